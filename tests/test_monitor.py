"""The foreign-process monitor sees real busy processes that are not ours, and not ours."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from showcase.host.monitor import ForeignProcessMonitor

# The foreign process: well above the 1 CPU-second threshold. /proc's tick-based CPU accounting
# read 0.84 s for a 1.2 s burn (by the process's own clock) on a loaded VM: keep a wide margin.
BURN_CPU_S = 2.0
OURS_BURN_CPU_S = 0.5  # ours: far above the 5 % peak threshold, were they not excluded
# Burns argv[2] seconds of CPU (however long the loaded host takes to give it that), writes a marker,
# then idles so the monitor's last sample still sees it; it ends by itself after 60 s at most.
BUSY = (
    "import sys, time\n"
    "start = time.monotonic()\n"
    "while time.process_time() < float(sys.argv[2]) and time.monotonic() - start < 60: pass\n"
    "open(sys.argv[1], 'w').close()\n"
    "time.sleep(max(0, 60 - (time.monotonic() - start)))\n"
)


def start_detached_busy_loop(marker: Path, burn_s: float) -> int:
    """A busy process that is not our descendant: started by a shell that exits at once, so it
    is re-parented away from us, like any other program on the host."""
    out = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$0" "$1" "$2" >/dev/null 2>&1 & echo $!', BUSY, str(marker), str(burn_s)],
        capture_output=True, text=True, timeout=30, check=True,
    )
    pid = int(out.stdout.strip())
    mine = {c.pid for c in psutil.Process().children(recursive=True)}
    assert pid not in mine, "the busy process must not be our descendant for this test to mean anything"
    return pid


def wait_for_file(path: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout_s} s"
        time.sleep(0.05)


def host_busy_s() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + t.steal


def burn_cpu_here(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_busy_foreign_process_reported_ours_and_the_runs_not(tmp_path):
    # Stands for a container process: excluded because its pid is given as the run's.
    container_like = start_detached_busy_loop(tmp_path / "container-burnt", OURS_BURN_CPU_S)
    monitor = ForeignProcessMonitor(interval_s=0.5, run_pids=lambda: {container_like}).start()
    foreign = start_detached_busy_loop(tmp_path / "foreign-burnt", BURN_CPU_S)
    child = subprocess.Popen([sys.executable, "-c", BUSY, str(tmp_path / "child-burnt"), str(OURS_BURN_CPU_S)])  # our descendant
    burner = threading.Thread(target=burn_cpu_here, args=(OURS_BURN_CPU_S,))  # our own process, busy
    burner.start()
    try:
        burner.join(90)
        for name in ("foreign-burnt", "container-burnt", "child-burnt"):
            wait_for_file(tmp_path / name)
        reported = monitor.stop()
    finally:
        for pid in (foreign, container_like, child.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        child.wait(10)

    by_pid = {p.pid: p for p in reported}
    assert foreign in by_pid, f"the busy process {foreign} was not reported: {reported}"
    busy = by_pid[foreign]
    assert busy.cpu_seconds >= 1.0 and busy.peak_cpu_percent >= 5.0
    assert "process_time()" in busy.cmdline and len(busy.cmdline) <= 120
    for ours in (os.getpid(), child.pid, container_like):
        assert ours not in by_pid, f"pid {ours} is part of this run and must not be reported"
    # Busiest first.
    assert [p.cpu_seconds for p in reported] == sorted((p.cpu_seconds for p in reported), reverse=True)
    # Host load sampled all along.
    samples = monitor.load_samples
    assert len(samples) >= 3 and all(s.load1 >= 0 for s in samples)
    assert [s.t_s for s in samples] == sorted(s.t_s for s in samples)


def test_kernel_threads_are_never_reported():
    monitor = ForeignProcessMonitor(interval_s=0.2, min_peak_percent=0.0, min_cpu_seconds=0.0).start()
    time.sleep(0.5)
    reported = monitor.stop()
    kernel = {p.pid for p in psutil.process_iter(["ppid"]) if p.pid == 2 or p.info["ppid"] == 2}
    assert kernel, "this host shows kernel threads in /proc; the test needs some to mean anything"
    assert not kernel & {p.pid for p in reported}
    assert os.getpid() not in {p.pid for p in reported}


def test_foreign_cores_count_a_burner_and_not_our_measured_tree(tmp_path):
    """The check's meter: two samples, no thread; a child of ours is foreign unless it is the
    tree given as the run's (the check's browser); our own process's time is never foreign."""
    ours = subprocess.Popen([sys.executable, "-c", BUSY, str(tmp_path / "ours-burnt"), str(BURN_CPU_S)])
    stray = subprocess.Popen([sys.executable, "-c", BUSY, str(tmp_path / "stray-burnt"), str(BURN_CPU_S)])
    host_before = host_busy_s()
    meter = ForeignProcessMonitor(interval_s=None, run_pids=[ours.pid], own_descendants=False).start()
    try:
        burn_cpu_here(OURS_BURN_CPU_S)
        for name in ("ours-burnt", "stray-burnt"):
            wait_for_file(tmp_path / name)
        meter.stop()
        host_busy = host_busy_s() - host_before
        elapsed = meter.load_samples[-1].t_s - meter.load_samples[0].t_s
    finally:
        for child in (ours, stray):
            child.kill()
            child.wait(10)
    assert len(meter.load_samples) == 2, "without an interval the meter samples only at start and stop"
    cores = meter.foreign_cores()
    assert cores is not None
    # The stray child burnt BURN_CPU_S (by its own clock) inside the window: foreign. The run's tree
    # burnt as much and our process OURS_BURN_CPU_S: taken off the host's busy time (which also holds
    # whatever else this machine ran meanwhile). Ticks are coarse: a wide margin.
    foreign_s = cores * elapsed
    assert foreign_s >= 0.6 * BURN_CPU_S, (cores, elapsed)
    assert foreign_s <= host_busy - 0.6 * (BURN_CPU_S + OURS_BURN_CPU_S), (foreign_s, host_busy)
