"""`showcase run`: a task from an empty folder to a scored result, and `finalize`.

Everything is written as it happens (versions, gate log, events), so if showcase itself is
killed mid-run nothing is lost and `finalize` completes the run from disk.
"""

import asyncio
import datetime as dt
import hashlib
import math
import os
import secrets
import subprocess
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


from showcase import __version__
from showcase.errors import InfraError, UserError
from showcase.host.lock import hold_final_check, release_final_check
from showcase.host.untrusted import DEFAULT_PAGE_CAP, Refused, open_dir, read_tail_at
from showcase.io import append_jsonl, read_jsonl, terminate_torn_line
from showcase.run.options import RunOptions
from showcase.run.shot import shot_route, write_tools
from showcase.runfolder.artefacts import RunEvent, RunLayout, ShotFigures
from showcase.sandbox.base import RUN_LABEL, EngineUnanswered, ExitInfo
from showcase.task import DEFAULT_OUTPUT_FILE, Task, load_task
from showcase.visible import visible

Progress = Callable[[str], None]

POLL_S = 0.5  # how often the supervisor looks at the agent; the watcher itself is event-driven
LIFETIME_GRACE_S = 45  # the container ends itself this long after the hard stop, even if showcase is dead
SPACE_FOLDERS = ["work", "agent"]  # what the agent writes (/work, /logs): one image, one cap


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


def sweep_leftovers(backend: str | None, say: Progress) -> None:
    """Remove what dead runs left behind (their containers, their mounted spaces); never a live run's.

    backend None: every known backend's (finalize does not know which one the run used)."""
    from showcase.sandbox.base import get_backend, known_backends
    from showcase.sandbox.space import sweep_mounts

    try:
        lines = [line for name in ([backend] if backend else known_backends())
                 for line in get_backend(name).remove_leftovers()] + sweep_mounts()
    except Exception as exc:  # a sweep that fails must not stop this run
        lines = [f"leftover sweep failed: {exc}"]
    for line in lines:
        say(f"cleanup: {line}")


def preflight(opts: RunOptions) -> "RunPlan":
    """Bad input before anything starts: each a one-line error naming the fix (exit 2)."""
    from showcase.gate.config import load_sampling
    from showcase.gate.probe import probe_upstream
    from showcase.harness import load_harness
    from showcase.sandbox.base import get_backend, known_backends

    task = load_task(opts.task)
    check_limits(opts, task)
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
    from showcase.sandbox.base import parse_size
    from showcase.sandbox.space import unavailable_reason as space_unavailable

    try:
        disk = parse_size(opts.disk)
    except UserError:
        raise UserError(f"--disk {opts.disk!r} is not a size: use e.g. 4g or 512m") from None
    if disk < 16 << 20:
        raise UserError(f"--disk {opts.disk!r} is too small: use at least 16m (default 4g)")

    reason = space_unavailable()
    if reason:
        raise InfraError(f"disk cap: {reason}")
    reason = asyncio.run(probe_upstream(opts.upstream, opts.model, opts.upstream_key, timeout_s=15))
    if reason:
        from showcase.runfolder.artefacts import redact_text

        raise UserError(redact_text(reason))  # names the upstream (credentials removed) and what is wrong
    return RunPlan(opts=opts, task=task, harness=harness, sampling=sampling, **run_limits(opts, task))


def run_limits(opts: RunOptions, task: Task) -> dict:
    """The hard stop, the finish-now second and the answer limit: the user's, else the task's."""
    return dict(
        limit_s=opts.limit_s if opts.limit_s is not None else task.limits.limit_s,
        inject_s=opts.inject_after_s if opts.inject_after_s is not None else task.limits.inject_after_s,
        answer_limit=opts.answer_limit if opts.answer_limit is not None else task.limits.answer_limit,
    )


def _bad_number(value: float, allow_zero: bool) -> bool:
    return not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero)


def check_limits(opts: RunOptions, task: Task) -> None:
    """Every limit finite and above 0 (finish-now may start at 0): `inf` would never stop a run."""
    limits = run_limits(opts, task)
    checks = [
        ("--limit-s", limits["limit_s"], False, "seconds, e.g. --limit-s 7200"),
        ("--inject-after-s", limits["inject_s"], True, "seconds, e.g. --inject-after-s 5400"),
        ("--answer-limit", limits["answer_limit"], False, "tokens, e.g. --answer-limit 262144"),
        ("the clip's length", opts.clip_seconds, False, "seconds, e.g. 15"),
    ]
    if opts.cpus is not None:
        checks.append(("--cpus", opts.cpus, False, "CPUs, e.g. --cpus 2"))
    if opts.ctx is not None:
        checks.append(("--ctx", opts.ctx, False, "tokens, e.g. --ctx 131072"))
    if opts.pids_limit is not None:
        checks.append(("--pids-limit", opts.pids_limit, False, "processes, e.g. --pids-limit 512"))
    for flag, value, allow_zero, unit in checks:
        if _bad_number(float(value), allow_zero):
            least = "0 or more" if allow_zero else "above 0"
            raise UserError(f"{flag} {value}: must be a finite number {least}, in {unit}")


MAX_REFUSALS = 100
MAX_REFUSED_NAME = 200


def _refusal_recorder(layout: RunLayout, events: "EventLog"):
    """Record each refused agent entry once per run in events.jsonl, however often it is met
    (and however often `finalize` runs): 'game.html was a link: not kept'."""
    told = {(e.detail.get("file"), e.detail.get("reason")) for e in read_events(layout) if e.event == "entry_refused"}
    lock = threading.Lock()

    def record(name: str, reason: str) -> None:
        # shot.sh names files at will: bound what a stream of made-up names can add to the log.
        name = name if len(name) <= MAX_REFUSED_NAME else name[:MAX_REFUSED_NAME] + "..."
        with lock:
            if (name, reason) in told or len(told) > MAX_REFUSALS:
                return
            told.add((name, reason))
            text = f"{visible(name)} was {reason}: not kept"
            if len(told) > MAX_REFUSALS:
                name, reason = "", "too many"
                text = f"more entries were refused than the {MAX_REFUSALS} recorded here"
        events("entry_refused", file=name, reason=reason, text=text)

    return record


def _quick_check_dict(npm_dir: Path | None, service=None, priority: int | None = None, task: Task | None = None):
    """The browser's quick load check, as the shot endpoint and the watcher want it.

    service: the run's browser (showcase.browser.service) to check in at `priority`; None: a
    browser of the check's own. task: whose import map the page may use.
    """
    from showcase.browser.service import ORDINARY
    from showcase.check.quick import load_check

    async def check(html: bytes, png: Path | None) -> dict:
        if service is None:
            result = await load_check(html, screenshot_path=png, npm_dir=npm_dir, task=task)
        else:
            level = ORDINARY if priority is None else priority
            result = await service.run_async(
                lambda browser: load_check(html, screenshot_path=png, npm_dir=npm_dir, browser=browser,
                                           opening=service.opening(level), task=task),
                level,
            )
        return result.model_dump(mode="json")

    return check


CHECK_PARALLEL = 8  # version checks at once in the run's browser: a burst shares the ready and settle waits


def _run_browser(events: Callable[..., None]):
    """The run's one browser for load checks and shot.sh; each restart after a crash is an event.

    It holds the check's CPU weight as the final check does: the final check of another run (a
    batch, or runs side by side) must not starve this run's load checks into a false verdict."""
    from showcase.browser.service import BrowserService
    from showcase.check.quick import QUICK_RENDERER
    from showcase.check.rubric import load_rubric

    return BrowserService(
        QUICK_RENDERER, parallel=CHECK_PARALLEL,
        on_restart=lambda reason, restarts: events("browser_restarted", reason=reason, restarts=restarts),
        cpu_weight=load_rubric().cpu_weight_factor,
    )


@dataclass
class RunPlan:
    """What preflight settled: the task, the harness, the sampling and the run's three limits."""

    opts: RunOptions
    task: Task
    harness: object
    sampling: dict
    limit_s: float
    inject_s: float
    answer_limit: int


@dataclass
class Provisioned:
    """Everything provision started for one run; each part's cleanup sits on the run's ExitStack."""

    plan: RunPlan
    layout: RunLayout
    events: EventLog
    gate: object
    spec: object
    sandbox: object
    space: object
    key: str


@dataclass
class Teardown:
    """What the parts report as they stop, for the `sandbox_removed` event."""

    exit_info: object = None
    leaks: list | None = field(default_factory=list)  # None: the audit itself failed
    foreign: list = field(default_factory=list)
    host_load: list = field(default_factory=list)
    outside: object = None
    peak_memory_bytes: int | None = None  # the sandbox's memory peak, read before its cgroup went

    def event(self) -> dict:
        return dict(
            exit=self.exit_info.model_dump(mode="json") if self.exit_info is not None else None,
            leaks=self.leaks if self.leaks is not None else ["leak audit failed"],
            foreign=[p.model_dump(mode="json") for p in self.foreign],
            host_load=[s.model_dump(mode="json") for s in self.host_load],
            outside_attempts=self.outside.model_dump(mode="json") if self.outside is not None else None,
            peak_memory_bytes=self.peak_memory_bytes,
        )


def execute_run(opts: RunOptions, say: Progress = print) -> Path:
    """Run the task once, sealed, and leave every file of the README's "The files of a run" in opts.out.

    DESIGN.md's pipeline: preflight (bad input, before anything starts), provision (run files,
    image, gate, sandbox, watcher, monitor), supervise (the agent until it ends or the hard stop),
    finalize (final choice, check, clip, report). Whatever happens in between, the ExitStack
    stops every part provision started, in the order that keeps what was seen.
    """
    plan = preflight(opts)
    sweep_leftovers(opts.backend, say)
    with ExitStack() as stack:
        run = provision(plan, stack, say)
        supervise(run, say)
    return finalize(run.layout.root, say=say, npm_dir=opts.npm_dir, clip=opts.clip, clip_seconds=opts.clip_seconds,
                    clock_t0=run.events.t0)


def write_run_files(plan: RunPlan) -> RunLayout:
    """The run folder and the files that fix what was asked: command, sampling, prompt, tools."""
    from showcase.io import write_json_atomic
    from showcase.runfolder.artefacts import CommandLine, SamplingFile

    opts = plan.opts
    layout = RunLayout(opts.out)
    layout.make()
    CommandLine.from_argv(opts.command_line).write(layout.command)
    write_json_atomic(
        layout.sampling,
        SamplingFile(fields=plan.sampling, source="file" if opts.sampling_file else "none",
                     source_path=str(opts.sampling_file) if opts.sampling_file else None),
    )
    (layout.task_dir / "prompt.txt").write_bytes(plan.task.prompt_bytes)
    write_tools(layout.tools_dir, plan.task.output_file)
    return layout


def sandbox_spec(plan: RunPlan, layout: RunLayout, image: str, key: str):
    """The sandbox as the contract records it: the published limits plus what the user set."""
    from showcase.sandbox.base import Mount, SandboxSpec

    opts = plan.opts
    return SandboxSpec(
        image=image,
        workdir_host=layout.work,
        gate_dir_host=layout.gate_dir,
        extra_mounts=[
            Mount(host=layout.task_dir, container="/task", read_only=True),
            Mount(host=layout.tools_dir, container="/opt/tools", read_only=True),
            Mount(host=layout.agent_dir, container="/logs", read_only=False),
        ],
        api_key=key,
        disk=opts.disk,
        # The container ends itself after the hard stop and a grace, even if showcase is dead by then.
        lifetime_s=plan.limit_s + LIFETIME_GRACE_S,
        memory=opts.memory,
        cpus=opts.cpus,
        **({"pids_limit": opts.pids_limit} if opts.pids_limit else {}),
        labels={RUN_LABEL: str(layout.root.resolve())},
    )


def make_gate(plan: RunPlan, layout: RunLayout, key: str, shot_check, on_refused, shots: ShotFigures | None = None):
    """The gate of this run: the upstream, the forced fields, the clock's two moments, shot.sh's route."""
    from showcase.gate.app import create_gate
    from showcase.gate.config import GateConfig, UpstreamTimeouts

    opts, task = plan.opts, plan.task
    return create_gate(
        GateConfig(
            upstream=opts.upstream,
            model=opts.model,
            api_key_upstream=opts.upstream_key,
            key=key,
            sampling=plan.sampling,
            sampling_source=str(opts.sampling_file) if opts.sampling_file else None,
            answer_limit=plan.answer_limit,
            finish_now_after_s=plan.inject_s,
            finish_now_text=task.finish_now_text,
            hard_stop_after_s=plan.limit_s,
            # A non-streamed answer arrives whole: its bound is the run's hard stop, not a fixed
            # hour (the stall bound still catches a stream that goes silent).
            upstream_timeout_s=UpstreamTimeouts(first_byte_s=None),
            log_dir=layout.root,
        ),
        extra_routes=[shot_route(layout.work, shot_check, page_cap=task.page_cap_bytes,
                                 on_refused=on_refused, page_name=task.output_file, figures=shots)],
    )


def provision(plan: RunPlan, stack: ExitStack, say: Progress) -> Provisioned:
    """Start every part of the run; each registers its own cleanup on `stack`.

    Cleanups run last-registered first, so the order of registration below is the order of the
    teardown read backwards: the gate refuses and the agent is killed first, then the final
    file is checked (the other versions too if it does not load), then the browser, the gate's
    server and the space close, and last `sandbox_removed` records what each part reported.
    """
    from showcase.browser.service import URGENT
    from showcase.gate.server import GateServer
    from showcase.run.watcher import Watcher
    from showcase.sandbox.base import get_backend
    from showcase.sandbox.image import ensure_image
    from showcase.sandbox.space import RunSpace

    opts, task, harness = plan.opts, plan.task, plan.harness
    layout = write_run_files(plan)
    say(f"image: sandbox image for harness {harness.id} (built once, cached by content hash)")
    image_started = time.monotonic()
    image = ensure_image(harness, base=opts.base_image, progress=lambda msg: say(f"  {msg}"))
    image_s = time.monotonic() - image_started

    # Launched only once the run starts (below); events exist by the time a restart can happen.
    browser = _run_browser(lambda event, **detail: events(event, **detail))
    key = secrets.token_urlsafe(24)
    shots = ShotFigures()
    gate = make_gate(plan, layout, key, _quick_check_dict(opts.npm_dir, browser, URGENT, task),
                     lambda name, why: refusals(name, why), shots)
    spec = sandbox_spec(plan, layout, image, key)
    _write_contract(layout, opts, task, harness, plan.sampling, spec, image, plan.limit_s, plan.inject_s,
                    plan.answer_limit)
    if os.geteuid() == 0:
        os.chown(layout.agent_dir, spec.uid, spec.gid)  # the agent writes its trajectory there
    sandbox = get_backend(opts.backend)()
    server = GateServer(gate, listen=[f"unix:{layout.gate_dir / 'gate.sock'}"])
    server.start()
    t0 = time.monotonic()
    events = EventLog(layout.events_log, t0)
    space = RunSpace(layout.root, SPACE_FOLDERS)
    report = Teardown()
    stack.callback(lambda: events("sandbox_removed", **report.event()))
    stack.callback(_close_space, space, events, say)
    stack.callback(lambda: events("shot_requests", **shots.model_dump()))  # once the server has stopped
    stack.callback(server.stop)
    events("run_started", started_at=_now_iso(), start_epoch=time.time())
    events("image_ready", image=image, seconds=round(image_s, 3))
    refusals = _refusal_recorder(layout, events)

    # Closed before the final check: its frame-rate item gets the CPU to itself.
    stack.callback(_safe, browser.close)
    browser.start()  # warm before the agent's first shot.sh
    # Before the watcher: it must watch the image's folder, not the one the mount covers.
    timings = space.open(spec.disk_bytes, spec.uid, spec.gid)
    events("space_opened", cap_bytes=spec.disk_bytes, **{k: round(v, 3) for k, v in timings.items()})
    watcher = Watcher(
        layout.work,
        layout.root,
        file_name=task.output_file,
        clock=lambda: time.monotonic() - events.t0,
        last_request_id=lambda: gate.last_request_id,
        load_check=_watcher_check(_quick_check_dict(opts.npm_dir, browser, task=task)),
        page_cap=task.page_cap_bytes,
        on_refused=refusals,
        check_workers=CHECK_PARALLEL,
        pictures=True,
        # At the end the agent is gone, so no shot.sh needs the urgent turn: the final file takes it.
        final_check=_watcher_check(_quick_check_dict(opts.npm_dir, browser, URGENT, task)),
    )
    stack.callback(_stop_watcher, watcher, events)
    watcher.start()
    stack.enter_context(_sandbox_running(sandbox, spec, report, say))
    monitor_egress(sandbox, report, stack)
    stack.callback(_kill_sandbox, sandbox, report)
    stack.callback(gate.hard_stop)  # first of all: from here on the gate refuses every request
    return Provisioned(plan=plan, layout=layout, events=events, gate=gate, spec=spec, sandbox=sandbox,
                       space=space, key=key)


def _stop_watcher(watcher, events: EventLog) -> None:
    """Take the last versions and the final file's check first (bounded), in the warm browser.

    If the final file loads, it counts whatever the other versions' verdicts: their checks are
    left to finalize, which runs them while the clip records. If not, the rule needs every
    verdict: they are checked here, now.
    """
    waited = time.monotonic()
    _safe(lambda: watcher.stop(timeout_s=180, backlog=False))
    final = watcher.final_record()
    if final is not None and final.loaded_without_errors is not True and watcher.unchecked():
        _safe(lambda: watcher.check_backlog(timeout_s=180))
    versions = watcher.versions
    events("load_checks_done", seconds_after_agent=round(time.monotonic() - waited, 3), versions=len(versions),
           unchecked=len(watcher.unchecked()),
           final_loads=final.loaded_without_errors if final is not None else None)


@contextmanager
def _sandbox_running(sandbox, spec, report: Teardown, say: Progress):
    """The sandbox from start to removal. Its kill is a cleanup of its own (`_kill_sandbox`), which
    runs before the monitors stop; removal and the leak audit come after them."""
    say("sandbox: starting (network none; the gate is the only way out)")
    try:
        sandbox.start(spec)
        yield sandbox
    finally:
        if report.exit_info is None:
            _kill_sandbox(sandbox, report)
        _safe(sandbox.remove)
        report.leaks = _safe(sandbox.leak_audit)


def _kill_sandbox(sandbox, report: Teardown) -> None:
    report.exit_info = _safe(sandbox.exit_info)  # before the kill: how the agent ended by itself
    _safe(sandbox.kill)
    report.peak_memory_bytes = _safe(sandbox.peak_memory_bytes)  # the backend read it before the kill


def monitor_egress(sandbox, report: Teardown, stack: ExitStack) -> None:
    """Who else used the CPU, and what the agent tried to reach outside, while the sandbox ran."""
    from showcase.host.egress import EgressWatch
    from showcase.host.monitor import ForeignProcessMonitor

    egress = EgressWatch.start(_safe(sandbox.host_pid))

    def stop_egress():
        report.outside = egress.stop()

    stack.callback(stop_egress)
    monitor = ForeignProcessMonitor(run_pids=lambda: _safe(sandbox.processes) or [])

    def stop_monitor():
        report.foreign = monitor.stop()
        report.host_load = monitor.load_samples

    monitor.start()
    stack.callback(stop_monitor)


def agent_command(run: Provisioned) -> tuple[list[str], dict[str, str]]:
    """The harness's launch command and environment, with the tools of /opt/tools on PATH."""
    from showcase.harness import render_launch

    command, env = render_launch(
        run.plan.harness,
        model=run.plan.opts.model,
        prompt=run.plan.task.prompt_bytes.decode(),
        prompt_file="/task/prompt.txt",
        base_url=run.spec.relay_url,
        api_key=run.key,
    )
    return command, {"PATH": "/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **env}


def supervise(run: Provisioned, say: Progress) -> str:
    """Start the agent on the gate's clock and watch it until it ends or the hard stop; how it ended."""
    plan, events = run.plan, run.events
    command, env = agent_command(run)
    run.gate.start_clock()
    events.t0 = time.monotonic()  # the run's clock is the gate's: finish-now and hard stop count from here
    events("agent_started", harness=plan.harness.id, limit_s=plan.limit_s, inject_after_s=plan.inject_s,
           start_epoch=time.time())
    say(f"agent: started; finish-now from {plan.inject_s:.0f} s, hard stop at {plan.limit_s:.0f} s")
    run.sandbox.start_process(command, env=env, log_path=run.layout.agent_log)
    return _supervise(run.sandbox, run.gate, events, events.t0, plan.limit_s, run.layout, plan.harness, say,
                      disk_full=run.space.is_full)


def _close_space(space, events: "EventLog", say: Progress) -> None:
    """The agent's folders become plain folders of the run again; nothing stays mounted."""
    if not space.exists():
        return
    try:
        report = space.close()
    except Exception as exc:
        events("space_close_failed", error=str(exc)[:300])
        say(f"disk: could not close the run's space ({exc}); `showcase finalize` tries again")
        return
    events("space_closed", **report.model_dump())
    if report.full:
        say("disk: the agent's space was full at the end")
    # Each entry left out is said where a person reads: run-info's refused entries and the report.
    for entry in report.skipped:
        events("entry_refused", file=entry.name, reason=entry.reason, text=f"{visible(entry.name)} was {entry.reason}: not kept")
    if report.skipped_count > len(report.skipped):
        more = report.skipped_count - len(report.skipped)
        events("entry_refused", file="", reason="too many", text=f"{more:,} more entries of the agent's folders were not kept")
    if report.skipped_count:
        say(f"disk: {report.skipped_count:,} entries of the agent's folders not kept (run-info.json names them)")


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def _watcher_check(quick_check):
    from showcase.check.runner import looks_like_html

    def check(html: bytes, picture: Path | None = None) -> tuple[bool, list[str]]:
        if not looks_like_html(html):
            # Not a page at all: it counts as one that did not load, and the last good one counts.
            return False, ["not an HTML file (no HTML tags in its text)"]
        result = asyncio.run(quick_check(html, picture))
        return bool(result["loads"]), list(result.get("errors") or [])

    return check


DONE_SCAN_BYTES = 1024 * 1024  # the agent says it is done at the end of what it wrote


def _agent_said_done(layout: RunLayout, harness) -> bool:
    """Did the agent end by saying it was done? Its structured output, or the tail of its output
    and of each regular file it left in /logs; links, FIFOs and the like are passed over, never followed."""
    from showcase.harness import said_done

    output, others = b"", []
    for folder, names in ((layout.root, [layout.agent_log.name]), (layout.agent_dir, None)):
        try:
            with open_dir(folder) as dir_fd:
                if names is None:
                    with os.scandir(dir_fd) as entries:
                        names = sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
                for name in names:
                    try:
                        tail = read_tail_at(dir_fd, name, DONE_SCAN_BYTES)
                    except (OSError, Refused):
                        continue
                    if folder == layout.root:
                        output = tail
                    else:
                        others.append(tail)
        except (OSError, Refused):
            continue
    return said_done(harness, output, others)


def _supervise(sandbox, gate, events: EventLog, t0: float, limit_s: float, layout: RunLayout, harness,
               say: Progress, disk_full: Callable[[], bool] = lambda: False) -> str:
    """Wait for the agent to end or the hard stop; return how the agent ended."""
    announced_finish_now = False
    announced_disk_full = False
    last_say = 0.0
    while True:
        elapsed = time.monotonic() - t0
        try:
            info = sandbox.wait(timeout_s=max(0.05, min(POLL_S, limit_s - elapsed)))
        except EngineUnanswered as exc:
            # A stalled engine (a machine far over its cores) is not the agent's end: the clock, the
            # finish-now message and the hard stop go on, and the engine is asked again.
            events("engine_unanswered", at_s=round(time.monotonic() - t0, 3), error=str(exc)[:300])
            say(f"sandbox: the engine did not answer ({type(exc.__cause__).__name__}); asking again")
            info = ExitInfo(how="running")
        elapsed = time.monotonic() - t0
        # The gate refuses every request from limit_s on by its own clock (the same t0): an agent
        # that exits on that refusal, before this loop kills it, was still stopped by the hard stop.
        if info.how != "running" and elapsed < limit_s:
            if info.oom_killed or info.how == "oom":
                how = "oom"
            elif info.exit_code == 0:
                how = "done" if _agent_said_done(layout, harness) else "exit"
            else:
                how = "crashed"
            events("agent_ended", how=how, exit_code=info.exit_code)
            say(f"agent: ended ({how}, exit code {info.exit_code}) after {elapsed / 60:.1f} min")
            return how
        if not announced_disk_full and disk_full():
            announced_disk_full = True
            events("disk_full", at_s=round(elapsed, 3))
            say("disk: the agent's space is full (writes fail with ENOSPC); the run goes on")
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
    """After showcase itself died mid-run, its sandbox may still run: stop it first (every backend's:
    finalize does not know which one the run used)."""
    from showcase.sandbox.base import get_backend, known_backends

    lines = []
    for name in known_backends():
        try:
            lines += get_backend(name).remove_run(layout.root)
        except Exception as exc:  # one backend that cannot answer must not stop the finalize
            lines.append(f"could not ask backend {name}: {exc}")
    for line in lines:
        say(f"finalize: {line}")
    return bool(lines)


def _ffmpeg_version() -> str | None:
    line = _tool_version(["ffmpeg", "-version"])
    return line.split(" Copyright")[0] if line else None


def _write_contract(layout, opts: RunOptions, task: Task, harness, sampling: dict, spec, image: str,
                    limit_s: float, inject_s: float, answer_limit: int) -> None:
    from showcase.browser.launch import chromium_version
    from showcase.check.rubric import load_rubric
    from showcase.runfolder.artefacts import Contract, ContractLimits, HarnessInfo, ImageInfo, SandboxLimits, ToolVersions
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
        sandbox_limits=SandboxLimits(memory_bytes=parse_size(spec.memory), cpus=spec.cpu_limit, disk_bytes=spec.disk_bytes,
                                     pids=spec.pids_limit, network=spec.network,
                                     read_only_root=spec.read_only_root, user=spec.user),
        image=ImageInfo(id=image_digest(image), tag=image),
        versions=ToolVersions(showcase=__version__, chromium=chromium_version(), ffmpeg=_ffmpeg_version()),
        checker_rubric_version=load_rubric().version,
        timezone="UTC",
        seeds={},
    )
    write_json_atomic(layout.contract, contract)


@dataclass
class FinalizeState:
    """A run folder as finalize found it, once nothing of the run runs any more."""

    layout: RunLayout
    contract: object
    events: list[RunEvent]
    log: EventLog
    phase_log: Callable[..., None]  # the phase timings: only the first finalize of a run adds them
    interrupted: bool
    task: Task | None  # None: the contract names a task this machine does not have
    page_name: str
    page_cap: int


def finalize(run_dir: Path, say: Progress = print, npm_dir: Path | None = None, clip: bool = True,
             clip_seconds: float = 15, clock_t0: float | None = None) -> Path:
    """Complete a run from what is on disk: final choice, check, clip, run-info, report.

    Used at the end of every run, and on its own after showcase itself was killed mid-run.
    clock_t0: the run's clock (time.monotonic() at the agent's start), so finalize's events
    continue the run's timeline; None (finalize on its own): they count from finalize's start.
    """
    from showcase.io import write_json_atomic
    from showcase.report import write_run_report

    state = settle_run(Path(run_dir), say, clock_t0)
    layout = state.layout
    catch_up = CatchUp(state, npm_dir, say)
    try:
        final = catch_up.final_file()
        # The rule final_file_loads needs no other verdict: the backlog waits for the clip. Otherwise
        # every verdict first, and the final check still runs with no version check beside it.
        early = final is not None and final.loaded_without_errors is True
        if not early:
            catch_up.backlog("before_check")
        choice = catch_up.choose()
        chosen = layout.versions_dir / choice.file if choice.file else None
        if chosen is not None:
            held = hold_final_check(say)  # a batch's runs check one at a time per host (showcase.host.lock)
            try:
                score_version(state, chosen, choice.n, npm_dir, say, clip, clip_seconds,
                              beside_clip=catch_up.backlog if early else None)
            finally:
                release_final_check(held)
        versions = catch_up.versions
        if catch_up.checked_late:
            choice = catch_up.choose()  # the same version by the same rule; now with every verdict
    finally:
        catch_up.close()
    info = run_info(state, versions, choice, chosen)
    write_json_atomic(layout.run_info, info)
    say(info.summary_run)
    say(info.summary_versions)
    phase = time.monotonic()
    write_run_report(layout.root)
    state.phase_log("report_written", seconds=round(time.monotonic() - phase, 3))
    say(f"report: {layout.report}")
    say(time_spent(read_events(layout)))
    return layout.root


def settle_run(run_dir: Path, say: Progress, clock_t0: float | None) -> FinalizeState:
    """Refuse a live run; stop what is left of an interrupted one; leave its folders plain again."""
    from showcase.runfolder.artefacts import Contract
    from showcase.sandbox.space import RunSpace

    layout = RunLayout(run_dir)
    if not layout.contract.is_file():
        raise UserError(f"{run_dir} is not a run folder (no contract.json)")
    contract = Contract.model_validate_json(layout.contract.read_text())
    try:
        task = load_task(contract.task_id)
        page_name, page_cap = task.output_file, task.page_cap_bytes
    except UserError:
        task, page_name, page_cap = None, DEFAULT_OUTPUT_FILE, DEFAULT_PAGE_CAP
    space = RunSpace(layout.root)
    try:
        owner = space.state().owner if space.state_path.is_file() else None
    except (OSError, ValueError):
        owner = None  # unreadable: close() says what it cannot do
    if owner is not None:
        if owner.alive() and owner.pid != os.getpid():
            raise UserError(f"{run_dir} is still running (showcase process {owner.pid}); finalize it once that has ended")
    sweep_leftovers(None, say)
    events = read_events(layout)
    terminate_torn_line(layout.events_log)
    log = EventLog(layout.events_log, clock_t0 if clock_t0 is not None else time.monotonic())
    # A finalize of a finalized run rewrites the same files and adds nothing to the timeline.
    first_finalize = clock_t0 is not None or not any(e.event == "report_written" for e in events)
    interrupted = not any(e.event == "sandbox_removed" for e in events)
    if interrupted:
        # showcase died mid-run: the agent may still be working. Stop it; what it wrote is kept.
        say("finalize: the run was interrupted; stopping what is left of it")
        _kill_leftovers(layout, say)
        log("finalized_after_interruption", at=_now_iso())
    if space.exists():
        # Mounted (showcase was killed) or not (the machine restarted): either way, plain folders again.
        _close_space(space, log, say)
        events = read_events(layout)
    return FinalizeState(layout=layout, contract=contract, events=events, log=log,
                         phase_log=log if first_finalize else (lambda event, **detail: None),
                         interrupted=interrupted, task=task, page_name=page_name, page_cap=page_cap)


def score_version(state: FinalizeState, chosen: Path, n: int, npm_dir: Path | None, say: Progress,
                  clip: bool, clip_seconds: float, beside_clip: Callable[[str], object] | None = None) -> None:
    """The ten-point check of the chosen version (check.json, screenshot.png) and its clip.

    beside_clip(when): work that must not run during the check (it measures the frame rate) but
    may run while the clip records (a virtual clock: competition slows it, changes no frame of
    it); called with "clip" in a thread of its own and joined before this returns, or after
    the check with "after_check" when there is no clip.
    """
    from showcase.check.runner import check_page, write_report
    from showcase.io import write_json_atomic

    layout = state.layout
    say(f"check: scoring version {n} in Chromium (software GL)")
    phase = time.monotonic()
    # The stored bytes as they are, whatever their encoding or content: the browser judges them.
    report = asyncio.run(check_page(chosen.read_bytes(), npm_dir=npm_dir,
                                    screenshot_path=layout.screenshot, page_name=str(chosen), task=state.task))
    write_report(report, layout.root)
    state.phase_log("check_done", seconds=round(time.monotonic() - phase, 3))
    say(report.summary)
    if not clip:
        if beside_clip is not None:
            beside_clip("after_check")
        return
    from showcase.clip import record_clip_file

    beside = threading.Thread(target=beside_clip, args=("clip",), name="showcase-beside-clip", daemon=True) \
        if beside_clip is not None else None
    say(f"clip: recording {clip_seconds:.0f} s on a virtual clock")
    phase = time.monotonic()
    if beside is not None:
        beside.start()
    try:
        result = record_clip_file(chosen, layout.clip, seconds=clip_seconds, npm_dir=npm_dir, task=state.task)
        write_json_atomic(layout.clip_info, result)
        state.phase_log("clip_done", seconds=round(time.monotonic() - phase, 3), clip_seconds=clip_seconds)
    finally:
        if beside is not None:
            beside.join(BACKLOG_TIMEOUT_S + 60)
    if result.note:
        say(f"clip: {result.note}")


def run_info(state: FinalizeState, versions, choice, chosen: Path | None):
    """run-info.json: the run's figures from its events, the gate's stats and the contract."""
    from showcase.gate.log import GateStats, stats_from_log
    from showcase.host.monitor import ForeignProcess, LoadSample
    from showcase.runfolder.artefacts import ContainerLimits, RunInfo
    from showcase.run.summary import with_summary
    from showcase.run.title import world_title

    layout, events, contract = state.layout, state.events, state.contract
    stats = _gate_stats(layout, GateStats, stats_from_log)
    ended = _how_agent_ended(events, state.interrupted)
    start = next((e for e in events if e.event == "run_started"), None)
    agent_start = next((e for e in events if e.event == "agent_started"), None)
    removed = next((e for e in reversed(events) if e.event == "sandbox_removed"), None)
    removed_detail = removed.detail if removed else {}
    end_event = next((e for e in reversed(events) if e.event in ("agent_ended", "hard_stop")), None)
    run_s = (end_event.t_s if end_event else (events[-1].t_s if events else 0.0)) - (agent_start.t_s if agent_start else 0.0)
    info = RunInfo(
        started_at=start.at if start else _mtime_iso(layout.contract),
        ended_at=end_event.at if end_event else _now_iso(),
        minutes_run=round(max(0.0, run_s) / 60, 2),
        agent_end=ended["how"],
        agent_exit_code=ended.get("exit_code"),
        finish_now_after_s=contract.limits.finish_now_after_s,
        finish_now_sent=stats.finish_now_count,
        finish_now_first_s=stats.finish_now_first_s,
        requests=stats.requests,
        not_completed=stats.not_completed,
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
            peak_memory_bytes=removed_detail.get("peak_memory_bytes"),
        ),
        foreign_processes=[ForeignProcess(**p) for p in (removed_detail.get("foreign") or [])],
        host_load=[LoadSample(**s) for s in (removed_detail.get("host_load") or [])],
        world_title=world_title(chosen.read_bytes()) if chosen is not None else None,
        disk_full=any(e.event == "disk_full" or (e.event == "space_closed" and e.detail.get("full")) for e in events),
        leaks=removed_detail.get("leaks") if removed else None,
        refused_entries=_refused_texts(read_events(layout)),
        outside_attempts=(removed_detail.get("outside_attempts") or None) if removed else None,
        shot_requests=next((ShotFigures(**e.detail) for e in reversed(events) if e.event == "shot_requests"), None),
    )
    return with_summary(info, versions, choice)


PHASES = {"image_ready": "image", "load_checks_done": "load checks after the agent", "check_done": "check",
          "clip_done": "clip", "backlog_checked": "versions checked", "report_written": "report"}


def time_spent(events: list[RunEvent]) -> str:
    """Where the run's time went, from its events: one line for the end of the run.

    The tail (agent end to report) is given when finalize continued the run's own clock."""
    last = {e.event: e for e in events}
    parts = []
    for name, label in PHASES.items():
        e = last.get(name)
        if e is None:
            continue
        seconds = e.detail.get("seconds", e.detail.get("seconds_after_agent"))
        if isinstance(seconds, (int, float)):
            parts.append(f"{label} {seconds:.1f} s")
        if name == "image_ready" and "agent_started" in last:
            end = last.get("agent_ended") or last.get("hard_stop")
            if end is not None:
                parts.append(f"agent {end.t_s - last['agent_started'].t_s:.1f} s")
    line = "time: " + ", ".join(parts)
    tail = run_tail_s(events)
    if tail is not None:
        line += f"; agent end to report {tail:.1f} s"
    return line


def run_tail_s(events: list[RunEvent]) -> float | None:
    """Seconds from the agent's end (or the hard stop) to report.html, on the run's own clock;
    None when finalize ran on its own (another clock) or the run has not got that far."""
    end = next((e for e in reversed(events) if e.event in ("agent_ended", "hard_stop")), None)
    report = next((e for e in reversed(events) if e.event == "report_written"), None)
    if end is None or report is None or any(e.event == "finalized_after_interruption" for e in events):
        return None
    if events.index(report) < events.index(end):
        return None
    return round(report.t_s - end.t_s, 3)


def _refused_texts(events: list[RunEvent]) -> list[str]:
    out: list[str] = []
    for e in events:
        text = e.detail.get("text") if e.event == "entry_refused" else None
        if text and text not in out:
            out.append(text)
    return out


def _mtime_iso(path: Path) -> str:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).isoformat(timespec="seconds")


BACKLOG_TIMEOUT_S = 600  # the versions' load checks in finalize, all together


class _VersionBrowser:
    """The load checks' browser in finalize: launched when a check needs one, closed before the
    final check (nothing of ours beside its frame rate), launched again for the backlog."""

    def __init__(self, events: Callable[..., None], npm_dir: Path | None, task: Task | None):
        self._events, self._npm_dir, self._task = events, npm_dir, task
        self._service = None
        self._lock = threading.Lock()

    def check(self, html: bytes, picture: Path | None = None) -> tuple[bool, list[str]]:
        with self._lock:
            if self._service is None:
                self._service = _run_browser(self._events)
            service = self._service
        return _watcher_check(_quick_check_dict(self._npm_dir, service, task=self._task))(html, picture)

    def close(self) -> None:
        with self._lock:
            service, self._service = self._service, None
        if service is not None:
            service.close()


class CatchUp:
    """finalize's view of the versions: every one on disk, the file as it is now, their checks.

    The final file is snapshot and checked first (`final_file`); the other versions still
    without a verdict are the backlog (`backlog`), checked before the final check or beside the
    clip; `choose` writes final-choice.json from the verdicts known then.
    """

    def __init__(self, state: FinalizeState, npm_dir: Path | None, say: Progress):
        from showcase.run.watcher import Watcher, recover_versions

        self.state, self.say = state, say
        layout = state.layout
        agent_start = next((e for e in state.events if e.event == "agent_started"), None)
        start_epoch = agent_start.detail.get("start_epoch") if agent_start else None
        recovered = recover_versions(layout.root, start_epoch=start_epoch)
        if recovered:
            say(f"finalize: {len(recovered)} version(s) recovered from versions/")
        self.browser = _VersionBrowser(state.log, npm_dir, state.task)
        self.watcher = Watcher(
            layout.work,
            layout.root,
            file_name=state.page_name,
            clock=(lambda: time.time() - start_epoch) if start_epoch else None,
            load_check=self.browser.check,
            page_cap=state.page_cap,
            on_refused=_refusal_recorder(layout, state.log),
            check_workers=CHECK_PARALLEL,
            pictures=True,
        )
        self.checked_late = 0  # backlog versions checked after the choice was made

    @property
    def versions(self):
        return self.watcher.versions

    def final_file(self):
        """Take the file as it is now if it is new; check it if it has no verdict. Its record, or
        None (no file, or one refused)."""
        self.watcher.start(check_backlog=False)
        self.watcher.stop(timeout_s=BACKLOG_TIMEOUT_S, backlog=False)
        self.browser.close()
        for name, reason in self.watcher.refusals:
            self.say(f"finalize: {name} was {reason}: not kept")
        return self.watcher.final_record()

    def backlog(self, when: str) -> None:
        """Check every version still without a verdict; `backlog_started` / `backlog_checked`
        (when: before_check, clip, after_check) put it on the run's timeline."""
        todo = self.watcher.unchecked()
        if not todo:
            return
        self.say(f"finalize: load-checking {len(todo)} version(s)" + (" while the clip records" if when == "clip" else ""))
        self.state.phase_log("backlog_started", versions=len(todo), during=when)
        began = time.monotonic()
        try:
            checked = self.watcher.check_backlog(timeout_s=BACKLOG_TIMEOUT_S)
        finally:
            self.browser.close()
        if when != "before_check":
            self.checked_late = checked
        self.state.phase_log("backlog_checked", versions=checked, unchecked=len(self.watcher.unchecked()),
                             during=when, seconds=round(time.monotonic() - began, 3))

    def choose(self):
        from showcase.io import write_json_atomic
        from showcase.run.final_choice import choose_final

        choice = choose_final(self.watcher.versions, self.watcher.final_sha256)
        write_json_atomic(self.state.layout.final_choice, choice)
        if not self.checked_late:
            self.say(f"final choice: {choice.rule_text}")
        return choice

    def close(self) -> None:
        self.browser.close()


def _gate_stats(layout: RunLayout, GateStats, stats_from_log):
    """gate-stats.json as the gate kept it; rebuilt from gate.log if it is missing or torn."""
    try:
        return GateStats.model_validate_json(layout.gate_stats.read_text())
    except (OSError, ValueError):
        return stats_from_log(layout.gate_log)


def _how_agent_ended(events: list[RunEvent], interrupted: bool) -> dict:
    for e in reversed(events):
        if e.event == "agent_ended":
            return {"how": e.detail.get("how", "exit"), "exit_code": e.detail.get("exit_code")}
        if e.event == "hard_stop":
            return {"how": "killed_at_hard_stop"}
    # No end was seen: showcase itself stopped first (killed, or the sandbox failed to start).
    return {"how": "interrupted" if interrupted else "crashed"}
