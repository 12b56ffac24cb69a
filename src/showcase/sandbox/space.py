"""A run's writable space: one filesystem image, so the kernel itself bounds what the agent writes.

`RunSpace.open()` makes a sparse file of `cap` bytes beside the folders it covers, formats it
ext4 (no reserved blocks: the agent gets all of it), loop-mounts it nosuid,nodev,discard
at <parent>/.space/mnt and bind-mounts one sub-folder of it over each covered host folder
(work/, agent/), so every path the host uses stays the same. A write past the cap fails with
ENOSPC inside the sandbox; the host's disk gives at most `cap` bytes (the file is sparse).

`RunSpace.close()` undoes it and leaves the covered folders as plain folders: it copies regular
files and folders out of the image (never a link, a FIFO or a device; hard links stay links;
holes stay holes, so the copy is bounded by what the image really holds), deleting each source
file as it goes (with `discard` the image gives its blocks back, so the peak stays near the cap),
then unmounts and deletes the image. It resumes wherever an earlier close was interrupted, from
a mounted or an unmounted image, so `finalize` after a `kill -9` can call it whatever state the
space is in. Unmounting never follows a link (umount2 with UMOUNT_NOFOLLOW).

space.json records who owns the space (process id and start time, boot id): `sweep_mounts()`
unmounts the spaces of owners that are gone, never one whose owner still runs. A lock on the
.space folder (flock) keeps one process at a time unmounting or copying out of a space: two runs
finalized at once each sweep the other's dead owner, and a sweep must not unmount a space while
another process's close() copies out of it; a sweep skips a space that is held.
"""

import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from showcase.errors import InfraError, UserError
from showcase.io import write_json_atomic
from showcase.sandbox.base import RUN_LABEL

SPACE_DIR = ".space"
IMAGE_NAME = "space.img"
STATE_NAME = "space.json"
MOUNT_OPTIONS = "loop,nosuid,nodev,discard"
MAX_ENTRIES = 1_000_000  # copied entries at most (an ext4 image of the default cap has ~262k inodes)
MAX_DEPTH = 128  # folders deep at most
FULL_MARGIN = 1 << 20  # free bytes at or under which the space counts as full
HOLD_WAIT_S = 300.0  # how long close() waits for a space another process holds (its own close of a full cap)

_MNT_DETACH = 2
_UMOUNT_NOFOLLOW = 8
_MS_BIND = 4096


class Owner(BaseModel):
    """The process that owns a space or a sandbox: alive only while that very process runs."""

    pid: int
    start_ticks: int = Field(description="the process's start time (/proc/PID/stat field 22)")
    boot_id: str = Field(description="/proc/sys/kernel/random/boot_id: a pid means nothing after a reboot")
    pid_ns: str = Field(description="the pid namespace the pid belongs to")

    @classmethod
    def me(cls) -> "Owner":
        return cls(pid=os.getpid(), start_ticks=_start_ticks(os.getpid()) or 0, boot_id=_boot_id(), pid_ns=_pid_ns())

    def alive(self) -> bool:
        """Gone only when known to be gone: another boot, or this namespace's pid no longer that process."""
        if self.boot_id != _boot_id():
            return False
        if self.pid_ns != _pid_ns():
            return True  # a pid of another namespace: cannot tell, so never judged dead
        return _start_ticks(self.pid) == self.start_ticks

    def label(self) -> str:
        return f"{self.boot_id}:{self.pid_ns}:{self.pid}:{self.start_ticks}"

    @classmethod
    def from_label(cls, text: str) -> "Owner | None":
        try:
            boot, ns, pid, ticks = text.rsplit(":", 3)
            return cls(pid=int(pid), start_ticks=int(ticks), boot_id=boot, pid_ns=ns)
        except ValueError:
            return None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return "unknown"


def _start_ticks(pid: int) -> int | None:
    """When a live process started (clock ticks after boot); None when it is gone or has ended.

    A zombie has ended: a killed run's process stays one until its new parent reaps it (a batch
    restarted at once found its cut run "still running" that way)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    fields = stat_line.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


class SpaceState(BaseModel):
    """space.json: what close() and the sweep need to know about a space."""

    cap_bytes: int
    folders: list[str] = Field(description="names of the covered folders (siblings of .space/)")
    owner: Owner
    created_at: float
    sweep_label: str = Field(RUN_LABEL, description="the sweep that may unmount it once its owner is gone "
                             "(the label of its sandbox's sweep; see SandboxSpec.sweep_label)")


MAX_SKIPPED_NAMED = 50  # skipped entries named one by one; the rest are counted
MAX_NAME_CHARS = 240  # a skipped entry's name is cut in the middle past this (a 128-deep path runs to 32 KiB)


class SkippedEntry(BaseModel):
    """One entry of the agent's folders that was not copied, and why."""

    name: str = Field(description="its path inside the space, e.g. 'work/a/b', cut in the middle past "
                      f"{MAX_NAME_CHARS} characters")
    reason: str = Field(description="why, in words that follow 'was': 'a link', 'a FIFO', "
                        f"'a folder deeper than {MAX_DEPTH} levels (with all it holds)' ...")


class CloseReport(BaseModel):
    """What close() did: the figures a run records."""

    copied_files: int = 0
    copied_bytes: int = 0
    skipped: list[SkippedEntry] = Field(default_factory=list, description="entries not copied (links, FIFOs, "
                                        f"devices, past a bound), the first {MAX_SKIPPED_NAMED}")
    skipped_count: int = Field(0, description="every entry not copied, the ones past the named ones included")
    full: bool = Field(False, description="the space had at most FULL_MARGIN bytes free when closed")
    seconds: float = 0.0


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _umount(path: Path) -> None:
    """Unmount exactly `path`, never through a link; detach lazily if something still uses it."""
    libc = _libc()
    target = os.fsencode(path)
    if libc.umount2(target, _UMOUNT_NOFOLLOW) == 0:
        return
    err = ctypes.get_errno()
    if err == errno.EBUSY and libc.umount2(target, _UMOUNT_NOFOLLOW | _MNT_DETACH) == 0:
        return
    if err in (errno.EINVAL, errno.ENOENT):  # not a mount point (any more)
        return
    raise InfraError(f"cannot unmount {path}: {os.strerror(err)}")


def _bind(source: Path, target: Path) -> None:
    if _libc().mount(os.fsencode(source), os.fsencode(target), None, _MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise InfraError(f"cannot bind {source} over {target}: {os.strerror(err)}")


def mount_points() -> set[str]:
    """Every mount point of this mount namespace (/proc/self/mountinfo, octal escapes decoded)."""
    try:
        lines = Path("/proc/self/mountinfo").read_bytes().splitlines()
    except OSError:
        return set()
    unescape = lambda m: bytes([int(m.group(1), 8)])  # noqa: E731
    return {os.fsdecode(re.sub(rb"\\([0-7]{3})", unescape, f[4])) for f in (line.split(b" ") for line in lines) if len(f) > 4}


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def is_mounted(path: Path, points: set[str] | None = None) -> bool:
    return str(path) in (points if points is not None else mount_points())


def unavailable_reason() -> str | None:
    """None when this machine can make run spaces (root, mkfs.ext4, loop devices), else why not."""
    if os.geteuid() != 0:
        return "a bounded run space needs root (a loop-mounted image); use --disk none to run without a disk cap"
    if shutil.which("mkfs.ext4") is None:
        return "mkfs.ext4 is missing (apt-get install e2fsprogs)"
    if not Path("/dev/loop-control").exists():
        return "no loop devices (/dev/loop-control missing)"
    return None


class RunSpace:
    """The space under `parent` covering the sibling folders `folders` (e.g. work, agent)."""

    def __init__(self, parent: Path, folders: list[str] | None = None):
        # Resolved: mountinfo names mount points by their real path. The parent is the host's (the
        # run folder), never a folder the agent controls.
        self.parent = Path(parent).resolve()
        self.dir = self.parent / SPACE_DIR
        self.image = self.dir / IMAGE_NAME
        self.state_path = self.dir / STATE_NAME
        self.mnt = self.dir / "mnt"
        self.out = self.dir / "out"
        self._folders = folders

    @property
    def folders(self) -> list[str]:
        if self._folders is None:
            self._folders = self.state().folders if self.state_path.is_file() else []
        return self._folders

    def exists(self) -> bool:
        return self.dir.is_dir()

    def state(self) -> SpaceState:
        return SpaceState.model_validate_json(self.state_path.read_text())

    @contextmanager
    def held(self, wait_s: float | None) -> Iterator[bool]:
        """Hold the space's lock while the block runs; yields whether it was got.

        wait_s None: do not wait (a sweep passes by a space in use). The lock goes with the
        process, so a killed holder never leaves it held."""
        try:
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # gone meanwhile (closed by its holder): nothing to hold
            yield False
            return
        try:
            deadline = time.monotonic() + (wait_s or 0.0)
            while not (got := _try_lock(fd)) and time.monotonic() < deadline:
                time.sleep(0.1)
            yield got
        finally:
            os.close(fd)  # and with it the lock

    # --- open ----------------------------------------------------------------------------------------

    def open(self, cap_bytes: int, uid: int, gid: int, sweep_label: str = RUN_LABEL) -> dict[str, float]:
        """Make, format and mount the image; bind its sub-folders over the covered folders.

        Returns the seconds each step took (create, mkfs, mount). On any failure nothing stays mounted.
        """
        reason = unavailable_reason()
        if reason:
            raise InfraError(reason)
        if cap_bytes < 16 << 20:
            raise UserError(f"a disk cap of {cap_bytes} bytes is too small (at least 16 MiB)")
        if self.exists():
            raise UserError(f"{self.parent} already has a run space ({self.dir}); finish it with `showcase finalize`")
        timings = {}
        started = time.monotonic()
        self.mnt.mkdir(parents=True)
        self.dir.chmod(0o700)  # the image and its mount are the host's business only
        write_json_atomic(self.state_path, SpaceState(cap_bytes=cap_bytes, folders=self.folders,
                                                       owner=Owner.me(), created_at=time.time(),
                                                       sweep_label=sweep_label))
        with open(self.image, "xb") as f:
            f.truncate(cap_bytes)  # sparse: costs the host nothing until written
        timings["create_s"] = time.monotonic() - started
        try:
            started = time.monotonic()
            _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "showcase-run",
                  "-E", f"lazy_itable_init=1,lazy_journal_init=1,root_owner={uid}:{gid}", str(self.image)])
            timings["mkfs_s"] = time.monotonic() - started
            started = time.monotonic()
            _run(["mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mnt)])
            lost = self.mnt / "lost+found"
            if lost.is_dir():
                lost.rmdir()
            for name in self.folders:
                inner = self.mnt / name
                inner.mkdir()
                os.chown(inner, uid, gid)
                host = self.parent / name
                host.mkdir(exist_ok=True)
                # What the folder already holds goes into the space (the mount would hide it).
                _copy_tree(host, inner, CloseReport(), [cap_bytes], delete_source=False, names_from=self.parent)
                _bind(inner, host)
            timings["mount_s"] = time.monotonic() - started
        except BaseException:
            self._unmount_all()
            raise
        return timings

    # --- while it runs ------------------------------------------------------------------------------

    def free_bytes(self) -> int | None:
        """Bytes the agent can still write, or None when the space is not mounted."""
        if not is_mounted(self.mnt):
            return None
        st = os.statvfs(self.mnt)
        return st.f_bavail * st.f_frsize

    def is_full(self) -> bool:
        free = self.free_bytes()
        return free is not None and free <= FULL_MARGIN

    # --- close ---------------------------------------------------------------------------------------

    def close(self) -> CloseReport:
        """Leave the covered folders plain, holding what the image held; nothing mounted, no image.

        Call only once nothing writes into the space (the sandbox is gone). Safe to call again
        after an interruption at any point, and a no-op when there is no space.
        """
        report = CloseReport()
        if not self.exists():
            return report
        with self.held(HOLD_WAIT_S) as got:
            if not got:
                raise InfraError(f"{self.dir} is held by another process for over {HOLD_WAIT_S:.0f} s "
                                 "(another finalize of this run?); try again once it has ended")
            if not self.exists():  # the holder we waited for closed it
                return report
            return self._close(report)

    def _close(self, report: CloseReport) -> CloseReport:
        if not self.state_path.is_file() and self.image.exists():
            raise InfraError(f"{self.state_path} is missing: cannot tell which folders {self.image} holds")
        started = time.monotonic()
        points = mount_points()
        for name in self.folders:
            if is_mounted(self.parent / name, points):
                _umount(self.parent / name)
        if self.image.is_file() and not is_mounted(self.mnt, points):
            # Showcase died and the mount went with the machine (or a sweep): mount it again to copy out.
            _run(["mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mnt)])
            points = mount_points()
        if is_mounted(self.mnt, points):
            report.full = self.is_full()
            budget = [self.state().cap_bytes if self.state_path.is_file() else 0]
            for name in self.folders:
                source = self.mnt / name
                if source.is_dir() and not source.is_symlink():
                    _copy_tree(source, self.out / name, report, budget, names_from=self.mnt)
            _umount(self.mnt)
        for name in self.folders:
            copied = self.out / name
            if not copied.is_dir():
                continue
            host = self.parent / name
            if is_mounted(host):
                raise InfraError(f"{host} is still mounted: not replacing it")
            if host.is_dir() and not host.is_symlink():
                shutil.rmtree(host)  # the empty folder the bind covered, or an earlier half copy
            os.replace(copied, host)
        self.image.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        report.seconds = time.monotonic() - started
        return report

    def unmount(self) -> None:
        """Unmount binds and image, keep the image (close() copies out later): for a dead owner's space."""
        self._unmount_all()

    def _unmount_all(self) -> None:
        points = mount_points()
        for name in self.folders:
            if is_mounted(self.parent / name, points):
                _umount(self.parent / name)
        if is_mounted(self.mnt, points):
            _umount(self.mnt)


def _run(cmd: list[str]) -> None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise InfraError(f"{cmd[0]} took over 120 s") from None
    if out.returncode != 0:
        raise InfraError(f"{cmd[0]} failed: {(out.stderr or out.stdout).strip()[-300:]}")


def _entry_name(path: Path, names_from: Path) -> str:
    """The entry's path inside the space ('work/a/b'), never the host's; cut in the middle when long."""
    try:
        name = path.relative_to(names_from).as_posix()
    except ValueError:
        name = path.name
    if len(name) > MAX_NAME_CHARS:
        keep = (MAX_NAME_CHARS - 3) // 2
        name = f"{name[:keep]}...{name[-keep:]}"
    return name


def _kind(mode: int) -> str:
    for test, words in ((stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return words
    return "not a regular file"


def _copy_tree(source: Path, target: Path, report: CloseReport, budget: list[int], delete_source: bool = True,
               names_from: Path | None = None) -> None:
    """Copy regular files and folders from source to target, deleting each source file once copied.

    No link is followed (lstat, O_NOFOLLOW); hard links are recreated as links; data is copied
    extent by extent (holes stay holes); the whole copy writes at most budget[0] bytes, walks at
    most MAX_DEPTH folders deep and MAX_ENTRIES entries (iteratively: no recursion to exhaust).
    Each entry left out is one SkippedEntry of `report`, named from `names_from` (default: the
    folder above source).
    """
    names_from = names_from if names_from is not None else source.parent

    def skip(path: Path, why: str) -> None:
        report.skipped_count += 1
        if len(report.skipped) < MAX_SKIPPED_NAMED:
            report.skipped.append(SkippedEntry(name=_entry_name(path, names_from), reason=why))

    target.mkdir(parents=True, exist_ok=True)
    linked: dict[tuple[int, int], Path] = {}
    entries = 0
    stack = [(source, target, 0)]
    while stack:
        here, there, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                names = sorted(entry.name for entry in it)
        except OSError as exc:
            skip(here, f"unreadable ({exc.strerror or exc})")
            continue
        for name in names:
            entries += 1
            path = here / name
            if entries > MAX_ENTRIES:
                skip(path, f"past the first {MAX_ENTRIES:,} entries")
                continue
            try:
                st = path.lstat()
            except OSError as exc:
                skip(path, f"unreadable ({exc.strerror or exc})")
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    skip(path, f"a folder deeper than {MAX_DEPTH} levels (with all it holds)")
                    continue
                try:
                    (there / name).mkdir(exist_ok=True)
                except OSError as exc:
                    skip(path, f"not copied ({exc.strerror or exc})")
                    continue
                stack.append((path, there / name, depth + 1))
                continue
            if not stat.S_ISREG(st.st_mode):
                skip(path, _kind(st.st_mode))
                continue
            key = (st.st_dev, st.st_ino)
            try:
                if st.st_nlink > 1 and key in linked:
                    dest = there / name
                    dest.unlink(missing_ok=True)
                    os.link(linked[key], dest)
                else:
                    written = _copy_file(path, there / name, budget[0])
                    budget[0] -= written
                    report.copied_bytes += written
                    linked[key] = there / name
                report.copied_files += 1
                if delete_source:
                    path.unlink()
            except _OverBudget:
                skip(path, "over the space's cap")
            except OSError as exc:
                skip(path, f"not copied ({exc.strerror or exc})")


class _OverBudget(Exception):
    pass


def _copy_file(source: Path, dest: Path, budget: int) -> int:
    """Copy the data extents of one regular file (never through a link); returns bytes written."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_blocks * 512 > budget + (1 << 20):
            raise _OverBudget()
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        written = 0
        try:
            offset = 0
            while offset < st.st_size:
                try:
                    start = os.lseek(fd, offset, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # only a hole is left
                        break
                    raise
                end = os.lseek(fd, start, os.SEEK_HOLE)
                while start < end:
                    if written >= budget:
                        raise _OverBudget()
                    chunk = os.pread(fd, min(1 << 20, end - start), start)
                    if not chunk:
                        break
                    os.pwrite(out, chunk, start)
                    start += len(chunk)
                    written += len(chunk)
                offset = end
            os.ftruncate(out, st.st_size)
            os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o755 | 0o644)
        finally:
            os.close(out)
        return written
    finally:
        os.close(fd)


def sweep_mounts(under: list[Path] | None = None, label: str = RUN_LABEL) -> list[str]:
    """Unmount the spaces whose owner is gone (the image stays: close() copies it out later).

    Only mounts named <folder>/.space/mnt with a space.json beside them are considered; a space
    whose owner still runs, or whose space.json cannot be read, is left alone. under: only the
    spaces of folders inside these (None: every one on the machine). label: only the spaces
    opened for that sweep (SpaceState.sweep_label).
    """
    roots = [Path(root).resolve() for root in under] if under is not None else None
    done = []
    for point in sorted(mount_points()):
        path = Path(point)
        if path.name != "mnt" or path.parent.name != SPACE_DIR:
            continue
        if roots is not None and not any(path.is_relative_to(root) for root in roots):
            continue
        space = RunSpace(path.parent.parent)
        with space.held(None) as got:
            if not got:
                continue  # someone closes it now (a finalize): it is theirs
            try:
                state = space.state()
            except (OSError, ValueError):
                continue
            if state.sweep_label != label or state.owner.alive() or not is_mounted(space.mnt):
                continue
            space.unmount()
        done.append(f"unmounted the space of a dead run in {space.parent}")
    return done
