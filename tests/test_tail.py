"""The tail of a run: the final file is checked first, the other versions after it.

The watcher over real files and threads (its load check a small parser), and `showcase finalize`
on a run folder whose final file throws, in real Chromium.
"""

import hashlib
import json
import subprocess
import threading
import time

import pytest

from showcase.io import read_jsonl
from showcase.run.watcher import Watcher
from test_watcher import page, wait_for, well_formed_page


def test_stop_checks_the_final_file_first_and_leaves_the_backlog(tmp_path):
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    order: list[bytes] = []
    release = threading.Event()

    def gated_check(html: bytes) -> tuple[bool, list[str]]:
        order.append(html)
        if len(order) <= 2:
            release.wait(10)  # the first two checks hold until the test lets them go
        return well_formed_page(html)

    watcher = Watcher(work, run, load_check=gated_check, check_workers=2).start()
    pages = [page(i, broken=(i == 2)) for i in range(8)]
    for data in pages:
        (work / "game.html").write_bytes(data)
        time.sleep(0.05)
    wait_for(lambda: len(order) == 2, what="two checks under way")
    # Two checks hold the workers; the final file's check waits neither for them nor for the queue,
    # and once it loads, theirs are not waited for (they would hold stop for 10 s, and record).
    watcher.stop(timeout_s=20, backlog=False)
    release.set()

    final = watcher.final_record()
    assert final is not None and final.sha256 == hashlib.sha256(pages[-1]).hexdigest()
    assert final.loaded_without_errors is True
    assert order[2] == pages[-1], "the final file was not the first check after the two under way"
    checked = [v.n for v in watcher.versions if v.loaded_without_errors is not None]
    assert checked == [final.n], checked  # the two under way were abandoned: left for the backlog
    left = watcher.unchecked()
    assert len(left) == len(watcher.versions) - 1

    assert watcher.check_backlog(timeout_s=20) == len(left)
    assert watcher.unchecked() == []
    index = {hashlib.sha256(d).hexdigest(): i for i, d in enumerate(pages)}
    assert [v.loaded_without_errors for v in watcher.versions] == [index[v.sha256] != 2 for v in watcher.versions]
    rows = [row for row in read_jsonl(run / "versions.jsonl") if row["event"] == "load_checked"]
    assert sorted(row["n"] for row in rows) == [v.n for v in watcher.versions]  # one verdict each


def test_a_check_abandoned_at_the_end_is_not_told_as_a_failure(tmp_path, caplog):
    """The check under way when the final file loaded meets its browser's close: that is no
    failure of the check (the version waits for the backlog), so the user is not told one."""
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    release, ended = threading.Event(), threading.Event()
    calls: list[bytes] = []

    def closing_check(html: bytes) -> tuple[bool, list[str]]:
        calls.append(html)
        if len(calls) == 1:
            release.wait(10)
            ended.set()
            raise RuntimeError("Browser.new_context: Target page, context or browser has been closed")
        return well_formed_page(html)

    watcher = Watcher(work, run, load_check=closing_check, check_workers=1).start()
    pages = [page(i) for i in range(3)]
    for data in pages:
        (work / "game.html").write_bytes(data)
        time.sleep(0.05)
    wait_for(lambda: len(calls) == 1, what="the first check under way")
    with caplog.at_level("WARNING", logger="showcase.run.watcher"):
        watcher.stop(timeout_s=20, backlog=False)
        assert watcher.final_record().loaded_without_errors is True
        release.set()
        assert ended.wait(10)
        time.sleep(0.3)  # the abandoned check's thread goes on to its end
    assert not [r for r in caplog.records if "failed" in r.getMessage()], caplog.text
    first = watcher.versions[0]
    assert first.loaded_without_errors is None and first.check_failure is None
    assert first.n in watcher.unchecked()  # left for the backlog, as its verdict is still owed


GOOD = "<!doctype html><title>good {}</title><script>window.ready=true</script>"
THROWS = "<!doctype html><title>throws</title><script>window.ready=true;throw new Error(`final file broken`)</script>"


@pytest.mark.docker
@pytest.mark.browser
def test_finalize_with_a_broken_final_file_chooses_by_every_verdict(docker_engine, tmp_path):
    """A run killed before any version was checked: its final file throws, so the rule needs every
    verdict, and they all come before the final check. About 40 s (the final check of a small page)."""
    from runfolder import make_run
    from test_run import SHOWCASE

    run = make_run(tmp_path, "killed", clip_source=None, finalized=False, n_versions=1)
    (run / "versions.jsonl").unlink()
    for old in (run / "versions").iterdir():
        old.unlink()
    for n in (1, 2):  # kept by a watcher killed before it wrote their lines: recovered, unchecked
        body = GOOD.format(n).encode()
        (run / "versions" / f"{n:04d}-{hashlib.sha256(body).hexdigest()[:8]}.html").write_bytes(body)
    (run / "work").mkdir()
    (run / "work" / "game.html").write_text(THROWS)

    done = subprocess.run(SHOWCASE + ["finalize", str(run), "--no-clip"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    choice = json.loads((run / "final-choice.json").read_text())
    assert (choice["rule"], choice["n"], choice["is_final_file"]) == ("last_version_that_loads", 2, False), choice
    assert [(c["n"], c["loaded_without_errors"]) for c in choice["candidates"]] == [(1, True), (2, True), (3, False)]
    checked = [row for row in read_jsonl(run / "versions.jsonl") if row["event"] == "load_checked"]
    assert sorted(row["n"] for row in checked) == [1, 2, 3]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    started = names.index("backlog_started")
    assert events[started]["detail"] == {"versions": 2, "during": "before_check"}
    assert started < names.index("backlog_checked") < names.index("check_done")
    assert events[names.index("backlog_checked")]["detail"]["unchecked"] == 0
    assert json.loads((run / "check.json").read_text())["page_sha256"] == hashlib.sha256(GOOD.format(2).encode()).hexdigest()
