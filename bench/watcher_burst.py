"""How many of a burst of in-place writes the watcher keeps, by gap between writes.

Prints, for each gap, kept/written for in-place writes and for atomic renames, and the host's
load average: the watcher's limit is CPU scheduling (a version overwritten before the watcher
thread runs is gone), so the figures only mean something next to the load they were taken at.

    .venv/bin/python bench/watcher_burst.py [--count 50]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from showcase.run.watcher import Watcher


def burst(gap_s: float, count: int, rename: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="showcase-bench-") as tmp:
        work, run = Path(tmp) / "work", Path(tmp) / "run"
        work.mkdir()
        watcher = Watcher(work, run).start()
        for i in range(count):
            data = f"<html><body>version {i} {'x' * 20000}</body></html>".encode()
            if rename:
                part = work / f".game.{i}.tmp"
                part.write_bytes(data)
                os.replace(part, work / "game.html")
            else:
                (work / "game.html").write_bytes(data)
            time.sleep(gap_s)
        return len(watcher.stop(timeout_s=30))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'gap ms':>7} {'in place':>10} {'rename':>10}")
    for gap_ms in (50, 20, 10, 5, 1):
        in_place = burst(gap_ms / 1000, args.count, rename=False)
        renamed = burst(gap_ms / 1000, args.count, rename=True)
        print(f"{gap_ms:>7} {in_place:>5}/{args.count:<4} {renamed:>5}/{args.count:<4}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
