"""Write plausible run folders for the report tests: every file on the model its writer uses
(showcase.runfolder.artefacts and the gate's, check's and clip's models), written by the project's
own writers (showcase.io), with a real PNG (Pillow) and a real H.264 clip (ffmpeg). A renamed
field fails here, before any report is drawn.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from PIL import Image, ImageDraw

from showcase.check.models import CheckReport, ItemResult
from showcase.check.rubric import load_rubric
from showcase.clip.model import ClipResult
from showcase.gate.log import GateLogLine, GateStats
from showcase.host.monitor import ForeignProcess, LoadSample
from showcase.io import append_jsonl, write_json_atomic
from showcase.runfolder.artefacts import (
    CommandLine, ContainerLimits, Contract, ContractLimits, HarnessInfo, ImageInfo, RunEvent,
    RunInfo, RunLayout, SamplingFile, SandboxLimits, ToolVersions, VersionRecord,
)
from showcase.run.final_choice import choose_final
from showcase.run.shot import SHOT_PATH
from showcase.run.summary import with_summary
from showcase.task import load_task

REPO = Path(__file__).resolve().parents[1]
# A real page of the task (three.js from the import map, window.ready): the live page's test plays it.
REAL_PAGE = REPO / "examples" / "voxel.html"

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


def _jsonl(path: Path, rows: list, cut_last: bool = False) -> None:
    for row in rows:
        append_jsonl(path, row)
    if cut_last:  # a run killed while writing its last line
        last = len(rows[-1].model_dump_json()) + 1
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size - last // 2 - 1)


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
    agent_shots: int = 0,
    world_title: str = "Voxel Isles",
    shot_calls: int = 0,
    pictures: bool = False,
    real_last_page: bool = False,
    foreign: int = 0,
) -> Path:
    """One run folder. finalized=False leaves what a run killed mid-way leaves: no run-info, no
    final choice, no check, no clip, and a cut last line in versions.jsonl.

    shot_calls: shot.sh calls in gate.log (kind 'tool'), which are not requests to the model;
    pictures: each version's load check kept versions/NNN.png (VersionRecord.picture);
    real_last_page: the last version is examples/voxel.html; foreign: other processes seen."""
    run = root / name
    layout = RunLayout(run)
    layout.versions_dir.mkdir(parents=True)
    start = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)
    span_s = minutes * 60
    task = load_task("voxel")
    layout.task_dir.mkdir(parents=True)
    (layout.task_dir / "prompt.txt").write_bytes(task.prompt_bytes)
    CommandLine(argv=["showcase", "run", "--task", "voxel", "--harness", harness, "--upstream", "http://127.0.0.1:8000/v1",
                      "--model", model, "--out", f"runs/{name}"]).write(layout.command)
    sampling = {"temperature": 0.6, "top_p": 0.95, "max_tokens": 262144}
    write_json_atomic(layout.contract, Contract(
        task_id="voxel", prompt_sha256=hashlib.sha256(task.prompt_bytes).hexdigest(),
        limits=ContractLimits(hard_stop_s=7200, finish_now_after_s=5400, answer_limit=262144, context_size=262144),
        harness=HarnessInfo(id=harness, version="0.3"), model=model, upstream_url="http://127.0.0.1:8000/v1",
        sampling=sampling, sandbox_limits=SandboxLimits(memory_bytes=4 << 30, cpus=1.0, pids=512, user="agent"),
        image=ImageInfo(id="sha256:" + "ab" * 32, tag=f"showcase-sandbox-{harness}:1234"),
        versions=ToolVersions(showcase="0.1.0", chromium="Chromium 156.0", ffmpeg="5.1.9"),
        checker_rubric_version=load_rubric().version, timezone="UTC", seeds={"check": 1},
    ))
    write_json_atomic(layout.sampling, SamplingFile(fields=sampling, source="file", source_path="sampling.json"))

    # gate.log + gate-stats.json
    lines, tp, ta = [], 0, 0
    for i in range(requests):
        t = span_s * (i + 1) / requests - 1.0
        p, a = 20000 + 9000 * i, 800 + 150 * (i % 4)
        tp, ta = tp + p, ta + a
        lines.append(GateLogLine(
            time=(start + timedelta(seconds=t)).isoformat().replace("+00:00", "Z"), t_s=round(t, 3), id=f"r{i + 1:04d}",
            kind="api", method="POST", path="/v1/chat/completions", api="chat", stream=True, status=200,
            prompt_tokens=p, answer_tokens=a, latency_ms=900.0, finish_reason="stop", injected=t >= 5400,
        ))
    for k in range(shot_calls):  # the agent's quick load checks: the run's own endpoint, not the model
        t = span_s * (k + 0.7) / (shot_calls + 1)
        lines.append(GateLogLine(
            time=(start + timedelta(seconds=t)).isoformat().replace("+00:00", "Z"), t_s=round(t, 3), id=f"t{k + 1:04d}",
            kind="tool", method="POST", path=SHOT_PATH, status=200, latency_ms=2500.0,
        ))
    lines.sort(key=lambda line: line.t_s)
    _jsonl(layout.gate_log, lines)
    lines = [line for line in lines if line.kind == "api"]
    fn_first = next((line.t_s for line in lines if line.injected), None)
    fn_sent = sum(1 for line in lines if line.injected)
    write_json_atomic(layout.gate_stats, GateStats(
        started_at=start.isoformat(), clock_started_at=start.isoformat(), updated_at=start.isoformat(),
        requests=requests, prompt_tokens=tp, answer_tokens=ta, finish_now_count=fn_sent, finish_now_first_s=fn_first,
        tool_requests=shot_calls, last_request_id=lines[-1].id if lines else None,
    ))

    # versions/ + versions.jsonl (seen line, then a load_checked update with the same n)
    vrows = []
    for n in range(1, n_versions + 1):
        body = f"<!doctype html><title>v{n}</title><p>version {n} of {name}</p>".encode()
        if real_last_page and n == n_versions:
            body = REAL_PAGE.read_bytes()
        sha = hashlib.sha256(body).hexdigest()
        fname = f"{n:04d}-{sha[:8]}.html"
        (layout.versions_dir / fname).write_bytes(body)
        seen = VersionRecord(n=n, event="seen", t_s=round(span_s * n / (n_versions + 1), 2), sha256=sha, size=len(body),
                             last_request_id=f"r{max(1, n * requests // (n_versions + 1)):04d}", file=fname)
        ok = n not in failed_versions
        picture = None
        if pictures:
            picture = make_png(layout.versions_dir / f"{n:03d}.png", (640, 360), 7 * n).relative_to(run).as_posix()
        vrows += [seen, seen.model_copy(update={
            "event": "load_checked", "loaded_without_errors": ok, "picture": picture,
            "load_errors": [] if ok else ["Uncaught ReferenceError: THREE is not defined\n    at game.html:12"]})]
    _jsonl(layout.versions_log, vrows, cut_last=not finalized)
    # shot.sh screenshots as the gate's shot endpoint names them; shot k halfway after version k
    for k in range(1, agent_shots + 1):
        shot = make_png(layout.shots_dir / f"shot-{k:03d}.png", (320, 180), 40 + k)
        when = start.timestamp() + span_s * (k + 0.5) / (n_versions + 1)
        os.utime(shot, (when, when))

    # as showcase.run.orchestrate logs them: t_s on the run's clock, the moment itself in detail.at_s
    at = lambda t: (start + timedelta(seconds=t)).isoformat()  # noqa: E731
    events = [
        RunEvent(t_s=0.0, at=at(0), event="run_started", detail={"started_at": at(0), "start_epoch": start.timestamp()}),
        RunEvent(t_s=0.0, at=at(0), event="agent_started",
                 detail={"harness": harness, "limit_s": 7200, "inject_after_s": 5400, "start_epoch": start.timestamp()}),
    ]
    if fn_first is not None:  # noticed by the supervisor up to a second later
        events.append(RunEvent(t_s=fn_first + 0.8, at=at(fn_first + 0.8), event="finish_now_first", detail={"at_s": fn_first}))
    if finalized:
        events.append(RunEvent(t_s=span_s, at=at(span_s), event="agent_ended", detail={"how": "done", "exit_code": 0}))
    _jsonl(layout.events_log, events)

    if not finalized:
        return run

    versions = [r for r in vrows if r.event == "load_checked"]
    choice = choose_final(versions, versions[-1].sha256 if versions else None)
    write_json_atomic(layout.final_choice, choice)
    loaded = sum(1 for v in versions if v.loaded_without_errors)
    write_json_atomic(layout.run_info, with_summary(RunInfo(
        started_at=start.isoformat(), ended_at=at(span_s), minutes_run=minutes, agent_end="done", agent_exit_code=0,
        finish_now_after_s=5400, finish_now_sent=fn_sent, finish_now_first_s=fn_first, requests=requests, errors=0,
        blocked=0, shortened=0, prompt_tokens=tp, answer_tokens=ta, versions_seen=n_versions,
        versions_loaded_without_errors=loaded,
        container_limits=ContainerLimits(memory_bytes=4 << 30, cpus=1.0, pids=512, peak_memory_bytes=900 << 20),
        world_title=world_title,
        foreign_processes=[
            ForeignProcess(pid=1000 + i, name=f"proc{i}", cmdline=f"/usr/bin/proc{i} --work {i}",
                           peak_cpu_percent=90.0 - i, cpu_seconds=600.0 - 10 * i) for i in range(foreign)
        ],
        host_load=[LoadSample(t_s=60.0 * i, load1=1.0 + i % 3, load5=1.5, load15=1.2) for i in range(20)],
    ), versions, choice))
    points = points or {}
    rubric = load_rubric()
    items = []
    for item_id, spec in rubric.items.items():
        got = points.get(item_id, spec.points)
        figures = {"5": {"fps": 1.3, "frames": 7}, "6a": {"parts": 50269, "triangles": 609760, "counted_by": "scene graph"},
                   "6b": {"text_sample": HOSTILE}}.get(item_id, {"value": 1})
        items.append(ItemResult(id=item_id, name=spec.name, points=got, max_points=spec.points, passed=got >= spec.points,
                                figures=figures, reason=f"{spec.name}: measured"))
    total = sum(i.points for i in items)
    write_json_atomic(layout.check, CheckReport(
        page="game.html", page_sha256="00" * 32, rubric_version=rubric.version, showcase_version="0.1.0",
        chromium_version="156", renderer=rubric.renderer, webgl_renderer="ANGLE (SwiftShader)", viewport=rubric.viewport,
        started_at=start.isoformat(), seconds=60.0, items=items, total=total, max_total=rubric.max_total,
        summary=f"Browser check {total:.1f} out of 10: the page loads without a page error.",
    ))
    make_png(layout.screenshot, (1280, 720), len(name))
    if clip_source is not None:
        shutil.copyfile(clip_source, layout.clip)
        write_json_atomic(layout.clip_info, ClipResult(
            path="clip.mp4", seconds=2.0, fps=30, size=(320, 180), frames=60, rendered_frames=60, distinct_frames=58,
            mode="virtual", frame_times_ms=[i * 33.3 for i in range(60)], wall_seconds=9.5, renderer="ANGLE (llvmpipe)",
        ))
    return run
