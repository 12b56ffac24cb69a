"""Bounded calls into a page, for check and clip alike.

Every call is bounded in seconds. A call that gets no answer means the page's main thread is
blocked: it is freed with Runtime.terminateExecution, which works only through a CDP session
opened before the hang. Screenshots are taken through CDP directly: Playwright's waits for fonts
and stable layout, which a frame-by-frame capture does not need.
"""

import asyncio
import base64
import weakref
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


STOP_WAIT_S = 5.0  # a screencast's stop takes one round trip; a browser that never answers is found by the next call's bound
_stopping: "weakref.WeakKeyDictionary[CDPSession, asyncio.Future]" = weakref.WeakKeyDictionary()


async def next_frame_png(cdp: CDPSession) -> bytes:
    """The next frame the compositor presents, as PNG, through CDP's screencast; unbounded: the
    caller bounds it.

    Starting a screencast makes the compositor draw a frame of what the page has committed and
    hand it over as it is presented; it does not wait for the page's main thread (a frozen page
    still shows its last frame). Page.captureScreenshot waits for a main-thread frame of its own
    on top of the page's: on software GL at 1-2 fps that cost 4-5 of the page's frames here, a
    screencast frame 1-2.
    """
    # The last picture's stop is sent, not awaited (a picture must not wait for it); the next
    # start waits for it here, or Chromium answers "Screencast is already active".
    previous = _stopping.pop(cdp, None)
    if previous is not None:
        await asyncio.wait([previous], timeout=STOP_WAIT_S)
    done: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_frame(event: dict) -> None:
        if not done.done():
            done.set_result(event["data"])
        asyncio.ensure_future(cdp.send("Page.screencastFrameAck", {"sessionId": event["sessionId"]})).add_done_callback(
            lambda f: f.cancelled() or f.exception())

    cdp.on("Page.screencastFrame", on_frame)
    try:
        await cdp.send("Page.startScreencast", {"format": "png", "everyNthFrame": 1})
        try:
            return base64.b64decode(await done)
        finally:
            stop = asyncio.ensure_future(cdp.send("Page.stopScreencast"))
            stop.add_done_callback(lambda f: f.cancelled() or f.exception())
            _stopping[cdp] = stop
    finally:
        cdp.remove_listener("Page.screencastFrame", on_frame)


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
