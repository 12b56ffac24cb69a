"""Record a clip of one page: on a virtual clock (default) or in real time.

Virtual clock: an init script (virtual_clock.js) takes over requestAnimationFrame, performance.now,
Date, the timers and Math.random. For each clip frame we advance the page's time by exactly 1/fps,
let it draw, and take a screenshot of what it drew, however long software GL needed. The clip
plays at the speed the page meant, and the same page gives the same clip.

Realtime: a CDP screencast of the page running on its own, resampled to the fps: what a viewer
of this machine would see (at ~1 fps for a rich world in software GL, a slide show).

Every call into the page is bounded. A page that blocks its main thread is freed with
Runtime.terminateExecution (through a CDP session opened before the hang); its clip then repeats
the last frame it showed, and the result says so.
"""

import asyncio
import base64
import hashlib
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from playwright.async_api import Browser, CDPSession, Page

from showcase.browser.bounded import (
    Navigations, answers, bounded, capture_screenshot, page_webgl, terminate_scripts, through_navigation,
)
from showcase.browser.cdn import OfflineCdn
from showcase.browser.launch import launch_browser
from showcase.browser.page import PAGE_URL, PageSession, open_page
from showcase.clip.encode import Mp4Writer, ffmpeg_version
from showcase.clip.model import ClipResult, FrameStep
from showcase.errors import InfraError, UserError
from showcase.task import Task, load_task

Progress = Callable[[int, int], None]

RANDOM_SEED = 20260101
# Date.now() at page time 0 in virtual mode (2026-01-01T00:00:00Z): fixed, so a page that shows
# the date gives the same clip every time.
EPOCH_MS = 1767225600000

# Bounds, in seconds (the browser check's: 30 s to load and to be ready).
NAV_TIMEOUT_S = 30.0
READY_GRACE_S = 5.0  # wait this long for window.ready with the clock still at 0 (pages that need timers get none)
PROBE_TIMEOUT_S = 5.0
FRAME_TIMEOUT_S = 30.0  # one step (draw) or one screenshot; software GL draws a 600k-triangle world in ~1-3 s
BUDGET_S = 900.0  # whole recording; past it the clip repeats the last frame
MAX_ERRORS = 50

_CLOCK_JS = (Path(__file__).with_name("virtual_clock.js")).read_text()

# Renderers to try in order when none is named: the fastest first (the clip does not score frame rate).
RENDERER_ORDER = ["llvmpipe", "swiftshader"]
# Virtual clock: Chromium composites in software, and only the page's WebGL canvas is drawn by
# software GL. Compositing and reading back each frame through llvmpipe cost more than the light
# bench page's own draw; in software the light page took ~20 % less CPU per frame (heavy: the same).
VIRTUAL_BROWSER_ARGS = ["--disable-gpu-compositing"]
VIRTUAL_FRAME_FORMAT = "png"
JPEG_QUALITY = 92


def clock_script(seed: int = RANDOM_SEED, epoch_ms: int = EPOCH_MS) -> str:
    return _CLOCK_JS.replace("__SEED__", str(int(seed))).replace("__EPOCH_MS__", str(int(epoch_ms)))


def validate(seconds: float, fps: int, size: tuple[int, int]) -> None:
    """Bad clip settings are the user's error (exit 2), said in one line."""
    if not (0 < seconds <= 600):
        raise UserError(f"--seconds must be more than 0 and at most 600, got {seconds}")
    if not (1 <= fps <= 120):
        raise UserError(f"--fps must be between 1 and 120, got {fps}")
    w, h = size
    if not (16 <= w <= 3840 and 16 <= h <= 2160) or w % 2 or h % 2:
        raise UserError(f"--size must be even numbers between 16x16 and 3840x2160 (H.264 yuv420p), got {w}x{h}")


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().replace("×", "x").split("x"))
    except ValueError:
        raise UserError(f"--size must look like 1280x720, got {text!r}") from None
    return w, h


@dataclass
class _Recording:
    """What one recording collected, whichever mode."""

    frames: int = 0
    rendered: int = 0
    distinct: int = 0
    times_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_hash: bytes | None = None
    t0: float = field(default_factory=time.monotonic)
    load_seconds: float = 0.0


async def _free_main_thread(cdp: CDPSession) -> None:
    await terminate_scripts(cdp, PROBE_TIMEOUT_S)


async def _responsive(page: Page) -> bool:
    return await answers(lambda: page.evaluate("1"), PROBE_TIMEOUT_S)


async def _screenshot(cdp: CDPSession, fmt: str = "png") -> bytes:
    return await capture_screenshot(cdp, fmt, JPEG_QUALITY if fmt == "jpeg" else None, beyond_viewport=False)


def _black_frame(size: tuple[int, int], fmt: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, (0, 0, 0)).save(buf, format=fmt.upper())
    return buf.getvalue()


async def _load(session: PageSession, cdp: CDPSession, rec: _Recording, wait_ready: bool) -> bool:
    """Navigate and wait for load (and, if asked, window.ready); a page that hangs here is freed and noted.

    True when the page's main thread is free to go on; False when it blocked it (and was stopped).
    """
    page = session.page
    try:
        await bounded(page.goto(PAGE_URL, wait_until="load", timeout=NAV_TIMEOUT_S * 1000), NAV_TIMEOUT_S + 5)
    except Exception as exc:
        if not await _responsive(page):
            await _free_main_thread(cdp)
            rec.notes.append(f"the page blocked its main thread while loading (stopped after {NAV_TIMEOUT_S:.0f} s)")
            return False
        rec.notes.append(f"the page did not finish loading within {NAV_TIMEOUT_S:.0f} s ({_first_line(exc)[:120]})")
    if not wait_ready:
        return True
    deadline = time.monotonic() + READY_GRACE_S
    while time.monotonic() < deadline:
        try:
            if await bounded(page.evaluate("window.ready === true"), PROBE_TIMEOUT_S):
                return True
        except TimeoutError:
            await _free_main_thread(cdp)
            rec.notes.append("the page blocked its main thread before its first frame")
            return False
        except Exception:
            pass  # navigating, or a page error while evaluating: keep waiting within the grace
        await asyncio.sleep(0.05)
    return True


async def _emit(writer: Mp4Writer, rec: _Recording, frame: bytes, t_ms: float, live: bool, progress: Progress | None, total: int) -> None:
    digest = hashlib.sha1(frame).digest()
    if digest != rec.last_hash:
        rec.distinct += 1
        rec.last_hash = digest
    await writer.write(frame)
    rec.frames += 1
    rec.rendered += live
    rec.times_ms.append(t_ms)
    if progress:
        progress(rec.frames, total)


async def _record_virtual(
    session: PageSession, cdp: CDPSession, writer: Mp4Writer, total: int, fps: int,
    frame_timeout_s: float, deadline: float, progress: Progress | None,
) -> _Recording:
    rec = _Recording()
    page = session.page
    navs = Navigations(page)  # a step lost to a navigation is retried: the new document has a fresh clock
    free = await _load(session, cdp, rec, wait_ready=True)
    rec.load_seconds = time.monotonic() - rec.t0
    frame: bytes | None = None
    t_ms = 0.0
    step_ms = 1000.0 / fps
    spin_reads = 0
    active_until: float | None = None  # page time of the last step in which a frame callback or timer ran
    was_active = False
    if free:  # the page loaded and its main thread is free: step it frame by frame
        for k in range(1, total + 1):
            if time.monotonic() > deadline:
                rec.notes.append(
                    f"recording stopped at {t_ms / 1000:.1f} s of page time when the wall-time budget ran out; the last frame repeats"
                )
                break
            try:
                # Absolute target time (k/fps), so the steps never drift by rounding.
                r = await through_navigation(
                    lambda k=k: page.evaluate("t => window.__showcaseClock.stepTo(t)", k * step_ms), page, navs, frame_timeout_s
                )
                t_ms = float(r["t"])
                spin_reads = int(r.get("spinReads") or 0)
                if r["frameCallbacks"] or r["timerRuns"]:
                    active_until, was_active = t_ms, True
                frame = await through_navigation(lambda: _screenshot(cdp, writer.image_format), page, navs, frame_timeout_s)
            except TimeoutError:
                await _free_main_thread(cdp)
                rec.notes.append(
                    f"page stopped rendering at {(k - 1) * step_ms / 1000:.1f} s (its main thread blocked for more than "
                    f"{frame_timeout_s:.0f} s); the last frame repeats"
                )
                break
            except Exception as exc:
                rec.notes.append(f"page stopped rendering at {(k - 1) * step_ms / 1000:.1f} s ({_first_line(exc)}); the last frame repeats")
                break
            await _emit(writer, rec, frame, t_ms, True, progress, total)
        if spin_reads:
            rec.notes.append(
                "the page busy-waited on its clock; past 100,000 reads in one frame each read advanced it by 1 microsecond"
            )
        if was_active and active_until is not None and rec.frames == total and active_until < t_ms - 1000:
            rec.notes.append(f"the page stopped animating at {active_until / 1000:.1f} s (no frame or timer pending)")
    if frame is None:
        # Nothing captured yet (hung while loading): show whatever the page shows now, if anything.
        await _free_main_thread(cdp)
        try:
            frame = await bounded(_screenshot(cdp, writer.image_format), frame_timeout_s)
        except Exception:
            frame = _black_frame(writer.size, writer.image_format)
            rec.notes.append("no frame could be captured; the clip is black")
    while rec.frames < total:
        await _emit(writer, rec, frame, t_ms, False, progress, total)
    return rec


async def _record_realtime(
    session: PageSession, cdp: CDPSession, writer: Mp4Writer, total: int, fps: int, seconds: float,
    frame_timeout_s: float, deadline: float, progress: Progress | None,
) -> _Recording:
    rec = _Recording()
    page = session.page
    shots: list[tuple[float, bytes]] = []  # (wall timestamp in s, jpeg)

    def on_frame(ev: dict) -> None:
        shots.append((float(ev["metadata"].get("timestamp") or time.time()), base64.b64decode(ev["data"])))
        # Ack at once: the screencast sends the next frame only after the ack.
        asyncio.ensure_future(_ack(cdp, ev["sessionId"]))

    cdp.on("Page.screencastFrame", on_frame)
    w, h = writer.size
    await bounded(cdp.send("Page.startScreencast", {"format": "jpeg", "quality": 90, "maxWidth": w, "maxHeight": h, "everyNthFrame": 1}), PROBE_TIMEOUT_S)
    await _load(session, cdp, rec, wait_ready=False)
    rec.load_seconds = time.monotonic() - rec.t0
    # The clip starts at load (what came before is a blank page) and lasts `seconds` of wall time.
    start = time.time()
    end = time.monotonic() + min(seconds + 0.2, max(0.0, deadline - time.monotonic()))
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(0.25, left))
        if progress:  # the frames are cut from the screencast at the end; show the time recorded so far
            progress(min(total, int((time.time() - start) * fps)), total)
    try:
        await bounded(cdp.send("Page.stopScreencast"), PROBE_TIMEOUT_S)
    except Exception:
        pass
    if not await _responsive(page):
        await _free_main_thread(cdp)
        rec.notes.append("the page's main thread was blocked when the recording ended")
    captured = sorted(shots, key=lambda s: s[0])
    if not captured:
        try:
            captured = [(time.time(), await bounded(_screenshot(cdp, "jpeg"), frame_timeout_s))]
        except Exception:
            captured = [(time.time(), _black_frame(writer.size, writer.image_format))]
            rec.notes.append("no frame could be captured; the clip is black")
    last_real = captured[-1][0]
    # Resample: output frame k shows the newest screencast frame at or before start + k/fps.
    j, shown = 0, -1
    for k in range(total):
        t = start + k / fps
        while j + 1 < len(captured) and captured[j + 1][0] <= t:
            j += 1
        ts, img = captured[j]
        ts = max(ts, start)  # a frame from before load is what the viewer sees at load
        # A clip frame counts as rendered when it shows a screencast frame not shown before.
        await _emit(writer, rec, img, (ts - start) * 1000, j != shown, progress, total)
        shown = j
    if last_real < start + seconds - 2 and len(captured) > 1:
        rec.notes.append(f"the picture did not change after {max(0.0, last_real - start):.1f} s")
    return rec


async def _ack(cdp: CDPSession, session_id: int) -> None:
    try:
        await bounded(cdp.send("Page.screencastFrameAck", {"sessionId": session_id}), PROBE_TIMEOUT_S)
    except Exception:
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


async def _webgl_renderer(page: Page) -> str | None:
    try:
        info = await page_webgl(page, NAV_TIMEOUT_S)  # under load a first GL context can take 10 s; a timeout is not "no WebGL"
    except Exception:
        return None
    return info.get("renderer") if info.get("available") else None


def _step_stats(times: list[float]) -> FrameStep | None:
    steps = [b - a for a, b in zip(times, times[1:])]
    if not steps:
        return None
    return FrameStep(min_ms=round(min(steps), 6), max_ms=round(max(steps), 6), mean_ms=round(sum(steps) / len(steps), 6))


def _distinct_errors(errors: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    for e in errors:
        seen[e] = seen.get(e, 0) + 1
    out = [e if n == 1 else f"{e} (x{n})" for e, n in seen.items()]
    if len(out) > MAX_ERRORS:
        out = out[:MAX_ERRORS] + [f"... and {len(out) - MAX_ERRORS} more distinct errors"]
    return out


async def record_clip(
    html: bytes,
    out: Path,
    *,
    seconds: float = 15,
    fps: int = 30,
    size: tuple[int, int] = (1280, 720),
    realtime: bool = False,
    npm_dir: Path | None = None,
    progress: Progress | None = None,
    renderer: str | None = None,
    task: Task | None = None,
    frame_timeout_s: float = FRAME_TIMEOUT_S,
    budget_s: float = BUDGET_S,
    seed: int = RANDOM_SEED,
    browser_args: list[str] | None = None,
) -> ClipResult:
    """Record `seconds` of the page at `fps` into the mp4 `out` (written atomically).

    Page faults (exceptions, a hung main thread, nothing drawn) still give a clip and are reported
    in page_errors / note. Bad settings raise UserError; no browser, no WebGL or no ffmpeg raise
    InfraError. `renderer` None takes the fastest software GL available (llvmpipe, else SwiftShader).
    `browser_args` are extra Chromium flags.
    """
    size = (int(size[0]), int(size[1]))
    validate(seconds, fps, size)
    encoder = ffmpeg_version()  # no ffmpeg: exit 3 before a browser starts
    started = time.monotonic()
    deadline = started + budget_s
    total = max(1, round(seconds * fps))
    out = Path(out)
    if out.is_dir():
        raise UserError(f"{out} is a folder; give the clip's file name, e.g. {out / 'clip.mp4'}")
    cdn = OfflineCdn((task or load_task()).npm, npm_dir)  # the task's import map (None: the default task's)

    order = [renderer] if renderer else RENDERER_ORDER
    for i, name in enumerate(order):
        async with launch_browser(name, ([] if realtime else VIRTUAL_BROWSER_ARGS) + list(browser_args or [])) as browser:
            session = await bounded(
                open_page(browser, html, cdn, viewport=size, init_scripts=[] if realtime else [clock_script(seed)]),
                PROBE_TIMEOUT_S * 3,
            )
            gl = await _webgl_renderer(session.page)
            if gl is None:
                if i + 1 < len(order):
                    continue
                raise InfraError(f"no WebGL in Chromium with the {name} renderer; software GL is needed to record a clip")
            return await _record_in(browser, session, gl, out, seconds, fps, size, realtime, total,
                                    frame_timeout_s, deadline, progress, started, seed, encoder)
    raise InfraError("no renderer to try")  # unreachable: order is never empty


async def _record_in(
    browser: Browser, session: PageSession, gl: str, out: Path, seconds: float, fps: int,
    size: tuple[int, int], realtime: bool, total: int, frame_timeout_s: float, deadline: float,
    progress: Progress | None, started: float, seed: int, encoder: str,
) -> ClipResult:
    cdp = await bounded(session.context.new_cdp_session(session.page), PROBE_TIMEOUT_S)
    writer = Mp4Writer(out, fps, size, "jpeg" if realtime else VIRTUAL_FRAME_FORMAT)
    await writer.start()
    try:
        if realtime:
            rec = await _record_realtime(session, cdp, writer, total, fps, seconds, frame_timeout_s, deadline, progress)
        else:
            rec = await _record_virtual(session, cdp, writer, total, fps, frame_timeout_s, deadline, progress)
        await writer.close()
    except BaseException:
        await writer.abort()
        raise
    events = session.events
    errors = events.all_errors()
    if events.dialogs:
        errors += [f"dialog: {m}" for _, m in events.dialogs]
    if events.navigations:
        rec.notes.append(f"the page navigated away to {events.navigations[0][1]}")
    return ClipResult(
        path=str(out),
        seconds=round(rec.frames / fps, 6),
        fps=fps,
        size=size,
        frames=rec.frames,
        rendered_frames=rec.rendered,
        distinct_frames=rec.distinct,
        mode="realtime" if realtime else "virtual",
        frame_times_ms=[round(t, 6) for t in rec.times_ms],
        # Virtual: the evenness of the page's clock over the frames it rendered (repeats add 0 ms steps).
        frame_step=_step_stats(rec.times_ms if realtime else rec.times_ms[: rec.rendered]),
        page_errors=_distinct_errors(errors),
        note="; ".join(rec.notes) or None,
        wall_seconds=round(time.monotonic() - started, 3),
        load_seconds=round(rec.load_seconds, 3),
        renderer=gl,
        browser=f"Chromium {browser.version}",
        encoder=encoder,
        random_seed=None if realtime else seed,
    )


def record_clip_file(page: Path, out: Path, **kw: Any) -> ClipResult:
    """Sync wrapper for a saved page: a missing or unreadable file is the user's error (exit 2)."""
    page = Path(page)
    if not page.is_file():
        raise UserError(f"{page}: no such file")
    try:
        html = page.read_bytes()
    except OSError as exc:
        raise UserError(f"{page}: cannot read ({exc.strerror})") from exc
    return asyncio.run(record_clip(html, Path(out), **kw))
