"""The quick load check: does a page load cleanly and set window.ready? (every kept version, shot.sh)

Uses the fastest renderer (llvmpipe): it scores nothing that depends on the frame rate. A run
passes its warm browser (showcase.browser.service); each check still has a context of its own.
"""

import asyncio
import time
from pathlib import Path

from contextlib import AbstractAsyncContextManager, nullcontext

from playwright.async_api import Browser

from showcase.browser.launch import launch_browser
from showcase.check.models import LoadCheck
from showcase.check.rubric import load_script
from showcase.check.runner import offline_cdn
from showcase.check.session import BoundedPage, StopMeasuring
from showcase.io import write_bytes_atomic
from showcase.task import Task

QUICK_RENDERER = "llvmpipe"
NAVIGATION_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 10.0
OPENING_NAV_S = 1.0  # how long a navigation keeps the run's browser's opening turn at most


async def load_check(
    html: bytes,
    *,
    screenshot_path: Path | None = None,
    npm_dir: Path | None = None,
    settle_s: float = 3.0,
    ready_timeout_s: float = 30.0,
    browser: Browser | None = None,
    opening: AbstractAsyncContextManager | None = None,
    task: Task | None = None,
) -> LoadCheck:
    """Navigate, wait for ready (bounded), settle, screenshot; errors up to ready + settle.

    browser: a running browser to open the page in (a fresh context); None: launch one for it.
    opening: held while the page opens and navigates (the run's browser opens one at a time).
    task: whose import map the offline CDN answers (None: the default task's).
    """
    started = time.monotonic()
    cdn = offline_cdn(npm_dir, task)
    deadline = started + NAVIGATION_TIMEOUT_S + ready_timeout_s + settle_s + 2 * CALL_TIMEOUT_S
    shot_written = None
    async with (nullcontext(browser) if browser is not None else launch_browser(QUICK_RENDERER)) as browser:
        async with opening or nullcontext():
            bp = await BoundedPage.open(browser, html, cdn, (1280, 720), [load_script("ready.js")], deadline, CALL_TIMEOUT_S)
            nav_start = bp.events.now()
            nav = asyncio.ensure_future(bp.goto(NAVIGATION_TIMEOUT_S))
            # The start of loading is shared out too, but a page slow to load holds no one up.
            await asyncio.wait([nav], timeout=OPENING_NAV_S)
        try:
            nav_error = await nav
            ready_after = None
            try:
                ready_after = await bp.wait_ready(nav_start, ready_timeout_s, 0.05)
                await asyncio.sleep(max(0.0, min(settle_s, bp.remaining() - 1)))
                if screenshot_path is not None:
                    png = await bp.screenshot(CALL_TIMEOUT_S)
                    write_bytes_atomic(Path(screenshot_path), png)
                    shot_written = str(screenshot_path)
            except StopMeasuring:
                pass
            errors = bp.events.all_errors()
            if nav_error:
                errors.insert(0, f"navigation: {nav_error}")
            if bp.frozen:
                errors.append(f"page frozen: {bp.frozen}")
            if bp.left:
                errors.append(f"the page {bp.left}")
        finally:
            await bp.close()
    return LoadCheck(
        loads=not errors,
        ready=ready_after is not None,
        ready_after_s=ready_after,
        errors=errors,
        screenshot=shot_written,
        seconds=round(time.monotonic() - started, 2),
    )


def load_check_sync(
    html: bytes,
    *,
    screenshot_path: Path | None = None,
    npm_dir: Path | None = None,
    settle_s: float = 3.0,
    ready_timeout_s: float = 30.0,
) -> LoadCheck:
    return asyncio.run(
        load_check(html, screenshot_path=screenshot_path, npm_dir=npm_dir, settle_s=settle_s, ready_timeout_s=ready_timeout_s)
    )
