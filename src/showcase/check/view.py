"""What WebGL drew with: the view's motion from the browser's record, not from the page's camera (rubric 3.0).

The probe (checks/probe.js) records, a few times in every measuring window, the 4 x 4 matrices in
effect at each draw that reaches the screen, and compares them with the window's first record.
Each window and control step carries the summary as `view` (see `ViewRecord`). This module reads
it: whether the page's camera object is the one the picture was drawn with, whether the view moved
at all, whether anything drawn moved beyond the view, and whether everything was drawn flat.
"""

import json

from pydantic import BaseModel, Field, ValidationError

from showcase.check.rubric import Rubric


class ViewRecord(BaseModel):
    """One window's or step's record of what WebGL drew with (the probe's `view`)."""

    samples: int = Field(0, description="frames recorded in the window (one every view_sample_ms)")
    compared: int = Field(0, description="of those, compared with the window's first on the same target")
    deep: bool = Field(False, description="some draw that reached the screen had a transform giving depth")
    draws: int = Field(0, description="draws of the target nearest the screen in the first record")
    kept: float | None = Field(None, description="least share of the first record's draws drawn again with the same matrices")
    claimed: int = Field(0, description="records in which the page's camera moved measurably since the one before")
    confirmed: int = Field(0, description="of those, records its motion explained more of than a view that did not move")
    claimed_explained: float | None = Field(
        None, description="most share of a record's draws found moved exactly as the page's camera moved")
    claimed_explained_min: float | None = None
    still_explained: float | None = Field(None, description="most share of a record's draws drawn again unchanged, "
                                                            "where the page's camera moved")
    found_explained: float | None = Field(None, description="most share explained by the draws' own common motion, when searched")
    beyond: int | None = Field(None, description="draws moved (or new) beyond the view's motion, inside the view; "
                                                 "null when the view's motion could not be told")
    switched: int = 0
    truncated: bool = False


def probe_rules(rubric: Rubric) -> str:
    """The thresholds the probe's view record works with, as the JavaScript object it is given."""
    spec = rubric.items["7"]
    return json.dumps({
        "sample_ms": spec["view_sample_ms"], "max_samples": spec["view_max_samples"],
        "min_found": spec["min_found_share"], "min_kept": spec["min_kept_share"], "inside": spec["view_inside"],
    })


def record(window: dict) -> ViewRecord | None:
    """The window's view record, or None (none taken, or rubric < 3.0)."""
    raw = window.get("view") if isinstance(window, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        return ViewRecord.model_validate(raw)
    except ValidationError:
        return None


def camera_drawn(window: dict, rubric: Rubric) -> bool | None:
    """Was the picture drawn with the page's camera in this window?

    True when, in most records where it moved, its motion explained more of what was drawn than a
    view that did not move would; False when mostly it did not (what was drawn did not move with
    it), or nothing was drawn with depth; None when its motion could not be tested (it did not
    move measurably between the records)."""
    v = record(window)
    if v is None or v.samples == 0 or not window.get("camera"):
        return None
    if not v.deep:
        return False
    spec = rubric.items["7"]
    if v.claimed:
        refuted = v.claimed - v.confirmed
        return True if v.confirmed > refuted else False if refuted > v.confirmed else None
    moved = (window.get("max_degrees") or 0) >= spec["min_degrees"] or (window.get("max_move") or 0) >= spec["min_move"]
    if window.get("camera") and moved and v.kept is not None and v.kept >= spec["min_kept_share"]:
        return False
    return None


def camera_trusted(windows: list[dict], rubric: Rubric) -> tuple[bool, int, int]:
    """Over all windows and steps: (trusted, confirmed, refuted). The camera's figures are used
    unless some window refuted it and no more windows confirmed it than refuted it."""
    verdicts = [camera_drawn(w, rubric) for w in windows]
    confirmed, refuted = verdicts.count(True), verdicts.count(False)
    return (refuted == 0 or confirmed > refuted), confirmed, refuted


def drawn_flat(windows: list[dict]) -> bool:
    """Every record taken shows only draws without a transform giving depth: a flat picture."""
    records = [v for v in (record(w) for w in windows) if v is not None and v.samples > 0]
    return bool(records) and not any(v.deep for v in records)


def view_still(window: dict, rubric: Rubric) -> bool | None:
    """The view did not move in the window: even the record that changed most drew at least
    min_kept_share of the first one's draws with the very same matrices. None when unknown."""
    v = record(window)
    if v is None or v.kept is None:
        return None
    return v.kept >= rubric.items["7"]["min_kept_share"]


def moved_beyond_view(window: dict) -> int | None:
    """Draws that moved (or appeared) beyond what the view's motion explains; None when unknown."""
    v = record(window)
    return None if v is None else v.beyond

