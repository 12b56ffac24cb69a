"""Benchmark (not a test): checks per minute on a local Ray cluster of 1 and 2 nodes, and the
scheduling overhead per job against a direct `showcase check` of the same page, in one run.

Every figure is a `showcase` process timed from outside, as a user runs it:
- direct: `showcase check PAGE` (the reference, measured in the same run);
- one job: `showcase check PAGE --ray ADDR` on a warm 1-node cluster; overhead = one job - direct;
- throughput: `showcase check PAGE x N --ray ADDR` with 1 node, then with 2 nodes (each node
  `--num-cpus 1`, one job at a time).
Two node processes on one 2-core machine share its cores: the gain of a second node is bounded
by the cores (and each check's frame-rate item then measures a shared CPU); on separate
machines the nodes add up.

    .venv/bin/python bench/batch_throughput.py [--pages 4] [--page tests/pages/good.html]
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from showcase.batch.remote import wait_for_resource

REPO = Path(__file__).resolve().parents[1]
SHOWCASE = [sys.executable, "-m", "showcase.cli"]
RAY = str(Path(sys.executable).parent / "ray")


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def timed(args: list[str]) -> float:
    started = time.monotonic()
    proc = subprocess.run(SHOWCASE + args, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"showcase {' '.join(args[:3])} ... failed: {proc.stderr.strip()[-500:]}")
    return time.monotonic() - started


def start_node(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([RAY, "start", "--block", "--num-cpus", "1", "--resources", '{"showcase": 1}',
                             "--object-store-memory", str(200 << 20), "--disable-usage-stats", *args],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})


def stop(nodes: list[subprocess.Popen]) -> None:
    for proc in reversed(nodes):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=4, help="checks per throughput figure")
    parser.add_argument("--page", type=Path, default=REPO / "tests" / "pages" / "good.html")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sc-bench-", dir="/tmp"))
    pages = []
    for i in range(args.pages):
        pages.append(root / f"page{i}.html")
        shutil.copyfile(args.page, pages[-1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    nodes: list[subprocess.Popen] = []
    try:
        print(f"load {load()}: direct check of {args.page.name}")
        direct = timed(["check", str(args.page), "--out", str(root / "direct")])
        nodes.append(start_node(["--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                                 "--include-dashboard", "false", "--temp-dir", str(root / "t")], root / "head.log"))
        wait_for_resource(address, 1, timeout_s=300)
        timed(["check", str(args.page), "--out", str(root / "warm"), "--ray", address])  # the node's first worker
        one = timed(["check", str(args.page), "--out", str(root / "one"), "--ray", address])
        print(f"load {load()}: one job on 1 node")
        t1 = timed(["check", *map(str, pages), "--out", str(root / "n1"), "--ray", address])
        print(f"load {load()}: {args.pages} checks on 1 node")
        nodes.append(start_node(["--address", address, "--node-ip-address", "127.0.0.1"], root / "worker.log"))
        wait_for_resource(address, 2, timeout_s=300)
        t2 = timed(["check", *map(str, pages), "--out", str(root / "n2"), "--ray", address])
        print(f"load {load()}: {args.pages} checks on 2 nodes")
    finally:
        stop(nodes)
        shutil.rmtree(root, ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    print(f"direct `showcase check`: {direct:.1f} s; one job through Ray: {one:.1f} s "
          f"(overhead {one - direct:+.1f} s per job, {one / direct:.2f}x)")
    print(f"1 node: {args.pages / t1 * 60:.2f} checks/min; 2 nodes: {args.pages / t2 * 60:.2f} checks/min "
          f"({t1 / t2:.2f}x; this machine has {cores} cores, which bound the gain)")


if __name__ == "__main__":
    main()
