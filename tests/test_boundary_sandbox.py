"""The sandbox's hard limits, through real runs: a disk cap the kernel holds, a container that ends
itself when showcase is dead, and leftovers of dead runs removed (never a live run's).

Each test starts `showcase` as its own process against a scripted model (ReplayServer) and judges
the run folder, the engine and the host's mounts as a user would.
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
from showcase.sandbox.space import mount_points

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SHOWCASE = [sys.executable, "-m", "showcase.cli"]
GOOD_PAGE = (TASKS_DIR / "voxel" / "demo" / "pages" / "v1.html").read_text()
MiB = 1 << 20


def write_turn(content: str, page: str) -> dict:
    return {"content": content, "tool_calls": [{"name": "write_file", "arguments": {"path": "game.html", "content": page}}]}


def shell_turn(content: str, command: str) -> dict:
    return {"content": content, "tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def endless_script() -> dict:
    """A good page, then 'working' forever: rewrites a heartbeat file every turn."""
    return {
        "model": "replay-endless",
        "turns": [write_turn("A first world.", GOOD_PAGE)],
        "final": {"content": "Still working.",
                  "tool_calls": [{"name": "shell", "arguments": {"command": "date +%s%N > /work/beat; sleep 1"}}]},
    }


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def containers_of(run: Path) -> list:
    return docker.from_env().containers.list(all=True, filters={"label": f"showcase.run={run.resolve()}"})


def mounts_under(run: Path) -> list[str]:
    root = str(run.resolve())
    return sorted(p for p in mount_points() if p == root or p.startswith(root + "/"))


def host_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def allocated(path: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def start_run(server: ReplayServer, run: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        SHOWCASE + ["run", "--upstream", server.base_url, "--model", server.replayer.script.model, "--out", str(run),
                    "--no-clip", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )


def wait_for(what: str, predicate, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"showcase ended before {what}: {proc.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.5)


def test_an_agent_that_fills_its_space_ends_disk_full_with_a_report(docker_engine, tmp_path):
    cap = 64 * MiB
    run = tmp_path / "full"
    script = {
        "model": "replay-fill",
        "turns": [
            write_turn("A first world.", GOOD_PAGE),
            # Far past the cap, in /work and in /logs, through ordinary tools.
            shell_turn("Fill.", "dd if=/dev/zero of=/work/junk bs=1M count=2048; "
                                "fallocate -l 2G /logs/junk2; head -c 1G /dev/zero > /logs/junk3; df -k /work"),
        ],
        "final": {"content": "DONE /work/game.html"},
    }
    before = host_free(tmp_path)
    image = run / ".space" / "space.img"
    image_peak = 0
    log = tmp_path / "showcase.log"  # a file, not a pipe: nobody reads while we sample
    with ReplayServer(script) as server, open(log, "w") as sink:
        proc = subprocess.Popen(
            SHOWCASE + ["run", "--upstream", server.base_url, "--model", "replay-fill", "--out", str(run),
                        "--no-clip", "--disk", "64m", "--limit-s", "300"],
            stdout=sink, stderr=subprocess.STDOUT,
        )
        # What the host's disk gives the agent while it runs: the image's allocated blocks.
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                image_peak = max(image_peak, image.stat().st_blocks * 512)
            except FileNotFoundError:
                pass
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)
    assert proc.returncode == 0, log.read_text()[-3000:]
    info = read_json(run / "run-info.json")
    assert info["disk_full"] is True
    assert read_json(run / "contract.json")["sandbox_limits"]["disk_bytes"] == cap
    assert (run / "report.html").is_file() and (run / "check.json").is_file()
    # The page written before the disk filled is what counts, and it is in a plain folder now.
    assert (run / "work" / "game.html").read_text() == GOOD_PAGE
    assert read_json(run / "final-choice.json")["n"] == 1
    assert "No space left on device" in (run / "agent.log").read_text(errors="replace") or \
        "No space left" in (run / "gate.log").read_text(errors="replace")
    assert mounts_under(run) == [] and not (run / ".space").exists()
    assert containers_of(run) == []
    # The agent tried 5 GiB: while it ran the host gave its image at most the cap, and what it
    # left takes at most the cap.
    assert 0 < image_peak <= cap, f"the image took {image_peak >> 20} MiB"
    agent_bytes = allocated(run / "work") + allocated(run / "agent")
    assert agent_bytes <= cap, f"{agent_bytes >> 20} MiB kept from the agent's folders"
    host_written = 64 * MiB + 32 * MiB  # agent.log's cap, and room for the run's own files
    assert allocated(run) <= cap + host_written
    # Free space as a whole moves with everything else on this disk (browsers, other runs): it
    # must stay far from the 5 GiB an unbounded agent would have taken.
    dropped = before - host_free(tmp_path)
    assert dropped < 2 << 30, f"host free space dropped by {dropped >> 20} MiB"


def test_killed_showcase_container_ends_itself_and_leftovers_go_at_the_next_start(docker_engine, tmp_path):
    dead, live, next_run = tmp_path / "dead", tmp_path / "live", tmp_path / "next"
    # The next run only has to start (its start is the cleanup): it writes no page, so it has none to check.
    quick = {"model": "replay-quick", "turns": [], "final": {"content": "Nothing to write. DONE"}}
    # One replay server per run: a server plays its turns in order to whoever asks.
    with ReplayServer(endless_script()) as for_live, ReplayServer(endless_script()) as for_dead, \
            ReplayServer(quick) as quick_server:
        live_proc = start_run(for_live, live, "--limit-s", "600")
        dead_proc = start_run(for_dead, dead, "--limit-s", "40")
        try:
            for proc, run in ((dead_proc, dead), (live_proc, live)):
                wait_for(f"{run.name} beats", lambda run=run: (run / "work" / "beat").is_file(), 300, proc)
            os.killpg(dead_proc.pid, signal.SIGKILL)
            dead_proc.wait(30)
            [container] = containers_of(dead)
            assert container.status == "running"  # showcase is gone; its agent goes on for now
            deadline = float(container.labels["showcase.deadline"])
            # Nobody does anything: by its deadline (plus a grace) the container has ended itself.
            wait_for("the dead run's container to end", lambda: containers_of(dead)[0].status != "running",
                     max(0.0, deadline - time.time()) + 30)
            assert time.time() <= deadline + 30
            beat = (dead / "work" / "beat").stat().st_mtime_ns
            time.sleep(3)
            assert (dead / "work" / "beat").stat().st_mtime_ns == beat, "something in the dead run still writes"
            assert mounts_under(dead), "the dead run's space is still mounted until someone cleans up"

            # The next run's start removes the dead run's container and mount, not the live run's.
            done = subprocess.run(
                SHOWCASE + ["run", "--upstream", quick_server.base_url, "--model", "replay-quick", "--out",
                            str(next_run), "--no-clip", "--limit-s", "120"],
                capture_output=True, text=True, timeout=900,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            assert f"of a dead run in {dead.resolve()}" in done.stderr
            assert containers_of(dead) == [] and mounts_under(dead) == []
            assert [c.status for c in containers_of(live)] == ["running"]
            assert mounts_under(live) and live_proc.poll() is None
            beat = (live / "work" / "beat").stat().st_mtime_ns
            wait_for("the live run to go on writing", lambda: (live / "work" / "beat").stat().st_mtime_ns != beat, 60)
        finally:
            for proc in (dead_proc, live_proc):
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(30)
    # finalize after kill -9 copes with an unmounted image (dead) and a mounted one (live); the
    # two at once, as two users would: each checks its page on its own.
    fins = {run: subprocess.Popen(SHOWCASE + ["finalize", str(run), "--no-clip"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for run in (dead, live)}
    for run, fin in fins.items():
        _, err = fin.communicate(timeout=600)
        assert fin.returncode == 0, err[-3000:]
        assert (run / "report.html").is_file()
        assert (run / "work" / "game.html").read_text() == GOOD_PAGE and (run / "work" / "beat").is_file()
        assert mounts_under(run) == [] and not (run / ".space").exists() and containers_of(run) == []
        assert read_json(run / "run-info.json")["agent_end"] == "interrupted"
