"""The watcher on the host sees writes made inside a real Docker container through the bind
mount, as in a run: the agent writes /work/game.html in the container, the host keeps them all."""

import hashlib
import io
import os
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from showcase.run.watcher import Watcher

pytestmark = pytest.mark.docker

TINY_BINARIES = ["/bin/dash", "/bin/sleep", "/bin/mv"]


def _libraries(binary: str) -> set[str]:
    """The shared libraries a host binary loads (from ldd), so the image can run it."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True, timeout=10).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            libs.add(path)
    return libs


@pytest.fixture(scope="module")
def tiny_image(docker_engine):
    """A few-MB image made from the host's own dash, sleep and mv (no registry, no download)."""
    import docker

    files = set(TINY_BINARIES)
    for binary in TINY_BINARIES:
        files |= _libraries(binary)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(files):
            tar.add(os.path.realpath(path), arcname=path.lstrip("/"))
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmp)
    client = docker.from_env(timeout=120)
    tag = f"test-{uuid.uuid4().hex[:8]}"
    client.api.import_image_from_data(buffer.getvalue(), repository="showcase-test-tiny", tag=tag)
    image = f"showcase-test-tiny:{tag}"
    try:
        yield client, image
    finally:
        client.images.remove(image, force=True)


# Ten in-place writes, then ten atomic renames, like agents do: 10 ms apart, then 50 ms apart.
WRITER = """
i=0
while [ $i -lt 10 ]; do printf '<html><body>in place %s</body></html>' $i > /work/game.html; sleep $1; i=$((i+1)); done
for j in 1 2 3 4 5 6 7 8 9 10; do printf '<html><body>renamed %s</body></html>' $j > /work/.game.tmp; mv /work/.game.tmp /work/game.html; sleep $1; done
"""


@pytest.mark.parametrize("gap_s", ["0.01", "0.05"])
def test_writes_inside_a_sealed_container_are_all_kept(tiny_image, tmp_path, gap_s):
    client, image = tiny_image
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    work.chmod(0o777)
    watcher = Watcher(work, run).start()
    container = client.containers.run(
        image, ["/bin/dash", "-c", WRITER, "writer", gap_s], detach=True, network_mode="none", read_only=True,
        user=f"{os.getuid()}:{os.getgid()}", volumes={str(work): {"bind": "/work", "mode": "rw"}},
        labels={"showcase": "test-watcher"}, name=f"showcase-test-watcher-{uuid.uuid4().hex[:8]}",
    )
    try:
        result = container.wait(timeout=120)
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert result["StatusCode"] == 0, logs
    versions = watcher.stop(timeout_s=10)

    expected = [f"<html><body>in place {i}</body></html>".encode() for i in range(10)]
    expected += [f"<html><body>renamed {j}</body></html>".encode() for j in range(1, 11)]
    assert [v.sha256 for v in versions] == [hashlib.sha256(e).hexdigest() for e in expected]
    assert all((run / "versions" / v.file).read_bytes() == e for v, e in zip(versions, expected))
    assert Path(work / "game.html").read_bytes() == expected[-1]
    assert not (work / ".game.tmp").exists()
