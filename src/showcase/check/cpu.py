"""Foreign CPU load during a check: all busy time (/proc/stat) minus our own processes' time."""

import os
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _busy_total() -> float | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        v = [int(x) for x in fields]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return (sum(v[:8]) - idle) / _TICK
    except (OSError, ValueError, IndexError):
        return None


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system seconds) of a process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        rest = raw[raw.rindex(")") + 2:].split()
        return int(rest[1]), (int(rest[11]) + int(rest[12])) / _TICK
    except (OSError, ValueError, IndexError):
        return None


def _processes() -> dict[int, tuple[int, float]]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _proc_stat(int(d))) is not None:
            out[int(d)] = st
    return out


def find_pid_with_arg(marker: str) -> int | None:
    """The pid of the process whose command line holds `marker` (our browser, tagged at launch)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{d}/cmdline").read_bytes():
                return int(d)
        except OSError:
            continue
    return None


def _tree_seconds(root: int | None, procs: dict[int, tuple[int, float]]) -> float:
    if root is None or root not in procs:
        return 0.0
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += procs[pid][1]
        stack.extend(children.get(pid, []))
    return total


class ForeignCpu:
    """Start/stop meter; `cores()` is the mean number of cores others kept busy in between."""

    def __init__(self) -> None:
        self.browser_pid: int | None = None
        self._start: tuple[float, float, float] | None = None

    def _sample(self) -> tuple[float, float, float] | None:
        busy = _busy_total()
        if busy is None:
            return None
        procs = _processes()
        ours = _tree_seconds(self.browser_pid, procs) + (procs.get(os.getpid(), (0, 0.0))[1])
        return time.monotonic(), busy, ours

    def start(self) -> None:
        self._start = self._sample()

    def cores(self) -> float | None:
        end = self._sample()
        if not self._start or not end or end[0] - self._start[0] < 0.5:
            return None
        foreign = (end[1] - self._start[1]) - (end[2] - self._start[2])
        return round(max(0.0, foreign) / (end[0] - self._start[0]), 2)
