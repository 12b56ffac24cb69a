"""Runs and checks on a Ray cluster (the `ray` extra): a job per run or page, the folder brought back whole.

Each node that can take a job (a Docker engine, Chromium, the npm cache) says so with the custom
resource `showcase` (how many jobs at once); a run also takes its container's CPUs from the node's
CPU count. A run's folder is written in the node's scratch folder and comes back as a tar archive
of its regular files and folders only (the folder holds what the agent left: a link is never
followed, a FIFO never opened), bounded in size, unpacked beside the batch and renamed into
place. A node that dies mid-job: Ray runs the job again elsewhere (max_retries); what is already
back in the batch folder stays.
"""

import hashlib
import io
import os
import shutil
import socket
import stat
import tarfile
import time
from pathlib import Path
from typing import Callable

from showcase.batch.job import Job, JobResult, execute_job, has_report
from showcase.errors import InfraError, UserError
from showcase.io import write_bytes_atomic

RESOURCE = "showcase"
SCRATCH_ENV = "SHOWCASE_RAY_SCRATCH"  # where a node writes its runs; default /var/tmp/showcase-ray
RUN_CAP_BYTES = 1 << 30  # a run folder is tens of MB (versions, gate bodies, clip); past this it is refused
SCREENSHOT_CAP_BYTES = 32 << 20
MAX_ENTRIES = 100_000
RETRIES = 3  # a job whose node died runs again on another, up to this many times
WAIT_S = 5.0


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'showcase[ray]'") from None
    return ray


def node_name() -> str:
    """host/node-id: two Ray nodes on one machine are told apart."""
    ray = _import_ray()
    try:
        node_id = ray.get_runtime_context().get_node_id()
    except Exception:
        node_id = None
    return f"{socket.gethostname()}/{node_id[:12]}" if node_id else socket.gethostname()


# ---------------------------------------------------------------------------------------------
# A hostile folder, packed and unpacked with bounds.

def pack_folder(folder: Path, cap_bytes: int = RUN_CAP_BYTES) -> bytes:
    """A tar archive of the regular files and folders under folder: links, FIFOs and devices left out,
    nothing read through a link, at most cap_bytes of content."""
    buffer = io.BytesIO()
    total = entries = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def walk(dir_fd: int, rel: str) -> None:
            nonlocal total, entries
            with os.scandir(dir_fd) as it:
                names = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in it)
            for name, is_dir, is_file in names:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise InfraError(f"{folder}: more than {MAX_ENTRIES} entries; not brought back")
                path = f"{rel}/{name}" if rel else name
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                if is_dir:
                    fd = os.open(name, flags | os.O_DIRECTORY, dir_fd=dir_fd)
                    try:
                        info = tarfile.TarInfo(path)
                        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, os.fstat(fd).st_mtime
                        tar.addfile(info)
                        walk(fd, path)
                    finally:
                        os.close(fd)
                elif is_file:
                    try:
                        fd = os.open(name, flags, dir_fd=dir_fd)
                    except OSError:
                        continue  # swapped for a link or gone since the scan: not kept
                    try:
                        st = os.fstat(fd)
                        if not stat.S_ISREG(st.st_mode):
                            continue
                        total += st.st_size
                        if total > cap_bytes:
                            raise InfraError(f"{folder}: more than {cap_bytes >> 20} MiB; not brought back")
                        info = tarfile.TarInfo(path)
                        info.size, info.mode, info.mtime = st.st_size, 0o644, st.st_mtime
                        with os.fdopen(os.dup(fd), "rb") as handle:
                            tar.addfile(info, _Exact(handle, st.st_size))
                    finally:
                        os.close(fd)

        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            walk(root, "")
        finally:
            os.close(root)
    return buffer.getvalue()


class _Exact(io.RawIOBase):
    """Exactly size bytes of a file (zeros if it shrank while read): the header's size stays true."""

    def __init__(self, handle, size: int):
        self.handle, self.left = handle, size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        n = min(len(b), self.left)
        data = self.handle.read(n) or b""
        data = data + b"\0" * (n - len(data))
        b[:n] = data
        self.left -= n
        return n


def unpack_folder(data: bytes, target: Path, cap_bytes: int = RUN_CAP_BYTES) -> None:
    """Unpack a pack_folder archive into target (which must not exist): files and folders only, inside target."""
    if target.exists():
        raise InfraError(f"{target} already exists; not overwritten")
    incoming = target.parent / f".{target.name}.incoming"
    if incoming.exists():
        shutil.rmtree(incoming)
    incoming.mkdir()
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
        if len(members) > MAX_ENTRIES:
            raise InfraError(f"{target.name}: more than {MAX_ENTRIES} entries")
        for m in members:
            if not (m.isreg() or m.isdir()):
                raise InfraError(f"{target.name}: the archive holds {m.name!r}, neither a file nor a folder")
            total += m.size
            if total > cap_bytes:
                raise InfraError(f"{target.name}: more than {cap_bytes >> 20} MiB")
        tar.extractall(incoming, members=members, filter="data")  # no absolute paths, no '..', no links
    os.rename(incoming, target)


# ---------------------------------------------------------------------------------------------
# What runs on a node.

def _batch_id(out: Path) -> str:
    """The batch's folder on a node: short (a run's gate socket path must stay under 108 bytes)
    and the same for the same DIR (a resumed batch finds its own)."""
    resolved = out.resolve().as_posix()
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(resolved).name)[:24]
    return f"{name}-{hashlib.sha256(resolved.encode()).hexdigest()[:10]}"


def _scratch(batch_id: str) -> Path:
    return Path(os.environ.get(SCRATCH_ENV) or "/var/tmp/showcase-ray") / batch_id


def _run_on_node(job: Job, batch_id: str) -> tuple[JobResult, bytes | None, bytes]:
    """(result, the run folder packed if it is done, the last MiB of the run's output)."""
    root = _scratch(batch_id)
    root.mkdir(parents=True, exist_ok=True)
    result = execute_job(job, root, node=node_name())
    log = _log_tail(root / "logs" / f"{job.name}.log")
    if result.state != "done":
        return result, None, log
    data = pack_folder(root / job.name)
    shutil.rmtree(root / job.name, ignore_errors=True)  # back on the head once this task's result is stored
    return result, data, log


def _log_tail(log: Path, cap: int = 1 << 20) -> bytes:
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - cap))
            return handle.read()
    except OSError:
        return b""


def _check_on_node(html: bytes, page_name: str, npm_dir: str | None) -> tuple[str, bytes | None, str]:
    import asyncio
    import tempfile

    from showcase.check.runner import check_page

    with tempfile.TemporaryDirectory(prefix="showcase-check-") as tmp:
        shot = Path(tmp) / "screenshot.png"
        report = asyncio.run(check_page(html, npm_dir=Path(npm_dir) if npm_dir else None, screenshot_path=shot,
                                        page_name=page_name))
        png = None
        if shot.is_file() and shot.stat().st_size <= SCREENSHOT_CAP_BYTES:
            png = shot.read_bytes()
    return report.model_dump_json(), png, node_name()


# ---------------------------------------------------------------------------------------------
# The head's side.

CONNECT_S = 10.0


def _answers(address: str) -> None:
    """A HOST:PORT that nothing answers on is one line now, not Ray's minutes of retries."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", ray://...: Ray's own forms, Ray's own waits
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise UserError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
                        "(docs/batch.md) or give its head's HOST:PORT") from None

class RayCluster:
    def __init__(self, ray, address: str):
        self.ray, self.address, self.version = ray, address, ray.__version__

    @classmethod
    def connect(cls, address: str) -> "RayCluster":
        ray = _import_ray()
        _answers(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False,
                     configure_logging=False)
        except Exception as exc:
            raise UserError(f"--ray {address}: cannot join the Ray cluster ({str(exc).splitlines()[0][:200]})") from None
        if not ray.cluster_resources().get(RESOURCE):
            ray.shutdown()
            raise UserError(f"--ray {address}: no node of that cluster offers the {RESOURCE!r} resource; start each node "
                            f"that has Docker, Chromium and the npm cache with --resources '{{\"{RESOURCE}\": 1}}'")
        return cls(ray, address)

    def close(self) -> None:
        self.ray.shutdown()

    def run_jobs(self, jobs: list[Job], out: Path, started, finished: Callable[[JobResult], None], say) -> None:
        """Every job on the cluster; each folder brought back into out as its job ends."""
        ray = self.ray
        options = {"max_retries": RETRIES, "retry_exceptions": False}
        key = os.environ.get("SHOWCASE_UPSTREAM_KEY")
        if key:  # a node's workers have the node's environment, not ours; the key goes with the job alone
            options["runtime_env"] = {"env_vars": {"SHOWCASE_UPSTREAM_KEY": key}}
        remote = ray.remote(_run_on_node)
        batch_id = _batch_id(out)
        refs = {}
        for job in jobs:
            if has_report(out / job.name):
                finished(JobResult(name=job.name, state="done", kept=True, exit_code=0, node="(kept)"))
                continue
            if (out / job.name).exists():
                # A folder that came back but holds no report (killed in the bring-back) is kept aside.
                from showcase.batch.job import set_aside

                set_aside(out / job.name)
            ref = remote.options(**options, num_cpus=job.cpus, resources={RESOURCE: 1},
                                 name=f"showcase-run-{job.name}").remote(job, batch_id)
            refs[ref] = job
            started(job.name)(None, None)
        for job, answer, exc in _each_done(ray, refs):
            if exc is not None:  # the job failed RETRIES+1 times (nodes died) or raised
                finished(JobResult(name=job.name, state="failed", node="?", error=f"on the cluster: {_first_line(exc)}"))
                continue
            result, data, log = answer
            try:
                write_bytes_atomic(out / "logs" / f"{job.name}.log", log)
                if result.state == "done":
                    unpack_folder(data, out / job.name)
            except (InfraError, OSError, tarfile.TarError) as exc:
                result = result.model_copy(update={"state": "failed", "error": f"bringing the folder back: {exc}"})
            say(f"{job.name}: {result.state} on {result.node}")
            finished(result)

    def check_pages(self, htmls: dict[Path, bytes], dirs: dict[Path, Path], npm_dir: Path | None):
        """The check of every page on the cluster; check.json and screenshot.png written here."""
        from showcase.check.cli import InternalError
        from showcase.check.models import CheckReport
        from showcase.check.runner import write_report
        from showcase.errors import ShowcaseError

        ray = self.ray
        remote = ray.remote(_check_on_node).options(num_cpus=1, resources={RESOURCE: 1}, max_retries=RETRIES)
        refs = {remote.remote(html, str(path), str(npm_dir) if npm_dir else None): path for path, html in htmls.items()}
        reports, failures, nodes = {}, {}, {}
        for path, answer, exc in _each_done(ray, refs):
            if exc is not None:
                cause = getattr(exc, "cause", None)
                failures[path] = cause if isinstance(cause, ShowcaseError) else InternalError(_first_line(exc))
                continue
            report_json, png, node = answer
            report = CheckReport.model_validate_json(report_json)
            write_report(report, dirs[path])
            if png is not None:
                write_bytes_atomic(dirs[path] / "screenshot.png", png)
            reports[path], nodes[path] = report, node
        return reports, failures, nodes


def _each_done(ray, refs: dict):
    """(key, answer, None) or (key, None, the exception ray.get raised), as each job of refs ends."""
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=WAIT_S)
        for ref in ready:
            key = refs.pop(ref)
            try:
                answer, error = ray.get(ref), None
            except Exception as exc:
                answer, error = None, exc
            yield key, answer, error


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def check_on_ray(htmls: dict[Path, bytes], dirs: dict[Path, Path], npm_dir: Path | None, address: str):
    cluster = RayCluster.connect(address)
    try:
        return cluster.check_pages(htmls, dirs, npm_dir)
    finally:
        cluster.ray.shutdown()


def wait_for_resource(address: str, count: float, timeout_s: float = 120.0) -> None:
    """For scripts that start a cluster: wait (bounded) until `count` of the resource is offered."""
    ray = _import_ray()
    ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
    try:
        deadline = time.monotonic() + timeout_s
        while ray.cluster_resources().get(RESOURCE, 0) < count:
            if time.monotonic() > deadline:
                raise InfraError(f"the Ray cluster at {address} did not offer {count:g} {RESOURCE} within {timeout_s:.0f} s")
            time.sleep(0.5)
    finally:
        ray.shutdown()
