"""One run of a batch, wherever it executes: a child `showcase run` (or `finalize`) into its folder.

A Job carries everything by value (the replay script, the sampling fields), so a Ray node needs
nothing of the head's disk. The same function runs it locally and on a node.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from showcase.host.lock import ENV as LOCK_ENV
from showcase.host.lock import host_lock_path
from showcase.io import write_json_atomic

AFTER_LIMIT_S = 3600.0  # image build, final check, clip and report on a busy machine, past the run's own hard stop
FINALIZE_S = 1800.0
GONE_WAIT_S = 60.0  # a run's showcase process that outlived its batch is given this long to die
TAIL_BYTES = 8192
ATTEMPTS_DIR = ".attempts"


class Job(BaseModel):
    """What one run needs, by value."""

    name: str = Field(description="the run's folder name, <setup>-<k>")
    run_args: list[str] = Field(description="`showcase run` options other than --upstream, --model, --out, --sampling-file")
    upstream: str | None = None
    model: str | None = None
    replay: dict[str, Any] | None = Field(None, description="a replay script to serve as the model for this run")
    sampling: dict[str, Any] = Field(default_factory=dict)
    limit_s: float = Field(description="the run's hard stop: the child is killed this long after it plus AFTER_LIMIT_S")
    clip: bool = True
    on_unfinished: Literal["finalize", "rerun"] = "finalize"
    cpus: float = Field(description="the container's CPUs: what the run takes of the machine")
    memory_bytes: int = Field(description="the container's memory plus the run's own browser and gate")
    previous_pid: int | None = None
    previous_pid_started: float | None = None


class JobResult(BaseModel):
    name: str
    state: Literal["done", "failed"]
    kept: bool = False
    exit_code: int | None = None
    error: str | None = None
    node: str


def has_report(folder: Path) -> bool:
    return (folder / "report.html").is_file() and not (folder / "report.html").is_symlink()


def _die_with_parent() -> None:
    # The run dies with the thread that started it: a killed batch leaves no run going on alone,
    # and its restart finalizes or reruns what was cut.
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _last_line(log: Path) -> str | None:
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return None
    errors = [ln for ln in lines if ln.startswith("error:")]
    line = (errors or lines or [None])[-1]
    return line[:500] if line else None


def wait_gone(pid: int | None, started: float | None, timeout_s: float = GONE_WAIT_S) -> bool:
    """Wait (bounded) for a process recorded earlier to be gone; a reused pid does not count."""
    import psutil

    if pid is None:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(pid)
            if started is not None and abs(proc.create_time() - started) > 1e-3:
                return True
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _child(args: list[str], log: Path, timeout_s: float, on_start: Callable[[int, float], None], env: dict) -> tuple[int, str | None]:
    import psutil

    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "showcase.cli", *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True, preexec_fn=_die_with_parent)
    try:
        on_start(proc.pid, psutil.Process(proc.pid).create_time())
    except psutil.NoSuchProcess:
        pass
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        return -9, f"did not end within {timeout_s:.0f} s; killed (`showcase finalize` completes it)"
    return code, None if code == 0 else _last_line(log)


def set_aside(folder: Path) -> Path:
    """An unfinished folder to be run again is moved, never deleted: DIR/.attempts/<name>.<n>/."""
    attempts = folder.parent / ATTEMPTS_DIR
    attempts.mkdir(exist_ok=True)
    n = 1
    while (attempts / f"{folder.name}.{n}").exists():
        n += 1
    target = attempts / f"{folder.name}.{n}"
    os.rename(folder, target)
    return target


def execute_job(job: Job, root: Path, on_start: Callable[[int, float], None] = lambda pid, started: None,
                say: Callable[[str], None] = lambda line: None, node: str | None = None) -> JobResult:
    """Run (or finish) one run in root/<name>/; its output goes to root/logs/<name>.log.

    node: what the contract records as the machine the run ran on (default: this host's name)."""
    result = _execute(job, root, on_start, say, node or socket.gethostname())
    if result.state == "done" and not result.kept:
        record_node(root / job.name, result.node)
    return result


def record_node(folder: Path, node: str) -> None:
    """contract.json on its own model, with the node the run ran on."""
    from showcase.runfolder.artefacts import Contract

    path = folder / "contract.json"
    try:
        with open(path, "rb") as handle:
            contract = Contract.model_validate_json(handle.read(1 << 20))
    except (OSError, ValueError):
        return  # the report already says what is wrong with it
    if contract.node != node:
        write_json_atomic(path, contract.model_copy(update={"node": node}))


def _execute(job: Job, root: Path, on_start, say, node: str) -> JobResult:
    from showcase.runfolder.artefacts import RunLayout

    folder, log = root / job.name, root / "logs" / f"{job.name}.log"
    env = {**os.environ, LOCK_ENV: str(host_lock_path(root))}
    if has_report(folder):
        return JobResult(name=job.name, state="done", kept=True, exit_code=0, node=node)
    if RunLayout(folder).looks_like_run():
        if not wait_gone(job.previous_pid, job.previous_pid_started):
            return JobResult(name=job.name, state="failed", node=node,
                             error=f"its earlier showcase process {job.previous_pid} is still running")
        if job.on_unfinished == "finalize" and RunLayout(folder).contract.is_file():
            say(f"{job.name}: unfinished; finalizing it from disk")
            args = ["finalize", str(folder)] + ([] if job.clip else ["--no-clip"])
            code, error = _child(args, log, FINALIZE_S, on_start, env)
            if code == 0 and has_report(folder):
                return JobResult(name=job.name, state="done", exit_code=0, node=node)
            say(f"{job.name}: finalize failed ({error}); running it again")
        moved = set_aside(folder)
        say(f"{job.name}: the unfinished folder is kept as {moved.relative_to(root)}; running it again")
    args = ["run", *job.run_args, "--out", str(folder)]
    if job.sampling:
        sampling = root / "logs" / f"{job.name}.sampling.json"
        write_json_atomic(sampling, job.sampling)
        args += ["--sampling-file", str(sampling)]
    if job.replay is not None:
        from showcase.replay import ReplayServer

        with ReplayServer(job.replay) as server:
            args += ["--upstream", server.base_url, "--model", job.model or server.script.model]
            code, error = _child(args, log, job.limit_s + AFTER_LIMIT_S, on_start, env)
    else:
        args += ["--upstream", job.upstream, "--model", job.model]
        code, error = _child(args, log, job.limit_s + AFTER_LIMIT_S, on_start, env)
    ok = code == 0 and has_report(folder)
    return JobResult(name=job.name, state="done" if ok else "failed", exit_code=code, node=node,
                     error=None if ok else (error or f"exit code {code}, no report.html"))

