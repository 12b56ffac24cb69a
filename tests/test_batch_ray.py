"""`showcase check --ray` and `showcase batch --ray` on a real Ray cluster of two node processes.

The cluster is started here (`ray start --head`, `ray start --address`, each with its own CPUs,
its own `showcase` resource and its own scratch folder) and stopped after, by process group.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import ray  # the ray extra; scripts/setup.sh installs it for the tests (a missing Ray fails here, never skips)

from showcase.host.cluster import wait_for_resource
from test_batch import passed_items, short_script, write_plan

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SHOWCASE = [sys.executable, "-m", "showcase.cli"]
RAY = str(Path(sys.executable).parent / "ray")
PAGES = Path(__file__).resolve().parent / "pages"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, args: list[str], scratch: Path, log: Path):
        self.scratch = scratch
        env = {**os.environ, "SHOWCASE_RAY_SCRATCH": str(scratch), "RAY_USAGE_STATS_ENABLED": "0"}
        self.proc = subprocess.Popen([RAY, "start", "--block", "--num-cpus", "1", "--resources", '{"showcase": 1}',
                                      "--object-store-memory", str(200 << 20), "--disable-usage-stats", *args],
                                     stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)


@pytest.fixture(scope="module")
def cluster(docker_engine):
    # A short folder: Ray's Unix sockets live under it (a socket path holds at most 107 bytes).
    root = Path(tempfile.mkdtemp(prefix="sc-ray-", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    head = Node(["--head", "--port", str(port), "--node-ip-address", "127.0.0.1", "--include-dashboard", "false",
                 "--temp-dir", str(root / "t")], root / "head", root / "head.log")
    nodes = [head]
    try:
        wait_for_resource(address, 1, timeout_s=180)
        worker = Node(["--address", address, "--node-ip-address", "127.0.0.1"], root / "worker", root / "worker.log")
        nodes.append(worker)
        wait_for_resource(address, 2, timeout_s=180)
        yield {"address": address, "head": head, "worker": worker, "root": root}
    finally:
        for node in reversed(nodes):
            node.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_six_checks_across_two_nodes(cluster, tmp_path):
    """Six pages scored on the cluster (two at a time, one per node); each result written here."""
    names = ["good.html", "instanced.html", "load_error.html", "console_error.html", "css_only.html", "black_canvas.html"]
    pages = [PAGES / n for n in names]
    out = tmp_path / "checks"
    proc = subprocess.run(SHOWCASE + ["check", *map(str, pages), "--out", str(out), "--json", "--ray", cluster["address"]],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = json.loads(proc.stdout)
    assert [Path(r["page"]).name for r in reports] == names
    for page in pages:
        report = json.loads((out / page.stem / "check.json").read_text())
        assert report["max_total"] == 10
        assert (out / page.stem / "screenshot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    passed = {Path(r["page"]).name: {i["id"] for i in r["items"] if i["passed"]} for r in reports}
    assert passed["good.html"] >= {"1", "2", "3", "4"} and "1" not in passed["load_error.html"]


def test_batch_across_two_nodes_survives_a_dead_node(cluster, tmp_path):
    """Two replay runs start at once, one per node; the worker node is killed while its run waits
    for the model. Its run is done again on the head; both folders come back whole."""
    (tmp_path / "slow.json").write_text(json.dumps(short_script("replay-slow", 30)))
    plan = write_plan(tmp_path, '[[setup]]\nname = "s"\nreplay = "slow.json"\nrepeats = 2\nclip = false\n'
                                'limits = { limit_s = 300, cpus = 1 }\n')
    out = tmp_path / "batch"
    proc = subprocess.Popen(SHOWCASE + ["batch", str(plan), "--out", str(out), "--ray", cluster["address"]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    worker_scratch = cluster["worker"].scratch
    while not any(p.read_text().strip() for p in worker_scratch.glob("*/s-*/versions.jsonl")):
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no run wrote its page on the worker node in 600 s"
        time.sleep(0.2)
    cluster["worker"].kill()
    stdout, stderr = proc.communicate(timeout=1200)
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.strip().splitlines()[-1] == str(out / "comparison.html")  # after Ray's note of the retry
    record = json.loads((out / "batch.json").read_text())
    assert record["ray_version"] == ray.__version__ and record["ray_address"] == cluster["address"]
    assert [r["state"] for r in record["runs"]] == ["done", "done"]
    nodes = set()
    for run in ("s-1", "s-2"):
        folder = out / run
        assert (folder / "report.html").is_file() and (folder / "check.json").is_file()
        assert passed_items(folder) >= {"1", "2", "3", "4"}
        assert any((folder / "versions").iterdir())
        nodes.add(json.loads((folder / "contract.json").read_text())["node"])
        assert "report:" in (out / "logs" / f"{run}.log").read_text()  # the run's output came back too
    # Both ended on the head: the worker was gone before its run could end there.
    assert len(nodes) == 1 and None not in nodes
    assert not [p for p in out.rglob("*") if p.is_symlink()]
    page = (out / "comparison.html").read_text()
    assert "s-1" in page and "s-2" in page
