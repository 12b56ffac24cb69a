"""The clip: a short mp4 of a page running on its own, recorded on a virtual clock (or in real time).

    record_clip(html, out, seconds=15, fps=30, size=(1280, 720), realtime=False) -> ClipResult  (async)
    record_clip_file(page, out, **kw) -> ClipResult                                        (sync)
    register(app)  adds `showcase clip`
"""

from showcase.clip.model import ClipResult, FrameStep

__all__ = ["ClipResult", "FrameStep", "record_clip", "record_clip_file", "register"]


def __getattr__(name: str):
    # Playwright loads only when a clip is recorded: reading clip.json (a report, a schema) needs the model alone.
    if name in ("record_clip", "record_clip_file"):
        from showcase.clip import record

        return getattr(record, name)
    if name == "register":
        from showcase.clip.cli import register

        return register
    raise AttributeError(f"module 'showcase.clip' has no attribute {name!r}")
