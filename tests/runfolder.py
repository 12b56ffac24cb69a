"""Write plausible run folders for the report tests: the files of spec/run-artefacts.md, with a
real PNG (Pillow) and a real H.264 clip (ffmpeg), in the shapes the run, gate and check parts write.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from PIL import Image, ImageDraw

ITEMS = [
    ("1", "loads", 1), ("2", "ready", 1), ("3", "no console errors", 1), ("4", "not blank", 1),
    ("5", "frame rate", 1), ("6a", "world size", 0.5), ("6b", "English", 0.5),
    ("7", "tour, window 1", 1), ("8", "tour, window 2", 1), ("9", "animation", 1), ("10", "controls", 1),
]

# Text a hostile page could put in its title or DOM; the report must show it, never run it.
HOSTILE = '<img src="https://evil.example/x.png" onerror="console.error(1)"><script>console.error("xss")</script>'


def make_clip(path: Path, seconds: float = 2.0) -> Path:
    """A real H.264 mp4 that Chromium plays (yuv420p, moov atom first)."""
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x180:rate=30", "-t", str(seconds),
         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(path)],
        check=True, timeout=60,
    )
    return path


def make_png(path: Path, size: tuple[int, int], seed: int) -> Path:
    img = Image.new("RGB", size, (30 + seed * 20 % 200, 90, 160))
    d = ImageDraw.Draw(img)
    for i in range(12):
        x = (seed * 37 + i * 97) % size[0]
        d.rectangle([x, size[1] // 2, x + size[0] // 10, size[1] - 10], fill=(40 + i * 15, 160, 60))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def _jsonl(path: Path, rows: list[dict], cut_last: bool = False) -> None:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if cut_last:  # a run killed while writing its last line
        text = text[: len(text) - len(json.dumps(rows[-1])) // 2 - 1]
    path.write_text(text)


def make_run(
    root: Path,
    name: str,
    *,
    clip_source: Path | None,
    model: str = "test-model-7b",
    harness: str = "builtin",
    points: dict[str, float] | None = None,
    n_versions: int = 5,
    failed_versions: tuple[int, ...] = (2,),
    requests: int = 12,
    minutes: float = 92.3,
    finalized: bool = True,
    shots: bool = True,
    agent_shots: int = 0,
    world_title: str = "Voxel Isles",
) -> Path:
    """One run folder. finalized=False leaves what a run killed mid-way leaves: no run-info end,
    no final choice, no check, no clip, and a cut last line in versions.jsonl."""
    run = root / name
    (run / "versions").mkdir(parents=True)
    start = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)
    span_s = minutes * 60
    (run / "command.txt").write_text(
        f"showcase run --task voxel --harness {harness} --upstream http://127.0.0.1:8000/v1 --model {model} --out runs/{name}\n"
    )
    sampling = {"temperature": 0.6, "top_p": 0.95, "max_tokens": 262144}
    (run / "contract.json").write_text(json.dumps({
        "schema_version": 1, "task_id": "voxel", "prompt_sha256": "26f98fd96f94b1b1c152eec15d2becfc807e7c7f2d478ae456e1d6e6a2bbdbb6",
        "limits": {"hard_stop_s": 7200, "finish_now_after_s": 5400, "answer_limit": 262144, "context_size": 262144},
        "harness": {"id": harness, "version": "0.3"}, "model": model, "upstream_url": "http://127.0.0.1:8000/v1",
        "sampling": sampling,
        "sandbox_limits": {"memory_bytes": 4 << 30, "cpus": 1.0, "pids": 512, "network": "none", "read_only_root": True, "user": "agent"},
        "image": {"id": "sha256:" + "ab" * 32, "digest": None, "tag": f"showcase-sandbox-{harness}:1234"},
        "versions": {"showcase": "0.1.0", "chromium": "Chromium 156.0", "ffmpeg": "5.1.9"},
        "checker_rubric_version": "1", "timezone": "UTC", "seeds": {"check": 1},
    }, indent=2))
    (run / "sampling.json").write_text(json.dumps({"schema_version": 1, "fields": sampling, "source": "file", "source_path": "sampling.json", "source_sha256": None}))

    # gate.log + gate-stats.json
    lines, tp, ta = [], 0, 0
    for i in range(requests):
        t = span_s * (i + 1) / requests - 1.0
        p, a = 20000 + 9000 * i, 800 + 150 * (i % 4)
        tp, ta = tp + p, ta + a
        lines.append({
            "time": (start + timedelta(seconds=t)).isoformat().replace("+00:00", "Z"), "t_s": round(t, 3), "id": f"r{i + 1:04d}",
            "kind": "api", "method": "POST", "path": "/v1/chat/completions", "api": "chat", "stream": True, "status": 200,
            "fields": {}, "prompt_tokens": p, "answer_tokens": a, "latency_ms": 900.0, "finish_reason": "stop",
            "injected": t >= 5400, "blocked": False, "shortened": False,
        })
    _jsonl(run / "gate.log", lines)
    fn_first = next((line["t_s"] for line in lines if line["injected"]), None)
    fn_sent = sum(1 for line in lines if line["injected"])
    (run / "gate-stats.json").write_text(json.dumps({
        "started_at": start.isoformat(), "clock_started_at": start.isoformat(), "updated_at": start.isoformat(),
        "requests": requests, "errors": 0, "blocked": 0, "blocked_why": {}, "shortened": 0,
        "prompt_tokens": tp, "answer_tokens": ta, "finish_now_count": fn_sent, "finish_now_first_s": fn_first,
        "tool_requests": 3, "hard_stopped": False, "last_request_id": lines[-1]["id"] if lines else None,
    }, indent=2))

    # versions/ + versions.jsonl (seen line, then a load_checked update with the same n)
    vrows = []
    for n in range(1, n_versions + 1):
        body = f"<!doctype html><title>v{n}</title><p>version {n} of {name}</p>".encode()
        sha = hashlib.sha256(body).hexdigest()
        fname = f"{n:04d}-{sha[:8]}.html"
        (run / "versions" / fname).write_bytes(body)
        t = span_s * n / (n_versions + 1)
        seen = {"n": n, "event": "seen", "t_s": round(t, 2), "sha256": sha, "size": len(body),
                "last_request_id": f"r{max(1, n * requests // (n_versions + 1)):04d}", "file": fname,
                "loaded_without_errors": None, "load_errors": [], "check_failure": None}
        vrows.append(seen)
        ok = n not in failed_versions
        vrows.append(dict(seen, event="load_checked", loaded_without_errors=ok,
                          load_errors=[] if ok else ["Uncaught ReferenceError: THREE is not defined\n    at game.html:12"]))
        if shots:
            make_png(run / "work" / "shots" / f"{n:04d}-{sha[:8]}.png", (320, 180), n)
    _jsonl(run / "versions.jsonl", vrows, cut_last=not finalized)
    # shot.sh screenshots as the gate's shot endpoint names them; shot k halfway after version k
    for k in range(1, agent_shots + 1):
        shot = make_png(run / "work" / "shots" / f"shot-{k:03d}.png", (320, 180), 40 + k)
        when = start.timestamp() + span_s * (k + 0.5) / (n_versions + 1)
        os.utime(shot, (when, when))

    # as showcase.run.orchestrate logs them: t_s on the run's clock, the moment itself in detail.at_s
    events = [
        {"t_s": 0.0, "at": start.isoformat(), "event": "run_started", "detail": {"started_at": start.isoformat()}},
        {"t_s": 0.0, "at": start.isoformat(), "event": "agent_started",
         "detail": {"harness": harness, "limit_s": 7200, "inject_after_s": 5400, "start_epoch": start.timestamp()}},
    ]
    if fn_first is not None:  # noticed by the supervisor up to a second later
        events.append({"t_s": fn_first + 0.8, "at": (start + timedelta(seconds=fn_first + 0.8)).isoformat(),
                       "event": "finish_now_first", "detail": {"at_s": fn_first}})
    if finalized:
        events.append({"t_s": span_s, "at": (start + timedelta(seconds=span_s)).isoformat(), "event": "agent_ended",
                       "detail": {"how": "done", "exit_code": 0}})
    _jsonl(run / "events.jsonl", events)

    if not finalized:
        return run

    loaded = [n for n in range(1, n_versions + 1) if n not in failed_versions]
    chosen = n_versions if n_versions in loaded else (loaded[-1] if loaded else None)
    (run / "run-info.json").write_text(json.dumps({
        "schema_version": 1, "started_at": start.isoformat(), "ended_at": (start + timedelta(seconds=span_s)).isoformat(),
        "minutes_run": minutes, "agent_end": "done", "agent_exit_code": 0, "finish_now_after_s": 5400,
        "finish_now_sent": fn_sent, "finish_now_first_s": fn_first, "requests": requests, "errors": 0, "blocked": 0,
        "shortened": 0, "prompt_tokens": tp, "answer_tokens": ta, "versions_seen": n_versions,
        "versions_loaded_without_errors": len(loaded),
        "container_limits": {"memory_bytes": 4 << 30, "cpus": 1.0, "pids": 512, "peak_memory_bytes": 900 << 20},
        "foreign_processes": [], "host_load": [], "world_title": world_title,
        "summary_run": f"The agent ran {minutes:.1f} minutes, one try, no help; the finish-now message (from 90 minutes) was sent {fn_sent} times. {requests} requests, no error, none blocked, none shortened ({tp:,} prompt tokens, {ta:,} answer tokens).",
        "summary_versions": f"{n_versions} versions of the page were seen on the way and {len(loaded)} loaded without errors; the last one counts.",
    }, indent=2))
    (run / "final-choice.json").write_text(json.dumps({
        "schema_version": 1, "n": chosen, "sha256": next(r["sha256"] for r in vrows if r["n"] == chosen),
        "file": next(r["file"] for r in vrows if r["n"] == chosen), "is_final_file": chosen == n_versions,
        "rule": "final_file_loads" if chosen == n_versions else "last_version_that_loads",
        "rule_text": "the final file loads without errors, so it counts" if chosen == n_versions else "the last version that loads without errors counts",
        "versions_seen": n_versions, "candidates": [],
    }))
    points = points or {}
    items = []
    for item_id, item_name, max_p in ITEMS:
        got = points.get(item_id, max_p)
        figures = {"fps": 1.3} if item_id == "5" else ({"text_sample": HOSTILE} if item_id == "6b" else {"value": 1})
        items.append({"id": item_id, "name": item_name, "points": got, "max_points": max_p, "passed": got >= max_p,
                      "figures": figures, "reason": f"{item_name}: measured"})
    total = sum(i["points"] for i in items)
    (run / "check.json").write_text(json.dumps({
        "page": "game.html", "page_sha256": "00" * 32, "rubric_version": "1", "showcase_version": "0.1.0",
        "chromium_version": "156", "renderer": "swiftshader", "webgl_renderer": "ANGLE (SwiftShader)", "viewport": [1280, 720],
        "started_at": start.isoformat(), "seconds": 60.0, "items": items, "total": total, "max_total": 10.0,
        "summary": f"Browser check {total:.1f} out of 10: the page loads without a page error.", "errors": [],
    }, indent=2))
    make_png(run / "screenshot.png", (1280, 720), len(name))
    if clip_source is not None:
        shutil.copyfile(clip_source, run / "clip.mp4")
        (run / "clip.json").write_text(json.dumps({
            "path": "clip.mp4", "seconds": 2.0, "fps": 30, "size": [320, 180], "frames": 60, "rendered_frames": 60,
            "distinct_frames": 58, "mode": "virtual", "frame_times_ms": [i * 33.3 for i in range(60)],
            "page_errors": [], "note": None, "wall_seconds": 9.5, "renderer": "ANGLE (llvmpipe)",
        }))
    return run
