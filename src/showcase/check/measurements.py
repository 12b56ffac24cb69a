"""The raw figures of one check session: the runner measures them, scoring turns them into items."""

from dataclasses import dataclass, field


@dataclass
class Measurements:
    """Raw figures of one session; scoring turns them into items."""

    nav_error: str | None = None
    ready_after_s: float | None = None
    load_end_s: float = 0.0            # end of "while loading", seconds since events.t0
    blank_share: float | None = None
    windows: list[dict] = field(default_factory=list)
    world: dict | None = None
    animation: dict | None = None
    text: str | None = None
    text_sources: dict[str, int] = field(default_factory=dict)  # pieces of visible text kept, by where they came from
    text_dropped: int = 0               # pieces of text no person sees (hidden, transparent, clipped, off the page)
    steps: dict[str, dict] = field(default_factory=dict)
    webgl_contexts: int | None = None
    canvas2d_contexts: int | None = None
    stopped: str | None = None          # why measuring stopped early
    stopped_phase: str | None = None    # the phase it stopped in
    phases: dict[str, float] = field(default_factory=dict)
    last_shot: bytes | None = None
    observed_s: float = 0.0
    gl_pictures: bool | None = None     # whether the probe could take pictures of what WebGL drew
    blank_screen_share: float | None = None  # item 4 on the screenshot alone (blank_share: also what WebGL drew, seen)
    blank_webgl_share: float | None = None
    visible_canvases: dict | None = None     # per WebGL canvas: how much of its drawing was seen (visible.py)
