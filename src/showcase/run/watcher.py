"""Keep every distinct version of the agent's page (/work/game.html) as the run goes.

The watcher runs on the host over the run's work folder (bind-mounted into the container, so
the container's writes raise the same kernel file events). It reacts to inotify events, not to
polling: each close-after-write or rename onto the file is read at once, by a reader process of
its own (showcase.run.page_reader), so writes 10 ms apart are each kept. Each new version is stored as versions/NNNN-<sha8>.html *before* its line is
appended to versions.jsonl, so a `kill -9` at any moment loses no page: `recover_versions`
rebuilds the lines a killed watcher did not write.

Why inotify_simple and not watchfiles (see docs/run-parts.md): watchfiles groups changes over a
debounce window (1600 ms by default) into a set, so two writes of the same file in one window
are one change and the first version is never read; it also cannot tell a finished write
(IN_CLOSE_WRITE) from a half-done one (IN_MODIFY).
"""

import hashlib
import json
import logging
import os
import queue
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from showcase.errors import UserError
from showcase.host.untrusted import DEFAULT_PAGE_CAP, Refused, open_dir_fd, read_file_at, read_regular
from showcase.io import append_jsonl, terminate_torn_line, write_bytes_atomic
from showcase.run.page_reader import PageReader, raise_priority
from showcase.runfolder.artefacts import RunLayout, VersionRecord, fold_versions, read_jsonl_models

log = logging.getLogger(__name__)

VERSIONS_DIR = "versions"
VERSIONS_LOG = "versions.jsonl"
_VERSION_FILE = re.compile(r"^(\d{4,})-([0-9a-f]{8})\.html$")
MAX_ERROR_LINES = 20
MAX_ERROR_CHARS = 300
# A load check (a page opening) competes for the CPU with the read of the next write: during a
# burst it waits until the file has been quiet this long, but never longer than CHECK_DEFER_MAX_S.
CHECK_QUIET_S = 0.25
CHECK_DEFER_MAX_S = 3.0
SPOOL_PREFIX = ".reads-"  # versions/.reads-XXXX/: what the reader process read, until it is kept
READER_START_S = 30.0
MAX_MESSAGE_BYTES = 4096

LoadCheck = Callable[..., tuple[bool, list[str]]]  # (html bytes[, picture path]) -> (loaded, error lines)
# (file name, reason) of an entry the watcher would not read: "a link", "a FIFO", "larger than 16 MiB"
OnRefused = Callable[[str, str], None]


def version_file_name(n: int, sha256: str) -> str:
    return f"{n:04d}-{sha256[:8]}.html"


def read_versions(run_dir: Path | str) -> list[VersionRecord]:
    """Every version recorded in run_dir/versions.jsonl, folded by n, in order of n."""
    return fold_versions(read_jsonl_models(Path(run_dir) / VERSIONS_LOG, VersionRecord, []))


def recover_versions(run_dir: Path | str, start_epoch: float | None = None) -> list[VersionRecord]:
    """Append a 'recovered' line for every stored version file that versions.jsonl lacks.

    A killed watcher may have stored a version (file first) without writing its line. The time
    since start is taken from the file's modification time and `start_epoch` (the run's start,
    Unix seconds); without it, from an already recorded version (its file's mtime minus its t_s);
    failing both it is null. Returns the lines added. Leftover temp files are removed.
    """
    run_dir = Path(run_dir)
    versions_dir = run_dir / VERSIONS_DIR
    log_path = run_dir / VERSIONS_LOG
    terminate_torn_line(log_path)
    known = {record.n: record for record in read_versions(run_dir)}
    if not versions_dir.is_dir():
        return []
    for leftover in versions_dir.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    if start_epoch is None:
        for record in known.values():
            path = versions_dir / record.file
            if record.t_s is not None and path.exists():
                start_epoch = path.stat().st_mtime - record.t_s
                break
    added = []
    for path in sorted(versions_dir.iterdir()):
        match = _VERSION_FILE.match(path.name)
        if not match or int(match.group(1)) in known:
            continue
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if sha[:8] != match.group(2):
            log.warning("versions/%s does not hold the bytes its name says; not recovered", path.name)
            continue
        t_s = None if start_epoch is None else round(max(0.0, path.stat().st_mtime - start_epoch), 3)
        record = VersionRecord(
            n=int(match.group(1)), event="recovered", t_s=t_s, sha256=sha, size=len(data),
            last_request_id=None, file=path.name,
        )
        append_jsonl(log_path, record)
        added.append(record)
    return added


@dataclass(eq=False)
class _Read:
    """Bytes read from the page file, waiting to be kept."""

    data: bytes
    t_s: float
    last_request_id: str | None
    done: threading.Event = field(default_factory=threading.Event)
    record: VersionRecord | None = None
    error: Exception | None = None
    spool_path: Path | None = None  # the reader's copy, removed once the version is kept


class Watcher:
    """Watch `work_dir/file_name` and keep each distinct version under `run_dir`.

    clock: seconds since the run's start (default: since this object was made).
    last_request_id: the id of the gate's latest request, recorded with each version.
    load_check: html bytes -> (loaded_without_errors, error lines); run in a background thread.
    pictures: load_check also gets the path to write the version's screenshot to
    (RunLayout.version_picture), and the load_checked line names the file if it was written.
    quiet_read_s: a write with no close (a writer that keeps the file open) is read after this
    long without further writes.
    page_cap: a file larger than this is refused, never copied.
    on_refused: told once per (file, reason) when the file is not a regular file reached through
    no link, or is too large; the version before it still counts.
    check_workers: load checks run at once, started in the order the versions were written (a
    burst then shares each check's settle time instead of queueing behind it).
    final_check: the final file's check at stop(backlog=False), if it is not load_check (the run
    gives it precedence over the version checks under way: the end of the run waits for it).
    """

    def __init__(
        self,
        work_dir: Path | str,
        run_dir: Path | str,
        file_name: str = "game.html",
        clock: Callable[[], float] | None = None,
        last_request_id: Callable[[], str | None] | None = None,
        load_check: LoadCheck | None = None,
        quiet_read_s: float = 5.0,
        page_cap: int = DEFAULT_PAGE_CAP,
        on_refused: OnRefused | None = None,
        check_workers: int = 1,
        pictures: bool = False,
        final_check: LoadCheck | None = None,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.run_dir = Path(run_dir)
        self.file_name = file_name
        self.path = self.work_dir / file_name
        self.versions_dir = self.run_dir / VERSIONS_DIR
        self.log_path = self.run_dir / VERSIONS_LOG
        started = time.monotonic()
        self._clock = clock or (lambda: time.monotonic() - started)
        self._last_request_id = last_request_id or (lambda: None)
        self._load_check = load_check
        self._final_check = final_check or load_check
        self._pictures = pictures
        self._quiet_read_s = quiet_read_s
        self._page_cap = page_cap
        self._on_refused = on_refused
        self._refusals_told: set[tuple[str, str]] = set()
        self.refusals: list[tuple[str, str]] = []  # every refusal told, in order
        self.final_sha256: str | None = None  # the file's bytes at the last snapshot; None: none kept

        self._lock = threading.RLock()  # guards the records, the log and the numbering
        self._records: dict[int, VersionRecord] = {}
        self._by_sha: dict[str, int] = {}
        self._current_sha: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._work_fd: int | None = None
        # The reading happens in a process of its own (no lock shared with this process's busy
        # threads delays it); in a thread here only if that process cannot start.
        self._proc: subprocess.Popen | None = None
        self._spool: Path | None = None
        self._reader_stop: threading.Event | None = None
        self._checks: queue.Queue[int | None] = queue.Queue()
        # Reading must be quick (the next write may come 50 ms later); storing fsyncs and may
        # take longer on a busy disk, so it happens in its own thread, in the order read.
        self._stores: queue.Queue[_Read | None] = queue.Queue()
        self._storer: threading.Thread | None = None
        self._checkers: list[threading.Thread] = []
        self._check_workers = max(1, check_workers)
        # stop(backlog=False): checks not begun are left for check_backlog; those begun, by n.
        self._leave_backlog = False
        self._checking: set[int] = set()
        self._abandoned = False  # the final file loads: the checks that were under way record nothing
        self._generation = 0  # bumped when they are abandoned; a check records only in its own
        self.skipped_torn_reads = 0  # reads thrown away because a new write began meanwhile
        self._last_read = 0.0  # monotonic time of the last read of the page file

        # A watcher restarted over the same run folder goes on numbering where the last stopped.
        recover_versions(self.run_dir)
        for record in read_versions(self.run_dir):
            self._records[record.n] = record
            self._by_sha.setdefault(record.sha256, record.n)
        if self._records:
            latest = max(self._records.values(), key=lambda r: (r.last_seen_t_s or r.t_s or 0.0, r.n))
            self._current_sha = latest.sha256  # the file as the last watcher left it is no rewrite

    # ------------------------------------------------------------------ public API

    @property
    def versions(self) -> list[VersionRecord]:
        """Every version so far, in order of n, with load-check results as far as known."""
        with self._lock:
            return [self._records[n] for n in sorted(self._records)]

    def start(self, check_backlog: bool = True) -> "Watcher":
        """Watch from now on. check_backlog False: versions a former watcher left unchecked wait
        for `check_backlog` (new ones are checked as they land)."""
        if not self.work_dir.is_dir():
            raise UserError(f"watcher: work folder {self.work_dir} does not exist")
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        # One handle on the folder for every read: a read 50 ms after the last must be quick.
        self._work_fd = open_dir_fd(self.work_dir)
        self._take_leftover_reads()
        self._start_reader()
        self._storer = threading.Thread(target=self._store_loop, name="showcase-version-store", daemon=True)
        self._storer.start()
        # Events start now; a file already there (a restart) is taken as it is.
        self.snapshot_now()
        if self._load_check is not None:
            if check_backlog:
                self._queue_unchecked()
            self._start_checkers()
        return self

    def final_record(self) -> VersionRecord | None:
        """The version the last snapshot read (the final file), as far as it is known now."""
        with self._lock:
            n = self._by_sha.get(self.final_sha256) if self.final_sha256 else None
            return self._records[n] if n is not None else None

    def unchecked(self) -> list[int]:
        """The versions with no load verdict yet (and no failed check), in order of n."""
        with self._lock:
            return [n for n in sorted(self._records)
                    if self._records[n].loaded_without_errors is None and self._records[n].check_failure is None]

    def check_backlog(self, timeout_s: float) -> int:
        """After stop(backlog=False): check every version still without a verdict, `check_workers`
        at once in the order written; bounded by timeout_s. Returns how many were checked."""
        if self._load_check is None:
            return 0
        with self._lock:
            self._leave_backlog = self._abandoned = False
        todo = self._queue_unchecked()
        self._checkers = []
        self._start_checkers()
        self.wait_checked(timeout_s)
        self._end_checkers(max(0.0, min(1.0, timeout_s)))
        return len(todo) - len(set(todo) & set(self.unchecked()))

    def _queue_unchecked(self) -> list[int]:
        todo = self.unchecked()
        for n in todo:
            self._checks.put(n)
        return todo

    def _start_checkers(self) -> None:
        for i in range(self._check_workers):
            checker = threading.Thread(target=self._check_loop, name=f"showcase-load-check-{i}", daemon=True)
            checker.start()
            self._checkers.append(checker)

    def _end_checkers(self, timeout_s: float) -> None:
        for _ in self._checkers:
            self._checks.put(None)
        deadline = time.monotonic() + timeout_s
        for checker in self._checkers:
            checker.join(max(0.0, deadline - time.monotonic()))

    def snapshot_now(self) -> VersionRecord | None:
        """Read the file now and keep it if new (the final snapshot at the hard stop catches a
        last write the events missed). Returns the record of the file's current bytes, or None
        if the file does not exist."""
        data = self._read()
        if data is None:
            self.final_sha256 = None
            return None
        if self._storer is None or not self._storer.is_alive():
            record = self._keep(self._as_read(data))  # not started or stopped: keep it here
            self.final_sha256 = record.sha256
            return record
        item = self._enqueue(data)
        if not item.done.wait(60):
            raise TimeoutError("the version store did not keep the snapshot within 60 s")
        if item.error is not None:
            raise item.error
        self.final_sha256 = item.record.sha256 if item.record is not None else None
        return item.record

    def wait_checked(self, timeout_s: float) -> bool:
        """Wait until every version so far has its load-check result; False if time ran out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._checks.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return self._checks.unfinished_tasks == 0

    def stop(self, timeout_s: float = 30.0, final_snapshot: bool = True, backlog: bool = True) -> list[VersionRecord]:
        """Stop watching, take a final snapshot, wait (bounded) for pending load checks.

        Versions still unchecked when `timeout_s` runs out keep loaded_without_errors null.
        backlog False: the final file's check comes first, and no other check begins: those
        versions wait for `check_backlog`. If the final file loads, the final choice needs no
        other verdict, so the checks under way are not waited for either: they record nothing
        (whoever closes their browser ends them) and are left to `check_backlog` too.
        """
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        self._stop_reader(max(0.0, min(10.0, deadline - time.monotonic())))
        if final_snapshot:
            try:
                self.snapshot_now()
            except Exception as exc:  # a full disk, a store that timed out: the versions so far stand
                log.error("watcher: final snapshot failed: %s", exc)
        if self._storer is not None:
            self._stores.put(None)
            self._storer.join(max(0.0, deadline - time.monotonic()))
        if self._checkers:
            if not backlog:
                self._check_final_first(deadline)
            if not self._abandoned:
                self.wait_checked(max(0.0, deadline - time.monotonic()))
            self._end_checkers(max(0.0, min(1.0, deadline - time.monotonic())))
        if self._spool is not None and (self._thread is None or not self._thread.is_alive()):
            if not any(self._spool.glob("*.read")):  # a read not kept stays for the next start
                shutil.rmtree(self._spool, ignore_errors=True)
        if self._work_fd is not None and (self._thread is None or not self._thread.is_alive()):
            # Closed only once no read can use it: a reused fd number would be another folder.
            fd, self._work_fd = self._work_fd, None
            os.close(fd)
        return self.versions

    # ------------------------------------------------------------------ internals

    def _read(self) -> bytes | None:
        """The file's bytes; None when it is missing or refused (a link, a FIFO, too large ...)."""
        try:
            if self._work_fd is not None and "/" not in self.file_name:
                return read_file_at(self._work_fd, self.file_name, self._page_cap)
            return read_regular(self.work_dir, self.file_name, self._page_cap)
        except FileNotFoundError:
            return None
        except Refused as refused:
            self._refuse(refused.name, refused.reason)
        except OSError as exc:
            self._refuse(self.file_name, f"unreadable ({exc.strerror or exc})")
        return None

    def _refuse(self, name: str, reason: str) -> None:
        with self._lock:
            self._current_sha = None  # the same bytes written back later are a sighting again
            if (name, reason) in self._refusals_told:
                return
            self._refusals_told.add((name, reason))
            self.refusals.append((name, reason))
        log.warning("watcher: %s was %s: not kept", name, reason)
        if self._on_refused is not None:
            try:
                self._on_refused(name, reason)
            except Exception as exc:
                log.error("watcher: could not record a refused entry: %s", exc)

    def _start_reader(self) -> None:
        """Read the page file from a process of its own; in this one only if that cannot start."""
        spool = Path(tempfile.mkdtemp(prefix=SPOOL_PREFIX, dir=self.versions_dir))
        command = [sys.executable, "-m", "showcase.run.page_reader", str(self.work_dir), self.file_name, str(spool),
                   str(self._page_cap), str(self._quiet_read_s)]
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
            ready = _read_line(proc.stdout, READER_START_S)
            if ready != {"ready": True}:
                raise OSError(f"the page reader did not start (said {ready!r})")
        except (OSError, ValueError) as exc:
            log.warning("watcher: reading in this process instead: %s", exc)
            if "proc" in locals():
                _end_process(proc)
            shutil.rmtree(spool, ignore_errors=True)
            self._reader_stop = threading.Event()
            reader = PageReader(self.work_dir, self.file_name, self._page_cap, self._quiet_read_s)
            self._thread = threading.Thread(target=self._read_here, args=(reader,), name="showcase-watcher", daemon=True)
        else:
            self._proc, self._spool = proc, spool
            self._thread = threading.Thread(target=self._take_reads, name="showcase-watcher", daemon=True)
        self._thread.start()

    def _read_here(self, reader: "PageReader") -> None:
        raise_priority(threading.get_native_id())
        assert self._reader_stop is not None
        reader.run(self._reader_stop.is_set, lambda data, began_ns: self._enqueue(data, began_ns / 1e9), self._told)

    def _take_reads(self) -> None:
        """Keep, in order, what the reader process read; until it ends (stop closes its input)."""
        assert self._proc is not None and self._proc.stdout is not None and self._spool is not None
        for line in self._proc.stdout:
            try:
                message = json.loads(line)
                if "read" in message:
                    path = self._spool / message["read"]
                    self._enqueue(path.read_bytes(), message["mono_ns"] / 1e9, spool_path=path)
                else:
                    self._told(message)
            except Exception as exc:  # one read's fault is that read's: the rest still count
                log.error("watcher: could not take a read: %s: %s", type(exc).__name__, exc)
        if not self._stop.is_set():
            log.error("watcher: the page reader ended before the run did (exit %s); reading here", self._proc.poll())
            self._reader_stop = threading.Event()
            if self._stop.is_set():
                return
            self._read_here(PageReader(self.work_dir, self.file_name, self._page_cap, self._quiet_read_s))

    def _told(self, message: dict) -> None:
        if "refused" in message:
            self._refuse(*message["refused"])
        elif "torn" in message:
            self.skipped_torn_reads += 1

    def _take_leftover_reads(self) -> None:
        """Reads a killed watcher's reader spooled but no one kept: kept now, in the order read."""
        spools = sorted(self.versions_dir.glob(SPOOL_PREFIX + "*"))
        for path in sorted((p for d in spools for p in d.glob("*.read")), key=lambda p: p.name):
            mono = int(path.stem) / 1e9
            self._keep(_Read(data=path.read_bytes(), t_s=round(max(0.0, self._clock() - (time.monotonic() - mono)), 3),
                             last_request_id=None))
            path.unlink()
        for spool in spools:
            shutil.rmtree(spool, ignore_errors=True)

    def _stop_reader(self, timeout_s: float) -> None:
        """The reader reads what is pending, then ends; its spool goes once every read is kept."""
        if self._reader_stop is not None:
            self._reader_stop.set()
        if self._proc is not None:
            try:
                self._proc.stdin.close()  # its end of input: read what is queued, then end
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(max(0.1, timeout_s))
        if self._proc is not None:
            _end_process(self._proc)

    def _as_read(self, data: bytes) -> "_Read":
        # Time and request id as of the read, not as of the (possibly later) store.
        return _Read(data=data, t_s=round(self._clock(), 3), last_request_id=self._last_request_id())

    def _enqueue(self, data: bytes, read_at: float | None = None, spool_path: Path | None = None) -> "_Read":
        """Queue bytes to keep; read_at: time.monotonic() when they were read (default: now)."""
        now = time.monotonic()
        read_at = now if read_at is None else min(read_at, now)
        self._last_read = read_at
        item = _Read(data=data, t_s=round(max(0.0, self._clock() - (now - read_at)), 3),
                     last_request_id=self._last_request_id(), spool_path=spool_path)
        self._stores.put(item)
        return item

    def _store_loop(self) -> None:
        while True:
            item = self._stores.get()
            if item is None:
                return
            try:
                self._keep(item)
            except Exception as exc:  # a full disk: say so, keep going with later versions
                log.error("watcher: could not keep a version: %s", exc)
                item.error = exc
                item.done.set()

    def _keep(self, item: "_Read") -> VersionRecord:
        """Store new bytes as the next version (file first, then its line); note rewrites."""
        record = self._keep_locked(item.data, item.t_s, item.last_request_id)
        if item.spool_path is not None:
            item.spool_path.unlink(missing_ok=True)
        item.record = record
        item.done.set()
        return record

    def _keep_locked(self, data: bytes, now: float, last_request_id: str | None) -> VersionRecord:
        sha = hashlib.sha256(data).hexdigest()
        with self._lock:
            known = self._by_sha.get(sha)
            if known is not None:
                record = self._records[known]
                if sha != self._current_sha:
                    # An older version written again: its last sighting matters to the final choice.
                    record = record.model_copy(update={"last_seen_t_s": now})
                    self._records[known] = record
                    append_jsonl(self.log_path, record.model_copy(update={"event": "seen_again"}))
                self._current_sha = sha
                return record
            n = max(self._records, default=0) + 1
            name = version_file_name(n, sha)
            write_bytes_atomic(self.versions_dir / name, data)
            record = VersionRecord(
                n=n, event="seen", t_s=now, last_seen_t_s=now, sha256=sha, size=len(data),
                last_request_id=last_request_id, file=name,
            )
            append_jsonl(self.log_path, record)
            self._records[n] = record
            self._by_sha[sha] = n
            self._current_sha = sha
        if self._load_check is not None:
            self._checks.put(n)
        return record

    def _check_final_first(self, deadline: float) -> None:
        """No check begins from now on but the final file's: here and now, or the one under way
        (waited for, until `deadline`). If it loads, the other checks under way are abandoned."""
        with self._lock:
            self._leave_backlog = True
            final = self.final_record()
            if final is None:
                return
            mine = final.loaded_without_errors is None and final.check_failure is None and final.n not in self._checking
            if mine:
                self._checking.add(final.n)
        if mine:
            try:
                self._check_one(final.n, check=self._final_check)
            except Exception as exc:
                log.error("watcher: load check of the final file (version %s) could not run: %s", final.n, exc)
            finally:
                with self._lock:
                    self._checking.discard(final.n)
        while time.monotonic() < deadline:
            with self._lock:
                if final.n not in self._checking:
                    if self._records[final.n].loaded_without_errors is True:
                        self._abandoned = True
                        self._generation += 1
                        self._checking = set()
                    return
            time.sleep(0.02)

    def _check_loop(self) -> None:
        while True:
            n = self._checks.get()
            try:
                if n is None:
                    return
                with self._lock:
                    record = self._records[n]
                    if self._leave_backlog or n in self._checking or record.loaded_without_errors is not None:
                        continue  # left for check_backlog, or already under way or done
                    self._checking.add(n)
                    generation = self._generation
                try:
                    self._check_one(n, generation)
                finally:
                    with self._lock:
                        if generation == self._generation:
                            self._checking.discard(n)
            except Exception as exc:  # e.g. a version file gone: that version stays unchecked
                log.error("watcher: load check of version %s could not run: %s", n, exc)
            finally:
                self._checks.task_done()

    def _check_one(self, n: int, generation: int | None = None, check: LoadCheck | None = None) -> None:
        check = check or self._load_check
        assert check is not None
        picked = time.monotonic()
        while (time.monotonic() - self._last_read < CHECK_QUIET_S and time.monotonic() - picked < CHECK_DEFER_MAX_S
               and not self._stop.is_set()):
            time.sleep(0.05)
        with self._lock:
            record = self._records[n]
        data = (self.versions_dir / record.file).read_bytes()
        picture = RunLayout(self.run_dir).version_picture(n) if self._pictures else None
        loaded: bool | None
        try:
            loaded, errors = check(data, picture) if picture is not None else check(data)
            loaded = bool(loaded)
            errors = [str(e).splitlines()[0][:MAX_ERROR_CHARS] if str(e) else "" for e in errors][:MAX_ERROR_LINES]
            failure = None
        except Exception as exc:  # the checker broke: our fault, never the page's
            loaded, errors, failure = None, [], f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        with self._lock:
            if generation is not None and generation != self._generation:
                # Abandoned, left for check_backlog (its browser closed under it, most likely):
                # not a failure to tell; its picture, if any, is written again then.
                return
            record = self._records[n].model_copy(
                update={"loaded_without_errors": loaded, "load_errors": errors, "check_failure": failure,
                        "picture": picture.relative_to(self.run_dir).as_posix() if picture and picture.is_file() else None}
            )
            self._records[n] = record
            append_jsonl(self.log_path, record.model_copy(update={"event": "load_checked"}))
        if failure is not None:
            log.warning("load check of version %d failed: %s", n, failure)


def _read_line(stream, timeout_s: float) -> dict | None:
    """The next line of a reader's output as JSON, waiting at most timeout_s for it."""
    if not select.select([stream], [], [], timeout_s)[0]:
        return None
    line = stream.readline(MAX_MESSAGE_BYTES)
    return json.loads(line) if line else None


def _end_process(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
