"""The clip: a short mp4 of a page running on its own, recorded on a virtual clock (or in real time).

    record_clip(html, out, seconds=15, fps=30, size=(1280, 720), realtime=False) -> ClipResult  (async)
    record_clip_file(page, out, **kw) -> ClipResult                                        (sync)
    register(app)  adds `showcase clip`
"""

from showcase.clip.cli import register
from showcase.clip.model import ClipResult, FrameStep
from showcase.clip.record import record_clip, record_clip_file

__all__ = ["ClipResult", "FrameStep", "record_clip", "record_clip_file", "register"]
