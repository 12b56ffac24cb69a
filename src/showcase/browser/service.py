"""One sealed browser for a whole run: every load check and every shot.sh goes through it.

Starting Chromium sealed costs about a second of CPU per page; a run keeps one warm instead
(launched through showcase.browser.launch, so sealed like every other). Each job gets a fresh
context of its own (the job opens it), never another page's cookies or storage.

Scheduling, in bounded queues: shot.sh requests (URGENT) run in slots of their own
(`shot_slots`, one by default), one after another; version checks (ordinary) run beside them in
theirs (`parallel`, a load check mostly waits for its page to settle, so a burst shares that
wait), each kind in the order submitted. An agent that keeps asking for shots therefore never
holds the versions' load checks back: they keep their slots whatever the shots do. Opening a
page (a new context, its renderer process) is the costly part and does not share well, so
pages open one at a time through `opening(priority)`, a waiting shot's first; with one shot
running at a time, version checks open between two shots. A browser that dies is launched again, the
restart told to `on_restart`, and the job that met the crash is tried once more in the new one.

With `cpu_weight`, the service's process (and so its driver and browser) is in the check's CPU
group (showcase.host.cpu_share) from the first launch to `close`: a load check's bounds are in
seconds, and beside a final check of another run at that weight, outside it, a burst of load
checks could starve into a verdict of "frozen".
"""

import asyncio
import heapq
import itertools
import logging
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager
from concurrent.futures import Future, InvalidStateError
from typing import Any

from playwright.async_api import Browser

from showcase.browser import seal
from showcase.browser.launch import launch_browser
from showcase.errors import InfraError
from showcase.host import cpu_share

log = logging.getLogger(__name__)

URGENT, ORDINARY = 0, 1
Job = Callable[[Browser], Awaitable[Any]]

SHOT_SLOTS = 1  # shot.sh checks at once: the agent waits for its answer, one after another is enough
START_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 30.0


class QueueFull(Exception):
    """More jobs are waiting than the queue holds: the caller says it is busy."""


class _OpenGate:
    """A lock taken by priority, then by arrival (lives on the service's loop)."""

    def __init__(self) -> None:
        self._busy = False
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._order = itertools.count()

    @asynccontextmanager
    async def hold(self, priority: int) -> AsyncIterator[None]:
        if self._busy or self._waiters:
            fut = asyncio.get_running_loop().create_future()
            entry = (priority, next(self._order), fut)
            heapq.heappush(self._waiters, entry)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._release()  # handed over just as we were cancelled: pass it on
                else:
                    self._waiters.remove(entry)
                    heapq.heapify(self._waiters)
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)  # stays busy: the lock passes straight to the next
                return
        self._busy = False


class BrowserService:
    """A sealed browser of `renderer` on a loop of its own thread; jobs are `async (browser) -> T`.

    parallel: ordinary jobs running at once. shot_slots: urgent jobs running at once, beside them.
    max_queued: jobs waiting (not running) at most.
    on_restart(reason, restarts): told after the browser was launched again.
    cpu_weight: the CPU group's weight factor to hold while the service lives (None: the share
    this process has); `cpu_share` then says what was held, as check.json's field does.
    """

    def __init__(self, renderer: str = "llvmpipe", parallel: int = 4, max_queued: int = 64,
                 on_restart: Callable[[str, int], None] | None = None, cpu_weight: float | None = None,
                 shot_slots: int = SHOT_SLOTS) -> None:
        self.renderer = renderer
        self.parallel = max(1, parallel)
        self._slots = {URGENT: max(1, shot_slots), ORDINARY: self.parallel}
        self.max_queued = max_queued
        self.on_restart = on_restart
        self.restarts = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="showcase-browser", daemon=True)
        self._queues: dict[int, deque[tuple[Job, Future]]] = {URGENT: deque(), ORDINARY: deque()}
        self._running = {URGENT: 0, ORDINARY: 0}
        self._inflight: set[Future] = set()  # futures of jobs under way, failed at close if still open
        self._browser: Browser | None = None
        self._browser_cm = None
        self._launching: asyncio.Lock | None = None
        self._generation = 0  # bumped at each launch: a crash is handled once per browser
        self._closed = False
        self._gate = _OpenGate()
        self.cpu_weight = cpu_weight
        self.cpu_share: str | None = None
        self._share = ExitStack()  # the CPU group's hold, released at close
        # On the browser's command line, so /proc tells which Chromium is this service's.
        self.marker = f"--showcase-run-browser={uuid.uuid4().hex}"
        self._thread.start()

    # ------------------------------------------------------------------ public API

    def start(self, wait: bool = False) -> "BrowserService":
        """Launch the browser now (in the background unless `wait`), so the first job finds it warm."""
        fut = asyncio.run_coroutine_threadsafe(self._ensure_browser(), self._loop)
        if wait:
            fut.result(START_TIMEOUT_S + 10)
        return self

    def submit(self, job: Job, priority: int = ORDINARY) -> Future:
        """Queue a job; its Future holds the job's result or exception. QueueFull if the queue is full."""
        fut: Future = Future()
        if self._closed:
            raise InfraError("the run's browser is closed")
        done = threading.Event()
        error: list[Exception] = []

        def put() -> None:
            try:
                if self.pending >= self.max_queued:
                    raise QueueFull(f"{self.pending} browser jobs are already waiting")
                self._queues[URGENT if priority == URGENT else ORDINARY].append((job, fut))
                self._dispatch()
            except Exception as exc:
                error.append(exc)
            finally:
                done.set()

        self._loop.call_soon_threadsafe(put)
        if not done.wait(10):
            raise InfraError("the run's browser thread did not take the job within 10 s")
        if error:
            raise error[0]
        return fut

    def run(self, job: Job, priority: int = ORDINARY, timeout_s: float = 300.0) -> Any:
        """Submit and wait (from any thread but the service's own)."""
        return self.submit(job, priority).result(timeout_s)

    async def run_async(self, job: Job, priority: int = ORDINARY) -> Any:
        """Submit and await (from another event loop, e.g. the gate's)."""
        return await asyncio.wrap_future(self.submit(job, priority))

    def opening(self, priority: int = ORDINARY):
        """Hold while opening a page (for jobs, on the service's loop): one page opens at a time."""
        return self._gate.hold(priority)

    @property
    def pending(self) -> int:
        """Jobs waiting for a slot (read on the service's loop, or as a rough figure elsewhere)."""
        return sum(len(queue) for queue in self._queues.values())

    def browser_pid(self) -> int | None:
        """The running Chromium's browser process, from /proc (for the seal check and tests)."""
        return seal.browser_pid(self.marker) if self._browser is not None else None

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Close the browser (waiting jobs fail) and end the thread; bounded by timeout_s."""
        if self._closed:
            return
        self._closed = True
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        try:
            fut.result(timeout_s)
        except Exception as exc:
            log.warning("browser service: close did not finish cleanly: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._share.close()
        # A job still under way when the loop stopped would never end: its caller (a shot.sh
        # request the agent left behind) must get an answer, never wait forever.
        for fut in list(self._inflight):
            try:
                fut.set_exception(InfraError("the run's browser closed while this job ran"))
            except InvalidStateError:
                pass  # it ended on its own in the meantime

    def __enter__(self) -> "BrowserService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop's side

    def _dispatch(self) -> None:
        for priority, queue in self._queues.items():
            while queue and self._running[priority] < self._slots[priority]:
                job, fut = queue.popleft()
                if not fut.set_running_or_notify_cancel():
                    continue
                self._running[priority] += 1
                self._inflight.add(fut)
                self._loop.create_task(self._run(job, fut, priority))

    async def _run(self, job: Job, fut: Future, priority: int) -> None:
        try:
            result = await self._attempt(job)
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc if isinstance(exc, Exception) else InfraError(repr(exc)))
        else:
            if not fut.done():
                fut.set_result(result)
        finally:
            self._running[priority] -= 1
            self._inflight.discard(fut)
            self._dispatch()

    async def _attempt(self, job: Job) -> Any:
        for attempt in (1, 2):
            browser, generation = await self._ensure_browser()
            try:
                result = await job(browser)
                await asyncio.sleep(0.05)  # a crash's disconnect may trail the page's close by a moment
                if browser.is_connected() and generation == self._generation or self._closed:
                    return result
                # The browser died while the page was open: its verdict (a page that "closed
                # itself") is the crash's, not the page's.
                raise InfraError("the browser died during the job")
            except Exception as exc:
                for _ in range(20):  # the pipe's end may be read just after the job's error
                    if not browser.is_connected():
                        break
                    await asyncio.sleep(0.05)
                if browser.is_connected() or self._closed:
                    raise
                # The browser died under the job: the machine's fault, never the page's.
                await self._handle_crash(generation, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200])
                if attempt == 2:
                    raise InfraError("the browser died twice during the same job") from exc
        raise AssertionError("unreachable")

    async def _ensure_browser(self) -> tuple[Browser, int]:
        if self._launching is None:
            self._launching = asyncio.Lock()
        async with self._launching:
            if self._closed:
                raise InfraError("the run's browser is closed")
            if self._browser is not None and self._browser.is_connected():
                return self._browser, self._generation
            if self._browser is not None:
                await self._drop_browser()
                await self._relaunched("the browser was gone when a job came")
            if self.cpu_weight is not None and self.cpu_share is None:
                # Before the launch: Playwright's driver and the browser inherit the group.
                self.cpu_share = self._share.enter_context(cpu_share.raised(self.cpu_weight))
            cm = launch_browser(self.renderer, [self.marker])
            browser = await asyncio.wait_for(cm.__aenter__(), START_TIMEOUT_S)
            self._browser_cm, self._browser = cm, browser
            self._generation += 1
            return browser, self._generation

    async def _handle_crash(self, generation: int, reason: str) -> None:
        async with self._launching:
            if generation != self._generation or self._browser is None:
                return  # another job already handled this browser's death
            await self._drop_browser()
            await self._relaunched(reason)

    async def _relaunched(self, reason: str) -> None:
        self.restarts += 1
        log.warning("browser service: the browser died (%s); launching another", reason)
        if self.on_restart is not None:
            try:
                self.on_restart(reason, self.restarts)
            except Exception as exc:
                log.error("browser service: on_restart failed: %s", exc)

    async def _drop_browser(self) -> None:
        cm, self._browser_cm, self._browser = self._browser_cm, None, None
        if cm is not None:
            try:
                await asyncio.wait_for(cm.__aexit__(None, None, None), CLOSE_TIMEOUT_S)
            except Exception as exc:
                log.debug("browser service: closing the old browser: %s", exc)

    async def _shutdown(self) -> None:
        for queue in self._queues.values():
            while queue:
                _, fut = queue.popleft()
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(InfraError("the run's browser closed before this job ran"))
        if self._launching is None:
            self._launching = asyncio.Lock()
        async with self._launching:
            await self._drop_browser()
