"""The foreign-process monitor sees real busy processes that are not ours, and not ours."""

import os
import subprocess
import sys
import threading
import time

import psutil

from showcase.run.monitor import ForeignProcessMonitor

BUSY_S = 3.0
BUSY = f"import time\nt = time.time()\nwhile time.time() - t < {BUSY_S}: pass"


def start_detached_busy_loop() -> int:
    """A busy loop that is not our descendant: started by a shell that exits at once, so the
    loop is re-parented away from us, like any other program on the host. It ends by itself."""
    out = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', BUSY],
        capture_output=True, text=True, timeout=10, check=True,
    )
    pid = int(out.stdout.strip())
    mine = {c.pid for c in psutil.Process().children(recursive=True)}
    assert pid not in mine, "the busy loop must not be our descendant for this test to mean anything"
    return pid


def burn_cpu_here(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_busy_foreign_process_reported_ours_and_the_runs_not():
    container_like = start_detached_busy_loop()  # stands for a container process: excluded by pid
    monitor = ForeignProcessMonitor(interval_s=0.5, run_pids=lambda: {container_like})
    monitor.start()
    foreign = start_detached_busy_loop()
    child = subprocess.Popen([sys.executable, "-c", BUSY])  # our own descendant
    burner = threading.Thread(target=burn_cpu_here, args=(BUSY_S,))  # our own process, busy
    burner.start()
    burner.join()
    child.wait(timeout=30)
    deadline = time.monotonic() + 30
    while psutil.pid_exists(foreign) and time.monotonic() < deadline:
        time.sleep(0.1)
    reported = monitor.stop()

    by_pid = {p.pid: p for p in reported}
    assert foreign in by_pid, f"the busy loop {foreign} was not reported: {reported}"
    busy = by_pid[foreign]
    assert busy.peak_cpu_percent >= 5.0 and busy.cpu_seconds > 0.1
    assert "while time.time()" in busy.cmdline and len(busy.cmdline) <= 120
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
