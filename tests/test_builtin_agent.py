"""The builtin agent (harness/builtin/agent.py) as a real subprocess against the replay model server."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from showcase.replay import ReplayServer, load_script

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "harness" / "builtin" / "agent.py"
PROMPT = REPO / "tasks" / "voxel" / "prompt.txt"
DEMO = REPO / "tasks" / "voxel" / "demo" / "builtin.json"
PAGES = REPO / "tasks" / "voxel" / "demo" / "pages"
RUN_BOUND_S = 90  # no agent run here should come near this; it only keeps a hang from hanging the suite


def clean_env(tmp: Path) -> dict:
    """The test's environment without our variables, and a fresh HOME as in the sandbox (tmpfs):
    the login shell then reads no ~/.bashrc of whoever runs the tests (this machine's runs pyenv)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SHOWCASE_"))}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    return env


def run_agent(base_url: str, work: Path, *extra: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = clean_env(work.parent)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, str(AGENT), "--prompt-file", str(PROMPT), "--model", "demo-model", "--base-url", base_url,
         "--workdir", str(work), "--trajectory", str(work.parent / "trajectory.jsonl"), *extra],
        capture_output=True, text=True, timeout=RUN_BOUND_S, env=env,
    )


def tool_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m.get("role") == "tool"]


def test_demo_conversation_writes_every_version_and_ends_with_done(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    # A stand-in for the run's shot.sh: keeps a copy of every page it is asked to check.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shot = bin_dir / "shot.sh"
    shot.write_text('#!/bin/bash\nn=$(ls "$SHOTS" | wc -l)\ncp "$1" "$SHOTS/shot-$n.html"\necho "shot $1: no console errors"\n')
    shot.chmod(shot.stat().st_mode | stat.S_IXUSR)
    shots = tmp_path / "shots"
    shots.mkdir()

    with ReplayServer(DEMO) as server:
        proc = run_agent(server.base_url, work, env_extra={"PATH": f"{bin_dir}:{os.environ['PATH']}", "SHOTS": str(shots)})
        requests = list(server.requests)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "agent: finished after 11 steps: DONE /work/game.html"

    # Each version was on disk when the shot after it ran, and the final file is the last version.
    versions = [(PAGES / f"v{n}.html").read_text() for n in (1, 2, 3, 4)]
    assert [(shots / f"shot-{i}.html").read_text() for i in range(4)] == versions
    script = load_script(DEMO)
    writes = [c.arguments["content"] for t in script.turns for c in t.tool_calls if c.name == "write_file"]
    assert (work / "game.html").read_text() == writes[-1] == versions[-1]
    assert sorted(p.name for p in work.iterdir()) == ["game.html"]  # no temp file left behind
    assert stat.S_IMODE((work / "game.html").stat().st_mode) == 0o644

    # What the model saw: the exact prompt, our four tools, and every tool result tied to its call.
    first = requests[0]
    assert first["model"] == "demo-model"
    assert first["messages"][1] == {"role": "user", "content": PROMPT.read_text()}
    assert [t["function"]["name"] for t in first["tools"]] == ["shell", "write_file", "read_file", "shot"]
    last = requests[-1]
    calls = [c for m in last["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    results = tool_messages(last)
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls] and len(calls) == 10
    assert "shot game.html: no console errors" in results[2]["content"]
    assert str(work) in results[0]["content"]  # `pwd` ran in the working folder

    # One trajectory line per step (= per model answer), the last one marked as the end.
    lines = [json.loads(line) for line in (tmp_path / "trajectory.jsonl").read_text().splitlines()]
    assert [e["step"] for e in lines] == list(range(1, 12)) == list(range(1, len(requests) + 1))
    assert lines[-1]["end"] == "answered" and lines[-1]["content"] == "DONE /work/game.html"
    assert lines[1]["tool_results"][0]["name"] == "write_file" and lines[1]["tool_results"][0]["ok"]


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status  # a zombie is dead, only not yet reaped by its new parent


def test_shell_timeout_kills_the_whole_process_group(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "turns": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 100 & echo $! > sleep.pid; echo started; wait"}}]},
            {"content": "DONE"},
        ]
    }
    with ReplayServer(script) as server:
        proc = run_agent(server.base_url, work, "--command-timeout", "2")
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = tool_messages(requests[1])[0]["content"]
    assert "started" in result and "[killed: timed out after 2 s]" in result
    pid = int((work / "sleep.pid").read_text())
    assert not _alive(pid), f"the background sleep {pid} survived the timeout"


def test_tool_output_is_truncated_to_a_bound(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = {"turns": [{"tool_calls": [{"name": "shell", "arguments": {"command": "seq 1 200000; echo last-line"}}]}, {"content": "DONE"}]}
    with ReplayServer(script) as server:
        proc = run_agent(server.base_url, work, "--output-limit", "2000")
        result = tool_messages(server.requests[1])[0]["content"]
    assert proc.returncode == 0
    assert len(result) < 2300 and result.startswith("1\n2\n") and "last-line" in result and "omitted" in result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_ends_after_bounded_retries(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = run_agent(f"http://127.0.0.1:{_free_port()}/v1", work, "--retries", "2", "--backoff-s", "0.1")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stdout.count("retry ") == 2
    assert "stopped: the endpoint is unreachable" in proc.stdout and "gave up after 3 tries" in proc.stdout
    assert not (tmp_path / "trajectory.jsonl").exists()  # no step happened


def test_transient_error_is_retried_and_a_hard_stop_ends_cleanly(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "turns": [
            {"http_status": 503, "content": "upstream busy"},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "game.html", "content": "<p>hello</p>"}}]},
            {"http_status": 403, "content": "hard stop: the run's time is over"},
        ]
    }
    with ReplayServer(script) as server:
        proc = run_agent(server.base_url, work, "--backoff-s", "0.1")
        n_requests = len(server.requests)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "HTTP 503" in proc.stdout and "retry 1/" in proc.stdout
    assert "stopped: the endpoint refused the request (HTTP 403" in proc.stdout and "hard stop" in proc.stdout
    assert n_requests == 3  # the 403 was not retried
    assert (work / "game.html").read_text() == "<p>hello</p>"


@pytest.mark.parametrize(
    "call, expected",
    [
        ({"name": "read_file", "arguments": {"path": "notes.txt", "offset": 2, "limit": 2}}, "lines 2-3 of 4\nb\nc"),
        ({"name": "read_file", "arguments": {"path": "missing.txt"}}, "error: [Errno 2]"),
        ({"name": "shot", "arguments": {"path": "game.html"}}, "shot.sh is not available"),
        ({"name": "teleport", "arguments": {}}, "error: unknown tool 'teleport'"),
        ({"name": "shell", "arguments": "{not json"}, "error: the arguments are not a valid JSON object"),
    ],
)
def test_tool_errors_go_back_to_the_model(tmp_path, call, expected):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("a\nb\nc\nd\n")
    with ReplayServer({"turns": [{"tool_calls": [call]}, {"content": "DONE"}]}) as server:
        proc = run_agent(server.base_url, work, env_extra={"PATH": "/usr/bin:/bin"})
        second = server.requests[1]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert expected in tool_messages(second)[0]["content"]
    # The call goes back in the history in a form strict APIs accept: an id, a type, JSON arguments.
    sent_back = second["messages"][2]["tool_calls"][0]
    assert sent_back["type"] == "function" and sent_back["id"] == tool_messages(second)[0]["tool_call_id"]
    assert isinstance(json.loads(sent_back["function"]["arguments"]), dict)


def test_step_limit_ends_the_loop(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    loop = {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}
    with ReplayServer({"turns": [], "final": loop}) as server:
        proc = run_agent(server.base_url, work, "--max-steps", "3")
        assert len(server.requests) == 3
    assert proc.returncode == 5 and "step limit (3)" in proc.stdout


def test_long_history_elides_old_page_versions_but_keeps_the_latest(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with ReplayServer(DEMO) as server:
        proc = run_agent(server.base_url, work, "--history-chars", "20000", "--keep-writes", "1")
        first, last = server.requests[0], server.requests[-1]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    writes = [json.loads(c["function"]["arguments"]) for m in last["messages"] if m["role"] == "assistant"
              for c in m.get("tool_calls") or [] if c["function"]["name"] == "write_file"]
    assert len(writes) == 4
    assert all(w["elided"] and "elided from the history" in w["content"] for w in writes[:3])
    assert writes[3]["content"] == (PAGES / "v4.html").read_text()
    assert len(json.dumps(last["messages"])) < 40000  # four full pages would be over 50,000
    assert first["messages"][1]["content"] == PROMPT.read_text()
    assert "elided the content of" in proc.stdout


def test_sigterm_takes_the_running_command_along(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = {"turns": [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 100 & echo $! > sleep.pid; wait"}}]}]}
    with ReplayServer(script) as server:
        proc = subprocess.Popen(
            [sys.executable, str(AGENT), "--prompt-file", str(PROMPT), "--model", "m", "--base-url", server.base_url,
             "--workdir", str(work), "--trajectory", str(tmp_path / "t.jsonl"), "--command-timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(tmp_path),
        )
        try:
            pid_file = work / "sleep.pid"
            for _ in range(300):  # up to 30 s for the command to start
                if pid_file.exists() and pid_file.read_text().strip():
                    break
                time.sleep(0.1)
            sleep_pid = int(pid_file.read_text())
            assert _alive(sleep_pid)
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM and "stopped by a signal" in out
    assert not _alive(sleep_pid)


def test_clock_script_never_finishes_by_itself(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with ReplayServer(REPO / "tasks" / "voxel" / "demo" / "builtin-clock.json") as server:
        # --command-timeout 1 cuts each `sleep 5` short, so four steps take seconds, not twenty.
        proc = run_agent(server.base_url, work, "--max-steps", "4", "--command-timeout", "1")
        assert not server.replayer.exhausted and server.replayer.index == 1
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert (work / "game.html").read_text() == (PAGES / "v1.html").read_text()
    assert proc.stdout.count("sleep 5") == 3


def test_shell_commands_see_the_agents_path(tmp_path):
    """A login shell must not lose the PATH the run set (shot.sh lives in /opt/tools there)."""
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir()
    tool = bin_dir / "runtool.sh"
    tool.write_text("#!/bin/sh\necho tool-ran-here\n")
    tool.chmod(0o755)
    script = {"turns": [{"tool_calls": [{"name": "shell", "arguments": {"command": "runtool.sh"}}]}, {"content": "DONE"}]}
    with ReplayServer(script) as server:
        proc = run_agent(server.base_url, work, env_extra={"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"})
        result = tool_messages(server.requests[1])[0]["content"]
    assert proc.returncode == 0
    assert "tool-ran-here" in result and "[exit code 0]" in result
