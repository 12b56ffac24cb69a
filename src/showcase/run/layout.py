"""RunLayout lives with the run folder's models and readers (showcase.run.artefacts)."""

from showcase.run.artefacts import RunLayout

__all__ = ["RunLayout"]
