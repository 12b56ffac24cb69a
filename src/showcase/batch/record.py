"""DIR/batch.json: the plan, its sha256, the versions, and each run's folder and state.

Written atomically on every change (showcase.io), read back on a restart by the same model.
"""

import datetime as dt
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from showcase.batch.plan import Plan
from showcase.errors import UserError
from showcase.io import write_json_atomic

SCHEMA_VERSION = 1
RECORD_NAME = "batch.json"
RECORD_CAP_BYTES = 16 << 20

State = Literal["pending", "running", "finalizing", "done", "failed"]


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the run's name: <setup>-<k>")
    setup: str = Field(description="the setup it runs")
    repeat: int = Field(description="k: which run of that setup, from 1")
    folder: str = Field(description="the run folder, relative to the batch folder")
    state: State = Field("pending", description="pending, running, finalizing (from disk, after a crash), done or failed")
    kept: bool = Field(False, description="found complete (with report.html) on a restart and left as it was")
    attempts: int = Field(0, description="times this run was started or finalized")
    node: str | None = Field(None, description="the machine (or Ray node) the run ran on")
    pid: int | None = Field(None, description="the showcase process of the run while it runs")
    pid_started: float | None = Field(None, description="that process's start time (tells a reused pid apart)")
    exit_code: int | None = Field(None, description="exit code of the run's showcase process")
    error: str | None = Field(None, description="the last line the run printed when it failed")
    score: float | None = Field(None, description="the check's total")
    started_at: str | None = None
    ended_at: str | None = None


class BatchRecord(BaseModel):
    """batch.json: everything needed to tell what a batch was asked and what it did."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(SCHEMA_VERSION, description="version of this file's layout")
    plan_file: str = Field(description="the plan file as given")
    plan_sha256: str = Field(description="sha256 (hex) of the plan file's bytes")
    plan: Plan = Field(description="the plan as read")
    showcase_version: str = Field(description="showcase version")
    ray_version: str | None = Field(None, description="Ray version when the batch ran on a Ray cluster; null: locally")
    ray_address: str | None = Field(None, description="the Ray cluster's address; null: locally")
    started_at: str = Field(description="when the batch first started")
    updated_at: str = Field(description="when this file was last written")
    restarts: int = Field(0, description="times the batch was started again on this folder")
    runs: list[RunState] = Field(description="every run of the plan, in plan order")
    comparison: str | None = Field(None, description="the comparison page of all runs, relative to the batch folder")

    def write(self, folder: Path) -> None:
        self.updated_at = now_iso()
        write_json_atomic(folder / RECORD_NAME, self)


def read_record(folder: Path) -> BatchRecord | None:
    path = folder / RECORD_NAME
    try:
        with open(path, "rb") as handle:
            raw = handle.read(RECORD_CAP_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(raw) > RECORD_CAP_BYTES:
        raise UserError(f"{path} is larger than {RECORD_CAP_BYTES >> 20} MiB: not a batch record; use another --out")
    try:
        return BatchRecord.model_validate_json(raw)
    except ValueError as exc:
        raise UserError(f"{path} is not a batch record ({str(exc).splitlines()[0]}); use another --out") from None
