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
FAILED_SHOT_S = 10.0  # a failed page's picture: its first frame may be seconds away on a busy machine
WATCH_S = 0.05  # how often a wait looks for the page's first error


class _Judged(Exception):
    """The page has already failed: no later event can make it load cleanly."""


def _failed(bp: BoundedPage) -> bool:
    ev = bp.events
    return bool(ev.page_errors or ev.console_errors or ev.failed_requests or bp.left or bp.frozen)


async def _unless_failed(bp: BoundedPage, step: asyncio.Future, cancel: bool = True):
    """The step's result, or _Judged as soon as the page has an error.

    The step is then cancelled, or (cancel=False: the navigation, whose helpers outlive a
    cancel) left to end with the page's close, its outcome unread.
    """
    while True:
        done, _ = await asyncio.wait([step], timeout=WATCH_S)
        if done:
            return step.result()
        if _failed(bp):
            if cancel:
                step.cancel()
                try:
                    await step
                except BaseException:
                    pass
            else:
                step.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise _Judged


async def _shoot(bp: BoundedPage, path: Path, timeout_s: float) -> str | None:
    try:
        png = await bp.screenshot(timeout_s, main_frame=True)
    except StopMeasuring:
        return None
    write_bytes_atomic(Path(path), png)
    return str(path)


def _errors(bp: BoundedPage, nav_error: str | None) -> list[str]:
    errors = bp.events.all_errors()
    if nav_error:
        errors.insert(0, f"navigation: {nav_error}")
    if bp.frozen:
        errors.append(f"page frozen: {bp.frozen}")
    if bp.left:
        errors.append(f"the page {bp.left}")
    return errors


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

    It stops at the page's first error (or its leaving, or freezing), whenever that comes: the
    verdict can no longer change, so a broken page costs seconds, not the whole ready timeout.
    The errors seen by then are kept, and the screenshot shows the page as it was.

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
            nav_error, ready_after, judged = None, None, False
            try:
                nav_error = await _unless_failed(bp, nav, cancel=False)
                if not nav_error:
                    ready_after = await _unless_failed(bp, asyncio.ensure_future(bp.wait_ready(nav_start, ready_timeout_s, 0.05)))
                    await _unless_failed(bp, asyncio.ensure_future(asyncio.sleep(max(0.0, min(settle_s, bp.remaining() - 1)))))
            except (_Judged, StopMeasuring):
                judged = True
                if ready_after is None and bp.ready_at_ms is not None:  # ready came before the error
                    ready_after = round(bp.ready_at_ms / 1000, 2)
            judged = judged or bool(nav_error)
            if not judged and screenshot_path is not None:
                shot_written = await _shoot(bp, screenshot_path, CALL_TIMEOUT_S)  # a page frozen since is found here
            errors = _errors(bp, nav_error)
            if judged and screenshot_path is not None and not bp.left:
                # Best effort, after the verdict: a page still loading has no picture yet, and a
                # screenshot that gets no answer says nothing more about a page already failed.
                if not nav.done():
                    await asyncio.wait([nav], timeout=FAILED_SHOT_S)
                if nav.done():
                    shot_written = await _shoot(bp, screenshot_path, FAILED_SHOT_S)
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
