"""The batch itself: judge the plan, resume what a folder holds, run the jobs, write the comparison.

Locally, runs go at once as far as the machine holds them: the sum of their containers' CPU
and memory limits (plus the run's own browser and gate) stays within the host's cores and
memory. Their final checks go one at a time per host (showcase.host.lock).
"""

import asyncio
import os
import threading
from pathlib import Path
from typing import Callable

from showcase import __version__
from showcase.batch.job import Job, JobResult, execute_job, has_report
from showcase.batch.plan import Plan, Setup, load_plan, planned_runs, replay_script_path, resolve
from showcase.batch.record import BatchRecord, RunState, now_iso, read_record
from showcase.batch.remote import run_jobs
from showcase.errors import ShowcaseError, UserError
from showcase.host.cluster import RayCluster

HOST_MEMORY_PER_RUN = 1 << 30  # the run's own browser (load checks, shot.sh), gate and watcher beside its container
CHECK_CAP_BYTES = 4 << 20


class BatchFailed(ShowcaseError):
    """Some runs failed (exit 1); the others are kept and compared."""


def host_capacity() -> tuple[float, int]:
    import psutil

    return float(len(os.sched_getaffinity(0))), int(psutil.virtual_memory().total)


def _run_args(setup: Setup) -> list[str]:
    args = ["--task", setup.task, "--harness", setup.harness, "--memory", setup.limits.memory, "--disk", setup.limits.disk]
    for flag, value in (("--limit-s", setup.limits.limit_s), ("--inject-after-s", setup.limits.inject_after_s),
                        ("--answer-limit", setup.limits.answer_limit), ("--ctx", setup.limits.ctx),
                        ("--cpus", setup.limits.cpus), ("--pids-limit", setup.limits.pids_limit)):
        if value is not None:
            args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if not setup.clip:
        args.append("--no-clip")
    return args


def build_jobs(plan: Plan, plan_path: Path, host_cpus: float) -> dict[str, Job]:
    """Every run of the plan as a Job, carrying what it needs by value (script, sampling)."""
    import json

    from showcase.gate.config import load_sampling
    from showcase.sandbox.base import parse_size
    from showcase.task import load_task

    setups = {s.name: s for s in plan.setup}
    jobs = {}
    for planned in planned_runs(plan):
        setup = setups[planned.setup]
        replay = json.loads(replay_script_path(plan_path, setup).read_text()) if setup.replay else None
        sampling = load_sampling(resolve(plan_path, setup.sampling_file)) if setup.sampling_file else setup.sampling
        limit_s = setup.limits.limit_s if setup.limits.limit_s is not None else load_task(setup.task).limits.limit_s
        jobs[planned.name] = Job(
            name=planned.name, run_args=_run_args(setup), upstream=setup.upstream, model=setup.model, replay=replay,
            sampling=sampling, limit_s=limit_s, clip=setup.clip, on_unfinished=plan.on_unfinished,
            cpus=setup.limits.cpus or min(4.0, host_cpus),  # the run's own default (sandbox: min(4, host))
            memory_bytes=parse_size(setup.limits.memory) + HOST_MEMORY_PER_RUN,
        )
    return jobs


def _probe_upstreams(plan: Plan, plan_path: Path) -> None:
    from showcase.gate.probe import probe_upstream
    from showcase.runfolder.artefacts import redact_text

    key = os.environ.get("SHOWCASE_UPSTREAM_KEY")
    for i, setup in enumerate(plan.setup, 1):
        if setup.upstream is None:
            continue
        reason = asyncio.run(probe_upstream(setup.upstream, setup.model, key, timeout_s=15))
        if reason:
            raise UserError(f"plan {plan_path}: setup {i} ({setup.name}) upstream: {redact_text(reason)}")


def _open_record(out: Path, plan_path: Path, plan: Plan, sha: str, ray_version: str | None,
                 ray_address: str | None) -> BatchRecord:
    record = read_record(out) if out.is_dir() else None
    names = [p.name for p in planned_runs(plan)]
    if record is None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UserError(f"{out} exists and holds no batch.json; choose an empty or new --out")
        runs = [RunState(name=p.name, setup=p.setup, repeat=p.repeat, folder=p.name) for p in planned_runs(plan)]
        return BatchRecord(plan_file=str(plan_path), plan_sha256=sha, plan=plan, showcase_version=__version__,
                           ray_version=ray_version, ray_address=ray_address, started_at=now_iso(),
                           updated_at=now_iso(), runs=runs)
    if record.plan_sha256 != sha:
        raise UserError(f"{out} holds a batch of another plan (sha256 {record.plan_sha256[:12]}..., this one "
                        f"{sha[:12]}...); give that plan again or choose another --out")
    if [r.name for r in record.runs] != names:  # same bytes, same runs; a hand-edited record is not ours
        raise UserError(f"{out}/batch.json does not list this plan's runs; choose another --out")
    record.restarts += 1
    record.showcase_version, record.ray_version, record.ray_address = __version__, ray_version, ray_address
    return record


def _score(folder: Path) -> float | None:
    from showcase.check.models import CheckReport

    try:
        with open(folder / "check.json", "rb") as handle:
            raw = handle.read(CHECK_CAP_BYTES + 1)
        return CheckReport.model_validate_json(raw).total if len(raw) <= CHECK_CAP_BYTES else None
    except (OSError, ValueError):
        return None


def _prepare_images(plan: Plan, say: Callable[[str], None]) -> None:
    """Every harness's image once, before any run: no image build beside a run's final check."""
    from showcase.harness import load_harness
    from showcase.sandbox.base import get_backend
    from showcase.sandbox.image import ensure_image

    reason = get_backend("docker").unavailable_reason()
    if reason:
        raise UserError(f"sandbox backend docker: {reason}")
    for harness in dict.fromkeys(s.harness for s in plan.setup):
        say(f"image: sandbox image for harness {harness} (built once, cached by content hash)")
        ensure_image(load_harness(harness), progress=lambda msg: say(f"  {msg}"))


class _Pool:
    """CPU and memory of this host, taken by each running run's limits; a run too big for an idle machine still runs alone."""

    def __init__(self, cpus: float, memory: int, max_parallel: int | None):
        self.cpus, self.memory, self.max_parallel = cpus, memory, max_parallel
        self.running: dict[str, Job] = {}

    def fits(self, job: Job) -> bool:
        if not self.running:
            return True
        if self.max_parallel is not None and len(self.running) >= self.max_parallel:
            return False
        cpus = sum(j.cpus for j in self.running.values()) + job.cpus
        memory = sum(j.memory_bytes for j in self.running.values()) + job.memory_bytes
        return cpus <= self.cpus + 1e-9 and memory <= self.memory


def run_batch(plan_path: Path, out: Path, say: Callable[[str], None] = print,
              update: Callable[[BatchRecord], None] = lambda record: None, ray_address: str | None = None) -> BatchRecord:
    """Run (or resume) the batch of plan_path in out; returns the record as written last."""
    plan, sha = load_plan(plan_path)
    cpus, memory = host_capacity()
    jobs = build_jobs(plan, plan_path, cpus)
    _probe_upstreams(plan, plan_path)
    cluster = None
    if ray_address is not None:
        cluster = RayCluster.connect(ray_address)
    else:
        _prepare_images(plan, say)
    out.mkdir(parents=True, exist_ok=True)
    record = _open_record(out, plan_path, plan, sha, cluster.version if cluster else None, ray_address)
    lock = threading.Lock()

    def save() -> None:
        with lock:
            record.write(out)
            update(record)

    by_name = {r.name: r for r in record.runs}
    for state in record.runs:
        job = jobs[state.name]
        job.previous_pid, job.previous_pid_started = state.pid, state.pid_started
        if has_report(out / state.folder):
            if state.state != "done":
                state.kept = True
            state.state, state.score = "done", _score(out / state.folder)
        else:
            state.state = "pending"
    save()

    def started(name: str) -> Callable[[int, float], None]:
        def on_start(pid: int | None, pid_started: float | None) -> None:
            state = by_name[name]
            state.pid, state.pid_started = pid, pid_started  # None: on a Ray node, not this host's
            state.attempts += 1
            state.state = "finalizing" if (out / name / "contract.json").is_file() else "running"
            state.started_at = state.started_at or now_iso()
            save()
        return on_start

    def finished(result: JobResult) -> None:
        state = by_name[result.name]
        state.state, state.exit_code, state.error, state.node = result.state, result.exit_code, result.error, result.node
        state.kept = state.kept or result.kept
        state.pid = state.pid_started = None
        state.ended_at = now_iso()
        state.score = _score(out / state.folder)
        save()

    pending = [jobs[s.name] for s in record.runs if s.state == "pending"]
    if cluster is not None:
        try:
            run_jobs(cluster, pending, out, started, finished, say)
        finally:
            cluster.close()
    else:
        _run_local(pending, out, _Pool(cpus, memory, plan.max_parallel), started, finished, say)

    done = [out / s.folder for s in record.runs if s.state == "done"]
    if done:
        from showcase.report import write_comparison

        write_comparison(done, out / "comparison.html")
        record.comparison = "comparison.html"
        save()
    failed = [s for s in record.runs if s.state != "done"]
    if failed:
        first = failed[0]
        raise BatchFailed(f"{len(failed)} of {len(record.runs)} runs failed; first {first.name}: {first.error} "
                          f"(its output: {out / 'logs' / (first.name + '.log')}); start the batch again to retry them")
    return record


def _run_local(pending: list[Job], out: Path, pool: _Pool, started, finished, say) -> None:
    wake = threading.Condition()
    results: list[JobResult] = []

    def work(job: Job) -> None:
        try:
            result = execute_job(job, out, on_start=started(job.name), say=say)
        except Exception as exc:  # one run's fault (ours or the machine's) fails that run alone
            import socket

            result = JobResult(name=job.name, state="failed", node=socket.gethostname(),
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
        with wake:
            results.append(result)
            wake.notify_all()

    threads = []
    while pending or pool.running:
        with wake:
            while pending and pool.fits(pending[0]):
                job = pending.pop(0)
                pool.running[job.name] = job
                thread = threading.Thread(target=work, args=(job,), name=f"batch-{job.name}", daemon=True)
                threads.append(thread)
                thread.start()
            # Each run bounds itself (its hard stop plus AFTER_LIMIT_S); this only wakes the loop.
            wake.wait(timeout=5)
            while results:
                result = results.pop(0)
                pool.running.pop(result.name, None)
                finished(result)
    for thread in threads:
        thread.join(timeout=5)
