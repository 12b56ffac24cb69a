"""Bounded calls into a page, for check and clip alike.

Every call is bounded in seconds. A call that gets no answer means the page's main thread is
blocked: it is freed with Runtime.terminateExecution, which works only through a CDP session
opened before the hang. Screenshots are taken through CDP directly: Playwright's waits for fonts
and stable layout, which a frame-by-frame capture does not need.
"""

import asyncio
import base64
from typing import Any, Awaitable, Callable

from playwright.async_api import Browser, CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from showcase.browser.page import first_line
from showcase.errors import InfraError

# One query for the renderer: the unmasked name when the driver tells it. The context is lost at
# once so the probe's canvas holds no GL context while the page runs.
WEBGL_PROBE = """() => {
  const c = document.createElement('canvas');
  const gl = c.getContext('webgl2') || c.getContext('webgl');
  if (!gl) return {available: false, renderer: null};
  const ext = gl.getExtension('WEBGL_debug_renderer_info');
  const out = {available: true, renderer: String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER)),
               version: String(gl.getParameter(gl.VERSION))};
  const lose = gl.getExtension('WEBGL_lose_context'); if (lose) lose.loseContext();
  return out;
}"""


async def bounded(coro: Awaitable[Any], timeout_s: float) -> Any:
    return await asyncio.wait_for(coro, timeout_s)


async def terminate_scripts(cdp: CDPSession, timeout_s: float = 5.0) -> None:
    """Free a blocked main thread (works only through a CDP session opened before the hang)."""
    try:
        await bounded(cdp.send("Runtime.terminateExecution"), timeout_s)
    except Exception:
        pass


async def answers(make: Callable[[], Awaitable[Any]], timeout_s: float) -> bool:
    """Whether a trivial call into the page answers within the bound: a free main thread."""
    try:
        await bounded(make(), timeout_s)
        return True
    except Exception:
        return False


async def capture_screenshot(cdp: CDPSession, fmt: str = "png", quality: int | None = None,
                             beyond_viewport: bool | None = None) -> bytes:
    """The viewport as `fmt` through CDP's Page.captureScreenshot (optimizeForSpeed); unbounded:
    the caller bounds it (a screenshot waits for a frame, which a blocked page never draws)."""
    params: dict[str, Any] = {"format": fmt, "optimizeForSpeed": True}
    if beyond_viewport is not None:
        params["captureBeyondViewport"] = beyond_viewport
    if quality is not None:
        params["quality"] = quality
    shot = await cdp.send("Page.captureScreenshot", params)
    return base64.b64decode(shot["data"])


class FrameStream:
    """Frames the compositor presents, one on request, through a CDP screencast kept open.

    Starting a screencast makes the compositor draw a frame of what the page has committed and
    hand it over as it is presented; it does not wait for the page's main thread (a frozen page
    still shows its last frame). Page.captureScreenshot waits for a main-thread frame of its own
    on top of the page's: on software GL at 1-2 fps that cost 4-5 of the page's frames here; a
    screencast started per picture 1-2, and its start and stop a second or more under load.

    So the screencast stays open and the acknowledgement of the frame last handed out is held:
    Chromium then encodes at most one frame more until the next request, which releases it and
    takes the first frame presented after the request (by the frame's own swap time). A page that
    presents none within `patience_s` (it draws nothing new) gets the screencast restarted, which
    draws what it has committed, as a fresh start always did. Unbounded: the caller bounds it.
    """

    def __init__(self, cdp: CDPSession):
        self.cdp = cdp
        self._frames: asyncio.Queue = asyncio.Queue()
        self._held: list[int] = []
        self._on = False
        cdp.on("Page.screencastFrame", self._frames.put_nowait)

    async def png_after(self, since: float, patience_s: float) -> bytes:
        """The first frame presented at or after `since` (time.time()), or a restart's frame."""
        if not self._on:
            return await self._start()
        frame = self._newer_queued(since)
        if frame is None:
            self._release()
            try:
                frame = await asyncio.wait_for(self._next_newer(since), patience_s) if patience_s > 0 else None
            except asyncio.TimeoutError:
                frame = None
            if frame is None:
                return await self._restart()
        return self._hand_out(frame)

    async def _start(self) -> bytes:
        await self.cdp.send("Page.startScreencast", {"format": "png", "everyNthFrame": 1})
        self._on = True
        return self._hand_out(await self._frames.get())

    async def _restart(self) -> bytes:
        self._on = False
        await self.cdp.send("Page.stopScreencast")
        self._held.clear()  # a new screencast counts its frames in flight afresh
        while not self._frames.empty():
            self._frames.get_nowait()
        return await self._start()

    def _hand_out(self, frame: dict) -> bytes:
        self._held.append(frame["sessionId"])
        return base64.b64decode(frame["data"])

    def _newer_queued(self, since: float) -> dict | None:
        found = None
        while not self._frames.empty():
            frame = self._frames.get_nowait()
            if found is None and _presented(frame) >= since:
                found = frame
            else:
                self._ack(frame["sessionId"])
        return found

    async def _next_newer(self, since: float) -> dict:
        while True:
            frame = await self._frames.get()
            if _presented(frame) >= since:
                return frame
            self._ack(frame["sessionId"])

    def _release(self) -> None:
        for session_id in self._held:
            self._ack(session_id)
        self._held.clear()

    def _ack(self, session_id: int) -> None:
        ack = asyncio.ensure_future(self.cdp.send("Page.screencastFrameAck", {"sessionId": session_id}))
        ack.add_done_callback(lambda f: f.cancelled() or f.exception())


def _presented(frame: dict) -> float:
    """A frame's swap time (seconds since the epoch); one without it counts as presented now."""
    ts = (frame.get("metadata") or {}).get("timestamp")
    return float(ts) if isinstance(ts, (int, float)) else float("inf")


async def page_webgl(page: Page, timeout_s: float) -> dict:
    """WEBGL_PROBE's answer in `page`: {available, renderer, version}. Raises on a timeout or error."""
    return await bounded(page.evaluate(WEBGL_PROBE), timeout_s)


async def webgl_renderer(browser: Browser, timeout_s: float = 20.0) -> str:
    """The WebGL renderer string of this browser, from a blank page of our own; InfraError without WebGL."""
    try:
        page = await bounded(browser.new_page(), timeout_s)
        try:
            info = await page_webgl(page, timeout_s)
        finally:
            await bounded(page.close(), timeout_s)
    except (PlaywrightError, asyncio.TimeoutError) as exc:
        raise InfraError(f"could not ask Chromium for WebGL: {first_line(str(exc)) or type(exc).__name__}") from exc
    if not info.get("available"):
        raise InfraError("WebGL is unavailable in Chromium (no WebGL context on a blank page); the check needs software GL")
    return info["renderer"]


class Navigations:
    """Set when the page's main frame navigates (a reload, a link): a step in flight then never answers."""

    def __init__(self, page: Page):
        self.event = asyncio.Event()
        page.on("framenavigated", lambda frame: self.event.set() if frame == page.main_frame else None)


async def through_navigation(make: Callable[[], Any], page: Page, navs: Navigations, timeout: float) -> Any:
    """Run one call into the page, bounded; if the page navigates meanwhile, wait for load and call again.

    A call in flight when the page navigates (a reload, a link) never answers: an evaluate is
    lost with its document and a screenshot waits for a frame that never comes. A timeout
    without navigation means the main thread is blocked: TimeoutError.
    """
    for attempt in range(2):
        navs.event.clear()
        call = asyncio.ensure_future(make())
        nav = asyncio.ensure_future(navs.event.wait())
        done, _ = await asyncio.wait({call, nav}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        nav.cancel()
        if call in done and (attempt or not navs.event.is_set() and not call.exception()):
            return call.result()
        if not done:
            call.cancel()
            raise TimeoutError
        call.cancel()
        call.add_done_callback(lambda f: f.cancelled() or f.exception())  # its late error is expected
        try:
            await bounded(page.wait_for_load_state("load", timeout=timeout * 1000), timeout + 1)
        except Exception:
            pass
    return await bounded(make(), timeout)
