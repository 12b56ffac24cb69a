"""Where the project's data folders and the user's cache live."""

import os
from pathlib import Path

# Data (tasks/, harness/, checks/) sits beside src/ so a new task or agent is a folder, not code.
PROJECT_ROOT = Path(os.environ.get("SHOWCASE_HOME") or Path(__file__).resolve().parents[2])
TASKS_DIR = PROJECT_ROOT / "tasks"
HARNESS_DIR = PROJECT_ROOT / "harness"
CHECKS_DIR = PROJECT_ROOT / "checks"


def cache_dir() -> Path:
    root = os.environ.get("SHOWCASE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "showcase"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
