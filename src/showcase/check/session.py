"""A page under check with every call bounded, and the page's faults told apart from ours.

A call that times out means the page's main thread is blocked: execution is terminated through a
CDP session opened before any script ran, and the page is marked frozen; nothing more is asked of
it. A page that leaves (a new document in its tab: navigation, reload, `location = ...`; closing
itself; a crashed renderer) is marked gone with the time it left, and no answer that arrived after
that counts. Only a dead browser is an InfraError: the machine's fault, never the page's.
"""

import asyncio
import time
from typing import Any, Awaitable, Callable

from playwright.async_api import Browser, CDPSession
from playwright.async_api import Error as PlaywrightError

from showcase.browser.bounded import answers, capture_screenshot, next_frame_png, terminate_scripts
from showcase.browser.cdn import OfflineCdn
from showcase.browser.page import PAGE_URL, PageSession, first_line, open_page
from showcase.errors import InfraError


MAX_CANVASES = 64  # per-canvas figures kept of one page


class StopMeasuring(Exception):
    """The page can no longer be measured (frozen, gone, or out of time); score what we have."""


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
        self.left: str | None = None            # how and when the page left, e.g. "navigated away to X at 6.1 s"
        self.left_to: str | None = None         # where it went (a URL), or None for a close or crash
        self.ready_at_ms: float | None = None  # page time of window.ready = true, from the probe's binding
        self._ours_committed = False            # our own navigation to PAGE_URL has committed
        self._requested: str | None = None      # a navigation the page asked for that has not committed yet
        self._main_id: str | None = None
        self.probe_token: str | None = None     # the probe hands its api over with this token
        self.probe_id: str | None = None        # CDP object id of the probe's api in the page's document
        self.canvas_max: dict | None = None     # the probe's largest WebGL frame so far, pushed as it grows
        self.canvas_max_by_id: dict[int, dict] = {}  # the same per canvas (probe's canvas id), pushed as they grow
        # uncaught errors and rejections as the probe saw them, first of all listeners, in any frame:
        # id -> (time, text); `shown`: the ids the page did not cancel (the browser reported those)
        self.probe_errors: dict[str, tuple[float, str]] = {}
        self.shown_errors: set[str] = set()
        self.page.on("crash", lambda _p: self._crashed())
        self._closing = False  # our own close is not the page closing itself
        self.page.on("close", lambda _p: self._closing or self._leave("closed itself", None))
        cdp.on("Page.frameNavigated", self._on_frame_navigated)
        cdp.on("Runtime.consoleAPICalled", self._on_console_api)
        cdp.on("Page.frameRequestedNavigation", self._on_requested_navigation)

    def _on_console_api(self, event: dict) -> None:
        """The probe's hand-over: console.debug(token, api), called before any page script runs."""
        args = event.get("args") or []
        if self._on_probe_error(args, event.get("type")):
            return
        if (self.probe_token and event.get("type") == "debug" and len(args) == 5 and self.left is None
                and args[0].get("value") == self.probe_token and args[1].get("value") == "max"):
            # the largest WebGL frame so far (draw calls, parts, triangles), counted by the probe
            values = [a.get("value") for a in args[2:]]
            if all(isinstance(v, (int, float)) for v in values):
                self.canvas_max = dict(zip(("draws_per_frame", "parts_per_frame", "triangles_per_frame"), values))
            return
        if (self.probe_token and event.get("type") == "debug" and len(args) == 6 and self.left is None
                and args[0].get("value") == self.probe_token and args[1].get("value") == "cmax"):
            values = [a.get("value") for a in args[2:]]
            # bounded: a page may make any number of canvases; the first ones drawn are kept
            if (all(isinstance(v, (int, float)) for v in values)
                    and (len(self.canvas_max_by_id) < MAX_CANVASES or int(values[0]) in self.canvas_max_by_id)):
                self.canvas_max_by_id[int(values[0])] = dict(zip(("draws_per_frame", "parts_per_frame", "triangles_per_frame"), values[1:]))
            return
        if (self.probe_token and self.probe_id is None and self.left is None and event.get("type") == "debug"
                and len(args) == 2 and args[0].get("value") == self.probe_token and args[1].get("objectId")):
            self.probe_id = args[1]["objectId"]

    MAX_PROBE_ERRORS = 500  # the probe tells at most 200 per document; a bound on what a page can make us keep

    def _on_probe_error(self, args: list, kind: str | None) -> bool:
        """The probe's word on an uncaught error of any frame: [token, 'error', id, kind, text] at once,
        [token, 'shown', id] a task later when the page did not cancel it. True when it was one."""
        if not (self.probe_token and kind == "debug" and len(args) >= 3 and args[0].get("value") == self.probe_token
                and args[1].get("value") in ("error", "shown")):
            return False
        if self.left is not None:
            return True
        key = args[2].get("value")
        if not isinstance(key, str):
            return True
        if args[1]["value"] == "shown":
            self.shown_errors.add(key)
        elif len(args) == 5 and len(self.probe_errors) < self.MAX_PROBE_ERRORS:
            what = "unhandled rejection" if args[3].get("value") == "rejection" else "uncaught exception"
            self.probe_errors.setdefault(key, (self.events.now(), f"{first_line(str(args[4].get('value')))} ({what}; "
                                                                  "the page cancelled its error event)"))
        return True

    def cancelled_errors(self) -> list[tuple[float, str]]:
        """Uncaught errors the page cancelled (never marked shown): the browser's own record has no
        trace of them, so they are added to the page errors here. One marked shown was reported by
        the browser itself and is not counted twice."""
        return [v for k, v in self.probe_errors.items() if k not in self.shown_errors]

    # --- the page leaving: every new document of the tab after ours counts, reloads included ---
    def _leave(self, how: str, to: str | None) -> None:
        if self.left is None:
            self.left, self.left_to = f"{how} at {self.events.now():.1f} s", to

    def _crashed(self) -> None:
        self.crashed = True
        self._leave("lost its renderer (the page process crashed)", None)

    def _on_requested_navigation(self, event: dict) -> None:
        if self._ours_committed and event.get("frameId") == self._main_id:
            self._requested = str(event.get("url", ""))[:300]

    def _on_frame_navigated(self, event: dict) -> None:
        frame = event.get("frame") or {}
        if frame.get("parentId"):
            return
        url = str(frame.get("url", ""))[:300]
        self._main_id = frame.get("id")
        if not self._ours_committed:
            self._ours_committed = url.split("#", 1)[0] == PAGE_URL
            return
        self._requested = None
        if frame.get("unreachableUrl"):  # a blocked or failed navigation lands on Chromium's error page
            self._leave(f"navigated away to {str(frame['unreachableUrl'])[:300]} (blocked)", str(frame["unreachableUrl"])[:300])
        elif url.split("#", 1)[0] == PAGE_URL:
            self._leave("reloaded itself", url)
        else:
            self._leave(f"navigated away to {url}", url)


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
                if bp.ready_at_ms is None and bp.left is None:  # a later document's ready is not this page's
                    bp.ready_at_ms = float(at_ms)

            # Independent of each other and all before navigation: sent at once, not one round trip each.
            await asyncio.wait_for(asyncio.gather(
                cdp.send("Page.enable"), cdp.send("Runtime.enable"), session.page.expose_binding("__scReady", on_ready)), 20)
        except (PlaywrightError, asyncio.TimeoutError) as exc:
            raise InfraError(f"Chromium could not open a page: {first_line(str(exc)) or type(exc).__name__}") from exc
        return bp

    # --- state ---
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def navigated_away(self) -> str | None:
        """Where the page went, if it left for another document (reloads included)."""
        return self.left_to

    def _check_alive(self) -> None:
        if not self.s.context.browser or not self.s.context.browser.is_connected():
            raise InfraError("the browser died during the check")
        if self.left:
            raise StopMeasuring(f"the page {self.left}")
        if self.frozen:
            raise StopMeasuring(f"page frozen ({self.frozen})")
        if self.remaining() <= 0.5:
            raise StopMeasuring("the check's time bound was reached")

    async def settle(self, grace_s: float = 2.0) -> None:
        """After a call failed or answered oddly: give a navigation the page asked for time to commit
        (bounded), then raise StopMeasuring if the page has left, or InfraError if the browser died."""
        end = time.monotonic() + min(grace_s, max(0.0, self.remaining()))
        while self._requested is not None and self.left is None and time.monotonic() < end:
            await asyncio.sleep(0.05)
        self._check_alive()

    async def garbled(self, what: str, got: Any) -> None:
        """A call into the page answered with something that is not the probe's answer."""
        await self.settle(1.0)
        raise StopMeasuring(f"{what}: the page answered {type(got).__name__} instead of the probe's figures")

    # --- bounded calls ---
    async def call(self, what: str, make: Callable[[], Awaitable[Any]], timeout_s: float | None = None) -> Any:
        """Run one Playwright call bounded by its timeout and the deadline."""
        self._check_alive()
        bound = min(timeout_s or self.call_timeout_s, self.remaining())
        try:
            result = await asyncio.wait_for(make(), bound)
        except asyncio.TimeoutError:
            await self.settle()  # a page in the middle of leaving does not answer either
            if what == "screenshot" and self.remaining() > 3 and await self._main_thread_answers():
                # A screenshot waits for a frame; a page whose main thread still answers is slow, not frozen.
                raise StopMeasuring(f"the page drew no frame to screenshot within {bound:.0f} s") from None
            self.frozen = f"{what} got no answer within {bound:.0f} s: the main thread is blocked"
            await self.terminate_scripts()
            raise StopMeasuring(f"page frozen ({self.frozen})") from None
        except PlaywrightError as exc:
            await self.settle()  # crash / navigation / frozen explain most errors
            msg = first_line(str(exc))
            if "Timeout" in msg:
                self.frozen = f"{what}: {msg}"
                await self.terminate_scripts()
                raise StopMeasuring(f"page frozen ({self.frozen})") from None
            # (an awaited call whose document went away says its promise "was collected")
            if "context was destroyed" in msg or "navigat" in msg.lower() or "closed" in msg.lower() or "collected" in msg:
                # The document went away: the event saying where to usually follows within moments.
                end = time.monotonic() + min(2.0, max(0.0, self.remaining()))
                while self.left is None and time.monotonic() < end:
                    await asyncio.sleep(0.05)
                self._leave("navigated away (to a page not named in time)", self._requested)
                self._check_alive()
            # Anything else is the page breaking our probe (it runs in the page's own world).
            raise StopMeasuring(f"{what} failed in the page: {msg}") from None
        # An answer that came after the page left may be the next document's: it does not count.
        self._check_alive()
        return result

    async def _main_thread_answers(self) -> bool:
        # As long as any other call's bound: a main thread held by a sync WebGL call (shaders
        # linked by a software GL on a machine busy with other runs) answered after 2 s, not within.
        bound = max(1.0, min(self.call_timeout_s, self.remaining() - 1))
        return await answers(lambda: self.cdp.send("Runtime.evaluate", {"expression": "1"}), bound)

    async def terminate_scripts(self) -> None:
        await terminate_scripts(self.cdp, 5)

    async def evaluate(self, expression: str, arg: Any = None, what: str = "a call into the page") -> Any:
        return await self.call(what, lambda: self.page.evaluate(expression, arg))

    async def probe(self, body: str, what: str, wait_s: float = 0.0) -> Any:
        """Evaluate `body` with `this` bound to the probe's api (out of the page's reach), by value.

        With wait_s, `body` is a promise of the probe that settles within wait_s of page time; the
        call is bounded by wait_s plus the usual call timeout (a frozen page settles nothing).
        """
        if self.probe_id is None:
            await self.settle(0.5)
            raise StopMeasuring(f"{what}: the check's probe never started in the page")
        res = await self.call(what, lambda: self.cdp.send("Runtime.callFunctionOn", {
            "objectId": self.probe_id, "functionDeclaration": f"function() {{ return ({body}); }}", "returnByValue": True,
            "awaitPromise": wait_s > 0}), (self.call_timeout_s + wait_s) if wait_s > 0 else None)
        if res.get("exceptionDetails"):
            d = res["exceptionDetails"]
            msg = first_line((d.get("exception") or {}).get("description") or d.get("text") or "an exception")
            raise StopMeasuring(f"{what} failed in the page: {msg}")
        return (res.get("result") or {}).get("value")

    async def mouse(self, what: str, events: list[dict]) -> None:
        """Dispatch mouse events through CDP all at once: Chromium queues them in order and a slow
        page handles them in its next frame, instead of one frame per event awaited in turn."""
        got = await asyncio.gather(*(self.call(what, lambda e=e: self.cdp.send("Input.dispatchMouseEvent", e)) for e in events),
                                   return_exceptions=True)
        for r in got:
            if isinstance(r, BaseException):
                raise r

    async def screenshot(self, timeout_s: float, *, main_frame: bool = False) -> bytes:
        """PNG of the next frame the compositor presents (a screencast frame: see next_frame_png).

        main_frame: through Page.captureScreenshot instead, which waits for a frame of the page's
        main thread: a page frozen since its last frame gets no picture (how the quick load check
        finds a freeze after its settle; the compositor alone would still present the last frame).
        """
        if main_frame:
            return await self.call("screenshot", lambda: capture_screenshot(self.cdp, "png"), timeout_s)
        return await self.call("screenshot", lambda: next_frame_png(self.cdp), timeout_s)

    async def goto(self, timeout_s: float) -> str | None:
        """Navigate; None when the load event came, else why not (the page's fault)."""
        bound = min(timeout_s, self.remaining())
        try:
            nav = asyncio.ensure_future(self.page.goto(PAGE_URL, wait_until="load", timeout=bound * 1000))
            nav.add_done_callback(lambda f: f.cancelled() or f.exception())
            gone = asyncio.ensure_future(self._until_left())
            done, _ = await asyncio.wait([nav, gone], timeout=bound + 2, return_when=asyncio.FIRST_COMPLETED)
            gone.cancel()
            if nav not in done:
                nav.cancel()  # a page that left never sends our load event: no need to wait for it
                if not self.left:
                    raise asyncio.TimeoutError
            else:
                nav.result()
            # A load event that came for a later document (a reload while loading) is not this page's.
            return f"the page {self.left}, before its load event" if self.left else None
        except asyncio.TimeoutError:
            return f"the load event did not come within {bound:.0f} s"
        except PlaywrightError as exc:
            end = time.monotonic() + 2.0  # the event naming where it went follows the error closely
            while self.left is None and not self.crashed and time.monotonic() < end and "Navigation" in str(exc):
                await asyncio.sleep(0.05)
            if self.left:
                return f"the page {self.left}, before its load event"
            msg = first_line(str(exc))
            return "the load event did not come within {:.0f} s".format(bound) if "Timeout" in msg else msg

    async def _until_left(self) -> None:
        while self.left is None:
            await asyncio.sleep(0.05)

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
                next_poll = time.monotonic() + 1.0
                try:
                    if await asyncio.wait_for(self.page.evaluate("window.ready === true"), 2.0):
                        self._check_alive()  # a true from a later document is not this page's ready
                        return round(self.events.now() - nav_start, 2)
                except (asyncio.TimeoutError, PlaywrightError):
                    pass  # busy loading, or frozen: the calls after this tell which
            await asyncio.sleep(poll_s)
        return round(self.ready_at_ms / 1000, 2) if self.ready_at_ms is not None else None

    async def close(self) -> None:
        self._closing = True
        try:
            await asyncio.wait_for(self.s.context.close(), 10)
        except Exception:
            pass  # the browser's own close follows and always works
