"""Benchmark: the run's own overhead, versions checked as they land, shot.sh in the run's browser.

One real run (Docker, gate, relay, watcher, the run's browser, check, clip) against a replay
model whose agent writes 20 distinct versions of game.html 50 ms apart in one shell command,
times a shot.sh of the light page during the backlog that burst makes, waits, times another
shot.sh once the backlog is through, then says DONE. Printed, as ratios against references
measured in this same run:

- how long after the last write every version had its load verdict (goal: within 30 s);
- tail / (check + clip): agent end to report.html against the final check and the clip (goal <= 1.1);
- shot.sh round trip (inside the sandbox, through relay and gate) / a bare load check of the same
  page in a warm browser of this process, idle and during the backlog (goal <= 1.5 for both).

Not a test: figures go into the README, with the load printed here.

    .venv/bin/python bench/run_overhead.py [--writes 20] [--interval-ms 50] [--no-clip]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from showcase.replay import ReplayServer

LIGHT = "<!doctype html><title>light</title><script>window.ready=true</script>"
SHOT = "s=$(date +%s%N); shot.sh light.html >/dev/null; echo \"shot_ms=$(( ($(date +%s%N) - s) / 1000000 ))\""


def script(writes: int, interval_ms: int) -> dict:
    loop = (
        f"printf '{LIGHT}' > light.html; "
        f"for i in $(seq 1 {writes}); do "
        "printf '<!doctype html><title>v%s</title><script>window.ready=true</script>' $i > game.html.tmp "
        f"&& mv game.html.tmp game.html; sleep {interval_ms / 1000:.3f}; done; {SHOT}"
    )
    return {
        "model": "replay-bench",
        "turns": [
            {"content": "Writing versions.", "tool_calls": [{"name": "shell", "arguments": {"command": loop}}]},
            {"content": "Looking again.", "tool_calls": [{"name": "shell", "arguments": {"command": f"sleep 30; {SHOT}"}}]},
        ],
        "final": {"content": "DONE /work/game.html"},
    }


def bare_check_s() -> float:
    """A bare load check of the light page in a warm browser (the second of two), in seconds."""
    from showcase.browser.service import BrowserService
    from showcase.check.quick import QUICK_RENDERER, load_check

    with tempfile.TemporaryDirectory() as tmp, BrowserService(QUICK_RENDERER).start(wait=True) as service:
        times = []
        for _ in range(2):  # with a screenshot, as shot.sh takes one
            t = time.monotonic()
            service.run(lambda browser: load_check(LIGHT.encode(), browser=browser, screenshot_path=Path(tmp) / "shot.png"))
            times.append(time.monotonic() - t)
    return times[-1]


def watch_verdicts(run: Path, stop: threading.Event, out: dict) -> None:
    """By this clock: when each version was first seen and when each verdict appeared."""
    seen_at: dict[int, float] = {}
    checked_at: dict[int, float] = {}
    while not stop.is_set():
        try:
            rows = [json.loads(line) for line in (run / "versions.jsonl").read_text().splitlines() if line.endswith("}")]
        except (FileNotFoundError, ValueError):
            rows = []
        now = time.monotonic()
        for r in rows:
            (checked_at if r["event"] == "load_checked" else seen_at).setdefault(r["n"], now)
        out["seen_at"], out["checked_at"] = seen_at, checked_at
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--no-clip", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    bare = bare_check_s()
    with tempfile.TemporaryDirectory() as tmp, ReplayServer(script(args.writes, args.interval_ms)) as server:
        run = Path(tmp) / "run"
        seen: dict = {}
        stop = threading.Event()
        watcher = threading.Thread(target=watch_verdicts, args=(run, stop, seen), daemon=True)
        watcher.start()
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "showcase.cli", "run", "--upstream", server.base_url, "--model", "replay-bench",
             "--out", str(run), "--limit-s", "600"] + (["--no-clip"] if args.no_clip else []),
            capture_output=True, text=True,
        )
        wall = time.monotonic() - t0
        stop.set()
        if proc.returncode != 0:
            sys.exit(f"run failed:\n{proc.stderr[-3000:]}")
        events = {}
        for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()):
            events[e["event"]] = e
        answers = [json.dumps(body) for body in server.requests]
        shots = [int(m) for body in answers for m in re.findall(r"shot_ms=(\d+)", body)]
        shots = list(dict.fromkeys(shots))  # each answer is repeated in every later request
        kept = len({json.loads(line)["n"] for line in (run / "versions.jsonl").read_text().splitlines()})
    load_after = os.getloadavg()
    agent_s = events["agent_ended"]["t_s"] - events["agent_started"]["t_s"]
    tail = events["report_written"]["t_s"] - events["agent_ended"]["t_s"]
    check_s = events["check_done"]["detail"]["seconds"]
    clip_s = events["clip_done"]["detail"]["seconds"] if "clip_done" in events else 0.0
    print(f"load average before / after: {load_before[0]:.1f} / {load_after[0]:.1f} (2 cores, shared)")
    print(f"wall time of the whole run:          {wall:7.1f} s (agent {agent_s:.1f} s)")
    seen_at, checked_at = seen.get("seen_at", {}), seen.get("checked_at", {})
    if seen_at and set(checked_at) >= set(seen_at):
        lag = max(checked_at.values()) - max(seen_at.values())
        print(f"every version checked, after the last was seen: {lag:5.1f} s (goal <= 30)")
        last_seen = max(seen_at.values())
        print("  each verdict after the last was seen (by n): "
              + " ".join(f"{checked_at[n] - last_seen:.1f}" for n in sorted(checked_at)))
    else:
        print(f"verdicts seen while the run went: {len(checked_at)} of {len(seen_at)} versions")
    print(f"after the agent ended, load checks:  {events['load_checks_done']['detail']['seconds_after_agent']:7.1f} s")
    print(f"final check {check_s:.1f} s, clip {clip_s:.1f} s, report {events['report_written']['detail']['seconds']:.1f} s")
    if "backlog_checked" in events:
        b = events["backlog_checked"]["detail"]
        print(f"backlog checked {b['during'].replace('_', ' ')}: {b['versions']} versions in {b['seconds']:.1f} s")
    print(f"tail (agent end to report.html):     {tail:7.1f} s; tail / (check + clip) = {tail / (check_s + clip_s):.2f} (goal <= 1.1)")
    print(f"bare load check in a warm browser:   {bare:7.2f} s")
    if len(shots) >= 2:
        print(f"shot.sh during the backlog:          {shots[0] / 1000:7.2f} s = {shots[0] / 1000 / bare:.2f}x bare (goal <= 1.5)")
        print(f"shot.sh once idle:                   {shots[1] / 1000:7.2f} s = {shots[1] / 1000 / bare:.2f}x bare (goal <= 1.5)")
    else:
        print(f"shot.sh round trips found: {shots}")
    print(f"versions kept: {kept} of {args.writes} written {args.interval_ms} ms apart")


if __name__ == "__main__":
    main()
