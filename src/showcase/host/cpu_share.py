"""The check's CPU share: while a check runs, its processes weigh `factor` times the default.

A page's frame rate is a verdict (item 5), and on a shared machine another process on a core took
a third or more of it. A nice value cannot hold Chromium: it sets its own threads' nice values (0
and -8, whatever it inherited). A CPU cgroup can: its weight counts against every other group and
process of the machine, and nothing inside can leave it without root.

The group is `showcase-check` at the top of the cpu controller's hierarchy (cgroup v1
`cpu.shares`, v2 `cpu.weight`). The check moves this process into it before Playwright starts its
driver and the browser, which inherit it, and back where it was once they are gone. Checks running
at once in one process share one entry. Without root or a cpu controller the check runs at the
machine's default share, and check.json says why.
"""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

GROUP = "showcase-check"
V1_DEFAULT_SHARES = 1024
V2_DEFAULT_WEIGHT, V2_MAX_WEIGHT = 100, 10000


@dataclass(frozen=True)
class _Hierarchy:
    mount: Path
    version: int  # 1 or 2
    ours: str  # this process's cgroup in it, e.g. "/" or "/user.slice/session-1.scope"


def _hierarchy() -> _Hierarchy:
    """Where the cpu controller is mounted and where this process is in it (OSError if nowhere)."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    cgroups = Path("/proc/self/cgroup").read_text().splitlines()
    for line in mounts:
        _, mount, kind, options, *_ = line.split()
        if kind == "cgroup" and "cpu" in options.split(","):
            for entry in cgroups:
                _, controllers, path = entry.split(":", 2)
                if "cpu" in controllers.split(","):
                    return _Hierarchy(Path(mount), 1, path)
    for line in mounts:
        _, mount, kind, *_ = line.split()
        if kind == "cgroup2" and "cpu" in (Path(mount) / "cgroup.controllers").read_text().split():
            for entry in cgroups:
                if entry.startswith("0::"):
                    return _Hierarchy(Path(mount), 2, entry[3:])
    raise OSError("no cpu controller is mounted (neither cgroup v1 `cpu` nor v2 with `cpu`)")


def _write(path: Path, text: str) -> None:
    # cgroup files take one write each; Path.write_text would also truncate, which they refuse
    with open(path, "w") as handle:
        handle.write(text)


def _join(where: Path) -> None:
    _write(where / "cgroup.procs", str(os.getpid()))


class _Entry:
    """One process-wide entry into the group, counted over the checks that hold it."""

    lock = threading.Lock()
    holders = 0
    home: Path | None = None  # where this process was before it joined
    state = ""

    @classmethod
    def acquire(cls, factor: float) -> str:
        with cls.lock:
            if cls.holders == 0:
                cls.state, cls.home = cls._enter(factor)
            cls.holders += 1
            return cls.state

    @classmethod
    def release(cls) -> None:
        with cls.lock:
            cls.holders -= 1
            if cls.holders == 0 and cls.home is not None:
                home, cls.home = cls.home, None
                try:
                    _join(home)
                except OSError:
                    try:
                        _join(_hierarchy().mount)  # our old group went away meanwhile
                    except OSError:
                        pass  # still in the group: later work here weighs more, nothing is lost

    @staticmethod
    def _enter(factor: float) -> tuple[str, Path | None]:
        if os.geteuid() != 0:
            return "the machine's default: only root may move the check into a CPU group", None
        try:
            h = _hierarchy()
            group = h.mount / GROUP
            group.mkdir(exist_ok=True)
            if h.version == 1:
                _write(group / "cpu.shares", str(round(V1_DEFAULT_SHARES * factor)))
                weight = f"cpu.shares {round(V1_DEFAULT_SHARES * factor)}"
            else:
                if "cpu" not in (group / "cgroup.controllers").read_text().split():
                    _write(h.mount / "cgroup.subtree_control", "+cpu")
                value = min(V2_MAX_WEIGHT, round(V2_DEFAULT_WEIGHT * factor))
                _write(group / "cpu.weight", str(value))
                weight = f"cpu.weight {value}"
            _join(group)
        except OSError as exc:
            return f"the machine's default: the CPU group could not be used ({exc.strerror or exc})", None
        return f"cgroup v{h.version} {group} ({weight}, {factor:g}x the default)", h.mount / h.ours.lstrip("/")


@contextmanager
def raised(factor: float) -> Iterator[str]:
    """Run the body with this process (and what it starts) in the check's CPU group.

    Yields what check.json records: the group and its weight, or why the default share was kept."""
    state = _Entry.acquire(factor)
    try:
        yield state
    finally:
        _Entry.release()


def group_of(pid: int) -> str | None:
    """The cpu cgroup of a process, as /proc shows it (None if it is gone)."""
    try:
        version = _hierarchy().version
        for entry in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            num, controllers, path = entry.split(":", 2)
            if (version == 1 and "cpu" in controllers.split(",")) or (version == 2 and num == "0"):
                return path
    except OSError:
        return None
    return None
