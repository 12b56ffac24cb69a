"""The rubric of the browser check, loaded from checks/rubric.toml (data, with a version)."""

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from showcase.errors import InfraError
from showcase.paths import CHECKS_DIR

ITEM_ORDER = ["1", "2", "3", "4", "5", "6a", "6b", "7", "8", "9", "10"]


class Timing(BaseModel):
    max_check_s: float
    close_reserve_s: float
    navigation_timeout_s: float
    ready_timeout_s: float
    ready_poll_ms: int
    call_timeout_s: float
    screenshot_timeout_s: float
    after_ready_frames: int
    after_ready_max_s: float
    window_s: float
    window_min_frames: int
    window_max_s: float
    step_s: float
    step_min_frames: int
    step_max_s: float


class ItemSpec(BaseModel):
    """One item: name and points; its thresholds are the other keys."""

    model_config = ConfigDict(extra="allow")
    name: str
    points: float

    def __getitem__(self, key: str) -> Any:
        return (self.model_extra or {})[key]


class Rubric(BaseModel):
    version: str
    renderer: str
    viewport: tuple[int, int]
    cpu_weight_factor: float = Field(description="the check runs with this many times the default CPU weight (showcase.host.cpu_share)")
    timing: Timing
    items: dict[str, ItemSpec] = Field(description="keyed by item id: '1'..'10', '6a', '6b'")

    @property
    def max_total(self) -> float:
        return sum(i.points for i in self.items.values())


@lru_cache(maxsize=4)
def load_rubric(path: Path = CHECKS_DIR / "rubric.toml") -> Rubric:
    try:
        rubric = Rubric(**tomllib.loads(path.read_text()))
    except (OSError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise InfraError(f"check rubric {path} unreadable: {str(exc).splitlines()[0]}") from exc
    if sorted(rubric.items) != sorted(ITEM_ORDER):
        raise InfraError(f"check rubric {path}: items {sorted(rubric.items)} differ from the method's {ITEM_ORDER}")
    return rubric


@lru_cache(maxsize=8)
def load_script(name: str) -> str:
    """An in-page script of checks/ (probe.js: the measuring probe; ready.js: the ready signal)."""
    path = CHECKS_DIR / name
    try:
        return path.read_text()
    except OSError as exc:
        raise InfraError(f"check script {path} unreadable: {exc}") from exc
