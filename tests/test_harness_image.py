"""The image side of harnesses: Node 24 for every agent, pinned packages checked, and the watch on
what a sealed container tries to reach (real Docker, real containers)."""

import base64
import hashlib
import time

import docker
import pytest

from showcase.errors import InfraError
from showcase.harness import NpmPackage
from showcase.host.egress import EgressWatch
from showcase.sandbox.image import NODE, _check_integrity, ensure_image

pytestmark = pytest.mark.docker


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path):
    tgz = tmp_path / "pkg-1.0.0.tgz"
    tgz.write_bytes(b"what the registry sent")
    good = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    _check_integrity(tgz, NpmPackage(spec="pkg@1.0.0", integrity=good))  # the pinned one passes
    tgz.write_bytes(b"what the registry sent, changed")
    with pytest.raises(InfraError, match="pkg@1.0.0: the fetched tarball's integrity .* refusing it"):
        _check_integrity(tgz, NpmPackage(spec="pkg@1.0.0", integrity=good))


def run_container(image: str, script: str) -> tuple[str, object]:
    """Run `script` (python3) in a container sealed like a run's (network none, the agent's user)."""
    client = docker.from_env()
    c = client.containers.run(image, ["python3", "-c", script], network_mode="none", detach=True, user="1000:1000")
    try:
        c.reload()
        watch = EgressWatch.start(c.attrs["State"]["Pid"])
        c.wait(timeout=120)
        return c.logs().decode(), watch.stop()
    finally:
        c.remove(force=True)


def test_every_layer_has_node_24_for_the_agent(docker_engine):
    image = ensure_image(None)  # even the layer of no harness
    out, _ = run_container(image, "import subprocess as s; print(s.run(['sh','-lc','command -v node; node --version; "
                                  "npm --version; readlink /usr/local/bin/shot.sh'], capture_output=True, text=True).stdout)")
    lines = out.split()
    assert lines[0] == "/usr/local/bin/node" and lines[1] == f"v{NODE.version}"
    assert lines[2].split(".")[0] == "11"  # npm, run by that node
    # The run mounts its tools at /opt/tools; this link puts shot.sh on a login shell's PATH too
    # (Debian's /etc/profile resets PATH, and several agents run commands in `bash -lc`).
    assert lines[3] == "/opt/tools/shot.sh"


def test_lookups_and_outside_connects_are_seen_and_counted(docker_engine):
    image = ensure_image(None)
    script = """
import socket, time
time.sleep(1.5)  # the watch is set up from the host after the container started
for host in ("example.org", "updates.example.net"):
    try:
        socket.getaddrinfo(host, 443)
    except OSError as exc:
        print(host, "->", exc.errno)
s = socket.socket(); s.settimeout(1)
try:
    s.connect(("192.0.2.10", 443))  # a documentation address; it exists nowhere
except OSError as exc:
    print("connect ->", exc)
own = socket.socket(); own.bind(("127.0.0.1", 0)); own.listen()
c = socket.create_connection(own.getsockname(), timeout=2)  # loopback is the container's own business
print("loopback ok")
"""
    t0 = time.monotonic()
    out, seen = run_container(image, script)
    assert seen.observed, seen.reason
    # The lookups were answered NXDOMAIN at once (EAI_NONAME), not left to time out.
    assert "example.org -> -2" in out and "updates.example.net -> -2" in out, out
    assert seen.dns_queries == ["example.org", "updates.example.net"]
    assert seen.connects == ["tcp 192.0.2.10:443"]
    assert "loopback ok" in out
    assert time.monotonic() - t0 < 60


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    # One small wheel, fetched as a harness's hashed lock file is: the right hash passes, a changed one is refused.
    from showcase.harness import Harness, HarnessInstall, HarnessLaunch
    from showcase.sandbox.image import ensure_wheelhouse

    monkeypatch.setenv("SHOWCASE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "h"
    folder.mkdir()
    good = "six==1.17.0 --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n"
    harness = Harness(id="h", version="1", dir=folder, install=HarnessInstall(pip_requirements="req.txt"),
                      launch=HarnessLaunch(command=["true"]))
    (folder / "req.txt").write_text(good)
    house = ensure_wheelhouse(harness)
    assert [p.name for p in house.glob("*.whl")] == ["six-1.17.0-py2.py3-none-any.whl"]
    (folder / "req.txt").write_text(good.replace("4721f391", "0000f391"))
    with pytest.raises(InfraError, match="wheels failed"):
        ensure_wheelhouse(harness)
    assert len(list((tmp_path / "cache" / "wheels").iterdir())) == 1  # nothing half-made was kept
