"""`showcase run` end to end: real Docker, real Chromium, a real agent, a replay model.

Each test starts `showcase` as its own process (as a user would) against a ReplayServer in
this process, and judges the run folder it leaves.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from showcase.paths import TASKS_DIR
from showcase.replay import ReplayServer

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SHOWCASE = [sys.executable, "-m", "showcase.cli"]
DEMO = TASKS_DIR / "voxel" / "demo"
GOOD_PAGE = (DEMO / "pages" / "v1.html").read_text()
BROKEN_PAGE = GOOD_PAGE.replace("<script type=\"module\">", "<script type=\"module\">\nthrow new Error('broken on purpose');", 1)
assert BROKEN_PAGE != GOOD_PAGE


def write_turn(content: str, page: str) -> dict:
    return {"content": content, "tool_calls": [{"name": "write_file", "arguments": {"path": "game.html", "content": page}}]}


def never_finishing_script() -> dict:
    """Writes a good page, then breaks it, then keeps 'working' forever (sleeps), finish-now or not."""
    return {
        "model": "replay-endless",
        "turns": [write_turn("A first world.", GOOD_PAGE), write_turn("More!", BROKEN_PAGE)],
        "final": {"content": "Still working.", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 2"}}]},
    }


def run_showcase(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(SHOWCASE + args, capture_output=True, text=True, timeout=timeout)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def versions_of(run: Path) -> dict[int, dict]:
    folded: dict[int, dict] = {}
    for line in (run / "versions.jsonl").read_text().splitlines():
        row = json.loads(line)
        folded.setdefault(row["n"], {}).update({k: v for k, v in row.items() if v is not None})
    return folded


def versions_so_far(run: Path) -> int:
    """Distinct versions recorded so far, read while the run appends (a torn last line is skipped)."""
    try:
        lines = (run / "versions.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    seen = set()
    for line in lines:
        try:
            seen.add(json.loads(line)["n"])
        except ValueError:
            pass
    return len(seen)


def containers_of(run: Path) -> list:
    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": f"showcase.run={run.resolve()}"})


def assert_every_artefact(run: Path, with_clip: bool) -> None:
    names = ["command.txt", "contract.json", "sampling.json", "run-info.json", "gate-stats.json", "gate.log",
             "versions.jsonl", "final-choice.json", "check.json", "screenshot.png", "report.html"]
    if with_clip:
        names.append("clip.mp4")
    missing = [n for n in names if not (run / n).is_file()]
    assert not missing, f"missing run files: {missing}"
    assert any((run / "versions").iterdir())


def test_demo_end_to_end(docker_engine, tmp_path):
    run = tmp_path / "demo"
    proc = run_showcase(["demo", "--out", str(run)], timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_every_artefact(run, with_clip=True)
    info = read_json(run / "run-info.json")
    assert info["agent_end"] == "done"
    versions = versions_of(run)
    # The recorded conversation writes four versions; the third throws and the fourth fixes it.
    assert len(versions) == 4
    assert [versions[n]["loaded_without_errors"] for n in sorted(versions)] == [True, True, False, True]
    choice = read_json(run / "final-choice.json")
    assert choice["n"] == 4 and choice["is_final_file"]
    check = read_json(run / "check.json")
    assert check["total"] >= 8, check["summary"]
    # shot.sh went through the relay and the gate: the agent's screenshots are in /work/shots.
    assert list((run / "work" / "shots").glob("shot-*.png"))
    stats = read_json(run / "gate-stats.json")
    assert stats["requests"] == 11 and stats["blocked"] == 0 and stats["tool_requests"] >= 4
    assert "4 versions" in info["summary_versions"] and "the last one counts" in info["summary_versions"]
    assert containers_of(run) == []
    # The key the agent used never lands in the files a user publishes.
    assert "Bearer" not in (run / "command.txt").read_text()


def test_mini_swe_agent_end_to_end(docker_engine, tmp_path):
    """A real agent CLI from PyPI, installed offline into its image layer, sealed, through the gate."""
    run = tmp_path / "mini"
    with ReplayServer(DEMO / "mini-swe-agent.json") as server:
        proc = run_showcase(
            ["run", "--harness", "mini-swe-agent", "--upstream", server.base_url, "--model", "replay-mini-swe-agent",
             "--out", str(run), "--no-clip", "--limit-s", "900"],
            timeout=1800,
        )
        received = list(server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_every_artefact(run, with_clip=False)
    info = read_json(run / "run-info.json")
    assert info["agent_end"] == "done", (run / "agent.log").read_text()[-2000:]
    assert info["requests"] == len(received) == 4
    # mini sends no temperature and no max_tokens; the gate adds the task's answer limit.
    assert all(body.get("max_tokens") == 262144 or body.get("max_completion_tokens") == 262144 for body in received)
    assert (run / "work" / "game.html").read_bytes() == (DEMO / "pages" / "v4.html").read_bytes()
    assert json.loads((run / "agent" / "traj.json").read_text())["info"]["exit_status"] == "Submitted"
    assert read_json(run / "final-choice.json")["is_final_file"]
    assert containers_of(run) == []


def test_hard_stop_kills_an_agent_that_never_finishes(docker_engine, tmp_path):
    run = tmp_path / "endless"
    with ReplayServer(never_finishing_script()) as server:
        proc = run_showcase(
            ["run", "--upstream", server.base_url, "--model", "replay-endless", "--out", str(run),
             "--limit-s", "60", "--inject-after-s", "30", "--no-clip"],
            timeout=900,
        )
        received = list(server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_every_artefact(run, with_clip=False)
    info = read_json(run / "run-info.json")
    assert info["agent_end"] == "killed_at_hard_stop"
    assert 59 <= info["minutes_run"] * 60 <= 75
    # Finish-now: sent from 30 s on, and what the model received carries it.
    assert info["finish_now_sent"] >= 1 and 30 <= info["finish_now_first_s"] < 45
    finish_text = (TASKS_DIR / "voxel" / "finish-now.txt").read_text().strip()
    assert any(finish_text in json.dumps(body) for body in received)
    assert not any(finish_text in json.dumps(body) for body in received[:2])
    # A version that breaks the page after a good one: the last loadable version counts.
    versions = versions_of(run)
    assert [versions[n]["loaded_without_errors"] for n in sorted(versions)] == [True, False]
    choice = read_json(run / "final-choice.json")
    assert choice["n"] == 1 and not choice["is_final_file"]
    assert "broken on purpose" not in (run / "versions" / choice["file"]).read_text()
    assert containers_of(run) == []


def test_killed_showcase_then_finalize(docker_engine, tmp_path):
    run = tmp_path / "killed"
    with ReplayServer(never_finishing_script()) as server:
        proc = subprocess.Popen(
            SHOWCASE + ["run", "--upstream", server.base_url, "--model", "replay-endless", "--out", str(run),
                        "--limit-s", "600", "--no-clip"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while versions_so_far(run) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the agent did not write two versions in 300 s"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # showcase is gone but its container goes on: the agent is still 'working'.
        assert [c.status for c in containers_of(run)] == ["running"]
        gate_lines = (run / "gate.log").read_text().splitlines()
        assert all(json.loads(line) for line in gate_lines)
    done = run_showcase(["finalize", str(run), "--no-clip"], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert containers_of(run) == []
    versions = versions_of(run)
    assert len(versions) == 2 and all(v.get("loaded_without_errors") is not None for v in versions.values())
    assert read_json(run / "final-choice.json")["n"] == 1
    info = read_json(run / "run-info.json")
    assert info["agent_end"] == "interrupted"
    assert info["requests"] >= 2
    assert (run / "check.json").is_file() and (run / "report.html").is_file()


def test_run_refuses_bad_input_before_starting(docker_engine, tmp_path):
    with ReplayServer(never_finishing_script()) as server:
        cases = {
            "unknown task": (["--task", "nope"], "known tasks: voxel"),
            "unknown harness": (["--harness", "nope"], "builtin"),
            "wrong model": (["--model", "not-served"], "not-served"),
        }
        for what, (extra, expect) in cases.items():
            args = ["run", "--upstream", server.base_url, "--model", "replay-endless", "--out", str(tmp_path / "x")]
            proc = run_showcase(args + extra, timeout=120)
            assert proc.returncode == 2, (what, proc.stderr)
            assert expect in proc.stderr, (what, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, (what, proc.stderr)
        dead = run_showcase(["run", "--upstream", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "y")], 120)
        assert dead.returncode == 2 and "127.0.0.1:9" in dead.stderr
    held = tmp_path / "held"
    held.mkdir()
    (held / "contract.json").write_text("{}")
    proc = run_showcase(["run", "--upstream", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(held)], 120)
    assert proc.returncode == 2 and "showcase finalize" in proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
