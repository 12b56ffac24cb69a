"""A task is a folder under tasks/: task.toml, the exact prompt bytes, the finish-now text."""

import hashlib
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field

from showcase.errors import UserError
from showcase.paths import TASKS_DIR

# The one place the defaults live: generic code (check, clip, run, replay) takes a Task, and
# where none is given it is this one.
DEFAULT_TASK = "voxel"
DEFAULT_OUTPUT_FILE = "game.html"


class NpmPackage(BaseModel):
    """One npm package behind the task's import map."""

    name: str = Field(description="npm package name, e.g. '@tweenjs/tween.js'")
    version: str = Field(description="exact version, e.g. '25.0.0'")
    integrity: str = Field(description="published sha512 integrity ('sha512-<base64>')")

    @property
    def tarball(self) -> str:
        """File name `npm pack` gives this package ('@a/b' -> 'a-b-VER.tgz')."""
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


class TaskLimits(BaseModel):
    limit_s: float = Field(7200, description="hard stop, seconds after the run's start")
    inject_after_s: float = Field(5400, description="finish-now message from this second on")
    answer_limit: int = Field(262144, description="answer token limit forced into requests")


class Task(BaseModel):
    """A task as loaded from tasks/<id>/task.toml."""

    id: str
    dir: Path
    prompt_file: str = "prompt.txt"
    prompt_sha256: str
    output_file: str = Field(DEFAULT_OUTPUT_FILE, description="the file the agent must leave in /work")
    page_cap_bytes: int = Field(
        16 * 1024 * 1024, gt=0,
        description="the largest page the host reads from /work (watcher, shot.sh, finalize); a larger one is refused",
    )
    finish_now_file: str = "finish-now.txt"
    limits: TaskLimits = TaskLimits()
    import_map: dict[str, str] = Field(default_factory=dict)
    npm: list[NpmPackage] = Field(default_factory=list)

    @property
    def prompt_bytes(self) -> bytes:
        return (self.dir / self.prompt_file).read_bytes()

    @property
    def finish_now_text(self) -> str:
        return (self.dir / self.finish_now_file).read_text()


def known_tasks() -> list[str]:
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/task.toml"))


def load_task(task_id: str = DEFAULT_TASK) -> Task:
    path = TASKS_DIR / task_id / "task.toml"
    if not path.is_file():
        raise UserError(f"unknown task {task_id!r}; known tasks: {', '.join(known_tasks()) or 'none'}")
    task = Task(dir=path.parent, **tomllib.loads(path.read_text()))
    actual = hashlib.sha256(task.prompt_bytes).hexdigest()
    if actual != task.prompt_sha256:
        # The prompt is published; a changed byte makes results incomparable.
        raise UserError(f"task {task_id}: prompt sha256 {actual} differs from the published {task.prompt_sha256}")
    return task
