"""What a recorded clip is: the file clip.json describes (and `showcase clip --json` prints)."""

from typing import Literal

from pydantic import BaseModel, Field


class FrameStep(BaseModel):
    """Spread of the time between consecutive frames, as the page saw it (virtual) or as captured (realtime)."""

    min_ms: float = Field(description="shortest step between two consecutive frames, ms")
    max_ms: float = Field(description="longest step between two consecutive frames, ms")
    mean_ms: float = Field(description="mean step, ms")


class ClipResult(BaseModel):
    """One clip of one page: where it is, how it was recorded, and what the page did meanwhile."""

    path: str = Field(description="the mp4 file (H.264, yuv420p, faststart)")
    seconds: float = Field(description="length of the clip: frames / fps")
    fps: int = Field(description="frames per second of the clip")
    size: tuple[int, int] = Field(description="width and height in pixels (the browser viewport)")
    frames: int = Field(description="frames in the clip")
    rendered_frames: int = Field(
        description="virtual: frames captured from the live page, the rest repeat the last one (page hung, or the "
        "wall budget ran out); realtime: clip frames showing a screencast frame not shown before"
    )
    distinct_frames: int = Field(description="frames whose pixels differ from the frame before (plus the first)")
    mode: Literal["virtual", "realtime"] = Field(
        description="virtual: the page's clock advanced exactly 1/fps per frame; realtime: what a viewer of this machine sees"
    )
    frame_times_ms: list[float] = Field(
        description="per frame: the page's own performance.now() (virtual) or the capture time since the first frame (realtime), ms"
    )
    frame_step: FrameStep | None = Field(
        None,
        description="spread of the steps of frame_times_ms (virtual: over the rendered frames only); None for fewer than two",
    )
    page_errors: list[str] = Field(
        default_factory=list,
        description="uncaught exceptions, console errors and failed requests while recording, one line each, first 50 distinct",
    )
    note: str | None = Field(None, description="what went wrong or differs from a plain recording, in plain English")
    wall_seconds: float = Field(description="wall time taken to record and encode the clip, s")
    load_seconds: float = Field(0.0, description="part of wall_seconds spent loading the page (and waiting for window.ready), s")
    renderer: str = Field(description="WebGL renderer string the page got (UNMASKED_RENDERER_WEBGL)")
    browser: str = Field("", description="browser name and version")
    encoder: str = Field("", description="ffmpeg version that encoded the clip")
    random_seed: int | None = Field(None, description="seed of the page's Math.random (virtual mode)")
