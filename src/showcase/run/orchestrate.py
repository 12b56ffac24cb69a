"""`showcase run`: the voxel task from an empty folder to a scored result, and `finalize`.

Everything is written as it happens (versions, gate log, events), so if showcase itself is
killed mid-run nothing is lost and `finalize` completes the run from disk.
"""

import asyncio
import datetime as dt
import hashlib
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel

from showcase import __version__
from showcase.errors import UserError
from showcase.io import append_jsonl, read_jsonl, terminate_torn_line
from showcase.run.layout import RunLayout
from showcase.run.options import RunOptions
from showcase.run.shot import shot_route, write_tools
from showcase.task import Task, load_task

Progress = Callable[[str], None]

POLL_S = 0.5  # how often the supervisor looks at the agent; the watcher itself is event-driven
RUN_LABEL = "showcase.run"  # container label naming the run folder, so finalize can find leftovers


class RunEvent(BaseModel):
    t_s: float
    at: str
    event: str
    detail: dict = {}


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _tool_version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


class EventLog:
    """events.jsonl: the run's own timeline (append-only, one fsynced line per event)."""

    def __init__(self, path: Path, t0: float):
        self.path, self.t0 = path, t0

    def __call__(self, event: str, **detail) -> None:
        append_jsonl(self.path, RunEvent(t_s=round(time.monotonic() - self.t0, 3), at=_now_iso(), event=event, detail=detail))


def preflight(opts: RunOptions) -> tuple[Task, "object", dict]:
    """Bad input before anything starts: each a one-line error naming the fix (exit 2)."""
    from showcase.gate.config import load_sampling
    from showcase.gate.probe import probe_upstream
    from showcase.harness import load_harness
    from showcase.sandbox.base import get_backend, known_backends

    task = load_task(opts.task)
    harness = load_harness(opts.harness)
    layout = RunLayout(opts.out)
    if layout.holds_a_run():
        raise UserError(
            f"{opts.out} already holds a run; complete it with `showcase finalize {opts.out}` or choose another --out"
        )
    sampling = load_sampling(opts.sampling_file) if opts.sampling_file else {}
    if opts.backend not in known_backends():
        raise UserError(f"unknown sandbox backend {opts.backend!r}; known: {', '.join(known_backends())}")
    reason = get_backend(opts.backend).unavailable_reason()
    if reason:
        raise UserError(f"sandbox backend {opts.backend}: {reason}")
    reason = asyncio.run(probe_upstream(opts.upstream, opts.model, opts.upstream_key, timeout_s=15))
    if reason:
        raise UserError(reason)  # the probe's reason names the upstream and what is wrong
    return task, harness, sampling


def _quick_check_dict(npm_dir: Path | None):
    """The browser's quick load check, as the shot endpoint and the watcher want it."""
    from showcase.check.quick import load_check

    async def check(html: bytes, png: Path | None) -> dict:
        result = await load_check(html, screenshot_path=png, npm_dir=npm_dir)
        return result.model_dump(mode="json")

    return check


def execute_run(opts: RunOptions, say: Progress = print) -> Path:
    """Run the task once, sealed, and leave every file of spec/run-artefacts.md in opts.out."""
    from showcase.gate.app import create_gate
    from showcase.gate.config import GateConfig
    from showcase.gate.server import GateServer
    from showcase.harness import render_launch
    from showcase.run.artefacts import CommandLine, SamplingFile
    from showcase.io import write_json_atomic
    from showcase.run.egress import EgressWatch
    from showcase.run.monitor import ForeignProcessMonitor
    from showcase.run.watcher import Watcher
    from showcase.sandbox.base import Mount, SandboxSpec, get_backend
    from showcase.sandbox.image import ensure_image

    task, harness, sampling = preflight(opts)
    layout = RunLayout(opts.out)
    layout.make()
    limit_s = opts.limit_s if opts.limit_s is not None else task.limits.limit_s
    inject_s = opts.inject_after_s if opts.inject_after_s is not None else task.limits.inject_after_s
    answer_limit = opts.answer_limit if opts.answer_limit is not None else task.limits.answer_limit
    CommandLine.from_argv(opts.command_line).write(layout.command)
    write_json_atomic(
        layout.sampling,
        SamplingFile(fields=sampling, source="file" if opts.sampling_file else "none",
                     source_path=str(opts.sampling_file) if opts.sampling_file else None),
    )
    (layout.task_dir / "prompt.txt").write_bytes(task.prompt_bytes)
    write_tools(layout.tools_dir)

    say(f"image: sandbox image for harness {harness.id} (built once, cached by content hash)")
    image = ensure_image(harness, base=opts.base_image, progress=lambda msg: say(f"  {msg}"))
    quick_check = _quick_check_dict(opts.npm_dir)
    key = secrets.token_urlsafe(24)
    gate = create_gate(
        GateConfig(
            upstream=opts.upstream,
            model=opts.model,
            api_key_upstream=opts.upstream_key,
            key=key,
            sampling=sampling,
            sampling_source=str(opts.sampling_file) if opts.sampling_file else None,
            answer_limit=answer_limit,
            finish_now_after_s=inject_s,
            finish_now_text=task.finish_now_text,
            hard_stop_after_s=limit_s,
            log_dir=layout.root,
        ),
        extra_routes=[shot_route(layout.work, quick_check)],
    )
    spec = SandboxSpec(
        image=image,
        workdir_host=layout.work,
        gate_dir_host=layout.gate_dir,
        extra_mounts=[
            Mount(host=layout.task_dir, container="/task", read_only=True),
            Mount(host=layout.tools_dir, container="/opt/tools", read_only=True),
            Mount(host=layout.agent_dir, container="/logs", read_only=False),
        ],
        api_key=key,
        memory=opts.memory,
        cpus=opts.cpus,
        **({"pids_limit": opts.pids_limit} if opts.pids_limit else {}),
        labels={RUN_LABEL: str(layout.root.resolve())},
    )
    _write_contract(layout, opts, task, harness, sampling, spec, image, limit_s, inject_s, answer_limit)
    if os.geteuid() == 0:
        os.chown(layout.agent_dir, spec.uid, spec.gid)  # the agent writes its trajectory there
    sandbox = get_backend(opts.backend)()
    server = GateServer(gate, listen=[f"unix:{layout.gate_dir / 'gate.sock'}"])
    server.start()
    t0 = time.monotonic()
    events = EventLog(layout.events_log, t0)
    events("run_started", started_at=_now_iso(), start_epoch=time.time())
    watcher = monitor = egress = None
    try:
        watcher = Watcher(
            layout.work,
            layout.root,
            file_name=task.output_file,
            clock=lambda: time.monotonic() - t0,
            last_request_id=lambda: gate.last_request_id,
            load_check=_watcher_check(quick_check),
        )
        watcher.start()
        say("sandbox: starting (network none; the gate is the only way out)")
        sandbox.start(spec)
        egress = EgressWatch.start(_container_pid(sandbox))
        monitor = ForeignProcessMonitor(run_pids=lambda: _container_pids(sandbox))
        monitor.start()
        command, env = render_launch(
            harness,
            model=opts.model,
            prompt=task.prompt_bytes.decode(),
            prompt_file="/task/prompt.txt",
            base_url=spec.relay_url,
            api_key=key,
        )
        env = {"PATH": "/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **env}
        gate.start_clock()
        t0 = time.monotonic()  # the run's clock is the gate's: finish-now and hard stop count from here
        events.t0 = t0
        events("agent_started", harness=harness.id, limit_s=limit_s, inject_after_s=inject_s, start_epoch=time.time())
        say(f"agent: started; finish-now from {inject_s:.0f} s, hard stop at {limit_s:.0f} s")
        sandbox.start_process(command, env=env, log_path=layout.agent_log)
        _supervise(sandbox, gate, events, t0, limit_s, layout, harness, say)
    finally:
        # Whatever happened above, leave nothing running and keep what was seen.
        gate.hard_stop()
        exit_info = _safe(sandbox.exit_info)
        _safe(sandbox.kill)
        if watcher is not None:
            watcher.stop(timeout_s=180)
        foreign = monitor.stop() if monitor is not None else []
        outside = egress.stop() if egress is not None else None
        host_load = monitor.load_samples if monitor is not None else []
        _safe(sandbox.remove)
        leaks = _safe(sandbox.leak_audit)
        server.stop()
        events(
            "sandbox_removed",
            exit=exit_info.model_dump(mode="json") if exit_info is not None else None,
            leaks=leaks if leaks is not None else ["leak audit failed"],
            foreign=[p.model_dump(mode="json") for p in foreign],
            host_load=[s.model_dump(mode="json") for s in host_load],
            outside_attempts=outside.model_dump(mode="json") if outside is not None else None,
        )
    return finalize(layout.root, say=say, npm_dir=opts.npm_dir, clip=opts.clip, clip_seconds=opts.clip_seconds)


def _container_pid(sandbox) -> int | None:
    """The container's first process on the host (for its network namespace)."""
    container = getattr(sandbox, "container", None)
    try:
        container.reload()
        return int(container.attrs["State"]["Pid"]) or None
    except Exception:
        return None


def _container_pids(sandbox) -> list[int]:
    container = getattr(sandbox, "container", None)
    if container is None:
        return []
    try:
        top = container.top(ps_args="-eo pid")
        return [int(row[0]) for row in top.get("Processes") or []]
    except Exception:
        return []


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def _watcher_check(quick_check):
    def check(html: bytes) -> tuple[bool, list[str]]:
        result = asyncio.run(quick_check(html, None))
        return bool(result["loads"]), list(result.get("errors") or [])

    return check


def _agent_said_done(layout: RunLayout, harness) -> bool:
    """Did the agent end by saying it was done? Its structured output, or its output and the files it left in /logs."""
    from showcase.harness import said_done

    def read(path: Path, limit: int = 8 << 20) -> bytes:
        # The tail is what tells how it ended; the agent decides how big these files get.
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - limit))
                return f.read(limit)
        except OSError:
            return b""

    others = [read(p) for p in sorted(layout.agent_dir.glob("*")) if p.is_file() and p != layout.agent_log]
    return said_done(harness, read(layout.agent_log), others)


def _supervise(sandbox, gate, events: EventLog, t0: float, limit_s: float, layout: RunLayout, harness,
               say: Progress) -> str:
    """Wait for the agent to end or the hard stop; return how the agent ended."""
    announced_finish_now = False
    last_say = 0.0
    while True:
        elapsed = time.monotonic() - t0
        info = sandbox.wait(timeout_s=max(0.05, min(POLL_S, limit_s - elapsed)))
        if info.how != "running":
            if info.oom_killed or info.how == "oom":
                how = "oom"
            elif info.exit_code == 0:
                how = "done" if _agent_said_done(layout, harness) else "exit"
            else:
                how = "crashed"
            events("agent_ended", how=how, exit_code=info.exit_code)
            say(f"agent: ended ({how}, exit code {info.exit_code}) after {elapsed / 60:.1f} min")
            return how
        stats = gate.stats
        if not announced_finish_now and stats.finish_now_count > 0:
            announced_finish_now = True
            events("finish_now_first", at_s=stats.finish_now_first_s)
            say(f"gate: finish-now message sent (first at {stats.finish_now_first_s:.0f} s)")
        if elapsed >= limit_s:
            gate.hard_stop()
            events("hard_stop", at_s=round(elapsed, 3))
            say(f"clock: hard stop at {elapsed:.0f} s; agent and container killed")
            sandbox.kill()
            return "killed_at_hard_stop"
        if elapsed - last_say >= 30:
            last_say = elapsed
            say(f"  {elapsed / 60:5.1f} min: {stats.requests} requests, {stats.prompt_tokens + stats.answer_tokens:,} tokens")


def read_events(layout: RunLayout) -> list[RunEvent]:
    """The run's timeline; a line torn by a kill -9 mid-write is skipped, the lines before it count."""
    return [RunEvent.model_validate(row) for row in read_jsonl(layout.events_log)]


def _kill_leftovers(layout: RunLayout, say: Progress) -> bool:
    """After showcase itself died mid-run, its container may still run: stop it first."""
    try:
        import docker

        client = docker.from_env(timeout=20)
        leftovers = client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={layout.root.resolve()}"})
    except Exception:
        return False
    for c in leftovers:
        say(f"finalize: removing the run's leftover container {c.name}")
        try:
            c.remove(force=True)
        except Exception as exc:
            say(f"finalize: could not remove {c.name}: {exc}")
    return bool(leftovers)


def _ffmpeg_version() -> str | None:
    line = _tool_version(["ffmpeg", "-version"])
    return line.split(" Copyright")[0] if line else None


def _write_contract(layout, opts: RunOptions, task: Task, harness, sampling: dict, spec, image: str,
                    limit_s: float, inject_s: float, answer_limit: int) -> None:
    from showcase.browser.launch import chromium_version
    from showcase.check.rubric import load_rubric
    from showcase.run.artefacts import Contract, ContractLimits, HarnessInfo, ImageInfo, SandboxLimits, ToolVersions
    from showcase.io import write_json_atomic
    from showcase.sandbox.base import parse_size
    from showcase.sandbox.image import image_digest

    contract = Contract(
        task_id=task.id,
        prompt_sha256=hashlib.sha256(task.prompt_bytes).hexdigest(),
        limits=ContractLimits(hard_stop_s=limit_s, finish_now_after_s=inject_s, answer_limit=answer_limit,
                              context_size=opts.ctx),
        harness=HarnessInfo(id=harness.id, version=harness.version),
        model=opts.model,
        upstream_url=opts.upstream,
        sampling=sampling,
        sandbox_limits=SandboxLimits(memory_bytes=parse_size(spec.memory), cpus=spec.cpu_limit,
                                     pids=spec.pids_limit, network=spec.network,
                                     read_only_root=spec.read_only_root, user=spec.user),
        image=ImageInfo(id=image_digest(image), tag=image),
        versions=ToolVersions(showcase=__version__, chromium=chromium_version(), ffmpeg=_ffmpeg_version()),
        checker_rubric_version=load_rubric().version,
        timezone="UTC",
        seeds={},
    )
    write_json_atomic(layout.contract, contract)


def finalize(run_dir: Path, say: Progress = print, npm_dir: Path | None = None, clip: bool = True,
             clip_seconds: float = 15) -> Path:
    """Complete a run from what is on disk: final choice, check, clip, run-info, report.

    Used at the end of every run, and on its own after showcase itself was killed mid-run.
    """
    from showcase.gate.log import GateStats, read_log
    from showcase.run.artefacts import ContainerLimits, Contract, ForeignProcess, LoadSample, RunInfo
    from showcase.run.final_choice import choose_final
    from showcase.io import write_json_atomic
    from showcase.run.summary import with_summary
    from showcase.run.title import world_title
    from showcase.run.watcher import recover_versions

    layout = RunLayout(Path(run_dir))
    if not layout.contract.is_file():
        raise UserError(f"{run_dir} is not a run folder (no contract.json)")
    contract = Contract.model_validate_json(layout.contract.read_text())
    events = read_events(layout)
    start = next((e for e in events if e.event == "run_started"), None)
    interrupted = not any(e.event == "sandbox_removed" for e in events)
    if interrupted:
        # showcase died mid-run: the agent may still be working. Stop it; what it wrote is kept.
        say("finalize: the run was interrupted; stopping what is left of it")
        _kill_leftovers(layout, say)
        terminate_torn_line(layout.events_log)
        log = EventLog(layout.events_log, time.monotonic())
        log("finalized_after_interruption", at=_now_iso())
    agent_start = next((e for e in events if e.event == "agent_started"), None)
    start_epoch = agent_start.detail.get("start_epoch") if agent_start else None
    recovered = recover_versions(layout.root, start_epoch=start_epoch)
    if recovered:
        say(f"finalize: {len(recovered)} version(s) recovered from versions/")
    versions = _catch_up_versions(layout, start_epoch, npm_dir, say)

    final_path = layout.work / "game.html"
    final_sha = hashlib.sha256(final_path.read_bytes()).hexdigest() if final_path.is_file() else None
    choice = choose_final(versions, final_sha)
    write_json_atomic(layout.final_choice, choice)
    say(f"final choice: {choice.rule_text}")

    chosen = layout.versions_dir / choice.file if choice.file else None
    if chosen is not None:
        from showcase.check.runner import check_file

        say(f"check: scoring version {choice.n} in Chromium (software GL)")
        report = check_file(chosen, layout.root, npm_dir=npm_dir)
        say(report.summary)
        if clip:
            from showcase.clip import record_clip_file

            say(f"clip: recording {clip_seconds:.0f} s on a virtual clock")
            result = record_clip_file(chosen, layout.clip, seconds=clip_seconds, npm_dir=npm_dir)
            write_json_atomic(layout.clip_info, result)
            if result.note:
                say(f"clip: {result.note}")

    stats = _gate_stats(layout, GateStats, read_log)
    ended = _how_agent_ended(events, interrupted)
    removed = next((e for e in reversed(events) if e.event == "sandbox_removed"), None)
    started_at = start.at if start else _mtime_iso(layout.contract)
    end_event = next((e for e in reversed(events) if e.event in ("agent_ended", "hard_stop")), None)
    run_s = (end_event.t_s if end_event else (events[-1].t_s if events else 0.0)) - (agent_start.t_s if agent_start else 0.0)
    info = RunInfo(
        started_at=started_at,
        ended_at=end_event.at if end_event else _now_iso(),
        minutes_run=round(max(0.0, run_s) / 60, 2),
        agent_end=ended["how"],
        agent_exit_code=ended.get("exit_code"),
        finish_now_after_s=contract.limits.finish_now_after_s,
        finish_now_sent=stats.finish_now_count,
        finish_now_first_s=stats.finish_now_first_s,
        requests=stats.requests,
        errors=stats.errors,
        blocked=stats.blocked,
        shortened=stats.shortened,
        prompt_tokens=stats.prompt_tokens,
        answer_tokens=stats.answer_tokens,
        versions_seen=len(versions),
        versions_loaded_without_errors=sum(1 for v in versions if v.loaded_without_errors),
        container_limits=ContainerLimits(
            memory_bytes=contract.sandbox_limits.memory_bytes,
            cpus=contract.sandbox_limits.cpus,
            pids=contract.sandbox_limits.pids,
        ),
        foreign_processes=[ForeignProcess(**p) for p in (removed.detail.get("foreign") or [])] if removed else [],
        host_load=[LoadSample(**s) for s in (removed.detail.get("host_load") or [])] if removed else [],
        world_title=world_title(chosen.read_bytes()) if chosen is not None else None,
        leaks=removed.detail.get("leaks") if removed else None,
        outside_attempts=(removed.detail.get("outside_attempts") or None) if removed else None,
    )
    info = with_summary(info, versions, choice)
    write_json_atomic(layout.run_info, info)
    say(info.summary_run)
    say(info.summary_versions)
    from showcase.report import write_run_report

    write_run_report(layout.root)
    say(f"report: {layout.report}")
    return layout.root


def _mtime_iso(path: Path) -> str:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).isoformat(timespec="seconds")


def _catch_up_versions(layout: RunLayout, start_epoch: float | None, npm_dir: Path | None, say: Progress):
    """Take the file as it is now if it is new, and load-check every version not checked yet."""
    from showcase.run.watcher import Watcher

    watcher = Watcher(
        layout.work,
        layout.root,
        clock=(lambda: time.time() - start_epoch) if start_epoch else None,
        load_check=_watcher_check(_quick_check_dict(npm_dir)),
    )
    unchecked = [v for v in watcher.versions if v.loaded_without_errors is None and v.check_failure is None]
    if unchecked:
        say(f"finalize: load-checking {len(unchecked)} version(s)")
    watcher.start()
    return watcher.stop(timeout_s=600)


def _gate_stats(layout: RunLayout, GateStats, read_log):
    """gate-stats.json as the gate kept it; rebuilt from gate.log if it is missing or torn."""
    try:
        return GateStats.model_validate_json(layout.gate_stats.read_text())
    except (OSError, ValueError):
        pass
    now = _now_iso()
    stats = GateStats(started_at=now, updated_at=now)
    lines = read_log(layout.gate_log) if layout.gate_log.exists() else []
    for line in lines:
        if line.kind != "api":
            stats.tool_requests += 1
            continue
        stats.requests += 1
        stats.errors += bool(line.error)
        stats.blocked += line.blocked
        stats.shortened += line.shortened
        stats.prompt_tokens += line.prompt_tokens or 0
        stats.answer_tokens += line.answer_tokens or 0
        if line.injected:
            stats.finish_now_count += 1
            if stats.finish_now_first_s is None:
                stats.finish_now_first_s, stats.finish_now_first_at = line.t_s, line.time
    return stats


def _how_agent_ended(events: list[RunEvent], interrupted: bool) -> dict:
    for e in reversed(events):
        if e.event == "agent_ended":
            return {"how": e.detail.get("how", "exit"), "exit_code": e.detail.get("exit_code")}
        if e.event == "hard_stop":
            return {"how": "killed_at_hard_stop"}
    # No end was seen: showcase itself stopped first (killed, or the sandbox failed to start).
    return {"how": "interrupted" if interrupted else "crashed"}
