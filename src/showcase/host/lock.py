"""One final check at a time per host: its frame-rate item measures a CPU nobody else of ours is using.

A batch names the lock file in SHOWCASE_FINAL_CHECK_LOCK for the runs it starts; each run's
finalize holds it (fcntl, so a killed holder releases it) from the final check to the end of
the clip. A single `showcase run` without the variable takes no lock.
"""

import fcntl
import os
import time
from pathlib import Path
from typing import Callable

ENV = "SHOWCASE_FINAL_CHECK_LOCK"
WAIT_S = 3 * 3600.0  # a queue of final checks and clips; past this the check goes on and says so
POLL_S = 0.2


def host_lock_path(fallback_dir: Path) -> Path:
    """/run/showcase/final-check.lock (one per host, whatever batch or node asks); else under fallback_dir."""
    for folder in (Path("/run/showcase"), fallback_dir):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder / "final-check.lock"
        except OSError:
            continue
    return fallback_dir / "final-check.lock"


def hold_final_check(say: Callable[[str], None] = print, wait_s: float = WAIT_S) -> int | None:
    """Take the host's final-check lock if a batch asked for one; the open fd (release_final_check), or None."""
    path = os.environ.get(ENV)
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        say(f"check: cannot open the final-check lock {path} ({exc.strerror}); checking without it")
        return None
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                say(f"check: another final check held the host for {wait_s:.0f} s; checking beside it")
                os.close(fd)
                return None
            if not told:
                say("check: waiting for this host's other final check to end (one at a time)")
                told = True
            time.sleep(POLL_S)


def release_final_check(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the last fd releases the flock
