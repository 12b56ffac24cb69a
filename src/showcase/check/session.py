"""A page under check with every call bounded, and the page's faults told apart from ours.

A call that times out means the page's main thread is blocked: execution is terminated through a
CDP session opened before any script ran, and the page is marked frozen; nothing more is asked of
it. A page that navigated away is marked gone. A crashed page or browser is an InfraError.
"""

import asyncio
import base64
import time
from typing import Any, Awaitable, Callable

from playwright.async_api import Browser, CDPSession
from playwright.async_api import Error as PlaywrightError

from showcase.browser.cdn import OfflineCdn
from showcase.browser.page import PAGE_URL, PageSession, first_line, open_page
from showcase.errors import InfraError

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


class StopMeasuring(Exception):
    """The page can no longer be measured (frozen, gone, or out of time); score what we have."""


async def webgl_renderer(browser: Browser, timeout_s: float = 20.0) -> str:
    """The WebGL renderer string of this browser, from a blank page of our own; InfraError without WebGL."""
    try:
        page = await asyncio.wait_for(browser.new_page(), timeout_s)
        try:
            info = await asyncio.wait_for(page.evaluate(WEBGL_PROBE), timeout_s)
        finally:
            await asyncio.wait_for(page.close(), timeout_s)
    except (PlaywrightError, asyncio.TimeoutError) as exc:
        raise InfraError(f"could not ask Chromium for WebGL: {first_line(str(exc)) or type(exc).__name__}") from exc
    if not info.get("available"):
        raise InfraError("WebGL is unavailable in Chromium (no WebGL context on a blank page); the check needs software GL")
    return info["renderer"]


class BoundedPage:
    """One page, its events, a CDP session, and a deadline for the whole measurement."""

    def __init__(self, session: PageSession, cdp: CDPSession, deadline: float, call_timeout_s: float):
        self.s = session
        self.page = session.page
        self.events = session.events
        self.cdp = cdp
        self.deadline = deadline
        self.call_timeout_s = call_timeout_s
        self.frozen: str | None = None
        self.crashed = False
        self.ready_at_ms: float | None = None  # page time of window.ready = true, from the probe's binding
        self.page.on("crash", lambda _p: setattr(self, "crashed", True))

    @classmethod
    async def open(
        cls, browser: Browser, html: bytes, cdn: OfflineCdn, viewport: tuple[int, int], init_scripts: list[str],
        deadline: float, call_timeout_s: float,
    ) -> "BoundedPage":
        try:
            session = await asyncio.wait_for(open_page(browser, html, cdn, viewport, init_scripts), 20)
            cdp = await asyncio.wait_for(session.context.new_cdp_session(session.page), 20)
            bp = cls(session, cdp, deadline, call_timeout_s)

            def on_ready(_source: Any, at_ms: float) -> None:
                if bp.ready_at_ms is None:
                    bp.ready_at_ms = float(at_ms)

            await asyncio.wait_for(session.page.expose_binding("__scReady", on_ready), 20)
        except (PlaywrightError, asyncio.TimeoutError) as exc:
            raise InfraError(f"Chromium could not open a page: {first_line(str(exc)) or type(exc).__name__}") from exc
        return bp

    # --- state ---
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def navigated_away(self) -> str | None:
        """Where the page went; a blocked navigation lands on Chromium's error page, so name its target."""
        if not self.events.navigations:
            return None
        t, url = self.events.navigations[0]
        if url.startswith("chrome-error:"):
            blocked = [u for bt, u in self.events.blocked_requests if bt <= t]
            if blocked:
                return f"{blocked[-1]} (blocked)"
        return url

    def _check_alive(self) -> None:
        if self.crashed:
            raise InfraError("the browser's page process crashed during the check")
        if not self.s.context.browser or not self.s.context.browser.is_connected():
            raise InfraError("the browser died during the check")
        if self.frozen:
            raise StopMeasuring(f"page frozen ({self.frozen})")
        if self.navigated_away:
            raise StopMeasuring(f"page navigated away to {self.navigated_away}")
        if self.remaining() <= 0.5:
            raise StopMeasuring("the check's time bound was reached")

    # --- bounded calls ---
    async def call(self, what: str, make: Callable[[], Awaitable[Any]], timeout_s: float | None = None) -> Any:
        """Run one Playwright call bounded by its timeout and the deadline."""
        self._check_alive()
        bound = min(timeout_s or self.call_timeout_s, self.remaining())
        try:
            return await asyncio.wait_for(make(), bound)
        except asyncio.TimeoutError:
            if self.navigated_away or self.remaining() <= 0.5:
                self._check_alive()  # a page in the middle of leaving does not answer either
            self.frozen = f"{what} got no answer within {bound:.0f} s: the main thread is blocked"
            await self.terminate_scripts()
            raise StopMeasuring(f"page frozen ({self.frozen})") from None
        except PlaywrightError as exc:
            self._check_alive()  # crash / navigation / frozen explain most errors
            msg = first_line(str(exc))
            if "Timeout" in msg:
                self.frozen = f"{what}: {msg}"
                await self.terminate_scripts()
                raise StopMeasuring(f"page frozen ({self.frozen})") from None
            if "context was destroyed" in msg or "navigat" in msg.lower():
                raise StopMeasuring(f"page navigated away ({what} was cut off)") from None
            # Anything else is the page breaking our probe (it runs in the page's own world).
            raise StopMeasuring(f"{what} failed in the page: {msg}") from None

    async def terminate_scripts(self) -> None:
        """Free a blocked main thread (works only through a CDP session opened before the hang)."""
        try:
            await asyncio.wait_for(self.cdp.send("Runtime.terminateExecution"), 5)
        except Exception:
            pass

    async def evaluate(self, expression: str, arg: Any = None, what: str = "a call into the page") -> Any:
        return await self.call(what, lambda: self.page.evaluate(expression, arg))

    async def screenshot(self, timeout_s: float) -> bytes:
        """PNG of the viewport through CDP (optimizeForSpeed: several times faster than page.screenshot)."""
        shot = await self.call(
            "screenshot",
            lambda: self.cdp.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}),
            timeout_s,
        )
        return base64.b64decode(shot["data"])

    async def goto(self, timeout_s: float) -> str | None:
        """Navigate; None when the load event came, else why not (the page's fault)."""
        bound = min(timeout_s, self.remaining())
        try:
            await asyncio.wait_for(self.page.goto(PAGE_URL, wait_until="load", timeout=bound * 1000), bound + 2)
            return None
        except asyncio.TimeoutError:
            return f"the load event did not come within {bound:.0f} s"
        except PlaywrightError as exc:
            if self.crashed:
                raise InfraError("the browser's page process crashed while loading the page") from exc
            msg = first_line(str(exc))
            return "the load event did not come within {:.0f} s".format(bound) if "Timeout" in msg else msg

    async def wait_ready(self, nav_start: float, timeout_s: float, poll_s: float) -> float | None:
        """Seconds from navigation start to window.ready === true, or None within the bound.

        The probe reports the moment through a binding (works even if the page freezes or leaves
        right after); a page that redefined window.ready is found by polling it once a second.
        """
        end = time.monotonic() + min(timeout_s - (self.events.now() - nav_start), self.remaining())
        next_poll = time.monotonic()
        while time.monotonic() < end:
            if self.ready_at_ms is not None:
                return round(self.ready_at_ms / 1000, 2)
            self._check_alive()
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic()
                try:
                    if await asyncio.wait_for(self.page.evaluate("window.ready === true"), 2.0):
                        return round(self.events.now() - nav_start, 2)
                except (asyncio.TimeoutError, PlaywrightError):
                    pass  # busy loading, or frozen: the calls after this tell which
            await asyncio.sleep(poll_s)
        return round(self.ready_at_ms / 1000, 2) if self.ready_at_ms is not None else None

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.s.context.close(), 10)
        except Exception:
            pass  # the browser's own close follows and always works
