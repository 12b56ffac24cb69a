"""Who else used the host's CPU while the run went.

A run's figures (minutes, tokens per second, the clip's smoothness) depend on the machine not
being busy with something else. This monitor samples every process on the host every few
seconds and keeps, for each one that is NOT part of the run, its peak CPU use and its CPU
seconds during the run, plus the host's load averages and the mean number of cores the others
kept busy (`foreign_cores`). Not part of the run: this process and its descendants (the
orchestrator, the gate, docker CLI calls), the run's container processes (given as pids, a
callable returning pids, or a cgroup substring such as the container id), and kernel threads.

The check meters with the same class, without a background thread (two samples, so nothing of
ours competes with the page it times) and without our descendants: a burner a test starts is
foreign to the check, only the check's own browser is not.
"""

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil
from pydantic import BaseModel, ConfigDict, Field

CMDLINE_CHARS = 120


class _Strict(BaseModel):
    # run-info.json holds these; a typo in a field name fails loudly instead of writing a partial file.
    model_config = ConfigDict(extra="forbid")


class ForeignProcess(_Strict):
    """A process on the host, not part of this run, that used CPU while the run went."""

    pid: int = Field(description="process id")
    name: str = Field(description="process name")
    cmdline: str = Field(description="command line, first 120 characters")
    peak_cpu_percent: float = Field(description="highest CPU use between two samples, percent of one CPU")
    cpu_seconds: float = Field(description="CPU seconds it used while the run was being watched")


class LoadSample(_Strict):
    t_s: float = Field(description="seconds since the monitor started")
    load1: float = Field(description="host 1-minute load average")
    load5: float = Field(description="host 5-minute load average")
    load15: float = Field(description="host 15-minute load average")


@dataclass
class _Track:
    pid: int
    name: str
    cmdline: str
    base_cpu_s: float  # CPU seconds already used before the run (0 for a process born during it)
    last_cpu_s: float
    last_t: float
    peak_percent: float = 0.0
    excluded: bool = False


def _cgroup_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            return handle.read()
    except OSError:
        return ""


def _is_kernel_thread(proc: psutil.Process, ppid: int) -> bool:
    # kthreadd is pid 2 and the parent of every kernel thread; pid 0 is the idle task.
    return proc.pid in (0, 2) or ppid == 2


class ForeignProcessMonitor:
    """Sample host processes in a background thread between `start()` and `stop()`.

    run_pids: pids of the run's own processes (e.g. the container's), or a callable returning
    them at each sample; their descendants are excluded too. run_cgroup: exclude processes whose
    /proc/PID/cgroup contains this text (e.g. the container id). Reported: processes whose peak
    CPU reached `min_peak_percent` or that used `min_cpu_seconds`.
    """

    def __init__(
        self,
        interval_s: float | None = 2.0,
        run_pids: Iterable[int] | Callable[[], Iterable[int]] | None = None,
        run_cgroup: str | None = None,
        min_peak_percent: float = 5.0,
        min_cpu_seconds: float = 1.0,
        own_descendants: bool = True,
    ) -> None:
        """interval_s None: no background sampling, only at start() and stop().
        own_descendants False: of this process only its own time is ours, not its children's."""
        self.interval_s = interval_s
        self._own_descendants = own_descendants
        self._busy: list[tuple[float, float]] = []  # (monotonic time, host busy CPU seconds) per sample
        self._run_pids = run_pids
        self._run_cgroup = run_cgroup
        self.min_peak_percent = min_peak_percent
        self.min_cpu_seconds = min_cpu_seconds
        self._tracks: dict[tuple[int, float], _Track] = {}
        self._load: list[LoadSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        self.samples = 0

    def start(self) -> "ForeignProcessMonitor":
        self._t0, self._wall0 = time.monotonic(), time.time()
        self._sample()  # baseline: CPU used before the run is not counted
        if self.interval_s is not None:
            self._thread = threading.Thread(target=self._loop, name="showcase-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> list[ForeignProcess]:
        """Stop sampling (one last sample first) and return the busy foreign processes, busiest first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._sample()
        return self.foreign_processes()

    def foreign_cores(self) -> float | None:
        """Mean cores kept busy by others from start() to the last sample: the host's busy time
        (/proc/stat, so short-lived processes count too) less the run's own processes' time.
        None over less than half a second, or without two samples."""
        with self._lock:
            if len(self._busy) < 2 or self._busy[-1][0] - self._busy[0][0] < 0.5:
                return None
            (t0, busy0), (t1, busy1) = self._busy[0], self._busy[-1]
            ours = sum(t.last_cpu_s - t.base_cpu_s for t in self._tracks.values() if t.excluded)
        return round(max(0.0, (busy1 - busy0) - ours) / (t1 - t0), 2)

    @property
    def load_samples(self) -> list[LoadSample]:
        with self._lock:
            return list(self._load)

    def foreign_processes(self) -> list[ForeignProcess]:
        with self._lock:
            tracks = [t for t in self._tracks.values() if not t.excluded]
        found = [
            ForeignProcess(
                pid=t.pid, name=t.name, cmdline=t.cmdline,
                peak_cpu_percent=round(t.peak_percent, 1), cpu_seconds=round(t.last_cpu_s - t.base_cpu_s, 2),
            )
            for t in tracks
        ]
        found = [p for p in found if p.peak_cpu_percent >= self.min_peak_percent or p.cpu_seconds >= self.min_cpu_seconds]
        return sorted(found, key=lambda p: (-p.cpu_seconds, -p.peak_cpu_percent, p.pid))

    # ------------------------------------------------------------------ internals

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception:  # a sampling hiccup must never take the run down
                continue

    def _excluded_pids(self) -> set[int]:
        roots = {os.getpid()} if self._own_descendants else set()
        if self._run_pids is not None:
            given = self._run_pids() if callable(self._run_pids) else self._run_pids
            roots |= {pid for pid in given if pid is not None}
        excluded = roots | {os.getpid()}
        for pid in roots:
            try:
                excluded |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
            except psutil.Error:
                pass
        return excluded

    def _sample(self) -> None:
        now = time.monotonic()
        host = psutil.cpu_times()
        busy = sum(host) - host.idle - getattr(host, "iowait", 0.0) - getattr(host, "guest", 0.0) - getattr(host, "guest_nice", 0.0)
        excluded = self._excluded_pids()
        load1, load5, load15 = os.getloadavg()
        seen: dict[tuple[int, float], _Track] = {}
        for proc in psutil.process_iter(["ppid", "name", "create_time", "cpu_times"]):
            info = proc.info
            times = info.get("cpu_times")
            created = info.get("create_time")
            if times is None or created is None:
                continue  # gone or not readable
            key = (proc.pid, created)
            track = self._tracks.get(key)
            cpu_s = times.user + times.system
            if track is None:
                born_during_run = created >= self._wall0
                try:
                    cmdline = " ".join(" ".join(proc.cmdline()).split())[:CMDLINE_CHARS]
                except psutil.Error:
                    cmdline = ""
                track = _Track(
                    pid=proc.pid, name=info.get("name") or "", cmdline=cmdline,
                    base_cpu_s=0.0 if born_during_run else cpu_s, last_cpu_s=cpu_s, last_t=now,
                )
                if born_during_run and self.samples:
                    # Born since the last sample: its whole life so far is within the run.
                    life = max(time.time() - created, 1e-3)
                    track.peak_percent = 100.0 * cpu_s / life
            else:
                elapsed = now - track.last_t
                if elapsed > 0:
                    track.peak_percent = max(track.peak_percent, 100.0 * (cpu_s - track.last_cpu_s) / elapsed)
                track.last_cpu_s, track.last_t = cpu_s, now
            if not track.excluded and (
                proc.pid in excluded
                or _is_kernel_thread(proc, info.get("ppid") or 0)
                or (self._run_cgroup and self._run_cgroup in _cgroup_of(proc.pid))
            ):
                track.excluded = True  # once part of the run, always part of it
            seen[key] = track
        with self._lock:
            self._tracks.update(seen)
            self._busy.append((now, busy))
            self._load.append(
                LoadSample(t_s=round(now - self._t0, 3), load1=load1, load5=load5, load15=load15)
            )
            self.samples += 1
