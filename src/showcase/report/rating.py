"""rating.json: a person's own rating of a run's page (`showcase rate RUN --score 7.5 --note "..."`, report/cli.py).

The published method weighs a reviewer's own rating beside the browser check, so it is a file of
the run like the others: a pydantic model with a schema (`showcase schema rating`), written
atomically, read back on the same model by the report.
"""

from __future__ import annotations

import getpass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from showcase.errors import UserError
from showcase.io import write_json_atomic
from showcase.runfolder.artefacts import FinalChoice, RunLayout, read_json_model

RATING_NAME = "rating.json"
MAX_NOTE_CHARS = 4000  # a note is a few sentences; a bound keeps every page that shows it small


class Rating(BaseModel):
    """rating.json: a person's own rating of the page the run left (the one that counts)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(1, description="version of this file's layout")
    who: str = Field(min_length=1, max_length=200, description="who rated, as they gave it (default: their login name)")
    when: str = Field(description="when they rated, UTC ISO 8601")
    score: float = Field(ge=0, le=10, description="their score of the page, 0 to 10")
    note: str = Field("", max_length=MAX_NOTE_CHARS, description="what they saw, in their words")
    page_sha256: str | None = Field(None, description="sha256 of the version that counted when they rated; null if none was chosen")


def rating_path(run_dir: Path) -> Path:
    return Path(run_dir) / RATING_NAME


def read_rating(run_dir: Path, problems: list[str]) -> Rating | None:
    return read_json_model(rating_path(run_dir), Rating, problems)


def _chosen_sha(run_dir: Path) -> str | None:
    choice = read_json_model(RunLayout(run_dir).final_choice, FinalChoice, [])
    return choice.sha256 if choice else None


def write_rating(run_dir: Path, score: float, note: str = "", who: str | None = None) -> Rating:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    if not RunLayout(run_dir).looks_like_run():
        raise UserError(f"{run_dir}: not a run folder (none of its files is there)")
    if not 0 <= score <= 10:
        raise UserError(f"--score {score:g}: a rating is 0 to 10")
    if len(note) > MAX_NOTE_CHARS:
        raise UserError(f"--note is {len(note):,} characters; at most {MAX_NOTE_CHARS:,}")
    who = (who or "").strip() or getpass.getuser()
    rating = Rating(
        who=who, when=datetime.now(timezone.utc).isoformat(timespec="seconds"), score=score, note=note,
        page_sha256=_chosen_sha(run_dir),
    )
    write_json_atomic(rating_path(run_dir), rating)
    return rating
