"""The run folder as files: where each lives, one pydantic model per file, and the one reader
(artefacts). The run writes it; the report and batch read it."""
