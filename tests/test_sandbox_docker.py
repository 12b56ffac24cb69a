"""The Docker backend's own behaviour: the published limits on the container, exec and the agent
process, copy out, stop/kill, /work shared with the host, clear errors."""

import io
import json
import os
import signal
from pathlib import Path

import docker
import pytest

from showcase.errors import InfraError, UserError
from showcase.sandbox.base import EngineUnanswered, SandboxSpec, get_backend, known_backends, parse_size
from showcase.sandbox.conformance import StandInGate
from showcase.sandbox.docker import DockerSandbox
from showcase.sandbox.image import ensure_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def image(docker_engine):
    return ensure_image(None)


@pytest.fixture
def folders(tmp_path):
    tmp_path.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "given.txt").write_text("from the host\n")
    with StandInGate(tmp_path / "gate") as gate:
        yield work, gate


@pytest.fixture
def sandbox(image, folders):
    work, gate = folders
    box = get_backend("docker")()
    box.start(SandboxSpec(image=image, workdir_host=work, gate_dir_host=gate.dir, api_key="sk-run-1",
                          env={"EXTRA": "yes"}, labels={"showcase.test": "docker"}))
    try:
        yield box
    finally:
        box.kill()
        box.remove()
        assert box.leak_audit() == []


def test_registry_knows_docker_and_refuses_unknown():
    assert "docker" in known_backends()
    assert get_backend("docker") is DockerSandbox
    with pytest.raises(UserError, match="known: .*docker"):
        get_backend("nope")


def test_published_limits_are_on_the_container(sandbox):
    host = docker.from_env().api.inspect_container(sandbox.container_id)["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == parse_size("1.25g") == host["MemorySwap"]  # no swap beyond memory
    assert host["NanoCpus"] == int(min(4, os.cpu_count()) * 1e9)
    assert host["PidsLimit"] == 512
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is False  # PID 1 is the relay's own init, which ends the container at its lifetime
    pid1 = sandbox.exec(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"], timeout_s=30).stdout
    assert "relay.py --lifetime-s 10800.000" in pid1, pid1
    binds = {m["Destination"]: m for m in docker.from_env().api.inspect_container(sandbox.container_id)["Mounts"]}
    assert binds["/work"]["RW"] is True and binds["/gate"]["RW"] is False


def test_overrides_reach_the_container(image, folders):
    work, gate = folders
    with DockerSandbox() as box:
        box.start(SandboxSpec(image=image, workdir_host=work, gate_dir_host=gate.dir, memory="600m",
                              memory_swap="800m", cpus=1, pids_limit=64, relay_port=9000))
        host = docker.from_env().api.inspect_container(box.container_id)["HostConfig"]
        assert (host["Memory"], host["MemorySwap"], host["NanoCpus"], host["PidsLimit"]) == (600 << 20, 800 << 20, 10**9, 64)
        probe = box.exec(["curl", "-s", "http://127.0.0.1:9000/v1/models"], timeout_s=30)
        assert json.loads(probe.stdout)["data"][0]["id"] == "stand-in"


def test_exec_gives_output_exit_code_and_the_agent_environment(sandbox):
    r = sandbox.exec(["sh", "-c", "echo out; echo err >&2; echo $OPENAI_BASE_URL $OPENAI_API_KEY $HOME $EXTRA $MINE; pwd; exit 3"],
                     timeout_s=30, env={"MINE": "mine"})
    assert r.exit_code == 3 and not r.timed_out
    assert r.stdout.split("\n")[:3] == ["out", "http://127.0.0.1:8765/v1 sk-run-1 /home/agent yes mine", "/work"]
    assert r.stderr == "err\n"
    assert sandbox.exec(["pwd"], timeout_s=30, workdir="/tmp").stdout == "/tmp\n"


def test_work_is_shared_with_the_host_both_ways(sandbox, folders):
    work, _ = folders
    r = sandbox.exec(["sh", "-c", "cat given.txt && echo more >> given.txt && echo '<html>' > game.html && id -u"], timeout_s=30)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "from the host\n1000\n"
    assert (work / "game.html").read_text() == "<html>\n"
    assert (work / "given.txt").read_text() == "from the host\nmore\n"


def test_agent_process_output_is_appended_to_a_host_log(sandbox, tmp_path):
    log = tmp_path / "logs" / "agent.log"
    log.parent.mkdir()
    log.write_text("earlier line\n")
    handle = sandbox.start_process(["sh", "-c", "echo started; echo warn >&2; sleep 1; echo done; exit 7"], log_path=log)
    info = sandbox.wait(60, handle)
    assert (info.how, info.exit_code, info.oom_killed) == ("exited", 7, False)
    assert info.finished_at is not None
    text = log.read_text()
    assert text.startswith("earlier line\n") and "started\n" in text and "warn\n" in text and text.endswith("done\n")


def test_wait_is_bounded_and_kill_process_kills_the_tree(sandbox, tmp_path):
    handle = sandbox.start_process(["sh", "-c", "sleep 500 & sleep 501"], log_path=tmp_path / "a.log")
    assert sandbox.wait(0.5, handle).how == "running"
    sandbox.kill_process(handle)
    info = sandbox.wait(30, handle)
    assert info.how == "killed"
    ps = sandbox.exec(["ps", "-eo", "args"], timeout_s=30).stdout
    assert "sleep 50" not in ps


def test_an_engine_that_does_not_answer_is_said_and_not_taken_for_the_agents_end(sandbox, tmp_path):
    """A machine far over its cores can stall the engine past its client's timeout: the run must
    learn that the engine did not answer, not that the agent ended (nor die of a ReadTimeout)."""
    handle = sandbox.start_process(["sleep", "300"], log_path=tmp_path / "a.log")
    sandbox.client = docker.from_env(timeout=2)  # the 120 s of a run's client, shortened for the test
    # the engine that serves the socket, by the pid file it writes (the oldest process named dockerd
    # may be another engine, or one that died and was never reaped: stopping it stalls nothing)
    engine = int(Path("/var/run/docker.pid").read_text().strip())
    os.kill(engine, signal.SIGSTOP)  # the engine, stalled
    try:
        with pytest.raises(EngineUnanswered, match="did not answer"):
            sandbox.wait(0.5, handle)
    finally:
        os.kill(engine, signal.SIGCONT)
    assert sandbox.wait(0.5, handle).how == "running"


def test_the_memory_peak_is_read_while_the_sandbox_lives_and_kept_after_its_kill(sandbox):
    """run-info's container_limits.peak_memory_bytes: the kernel's peak of the container's memory
    cgroup, which goes with the container, so it is read before the kill."""
    held = 200 << 20
    r = sandbox.exec(["python3", "-c", f"b = b'x' * {held}; print(len(b))"], timeout_s=60)
    assert r.exit_code == 0, r.stderr
    live = sandbox.peak_memory_bytes()
    assert live is not None and held <= live < parse_size("1.25g"), live
    sandbox.kill()
    assert sandbox.peak_memory_bytes() == live


def test_copy_out_file_and_folder(sandbox, tmp_path):
    sandbox.exec(["sh", "-c", "mkdir -p $HOME/out/sub && echo a > $HOME/out/a && echo b > $HOME/out/sub/b"], timeout_s=30)
    sandbox.copy_out("/home/agent/out/a", tmp_path / "a.txt")
    assert (tmp_path / "a.txt").read_text() == "a\n"
    sandbox.copy_out("/home/agent/out", tmp_path / "tree")
    assert (tmp_path / "tree" / "sub" / "b").read_text() == "b\n"
    with pytest.raises(UserError, match="nothing at"):
        sandbox.copy_out("/home/agent/missing", tmp_path / "m")


def test_stop_ends_everything_within_the_grace(sandbox, tmp_path):
    # an agent that ignores SIGTERM: stop must still end it (SIGKILL after the grace)
    handle = sandbox.start_process(["sh", "-c", "trap '' TERM; while true; do sleep 1; done"], log_path=tmp_path / "x.log")
    sandbox.stop(grace_s=1)
    assert sandbox.sandbox_exit_info().how in ("exited", "killed")
    assert sandbox.wait(10, handle).how == "killed"
    sandbox.remove()
    assert sandbox.leak_audit() == []


def test_base_image_has_what_the_agent_is_promised(sandbox):
    script = ("set -e; python3 -c 'import sys, venv, numpy, PIL; print(sys.version_info[:2] == (3, 11))'; "
              "python3 -m pip --version >/dev/null; ffmpeg -version | head -1; node --version; git --version; "
              "curl --version | head -1; ps --version")
    r = sandbox.exec(["sh", "-c", script], timeout_s=60)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("True\n")
    for tool in ("ffmpeg version", "v24.", "git version", "curl ", "procps"):  # Node 24 in every layer
        assert tool in r.stdout


def test_start_refuses_bad_input_clearly(image, folders, tmp_path):
    work, gate = folders
    name = f"showcase-test-refused-{os.getpid()}"
    with pytest.raises(UserError, match="no image"):
        DockerSandbox().start(SandboxSpec(image="showcase-missing:none", workdir_host=work, gate_dir_host=gate.dir, name=name))
    with pytest.raises(UserError, match="gate folder"):
        DockerSandbox().start(SandboxSpec(image=image, workdir_host=work, gate_dir_host=tmp_path / "nowhere", name=name))
    with pytest.raises(UserError, match="mount source"):
        DockerSandbox().start(SandboxSpec(image=image, workdir_host=work, gate_dir_host=gate.dir, name=name,
                                          extra_mounts=[{"host": tmp_path / "absent", "container": "/x"}]))
    with pytest.raises(ValueError, match="not a size"):
        SandboxSpec(image=image, workdir_host=work, gate_dir_host=gate.dir, memory="lots")
    assert not docker.from_env().containers.list(all=True, filters={"name": name})  # nothing was left behind


def test_a_sandbox_that_cannot_come_up_is_removed(image, folders):
    """An image without python3 cannot run the relay: a clear error, and no container left behind."""
    work, gate = folders
    client = docker.from_env()
    bare = f"showcase-test-nopython:{os.getpid()}"
    dockerfile = f"FROM {image}\nUSER root\nRUN rm -f /usr/bin/python3*\nUSER 1000:1000\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=bare, network_mode="none", rm=True)
    name = f"showcase-test-nopython-{os.getpid()}"
    try:
        with pytest.raises(InfraError, match="python3"):
            DockerSandbox().start(SandboxSpec(image=bare, workdir_host=work, gate_dir_host=gate.dir, name=name, relay_ready_s=10))
        assert not client.containers.list(all=True, filters={"name": name})
    finally:
        client.images.remove(bare, force=True)
