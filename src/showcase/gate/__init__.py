"""The gate: an OpenAI-compatible reverse proxy that logs every request and enforces a run's settings."""
