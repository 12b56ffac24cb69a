"""Shared fixtures: real Chromium, a real Docker engine (started here when none runs)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = Path(__file__).resolve().parent / "pages"


def _docker_up() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="session")
def docker_engine():
    """A running Docker engine. Started here if none runs, and stopped after only if we started it.

    No engine at all is a failure, not a skip: the sandbox is part of what we ship.
    """
    if _docker_up():
        yield
        return
    dockerd = shutil.which("dockerd")
    assert dockerd, "dockerd missing: run scripts/setup.sh (apt-get install docker.io)"
    log = open("/tmp/showcase-test-dockerd.log", "ab")
    proc = subprocess.Popen([dockerd], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while not _docker_up():
        assert proc.poll() is None, "dockerd exited; see /tmp/showcase-test-dockerd.log"
        assert time.monotonic() < deadline, "dockerd did not answer within 90 s"
        time.sleep(0.5)
    try:
        yield
    finally:
        if os.environ.get("SHOWCASE_KEEP_DOCKERD") != "1":
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
