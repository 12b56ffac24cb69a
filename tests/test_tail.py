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
        release.wait(10)  # the backlog's checks under way hold until the test lets them go
        return well_formed_page(html)

    watcher = Watcher(work, run, load_check=gated_check, check_workers=2).start()
    pages = [page(i, broken=(i == 2)) for i in range(8)]
    for data in pages:
        (work / "game.html").write_bytes(data)
        time.sleep(0.05)
    wait_for(lambda: len(order) == 2, what="two checks under way")
    # Two checks hold the workers; the final file's check must not wait behind them or the queue.
    threading.Timer(1.0, release.set).start()
    watcher.stop(timeout_s=20, backlog=False)

    final = watcher.final_record()
    assert final is not None and final.sha256 == hashlib.sha256(pages[-1]).hexdigest()
    assert final.loaded_without_errors is True
    assert order[2] == pages[-1], "the final file was not the first check after the two under way"
    checked = {v.n for v in watcher.versions if v.loaded_without_errors is not None}
    assert len(checked) == 3, checked  # the two under way and the final file, nothing else
    left = watcher.unchecked()
    assert len(left) == len(watcher.versions) - 3

    assert watcher.check_backlog(timeout_s=20) == len(left)
    assert watcher.unchecked() == []
    index = {hashlib.sha256(d).hexdigest(): i for i, d in enumerate(pages)}
    assert [v.loaded_without_errors for v in watcher.versions] == [index[v.sha256] != 2 for v in watcher.versions]
    rows = [row for row in read_jsonl(run / "versions.jsonl") if row["event"] == "load_checked"]
    assert sorted(row["n"] for row in rows) == [v.n for v in watcher.versions]  # one verdict each
