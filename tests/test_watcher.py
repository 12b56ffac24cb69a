"""The watcher keeps every distinct version of the page: real files, real inotify, real threads."""

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from html.parser import HTMLParser

import pytest

from showcase.io import read_jsonl
from showcase.run.watcher import Watcher, read_versions, recover_versions


def well_formed_page(html: bytes) -> tuple[bool, list[str]]:
    """A small real load check: the page must parse and must not contain a thrown-error marker."""
    errors = []

    class P(HTMLParser):
        def handle_data(self, data):
            if "throw new Error" in data:
                errors.append(f"Uncaught Error in script: {data.strip()[:40]}")

    P().feed(html.decode("utf-8", "replace"))
    if b"<html" not in html:
        errors.append("no <html> element")
    return (not errors, errors)


def page(i: int, broken: bool = False) -> bytes:
    script = "throw new Error('boom')" if broken else f"console.log({i})"
    return f"<html><head><title>v{i}</title></head><body><script>{script}</script>{'x' * (i * 37)}</body></html>".encode()


def wait_for(predicate, timeout_s: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def dirs(tmp_path):
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    return work, run


def test_twenty_in_place_writes_50ms_apart_are_all_kept_and_checked(dirs):
    work, run = dirs
    requests = iter(range(1, 1000))
    last_id = {"id": None}

    def last_request_id():
        return last_id["id"]

    watcher = Watcher(work, run, last_request_id=last_request_id, load_check=well_formed_page).start()
    pages = [page(i, broken=(i % 4 == 0)) for i in range(20)]
    for data in pages:
        last_id["id"] = f"req-{next(requests)}"
        (work / "game.html").write_bytes(data)  # open(O_TRUNC), write, close: in place
        time.sleep(0.05)
    versions = watcher.stop(timeout_s=20)

    assert [v.sha256 for v in versions] == [hashlib.sha256(d).hexdigest() for d in pages]
    assert [v.n for v in versions] == list(range(1, 21))
    for v, data in zip(versions, pages):
        assert (run / "versions" / v.file).read_bytes() == data
        assert v.file == f"{v.n:04d}-{v.sha256[:8]}.html"
        assert v.size == len(data)
    # The id recorded is the gate's latest when the version was seen: that write's request or,
    # if the watcher read it a moment later, a later one; never an earlier one.
    ids = [int(v.last_request_id.removeprefix("req-")) for v in versions]
    assert all(i >= k for k, i in enumerate(ids, start=1)) and ids == sorted(ids)
    assert all(a.t_s < b.t_s for a, b in zip(versions, versions[1:]))
    # Every version load-checked; broken ones say why.
    assert [v.loaded_without_errors for v in versions] == [i % 4 != 0 for i in range(20)]
    assert versions[0].load_errors[0].startswith("Uncaught Error")
    # The log is append-only: a sighting line then a check line per version; the fold agrees.
    events = [row["event"] for row in read_jsonl(run / "versions.jsonl")]
    assert events.count("seen") == 20 and events.count("load_checked") == 20
    assert read_versions(run) == versions


@pytest.mark.parametrize("how", ["in place", "rename"])
def test_twenty_writes_10ms_apart_beside_busy_threads_are_all_kept_whole(dirs, how):
    """A run's process is busy (gate, browser, checks): a read that waited for this process's
    threads would come after the next write. Every version is kept, and none half-written."""
    work, run = dirs
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinners = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
    for spinner in spinners:
        spinner.start()
    try:
        watcher = Watcher(work, run).start()
        pages = [page(i) + b"y" * 20000 for i in range(20)]
        for i, data in enumerate(pages):
            if how == "rename":
                (work / f".game.{i}.tmp").write_bytes(data)
                os.replace(work / f".game.{i}.tmp", work / "game.html")
            else:
                (work / "game.html").write_bytes(data)
            time.sleep(0.01)
        versions = watcher.stop(timeout_s=20)
    finally:
        stop.set()
    assert [v.sha256 for v in versions] == [hashlib.sha256(d).hexdigest() for d in pages]
    assert not list((run / "versions").glob(".reads-*"))  # the reader's spool is gone once all is kept


def test_a_burst_checked_by_several_workers_gets_every_verdict(dirs):
    """Checks overlap (a slow check per version) yet each version gets its own verdict."""
    work, run = dirs
    lock = threading.Lock()
    running = {"now": 0, "most": 0}

    def slow_check(html: bytes) -> tuple[bool, list[str]]:
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        time.sleep(0.3)  # a check that mostly waits, as a page settling does
        with lock:
            running["now"] -= 1
        return well_formed_page(html)

    watcher = Watcher(work, run, load_check=slow_check, check_workers=4).start()
    pages = [page(i, broken=(i % 3 == 0)) for i in range(12)]
    for data in pages:
        (work / "game.html").write_bytes(data)
        time.sleep(0.05)
    versions = watcher.stop(timeout_s=20)
    # (Keeping every write is the test above; here each kept version's verdict is its own.)
    index = {hashlib.sha256(d).hexdigest(): i for i, d in enumerate(pages)}
    assert len(versions) >= 6
    assert [v.loaded_without_errors for v in versions] == [index[v.sha256] % 3 != 0 for v in versions]
    assert running["most"] > 1
    events = [row["event"] for row in read_jsonl(run / "versions.jsonl")]
    assert events.count("load_checked") == len(versions)


def test_atomic_renames_are_kept_and_temp_files_ignored(dirs):
    work, run = dirs
    watcher = Watcher(work, run).start()
    pages = [page(100 + i) for i in range(10)]
    for i, data in enumerate(pages):
        tmp = work / f".game.html.{i}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, work / "game.html")  # how careful agents (and editors) save
        time.sleep(0.05)
    versions = watcher.stop(timeout_s=10)
    assert [v.sha256 for v in versions] == [hashlib.sha256(d).hexdigest() for d in pages]
    assert all(v.loaded_without_errors is None for v in versions)  # no load check given: unknown, not "yes"


def test_same_bytes_again_is_one_version_with_its_last_sighting(dirs):
    work, run = dirs
    watcher = Watcher(work, run, load_check=well_formed_page).start()
    a, b = page(1), page(2)
    for data in (a, a, b, a):
        (work / "game.html").write_bytes(data)
        time.sleep(0.1)
    versions = watcher.stop(timeout_s=10)
    assert [v.sha256 for v in versions] == [hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest()]
    first, second = versions
    assert first.last_seen_t_s > second.t_s  # a rewrote after b: a is the latest bytes
    assert [r["event"] for r in read_jsonl(run / "versions.jsonl")].count("seen_again") == 1
    assert read_versions(run) == versions


def test_a_writer_that_keeps_the_file_open_is_read_once_it_goes_quiet(dirs):
    work, run = dirs
    watcher = Watcher(work, run, quiet_read_s=0.3).start()
    data = page(7)
    with open(work / "game.html", "wb") as handle:
        handle.write(data)
        handle.flush()
        wait_for(lambda: len(watcher.versions) == 1, 5, "the open file to be read")
        assert watcher.versions[0].sha256 == hashlib.sha256(data).hexdigest()
    watcher.stop(timeout_s=5)


def test_snapshot_now_catches_what_events_did_not_see(dirs):
    work, run = dirs
    watcher = Watcher(work, run, load_check=well_formed_page)  # never started: no events at all
    assert watcher.snapshot_now() is None  # no file yet
    (work / "game.html").write_bytes(page(3))
    record = watcher.snapshot_now()
    assert record is not None and record.n == 1 and record.sha256 == hashlib.sha256(page(3)).hexdigest()
    assert (run / "versions" / record.file).read_bytes() == page(3)
    assert watcher.snapshot_now() == record  # same bytes: no new version


def test_a_failing_load_check_is_our_fault_not_the_page(dirs):
    work, run = dirs

    def broken_checker(html: bytes):
        raise RuntimeError("browser gone")

    watcher = Watcher(work, run, load_check=broken_checker).start()
    (work / "game.html").write_bytes(page(1))
    wait_for(lambda: len(watcher.versions) == 1, 5, "the version")
    (version,) = watcher.stop(timeout_s=10)
    assert version.loaded_without_errors is None
    assert version.check_failure == "RuntimeError: browser gone"


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from showcase.run import watcher as W

    work, run = Path(sys.argv[1]), Path(sys.argv[2])
    real_append = W.append_jsonl

    def append_but_freeze_on_4(path, record):
        # Freeze between "version 4 stored" and "its line appended": the worst moment for a kill.
        if record.n == 4 and record.event == "seen":
            (run / "STORED-4").touch()
            time.sleep(3600)
        real_append(path, record)

    W.append_jsonl = append_but_freeze_on_4
    W.Watcher(work, run).start()
    print("ready", flush=True)
    time.sleep(3600)
    """
)


def test_kill_9_between_storing_and_logging_loses_nothing(dirs):
    work, run = dirs
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(work), str(run)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        pages = [page(i) for i in range(1, 5)]
        for data in pages:
            (work / "game.html").write_bytes(data)
            time.sleep(0.1)
        wait_for(lambda: (run / "STORED-4").exists(), 10, "version 4 to be stored")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert child.returncode == -signal.SIGKILL

    # A torn line, as if a second kill hit mid-write.
    with open(run / "versions.jsonl", "ab") as handle:
        handle.write(b'{"n": 9, "event": "se')
    assert [v.n for v in read_versions(run)] == [1, 2, 3]
    assert len(list((run / "versions").glob("*.html"))) == 4

    added = recover_versions(run)
    assert [(r.n, r.event, r.sha256) for r in added] == [(4, "recovered", hashlib.sha256(pages[3]).hexdigest())]
    assert added[0].t_s is not None and added[0].t_s >= 0  # start derived from the recorded versions
    assert recover_versions(run) == []  # idempotent
    assert [v.sha256 for v in read_versions(run)] == [hashlib.sha256(d).hexdigest() for d in pages]

    # A restarted watcher goes on numbering after the recovered version.
    watcher = Watcher(work, run).start()
    (work / "game.html").write_bytes(page(5))
    wait_for(lambda: len(watcher.versions) == 5, 5, "version 5")
    versions = watcher.stop(timeout_s=5)
    assert [v.n for v in versions] == [1, 2, 3, 4, 5]
    assert read_versions(run) == versions
    rows = read_jsonl(run / "versions.jsonl")
    assert not any(r["event"] == "seen_again" for r in rows)  # a restart is not a rewrite


def test_reads_spooled_but_not_kept_before_a_kill_are_kept_at_the_next_start(dirs):
    """The reader hands each read over as a spooled file; one the run's process never kept
    (killed between the two) is kept, in the order read, when a watcher starts over the folder."""
    work, run = dirs
    spool = run / "versions" / ".reads-killed"
    spool.mkdir(parents=True)
    pages = [page(1), page(2)]
    now = time.monotonic_ns()
    for i, data in enumerate(pages):
        (spool / f"{now - 1000 + i:020d}.read").write_bytes(data)
    watcher = Watcher(work, run).start()
    versions = watcher.stop(timeout_s=10)
    assert [v.sha256 for v in versions] == [hashlib.sha256(d).hexdigest() for d in pages]
    assert not list((run / "versions").glob(".reads-*"))


# Real pages for real load checks side by side: each must get the verdict it gets alone.
GOOD = "<!doctype html><title>good {i}</title><script>window.ready = true</script>"
THROWS_IN_SETTLE = ("<!doctype html><title>throws</title><script>window.ready = true; "
                    "setTimeout(() => { throw new Error('thrown while settling') }, 800)</script>")
FREEZES_IN_SETTLE = ("<!doctype html><title>freezes</title><script>window.ready = true; "
                     "setTimeout(() => { for (;;) {} }, 800)</script>")
CONSOLE_ERROR = "<!doctype html><title>console</title><script>window.ready = true; console.error('said an error')</script>"


@pytest.mark.browser
def test_checks_side_by_side_in_the_run_browser_each_keep_their_own_verdict(dirs):
    """A burst checked three at a time in one warm browser: a page that throws, freezes or logs
    an error while a good one settles beside it is still found, and the good ones still load."""
    from showcase.browser.service import BrowserService
    from showcase.check.quick import QUICK_RENDERER
    from showcase.run.orchestrate import _quick_check_dict, _watcher_check

    work, run = dirs
    pages = [GOOD.format(i=1), THROWS_IN_SETTLE, GOOD.format(i=2), FREEZES_IN_SETTLE, CONSOLE_ERROR, GOOD.format(i=3)]
    with BrowserService(QUICK_RENDERER, parallel=3).start(wait=True) as service:
        running = {"now": 0, "most": 0}
        lock = threading.Lock()
        check = _watcher_check(_quick_check_dict(None, service))

        def counted(html: bytes, picture=None):
            with lock:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
            try:
                return check(html, picture)
            finally:
                with lock:
                    running["now"] -= 1

        watcher = Watcher(work, run, load_check=counted, check_workers=3, pictures=True).start()
        for data in pages:
            (work / "game.html").write_text(data)
            time.sleep(0.05)
        versions = watcher.stop(timeout_s=120)
    assert [v.sha256 for v in versions] == [hashlib.sha256(p.encode()).hexdigest() for p in pages]
    assert [v.loaded_without_errors for v in versions] == [True, False, True, False, False, True], [v.load_errors for v in versions]
    assert any("thrown while settling" in e for e in versions[1].load_errors), versions[1].load_errors
    assert any("page frozen" in e for e in versions[3].load_errors), versions[3].load_errors
    assert any("said an error" in e for e in versions[4].load_errors), versions[4].load_errors
    assert running["most"] > 1  # they did run side by side
    for v in versions:
        if v.loaded_without_errors:
            assert (run / v.picture).read_bytes()[:4] == b"\x89PNG"
