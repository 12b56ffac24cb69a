"""The run's space: a real loop-mounted image; what close() keeps, how it resumes, the sweep, and
agent.log's cap through a real sandbox."""

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from showcase.sandbox.base import SandboxSpec, get_backend
from showcase.sandbox.conformance import StandInGate
from showcase.sandbox.docker import LOG_CAP
from showcase.sandbox.image import ensure_image
from showcase.sandbox.space import MAX_DEPTH, MAX_NAME_CHARS, RunSpace, is_mounted, mount_points, sweep_mounts

MiB = 1 << 20


def mounts_under(root: Path) -> list[str]:
    root_s = str(root.resolve())
    return [p for p in mount_points() if p == root_s or p.startswith(root_s + "/")]


@pytest.fixture
def space(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    sp = RunSpace(run, ["work", "agent"])
    sp.open(64 * MiB, 1000, 1000)
    try:
        yield sp
    finally:
        sp.close()
        assert mounts_under(run) == []


def test_writes_stop_at_the_cap_and_close_keeps_regular_files_only(space, tmp_path):
    run = space.parent
    secret = tmp_path / "secret.txt"
    token = secrets.token_hex(16)
    secret.write_text(token)
    work = run / "work"
    (work / "game.html").write_text("<html>kept</html>")
    (work / "sub").mkdir()
    (work / "sub" / "a.txt").write_text("a")
    os.link(work / "sub" / "a.txt", work / "hard.txt")
    os.symlink(secret, work / "link.txt")
    os.symlink(tmp_path, work / "dirlink")
    os.mkfifo(work / "fifo")
    with open(work / "sparse.bin", "wb") as f:
        f.truncate(64 << 30)  # 64 GiB of holes: must not become 64 GiB on the host
    deep = work
    for _ in range(MAX_DEPTH + 5):
        deep = deep / "d"
    os.makedirs(deep)
    (run / "agent" / "traj.json").write_text("{}")
    with pytest.raises(OSError) as full:
        with open(work / "fill", "wb") as f:
            while True:
                f.write(b"\1" * MiB)
    assert full.value.errno == 28  # ENOSPC
    assert space.is_full()

    report = space.close()
    assert report.full
    assert mounts_under(run) == [] and not (run / ".space").exists()
    assert (work / "game.html").read_text() == "<html>kept</html>"
    assert (work / "sub" / "a.txt").read_text() == "a" and (work / "hard.txt").read_text() == "a"
    assert (run / "agent" / "traj.json").read_text() == "{}"
    for name in ("link.txt", "dirlink", "fifo"):
        assert not os.path.lexists(work / name), name
    assert (work / "sparse.bin").stat().st_size == 64 << 30 and (work / "sparse.bin").stat().st_blocks == 0
    kept = subprocess.run(["du", "-sb", "--apparent-size", str(run)], capture_output=True, text=True).stdout
    assert token not in "".join(p.read_text(errors="replace") for p in work.rglob("*") if p.is_file() and p.name != "sparse.bin")
    used = sum(p.lstat().st_blocks * 512 for p in run.rglob("*"))
    assert used <= 64 * MiB, (used, kept)
    # Each entry left out is named inside the space (never by a host path) with its reason.
    named = {(e.name, e.reason) for e in report.skipped}
    assert {("work/link.txt", "a link"), ("work/dirlink", "a link"), ("work/fifo", "a FIFO")} <= named, named
    cut = [e for e in report.skipped if e.reason.startswith(f"a folder deeper than {MAX_DEPTH} levels")]
    assert len(cut) == 1 and cut[0].name.startswith("work/d/d/") and "..." in cut[0].name, cut
    assert len(cut[0].name) <= MAX_NAME_CHARS
    assert report.skipped_count == len(report.skipped) == 4
    assert not any(str(run) in e.name for e in report.skipped)


def test_close_resumes_from_an_unmounted_image(space):
    """As after a restart: nothing mounted, the image still there; close() mounts it and copies out."""
    run = space.parent
    (run / "work" / "game.html").write_text("written before the crash")
    space.unmount()
    assert mounts_under(run) == [] and space.image.is_file()
    assert not (run / "work" / "game.html").exists()
    RunSpace(run).close()  # a fresh object, as finalize makes: folders come from space.json
    assert (run / "work" / "game.html").read_text() == "written before the crash"
    assert mounts_under(run) == [] and not (run / ".space").exists()


_OWNER = """
import sys, time
from pathlib import Path
from showcase.sandbox.space import RunSpace
RunSpace(Path(sys.argv[1]), ["work"]).open(32 << 20, 1000, 1000)
print("open", flush=True)
time.sleep(600)
"""


def test_sweep_unmounts_a_dead_owners_space_and_leaves_a_live_one(space, tmp_path):
    dead_run = tmp_path / "dead"
    dead_run.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(dead_run)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "open"
        (dead_run / "work" / "left.txt").write_text("left by a dead run")
    finally:
        owner.kill()
        owner.wait(30)
    assert mounts_under(dead_run)
    done = sweep_mounts()
    assert any(str(dead_run.resolve()) in line for line in done), done
    assert mounts_under(dead_run) == []
    assert is_mounted(space.mnt) and is_mounted(space.parent / "work")  # ours: its owner (this process) runs
    RunSpace(dead_run).close()
    assert (dead_run / "work" / "left.txt").read_text() == "left by a dead run"


_HOLDER = """
import sys
import threading
from pathlib import Path
from showcase.sandbox.space import RunSpace
with RunSpace(Path(sys.argv[1])).held(None) as got:
    print("held" if got else "not held", flush=True)
    sys.stdin.readline()
"""


def test_a_space_being_closed_is_not_swept_and_a_second_close_waits_for_the_first(tmp_path):
    """Two dead runs finalized at once: each one's sweep finds the other's owner gone. A sweep
    that unmounted a space while the other finalize copied out of it lost the page (work/ came
    back empty); a space held by its closer is passed by, and a close waits for the holder."""
    dead_run = tmp_path / "dead"
    dead_run.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(dead_run)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "open"
        (dead_run / "work" / "game.html").write_text("the page")
    finally:
        owner.kill()
        owner.wait(30)
    # Another process holds the space, as its finalize's close() does while it copies out.
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(dead_run)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = sweep_mounts([tmp_path])
        assert done == [] and is_mounted(RunSpace(dead_run).mnt), "the sweep unmounted a space another process holds"
        closing = threading.Thread(target=RunSpace(dead_run).close)
        closing.start()
        closing.join(2)
        assert closing.is_alive(), "close() did not wait for the process holding the space"
    finally:
        holder.stdin.close()
        holder.wait(30)
    closing.join(60)
    assert not closing.is_alive()
    assert (dead_run / "work" / "game.html").read_text() == "the page" and mounts_under(dead_run) == []


@pytest.mark.docker
def test_agent_log_has_a_cap_and_says_what_it_dropped(docker_engine, tmp_path):
    tmp_path.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "agent.log"
    with StandInGate(tmp_path / "gate") as gate:
        box = get_backend("docker")()
        box.start(SandboxSpec(image=ensure_image(None), workdir_host=work, gate_dir_host=gate.dir, disk="64m"))
        try:
            handle = box.start_process(["sh", "-c", "head -c 80M /dev/zero | tr '\\0' x; echo; echo end"], log_path=log)
            info = box.wait(300, handle)
        finally:
            box.kill()
            box.remove()
    assert info.how == "exited"
    size = log.stat().st_size
    assert LOG_CAP < size < LOG_CAP + 200, size
    with open(log, "rb") as f:
        f.seek(LOG_CAP)
        tail = f.read().decode()
    dropped = 80 * MiB + len("\nend\n") - LOG_CAP
    assert "output beyond 64 MiB dropped" in tail and f"[showcase: {dropped} bytes of output dropped]" in tail, tail
    assert box.leak_audit() == [] and mounts_under(tmp_path) == []


def test_the_owner_of_a_killed_run_is_gone_before_it_is_reaped():
    """A run's process killed with its batch is a zombie until its new parent reaps it; finalize
    must not call that run "still running" (a batch restarted at once ran it again instead)."""
    import json
    import signal
    import time

    from showcase.sandbox.space import Owner

    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom showcase.sandbox.space import Owner\n"
                              "print(Owner.me().model_dump_json(), flush=True)\ntime.sleep(120)"], stdout=subprocess.PIPE)
    try:
        owner = Owner.model_validate(json.loads(child.stdout.readline()))
        assert owner.pid == child.pid and owner.alive()
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed child did not become a zombie in 10 s"
            time.sleep(0.05)
        assert not owner.alive()  # killed, not yet reaped
    finally:
        child.kill()
        child.wait(10)
