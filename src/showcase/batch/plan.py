"""PLAN.toml: the setups a batch runs, each some number of times. Read and judged before anything starts.

A setup takes what `showcase run` takes; every default is the run's own (RunOptions), so a
plan that leaves a field out runs exactly as `showcase run` without that option would.
"""

import hashlib
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from showcase.errors import UserError
from showcase.run.options import RunOptions

PLAN_CAP_BYTES = 1 << 20  # a plan is a few lines; a bigger file is a mistake, not a plan
MAX_RUNS = 1000
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def _like(option: str, **constraints: Any) -> Any:
    """A field with the run's own default and description for that option."""
    field = RunOptions.model_fields[option]
    return Field(field.default, description=field.description, **constraints)


def _size(value: str | None) -> str | None:
    from showcase.sandbox.base import parse_size

    if value is not None:
        try:
            parse_size(value)
        except UserError:
            raise ValueError(f"{value!r} is not a size: use e.g. 512m or 1.25g") from None
    return value


class _Strict(BaseModel):
    # A misspelt key must be an error naming it, not a setting silently ignored.
    model_config = ConfigDict(extra="forbid")


class Limits(_Strict):
    """Time, token and container limits of each run of a setup."""

    limit_s: float | None = _like("limit_s", gt=0, allow_inf_nan=False)
    inject_after_s: float | None = _like("inject_after_s", ge=0, allow_inf_nan=False)
    answer_limit: int | None = _like("answer_limit", gt=0)
    ctx: int | None = _like("ctx", gt=0)
    memory: str = _like("memory")
    disk: str = _like("disk")
    cpus: float | None = _like("cpus", gt=0, allow_inf_nan=False)
    pids_limit: int | None = _like("pids_limit", gt=0)

    _sizes = field_validator("memory", "disk")(_size)

    @model_validator(mode="after")
    def _finish_now_before_stop(self) -> "Limits":
        if self.limit_s is not None and self.inject_after_s is not None and self.inject_after_s > self.limit_s:
            raise ValueError(f"inject_after_s {self.inject_after_s:g} is after limit_s {self.limit_s:g}")
        return self


class Setup(_Strict):
    """One way of running the task: a model behind an upstream (or a replay), a harness, limits."""

    name: str = Field(description="names the run folders DIR/<name>-<k>/ (letters, digits, . _ -)")
    upstream: str | None = Field(None, description="OpenAI-compatible base URL of the model; or give replay")
    replay: str | None = Field(
        None, description="a replay script (path relative to the plan) served as the model, or 'demo' for the "
        "harness's recorded demo conversation: runs offline")
    model: str | None = Field(None, description="model name; with replay, default the script's")
    task: str = _like("task")
    harness: str = _like("harness")
    sampling: dict[str, Any] = Field(default_factory=dict, description="request fields forced into every request")
    sampling_file: str | None = Field(None, description="or: a JSON file of them (path relative to the plan)")
    limits: Limits = Field(default_factory=Limits, description="time, token and container limits")
    repeats: int = Field(1, ge=1, le=100, description="how many runs of this setup")
    clip: bool = _like("clip")

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError(f"{value!r} must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _one_model_source(self) -> "Setup":
        if (self.upstream is None) == (self.replay is None):
            raise ValueError("give exactly one of upstream or replay")
        if self.upstream is not None and not self.model:
            raise ValueError("model is required with upstream")
        if self.sampling and self.sampling_file:
            raise ValueError("give sampling or sampling_file, not both")
        return self


class Plan(_Strict):
    """PLAN.toml: [[setup]] tables and how the batch treats a run it finds unfinished."""

    on_unfinished: Literal["finalize", "rerun"] = Field(
        "finalize", description="a run folder without report.html found on a restart: finalize it from disk, or run it again "
        "(the old folder is kept under .attempts/)")
    max_parallel: int | None = Field(None, ge=1, description="at most this many runs at once (default: what the machine holds)")
    setup: list[Setup] = Field(min_length=1, description="the setups, in the order they start")

    @model_validator(mode="after")
    def _unique_names(self) -> "Plan":
        names = [s.name for s in self.setup]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"setup name {dup[0]!r} is used twice")
        if sum(s.repeats for s in self.setup) > MAX_RUNS:
            raise ValueError(f"more than {MAX_RUNS} runs")
        return self


class PlannedRun(BaseModel):
    """One run of the batch: setup and repeat number; its folder is DIR/<name>/."""

    name: str
    setup: str
    repeat: int


def planned_runs(plan: Plan) -> list[PlannedRun]:
    return [PlannedRun(name=f"{s.name}-{k}", setup=s.name, repeat=k) for s in plan.setup for k in range(1, s.repeats + 1)]


def _where(plan_data: dict, loc: tuple) -> str:
    """'setup 2 (q4) limits.limit_s' from pydantic's ('setup', 1, 'limits', 'limit_s')."""
    if len(loc) >= 2 and loc[0] == "setup" and isinstance(loc[1], int):
        setups = plan_data.get("setup") if isinstance(plan_data.get("setup"), list) else []
        name = setups[loc[1]].get("name") if loc[1] < len(setups) and isinstance(setups[loc[1]], dict) else None
        head = f"setup {loc[1] + 1}" + (f" ({name})" if isinstance(name, str) and NAME.fullmatch(name) else "")
        rest = ".".join(str(p) for p in loc[2:])
        return f"{head} {rest}".strip()
    return ".".join(str(p) for p in loc) or "plan"


def load_plan(path: Path) -> tuple[Plan, str]:
    """The plan and the sha256 of its bytes; every fault a one-line UserError naming the field."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(PLAN_CAP_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"plan {path} does not exist") from None
    except OSError as exc:
        raise UserError(f"plan {path}: cannot read it ({exc.strerror})") from None
    if len(raw) > PLAN_CAP_BYTES:
        raise UserError(f"plan {path} is larger than {PLAN_CAP_BYTES >> 20} MiB: not a plan")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"plan {path}: not TOML ({str(exc).splitlines()[0]})") from None
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown field (see `showcase schema batch-plan`)"
        raise UserError(f"plan {path}: {_where(data, first['loc'])}: {msg}") from None
    _check_references(plan, path)
    return plan, hashlib.sha256(raw).hexdigest()


def resolve(plan_path: Path, relative: str) -> Path:
    """A path the plan names, relative to the plan's own folder."""
    p = Path(os.path.expanduser(relative))
    return p if p.is_absolute() else (plan_path.parent / p)


def replay_script_path(plan_path: Path, setup: Setup) -> Path:
    from showcase.harness import demo_script, load_harness
    from showcase.paths import TASKS_DIR

    if setup.replay == "demo":
        return demo_script(load_harness(setup.harness), TASKS_DIR / setup.task / "demo")
    return resolve(plan_path, setup.replay)


def _check_references(plan: Plan, path: Path) -> None:
    """What the plan names exists and parses: task, harness, sampling file, replay script."""
    from showcase.gate.config import load_sampling
    from showcase.harness import load_harness
    from showcase.replay import load_script
    from showcase.task import load_task

    for i, setup in enumerate(plan.setup, 1):
        where = f"plan {path}: setup {i} ({setup.name})"
        for field, load in (("task", lambda: load_task(setup.task)), ("harness", lambda: load_harness(setup.harness)),
                            ("sampling_file", lambda: setup.sampling_file and load_sampling(resolve(path, setup.sampling_file))),
                            ("replay", lambda: setup.replay and load_script(replay_script_path(path, setup)))):
            try:
                load()
            except UserError as exc:
                raise UserError(f"{where} {field}: {exc}") from None
        if setup.sampling:
            from showcase.gate.config import RESERVED_SAMPLING_FIELDS

            clash = sorted(RESERVED_SAMPLING_FIELDS & setup.sampling.keys())
            if clash:
                raise UserError(f"{where} sampling: may not set {', '.join(clash)} (the gate sets these itself)")
