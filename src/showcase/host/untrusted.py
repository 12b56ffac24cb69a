"""Host reads and writes of the folders the agent controls (work/, agent/), and nothing else.

Everything under those folders may be an attack: a link to a host file (/etc/shadow,
/proc/self/environ), a FIFO that blocks whoever opens it, a 1 GiB sparse file, a folder swapped
for a link between a check and a read. So every path is walked one component at a time from a
handle on the folder the host made (openat with O_NOFOLLOW), never resolved first and opened
later; only regular files are read, without blocking, and never past a size cap. Whatever is
refused comes back as `Refused` with a short reason ("a link", "a FIFO", "larger than 16 MiB"),
so a caller records it and goes on.
"""

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_PAGE_CAP = 16 * 1024 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """An agent-controlled entry the host would not read or write; `reason` says why."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name} was {reason}: not kept")
        self.name = name
        self.reason = reason


def size_words(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _parts(rel: str) -> list[str]:
    parts = [p for p in str(rel).split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Refused(str(rel), "outside the folder")
    return parts


def _open_error(name: str, exc: OSError) -> Exception:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return Refused(name, "a link")  # O_NOFOLLOW on a link
    if exc.errno == errno.ENOTDIR:
        return Refused(name, "under something that is not a folder")
    if exc.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, "no such file", name)
    if exc.errno == errno.ENXIO:
        return Refused(name, "a socket or a device")
    return Refused(name, f"unreadable ({exc.strerror or exc})")


def open_dir_fd(base: Path | str) -> int:
    """A handle on a folder the host made (the caller closes it); a link there is refused."""
    try:
        return os.open(base, _DIR_FLAGS)
    except OSError as exc:
        raise _open_error(str(base), exc) from None


@contextmanager
def open_dir(base: Path | str, rel: str | None = None, *, make: bool = False) -> Iterator[int]:
    """A handle on `base/rel`, each component of rel opened with O_NOFOLLOW from the one before.

    base is a folder the host made (the run's work/ or agent/); rel is agent-controlled.
    With make, missing components are created (mode 0755) before they are opened.
    """
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in _parts(rel) if rel else []:
            if make:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _entry_error(fd, part, rel, exc) from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _entry_error(dir_fd: int, name: str, label: str, exc: OSError) -> Exception:
    """What the entry that failed to open is, told from the entry itself (never followed)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            pass
        else:
            if stat.S_ISLNK(mode) or exc.errno != errno.ENOTDIR:
                return Refused(label, _kind(mode))
    return _open_error(label, exc)


def _open_regular(dir_fd: int, name: str, label: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _entry_error(dir_fd, name, label, exc) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused(label, _kind(st.st_mode))
    return fd, st


def _read_upto(fd: int, limit: int) -> bytes:
    chunks, got = [], 0
    while got < limit:
        chunk = os.read(fd, min(1 << 20, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_file_at(dir_fd: int, name: str, cap: int, label: str | None = None) -> bytes:
    """The bytes of the regular file `name` in the folder dir_fd; Refused past `cap` bytes."""
    label = label or name
    fd, st = _open_regular(dir_fd, name, label)
    try:
        if st.st_size > cap:
            raise Refused(label, f"larger than {size_words(cap)}")
        data = _read_upto(fd, cap + 1)  # it may grow after the fstat
        if len(data) > cap:
            raise Refused(label, f"larger than {size_words(cap)}")
        return data
    finally:
        os.close(fd)


def read_regular(base: Path | str, rel: str, cap: int = DEFAULT_PAGE_CAP) -> bytes:
    """The bytes of base/rel if it is a regular file of at most `cap` bytes reached through no link.

    Raises FileNotFoundError when there is no such entry, Refused for anything else.
    """
    parts = _parts(rel)
    folder = "/".join(parts[:-1]) or None
    try:
        with open_dir(base, folder) as dir_fd:
            return read_file_at(dir_fd, parts[-1], cap, label=rel)
    except Refused as refused:
        raise Refused(str(rel), refused.reason) from None


def read_tail_at(dir_fd: int, name: str, limit: int) -> bytes:
    """At most the last `limit` bytes of a regular file (a log to scan), Refused if not regular."""
    fd, st = _open_regular(dir_fd, name, name)
    try:
        if st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        return _read_upto(fd, limit)
    finally:
        os.close(fd)


def regular_names(base: Path | str) -> list[str]:
    """Names of the entries of base that are regular files right now (links are not)."""
    with open_dir(base) as fd:
        with os.scandir(fd) as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))


def write_new(base: Path | str, rel_dir: str, name: str, data: bytes) -> Path:
    """Create base/rel_dir/name with `data`, never through a link and never over an existing entry.

    The folder is made if missing. Raises Refused if a component is a link or the name is taken.
    """
    if "/" in name or name in ("", ".", ".."):
        raise Refused(name, "not a plain file name")
    with open_dir(base, rel_dir, make=True) as dir_fd:
        try:
            fd = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            raise Refused(f"{rel_dir}/{name}", "already there") from None
        except OSError as exc:
            raise _open_error(f"{rel_dir}/{name}", exc) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    return Path(base) / rel_dir / name
