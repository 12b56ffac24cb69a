"""The page reader: reads of the run's page file as the kernel tells of each finished write.

It runs as a process of its own (`python -m showcase.run.page_reader`, started by the watcher
in showcase.run.watcher), at a raised priority, importing little: a read must follow a write's
close before the next write begins (10 ms later, in a burst), and a thread of the run's own
process would wait behind its busy threads for the interpreter's lock.

Output, one JSON line each: {"ready": true} once watching; {"read": NAME, "mono_ns": N} when
spool/NAME holds the file's bytes as read at time.monotonic_ns() N; {"refused": [name, reason]};
{"torn": 1}. It ends when its input ends, after reading what the kernel had queued.
"""

import json
import logging
import os
import queue
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

from showcase.host.untrusted import Refused, _open_regular, _read_upto, open_dir_fd, size_words

log = logging.getLogger(__name__)

WATCH_MASK = F.CLOSE_WRITE | F.MOVED_TO | F.MODIFY | F.CREATE | F.DELETE_SELF | F.MOVE_SELF
SPOOL_BACKLOG = 64  # reads waiting to be spooled at most (each at most the page cap)
# The marker's writes must never wait for a disk: memory-backed if the machine has it.
MARKER_BASE = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def raise_priority(tid: int = 0, nice: int = -10, realtime: bool = False) -> str:
    """Let the reading run before ordinary work: an in-place write overwrites the previous
    version, so a reader that waits for the CPU behind a busy agent or browser loses versions.

    realtime: the lowest real-time priority (SCHED_FIFO 1): it runs as soon as an event wakes
    it, whatever the load; its work is bounded by what the agent writes (one read per write),
    and the kernel still keeps 5 % of each CPU for ordinary work. Else (or without the right
    to it) nice `nice`. Needs CAP_SYS_NICE (root has it); without it, the normal priority.
    Returns which it got.
    """
    if realtime:
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(1))
            return "realtime"
        except (PermissionError, OSError) as exc:
            log.debug("watcher: no real-time priority for the reader: %s", exc)
    try:
        os.setpriority(os.PRIO_PROCESS, tid, nice)
        return f"nice {nice}"
    except (PermissionError, OSError) as exc:
        log.debug("watcher: could not raise the reader's priority: %s", exc)
    return "normal"


def _stamp(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


Emit = Callable[[bytes, int], None]  # (the file's bytes, time.monotonic_ns() as the read began)
Tell = Callable[[dict], None]  # {"refused": [name, reason]} or {"torn": 1}


class PageReader:
    """Turns the kernel's events on the page file into whole reads of it, never a torn one.

    A read follows each close-after-write or rename onto the file at once, and is torn (dropped:
    that write's own close brings the next read) if a write began before it or ran during it.
    The kernel queues a change's event only after the change is visible, so the order of events
    alone cannot tell: after the open, a SEEK_HOLE waits for any truncation under way (ext4 and
    tmpfs take the inode's lock for it, and a truncation sends its event under that lock), then
    a write of our own marks the queue. A change of the file before the mark is a write that
    began before the read; a change of its stamp (size, times: fine-grained once queried) from
    the open to the end of the read is a write during it. A change after the mark with the stamp
    unchanged is the next write, begun after the read: the read stands.
    """

    def __init__(self, work_dir: Path, file_name: str, page_cap: int, quiet_read_s: float) -> None:
        self.file_name = file_name
        self._page_cap = page_cap
        self._quiet_read_s = quiet_read_s
        self._dir_fd = open_dir_fd(work_dir)
        self._inotify = INotify()
        self._wd = self._inotify.add_watch(work_dir, WATCH_MASK)
        self._marker_dir = tempfile.mkdtemp(prefix="showcase-watch-", dir=MARKER_BASE)
        self._marker_wd = self._inotify.add_watch(self._marker_dir, F.MODIFY)
        self._marker_fd = os.open(os.path.join(self._marker_dir, "mark"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._pending: deque = deque()
        self._modified_at: float | None = None  # a write seen with no close yet

    def close(self) -> None:
        self._inotify.close()
        os.close(self._marker_fd)
        os.close(self._dir_fd)
        shutil.rmtree(self._marker_dir, ignore_errors=True)

    def run(self, should_stop: Callable[[], bool], emit: Emit, tell: Tell, wake_fd: int | None = None) -> None:
        """Read until should_stop() or wake_fd is readable (its end), then take what is queued."""
        try:
            while True:
                stopping = should_stop()
                if not stopping and not self._pending and wake_fd is not None:
                    ready = select.select([self._inotify.fileno(), wake_fd], [], [], 0.1)[0]
                    stopping = wake_fd in ready
                    timeout = 0
                else:
                    timeout = 0 if stopping or self._pending else 100
                self._once(self._take(timeout), emit, tell)
                if stopping:
                    for _ in range(100):  # bounded: what came before the stop, not a writer that never ends
                        events = self._take(0)
                        if not events:
                            return
                        self._once(events, emit, tell)
                    return
        finally:
            self.close()

    def _take(self, timeout_ms: int) -> list:
        if self._pending:
            events = list(self._pending)
            self._pending.clear()
            return events
        return self._inotify.read(timeout=timeout_ms)

    def _once(self, events: list, emit: Emit, tell: Tell) -> None:
        read_now = False
        for event in events:
            if event.mask & F.Q_OVERFLOW:
                read_now = True  # the kernel dropped events: look at the file itself
                continue
            if event.wd != self._wd or event.name != self.file_name:
                continue
            if event.mask & (F.CLOSE_WRITE | F.MOVED_TO):
                read_now, self._modified_at = True, None
            elif event.mask & (F.MODIFY | F.CREATE):
                read_now, self._modified_at = False, time.monotonic()  # a write under way: its close reads it
        if read_now:
            self._read_whole(emit, tell)
        elif self._modified_at is not None and time.monotonic() - self._modified_at >= self._quiet_read_s:
            self._modified_at = None
            self._read_whole(emit, tell)

    def _read_whole(self, emit: Emit, tell: Tell) -> None:
        began = time.monotonic_ns()
        try:
            fd, before = _open_regular(self._dir_fd, self.file_name, self.file_name)
        except FileNotFoundError:
            return
        except Refused as refused:
            tell({"refused": [refused.name, refused.reason]})
            return
        except OSError as exc:
            tell({"refused": [self.file_name, f"unreadable ({exc.strerror or exc})"]})
            return
        try:
            try:
                os.lseek(fd, 0, os.SEEK_HOLE)  # for the inode's lock: a truncation under way has sent its event
            except OSError:
                pass  # ENXIO: an empty file (the lock was still taken)
            os.lseek(fd, 0, os.SEEK_SET)
            os.pwrite(self._marker_fd, b"m", 0)  # what the kernel queues before this came before the read
            if before.st_size > self._page_cap:
                tell({"refused": [self.file_name, f"larger than {size_words(self._page_cap)}"]})
                return
            data = _read_upto(fd, self._page_cap + 1)
            if len(data) > self._page_cap:
                tell({"refused": [self.file_name, f"larger than {size_words(self._page_cap)}"]})
                return
            after = os.fstat(fd)
        finally:
            os.close(fd)
        later = self._inotify.read(timeout=0)
        marks = [i for i, e in enumerate(later) if e.wd == self._marker_wd]
        earlier = later[: marks[0]] if marks else later
        self._pending.extend(e for e in later if e.wd != self._marker_wd)
        under_way = any(e.wd == self._wd and e.name == self.file_name and e.mask & F.MODIFY for e in earlier)
        if under_way or _stamp(before) != _stamp(after):
            tell({"torn": 1})
            return
        emit(data, began)


def main(argv: list[str]) -> None:
    """The reader process: reads of the page file into spool/<monotonic ns>.read, one line each."""
    work_dir, file_name, spool, page_cap, quiet_read_s = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run ends it (closing its input), not a Ctrl-C meant for the run
    raise_priority(realtime=True)
    spool_dir = Path(spool)
    out = sys.stdout
    lock = threading.Lock()

    def say(message: dict) -> None:
        with lock:  # both threads speak
            out.write(json.dumps(message) + "\n")
            out.flush()

    # Spooling (a file create on a possibly busy disk) happens in a thread of its own, so the
    # next read never waits for it; what waits is bounded, past that the read waits.
    spooled: queue.Queue[tuple[bytes, int] | None] = queue.Queue()
    room = threading.BoundedSemaphore(SPOOL_BACKLOG)

    def spool_loop() -> None:
        while (item := spooled.get()) is not None:
            data, began_ns = item
            name = f"{began_ns:020d}.read"
            part = spool_dir / f".{name}.tmp"
            try:
                with open(part, "xb") as handle:  # no fsync: the keeper fsyncs the version; this hands it over
                    handle.write(data)
                os.rename(part, spool_dir / name)
            except OSError as exc:  # a full disk: that read is lost, and said so; later ones may fit
                print(f"watcher: could not spool a read: {exc}", file=sys.stderr, flush=True)
                part.unlink(missing_ok=True)
                continue
            finally:
                room.release()
            say({"read": name, "mono_ns": began_ns})

    def emit(data: bytes, began_ns: int) -> None:
        room.acquire()
        spooled.put((data, began_ns))

    spooler = threading.Thread(target=spool_loop, name="showcase-spool")
    spooler.start()
    reader = PageReader(Path(work_dir), file_name, int(page_cap), float(quiet_read_s))
    say({"ready": True})
    try:
        reader.run(lambda: False, emit, say, wake_fd=sys.stdin.fileno())
    finally:
        spooled.put(None)
        spooler.join()


if __name__ == "__main__":
    main(sys.argv[1:])
