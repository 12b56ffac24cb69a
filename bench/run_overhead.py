"""Benchmark: the run's own overhead, and versions caught when an agent writes every 50 ms.

One real run (Docker, gate, relay, watcher, check; no clip) against a replay model whose agent
writes 20 distinct versions of game.html 50 ms apart in one shell command, then says DONE.
Prints the wall time of each phase, the agent's own time, and their ratio; and how many of the
20 versions the watcher kept. Not a test: figures go into the README.

    .venv/bin/python bench/run_overhead.py [--writes 20] [--interval-ms 50]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from showcase.replay import ReplayServer


def script(writes: int, interval_ms: int) -> dict:
    loop = (
        f"for i in $(seq 1 {writes}); do "
        "printf '<!doctype html><title>v%s</title><script>window.ready=true</script>' $i > game.html.tmp "
        f"&& mv game.html.tmp game.html; sleep {interval_ms / 1000:.3f}; done; ls -la"
    )
    return {
        "model": "replay-bench",
        "turns": [{"content": "Writing versions.", "tool_calls": [{"name": "shell", "arguments": {"command": loop}}]}],
        "final": {"content": "DONE /work/game.html"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--interval-ms", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ReplayServer(script(args.writes, args.interval_ms)) as server:
        run = Path(tmp) / "run"
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "showcase.cli", "run", "--upstream", server.base_url, "--model", "replay-bench",
             "--out", str(run), "--no-clip", "--limit-s", "600"],
            capture_output=True, text=True,
        )
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            sys.exit(f"run failed:\n{proc.stderr[-3000:]}")
        events = {e["event"]: e["t_s"] for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())}
        kept = len({json.loads(line)["n"] for line in (run / "versions.jsonl").read_text().splitlines()})
        check_s = json.loads((run / "check.json").read_text())["seconds"]
    agent_s = events["agent_ended"] - events["agent_started"]
    print(f"wall time of the whole run:         {wall:7.1f} s")
    print(f"agent's own time (start to end):    {agent_s:7.1f} s")
    print(f"run overhead (wall - agent):        {wall - agent_s:7.1f} s  (ratio wall/agent {wall / agent_s:.1f}x)")
    print(f"  of which the final check:         {check_s:7.1f} s")
    print(f"  end of agent to sandbox removed:  {events['sandbox_removed'] - events['agent_ended']:7.1f} s")
    print(f"versions caught: {kept} of {args.writes} written {args.interval_ms} ms apart")


if __name__ == "__main__":
    main()
