"""showcase: measure what a language model can build as a coding agent."""

__version__ = "0.1.0"
