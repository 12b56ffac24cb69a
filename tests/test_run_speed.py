"""The run's one browser, end to end: a burst of versions, a shot.sh during the backlog, a crash,
and a burst at the very end whose backlog is checked while the clip records.

One real run (Docker, gate, relay, watcher, the run's sealed browser, check, a 2 s clip) against
a replay model; the browser is killed from outside mid-run, as a crash would. About 2 minutes.
"""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from showcase.browser import seal
from showcase.replay import ReplayServer
from test_run import SHOWCASE, containers_of, read_json, versions_of

pytestmark = [pytest.mark.docker, pytest.mark.browser]

BURST = 8
LATER = 2
END = 10  # slow versions in a burst just before the agent ends: more than the 8 checks at once
CLIP_S = 2
# Each burst version is ready only after 3 s: a backlog that lasts, so a shot.sh lands in it.
SLOW_PAGE = "<!doctype html><title>v%s</title><script>setTimeout(function(){window.ready=true},3000)</script>"
QUICK_PAGE = "<!doctype html><title>quick</title><script>window.ready=true</script>"
# Throws as it loads (and would be ready 20 s later): judged at its error, never waited for.
BROKEN_PAGE = "<!doctype html><title>broken</title><script>setTimeout(function(){window.ready=true},20000);throw new Error(`broken at load`)</script>"


def script() -> dict:
    burst = (
        f"printf '{QUICK_PAGE}' > quick.html; "
        f"for i in $(seq 1 {BURST}); do printf '{SLOW_PAGE}' $i > game.html.tmp && mv game.html.tmp game.html; "
        "sleep 0.05; done; "
        "s=$(date +%s%N); shot.sh quick.html; echo \"shot took $(( ($(date +%s%N) - s) / 1000000 )) ms\""
    )
    later = (
        f"sleep 6; printf '{BROKEN_PAGE}' > game.html; sleep 0.05; "
        f"for i in $(seq 1 {LATER}); do printf '<!doctype html><title>late %s</title><script>window.ready=true</script>' $i "
        "> game.html.tmp && mv game.html.tmp game.html; sleep 0.05; done; sleep 8; "
        f"for i in $(seq 1 {END}); do printf '{SLOW_PAGE}' end$i > game.html.tmp && mv game.html.tmp game.html; "
        "sleep 0.05; done; "
        "printf '<!doctype html><title>final</title><script>window.ready=true</script>' > game.html.tmp "
        "&& mv game.html.tmp game.html"
    )
    return {
        "model": "replay-speed",
        "turns": [
            {"content": "A burst.", "tool_calls": [{"name": "shell", "arguments": {"command": burst}}]},
            {"content": "Two more.", "tool_calls": [{"name": "shell", "arguments": {"command": later}}]},
        ],
        "final": {"content": "DONE /work/game.html"},
    }


def load_checked(run: Path) -> int:
    try:
        lines = (run / "versions.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if '"load_checked"' in line)


def run_browser_pid(showcase_pid: int) -> int | None:
    """The run's Chromium (its browser process), among this showcase's descendants only."""
    for pid in seal.process_tree(showcase_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if (b"--showcase-run-browser=" in cmd and b"--type=" not in cmd
                    and os.readlink(f"/proc/{pid}/exe").endswith("/chromium")):
                return pid
        except OSError:
            continue
    return None


def events_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def test_burst_shot_during_backlog_and_a_browser_crash(docker_engine, tmp_path):
    run = tmp_path / "speed"
    with ReplayServer(script()) as server:
        proc = subprocess.Popen(
            SHOWCASE + ["run", "--upstream", server.base_url, "--model", "replay-speed", "--out", str(run),
                        "--clip-seconds", str(CLIP_S), "--limit-s", "600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            # The shot's answer reaches the model with the next request: the backlog must still be there.
            deadline = time.monotonic() + 400
            while len(server.requests) < 2:
                assert proc.poll() is None, proc.stderr.read()[-3000:]
                assert time.monotonic() < deadline, "the agent's burst did not end within 400 s"
                time.sleep(0.05)
            checked_at_shot = load_checked(run)
            pid = run_browser_pid(proc.pid)
            assert pid is not None, "the run's browser is not running while versions wait for their check"
            os.kill(pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        shot_answer = json.dumps(server.requests[1])
    assert proc.returncode == 0, err[-3000:]

    # shot.sh was answered ahead of the backlog, within its bound, from the page it named.
    assert "loads without errors: yes" in shot_answer, shot_answer[-2000:]
    assert re.search(r"shot took \d+ ms", shot_answer)
    assert checked_at_shot < BURST, f"the shot waited for all {BURST} burst versions to be checked"

    # Every version kept, each with its verdict and its picture, the crash notwithstanding.
    versions = versions_of(run)
    assert len(versions) == BURST + 1 + LATER + END + 1
    broken = versions[BURST + 1]
    assert broken["loaded_without_errors"] is False and any("broken at load" in e for e in broken["load_errors"])
    assert all(v.get("loaded_without_errors") is True for n, v in versions.items() if n != BURST + 1), versions
    for n, v in versions.items():
        assert v.get("picture") == f"versions/{n:04d}.png", (n, v)
        assert (run / v["picture"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = events_of(run)
    restarts = [e for e in events if e["event"] == "browser_restarted"]
    assert restarts and restarts[0]["detail"]["restarts"] == 1
    assert read_json(run / "run-info.json")["agent_end"] == "done"

    # Each phase's time is in the run's own events, and the tail is measured on the run's clock.
    by_name = {e["event"]: e for e in events}
    for name in ("image_ready", "agent_started", "agent_ended", "load_checks_done", "check_done", "clip_done",
                 "report_written"):
        assert name in by_name, f"no {name} event"
    tail = by_name["report_written"]["t_s"] - by_name["agent_ended"]["t_s"]
    assert tail >= by_name["check_done"]["detail"]["seconds"] + by_name["clip_done"]["detail"]["seconds"]

    # The final file loads, so it counts at once: the versions of the last burst still unchecked
    # when the agent ended are checked after the final check, while the clip records.
    choice = read_json(run / "final-choice.json")
    assert (choice["rule"], choice["n"]) == ("final_file_loads", len(versions)), choice
    assert all(c["loaded_without_errors"] is not None for c in choice["candidates"]), choice["candidates"]
    left = by_name["load_checks_done"]["detail"]
    assert left["final_loads"] is True and left["unchecked"] > 0, left
    names = [e["event"] for e in events]
    started, checked = by_name["backlog_started"], by_name["backlog_checked"]
    assert started["detail"] == {"versions": left["unchecked"], "during": "clip"}
    assert checked["detail"]["versions"] == left["unchecked"] and checked["detail"]["unchecked"] == 0
    assert names.index("check_done") < names.index("backlog_started") < names.index("backlog_checked")
    clip_began = by_name["clip_done"]["t_s"] - by_name["clip_done"]["detail"]["seconds"]
    assert by_name["check_done"]["t_s"] <= started["t_s"] < by_name["clip_done"]["t_s"]
    assert checked["t_s"] > clip_began
    assert names.index("backlog_checked") < names.index("report_written")
    assert f"agent end to report {tail:.1f} s" in err, err[-2000:]
    assert containers_of(run) == []
