"""One page served from a virtual https origin, every request through one router.

The page itself is answered at PAGE_URL, import-map URLs from the offline CDN, everything else
is aborted and reported. Console errors, page errors, failed requests, dialogs and navigations
away are collected as they happen, so a page that later hangs still leaves its record.
"""

import time
from dataclasses import dataclass, field

from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Dialog, Frame, Page, Request, Route

from showcase.browser.cdn import OfflineCdn
from showcase.task import DEFAULT_OUTPUT_FILE

ORIGIN = "https://game.local"
PAGE_URL = f"{ORIGIN}/{DEFAULT_OUTPUT_FILE}"  # the page's own address in the browser, whatever its task


@dataclass
class PageEvents:
    """What the page did, with the time (s since navigation started) of each event."""

    console_errors: list[tuple[float, str]] = field(default_factory=list)
    page_errors: list[tuple[float, str]] = field(default_factory=list)
    failed_requests: list[tuple[float, str]] = field(default_factory=list)
    blocked_requests: list[tuple[float, str]] = field(default_factory=list)
    dialogs: list[tuple[float, str]] = field(default_factory=list)
    navigations: list[tuple[float, str]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def all_errors(self) -> list[str]:
        """Every error of the session in time order, one line each."""
        rows = (
            [(t, f"page error: {m}") for t, m in self.page_errors]
            + [(t, f"console error: {m}") for t, m in self.console_errors]
            + [(t, f"request failed: {m}") for t, m in self.failed_requests]
        )
        return [m for _, m in sorted(rows, key=lambda r: r[0])]


def first_line(text: str, limit: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:limit]


@dataclass
class PageSession:
    context: BrowserContext
    page: Page
    events: PageEvents


def person_user_agent(version: str) -> str:
    """The user agent of the same Chromium run with a window: a headless one says "HeadlessChrome",
    and a page could show its world only to the check."""
    return f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{version} Safari/537.36"


async def open_page(
    browser: Browser,
    html: bytes,
    cdn: OfflineCdn | None,
    viewport: tuple[int, int] = (1280, 720),
    init_scripts: list[str] | None = None,
) -> PageSession:
    """A fresh context and page, routed and listened to; navigation is left to the caller."""
    events = PageEvents()
    context = await browser.new_context(
        viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=1,
        user_agent=person_user_agent(browser.version),
    )
    for script in init_scripts or []:
        await context.add_init_script(script=script)

    async def route(route: Route, request: Request) -> None:
        url = request.url
        base = url.split("#", 1)[0].split("?", 1)[0]
        try:
            if base == PAGE_URL:
                await route.fulfill(status=200, body=html, content_type="text/html; charset=utf-8")
            elif url.startswith(ORIGIN):
                # A local file the page expected beside it: there is none, the task wants one file.
                await route.fulfill(status=404, body=b"not found", content_type="text/plain")
            elif cdn is not None and (hit := cdn.lookup(url)) is not None:
                body, ctype = hit
                await route.fulfill(
                    status=200, body=body, content_type=ctype, headers={"access-control-allow-origin": "*"}
                )
            else:
                events.blocked_requests.append((events.now(), base[:300]))
                await route.abort("blockedbyclient")
        except Exception:
            pass  # the page or context closed while this request was in flight

    await context.route("**/*", route)
    page = await context.new_page()

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            loc = msg.location or {}
            where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
            events.console_errors.append((events.now(), first_line(msg.text) + where))

    def on_page_error(err: Exception) -> None:
        events.page_errors.append((events.now(), first_line(str(err)) or type(err).__name__))

    def on_request_failed(req: Request) -> None:
        events.failed_requests.append((events.now(), f"{req.url.split('?', 1)[0][:200]} ({req.failure})"))

    async def on_dialog(dialog: Dialog) -> None:
        events.dialogs.append((events.now(), f"{dialog.type}: {first_line(dialog.message)}"))
        try:
            await dialog.dismiss()
        except Exception:
            pass

    def on_frame_navigated(frame: Frame) -> None:
        if frame == page.main_frame and frame.url.split("#", 1)[0] != PAGE_URL:
            events.navigations.append((events.now(), frame.url[:300]))

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    page.on("requestfailed", on_request_failed)
    page.on("dialog", on_dialog)
    page.on("framenavigated", on_frame_navigated)
    return PageSession(context=context, page=page, events=events)
