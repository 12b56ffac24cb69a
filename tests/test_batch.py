"""`showcase batch` on this machine: real Docker, real Chromium, a scripted model.

Each batch is a `showcase` process of its own, as a user starts it; its runs are child
`showcase run` processes against a replay model the batch serves.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from showcase.paths import TASKS_DIR

SHOWCASE = [sys.executable, "-m", "showcase.cli"]
PAGE_FILE = TASKS_DIR / "voxel" / "demo" / "pages" / "v1.html"
GOOD_PAGE = PAGE_FILE.read_text()


def short_script(model: str, wait_s: float) -> dict:
    """One version of the page, then (after wait_s: a window to kill the batch in) done."""
    return {
        "model": model,
        "turns": [
            {"content": "A world.", "tool_calls": [{"name": "write_file", "arguments": {"path": "game.html", "content": GOOD_PAGE}}]},
            {"content": "DONE /work/game.html", "delay_s": wait_s},
        ],
        "final": {"content": "DONE /work/game.html"},
    }


def write_plan(folder: Path, text: str) -> Path:
    plan = folder / "plan.toml"
    plan.write_text(text)
    return plan


def batch(plan: Path, out: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(SHOWCASE + ["batch", str(plan), "--out", str(out)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("body, field", [
    # a misspelt key in a setup's limits
    ('[[setup]]\nname = "a"\nreplay = "demo"\nlimits = { limt_s = 60 }\n', "setup 1 (a) limits.limt_s: unknown field"),
    # a hard stop that never comes
    ('[[setup]]\nname = "a"\nreplay = "demo"\n[[setup]]\nname = "b"\nreplay = "demo"\nlimits = { limit_s = inf }\n',
     "setup 2 (b) limits.limit_s"),
    # a harness that does not exist
    ('[[setup]]\nname = "a"\nupstream = "http://127.0.0.1:9/v1"\nmodel = "m"\nharness = "nope"\n',
     "setup 1 (a) harness: unknown harness 'nope'"),
])
def test_bad_plan_is_one_line_naming_the_field(tmp_path, body, field):
    out = tmp_path / "out"
    proc = batch(write_plan(tmp_path, body), out)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert field in proc.stderr, proc.stderr
    assert not out.exists()  # nothing started


def test_plan_of_unreachable_upstream_and_of_two_sources(tmp_path):
    both = batch(write_plan(tmp_path, '[[setup]]\nname = "a"\nreplay = "demo"\nupstream = "http://x/v1"\nmodel = "m"\n'), tmp_path / "o")
    assert both.returncode == 2 and "setup 1 (a): give exactly one of upstream or replay" in both.stderr, both.stderr
    dead = batch(write_plan(tmp_path, '[[setup]]\nname = "a"\nupstream = "http://127.0.0.1:9/v1"\nmodel = "m"\n'), tmp_path / "o")
    assert dead.returncode == 2 and "setup 1 (a) upstream:" in dead.stderr and "127.0.0.1:9" in dead.stderr, dead.stderr
    assert len(dead.stderr.strip().splitlines()) == 1


def passed_items(run: Path) -> set[str]:
    """The check's items the page passed (the frame rate's is left to the machine's load)."""
    return {i["id"] for i in json.loads((run / "check.json").read_text())["items"] if i["passed"]}


def mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


@pytest.mark.docker
@pytest.mark.browser
def test_two_runs_killed_mid_way_resume_without_redoing(docker_engine, tmp_path):
    """Two short replay runs one after the other; the batch is SIGKILLed while the second runs.
    Started again, it keeps the first as it was, finalizes the second, and compares both."""
    (tmp_path / "a.json").write_text(json.dumps(short_script("replay-a", 1)))
    (tmp_path / "b.json").write_text(json.dumps(short_script("replay-b", 40)))
    plan = write_plan(tmp_path, (
        'max_parallel = 1\non_unfinished = "finalize"\n'
        '[[setup]]\nname = "a"\nreplay = "a.json"\nclip = false\nlimits = { limit_s = 300, cpus = 1 }\n'
        '[[setup]]\nname = "b"\nreplay = "b.json"\nclip = false\nlimits = { limit_s = 300, cpus = 1 }\n'
    ))
    out = tmp_path / "batch"
    first = subprocess.Popen(SHOWCASE + ["batch", str(plan), "--out", str(out)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 900
    # The second run has written its page (its agent now waits 40 s for the model): kill the batch.
    while not (out / "b-1" / "versions.jsonl").is_file() or not (out / "b-1" / "versions.jsonl").read_text().strip():
        assert first.poll() is None, first.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the second run did not write its page in 900 s"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    assert (out / "a-1" / "report.html").is_file() and not (out / "b-1" / "report.html").exists()
    record = json.loads((out / "batch.json").read_text())
    assert [r["state"] for r in record["runs"]] == ["done", "running"]
    kept = {name: mtime(out / "a-1" / name) for name in ("contract.json", "check.json", "events.jsonl", "run-info.json")}

    again = batch(plan, out, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {name: mtime(out / "a-1" / name) for name in kept} == kept  # the finished run was not redone
    record = json.loads((out / "batch.json").read_text())
    assert [r["state"] for r in record["runs"]] == ["done", "done"]
    assert [r["attempts"] for r in record["runs"]] == [1, 2]  # b: its run, then its finalize
    assert record["restarts"] == 1 and record["showcase_version"] and record["ray_version"] is None
    assert record["plan_sha256"] == __import__("hashlib").sha256(plan.read_bytes()).hexdigest()
    events = [json.loads(line)["event"] for line in (out / "b-1" / "events.jsonl").read_text().splitlines()]
    assert "finalized_after_interruption" in events
    for run in ("a-1", "b-1"):
        assert (out / run / "check.json").is_file() and (out / run / "report.html").is_file()
        assert passed_items(out / run) >= {"1", "2", "3", "4"}  # loads, ready, no errors, not blank
    page = (out / "comparison.html").read_text()
    assert "a-1" in page and "b-1" in page
    assert again.stdout.strip() == str(out / "comparison.html")
    # A third start finds everything done: nothing runs again.
    checked = {run: mtime(out / run / "check.json") for run in ("a-1", "b-1")}
    third = batch(plan, out, timeout=300)
    assert third.returncode == 0, third.stderr[-2000:]
    assert {run: mtime(out / run / "check.json") for run in checked} == checked
    assert [r["attempts"] for r in json.loads((out / "batch.json").read_text())["runs"]] == [1, 2]
    assert all(not os.path.exists(out / ".attempts" / n) for n in ("a-1.1", "b-1.1"))


def test_a_run_folder_comes_back_without_its_links_and_within_its_cap(tmp_path):
    """What a Ray node sends back of a run folder: the agent's links and FIFOs are left out, never followed."""
    from showcase.batch.remote import pack_folder, unpack_folder
    from showcase.errors import InfraError

    run = tmp_path / "run"
    (run / "work" / "deep").mkdir(parents=True)
    (run / "report.html").write_text("<p>report</p>")
    (run / "work" / "deep" / "game.html").write_bytes(b"<html>" + os.urandom(1000))
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    (run / "work" / "link.html").symlink_to(secret)
    (run / "work" / "dirlink").symlink_to(tmp_path)
    os.mkfifo(run / "work" / "fifo")  # opened, it would block the host forever
    data = pack_folder(run)
    back = tmp_path / "back"
    unpack_folder(data, back)
    files = sorted(str(p.relative_to(back)) for p in back.rglob("*"))
    assert files == ["report.html", "work", "work/deep", "work/deep/game.html"]
    assert (back / "work" / "deep" / "game.html").read_bytes() == (run / "work" / "deep" / "game.html").read_bytes()
    assert b"host secret" not in data
    with pytest.raises(InfraError, match="MiB"):
        pack_folder(run, cap_bytes=500)
    with pytest.raises(InfraError, match="already exists"):
        unpack_folder(data, back)


def test_ray_address_that_nothing_answers_is_one_line(tmp_path):
    plan = write_plan(tmp_path, '[[setup]]\nname = "a"\nreplay = "demo"\n')
    for command in (["batch", str(plan), "--out", str(tmp_path / "out")], ["check", str(PAGE_FILE), "--out", str(tmp_path / "c")]):
        proc = subprocess.run(SHOWCASE + command + ["--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "--ray 127.0.0.1:1: no Ray cluster" in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()
