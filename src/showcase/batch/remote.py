"""A batch's runs on a Ray cluster (host/cluster.py): a job per run, the folder brought back whole.

A run also takes its container's CPUs from the node's CPU count. A run's folder is written in the
node's scratch folder and comes back as a tar archive of its regular files and folders only (the
folder holds what the agent left: a link is never followed, a FIFO never opened), bounded in
size, unpacked beside the batch and renamed into place. A node that dies mid-job: Ray runs the
job again elsewhere (max_retries); what is already back in the batch folder stays.
"""

import hashlib
import io
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Callable

from showcase.batch.job import Job, JobResult, execute_job, has_report, set_aside
from showcase.errors import InfraError
from showcase.host.cluster import RESOURCE, RETRIES, RayCluster, each_done, first_line, node_name
from showcase.io import write_bytes_atomic

SCRATCH_ENV = "SHOWCASE_RAY_SCRATCH"  # where a node writes its runs; default /var/tmp/showcase-ray
RUN_CAP_BYTES = 1 << 30  # a run folder is tens of MB (versions, gate bodies, clip); past this it is refused
MAX_ENTRIES = 100_000


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


# ---------------------------------------------------------------------------------------------
# The head's side.


def run_jobs(cluster: RayCluster, jobs: list[Job], out: Path, started, finished: Callable[[JobResult], None], say) -> None:
    """Every job on the cluster; each folder brought back into out as its job ends."""
    ray = cluster.ray
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
            set_aside(out / job.name)
        ref = remote.options(**options, num_cpus=job.cpus, resources={RESOURCE: 1},
                             name=f"showcase-run-{job.name}").remote(job, batch_id)
        refs[ref] = job
        started(job.name)(None, None)
    for job, answer, exc in each_done(ray, refs):
        if exc is not None:  # the job failed RETRIES+1 times (nodes died) or raised
            finished(JobResult(name=job.name, state="failed", node="?", error=f"on the cluster: {first_line(exc)}"))
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
