"""Where the project's data folders and the user's cache live.

Data (tasks/, harness/, checks/) sits beside src/ so a new task or agent is a folder, not code.
The package reaches it as its resource showcase/_data/: in a checkout those are links to the
folders beside src/, in an installed wheel copies of them. SHOWCASE_HOME names another root
holding tasks/, harness/ and checks/.
"""

import os
from importlib import resources
from pathlib import Path


def _data_root() -> Path:
    if os.environ.get("SHOWCASE_HOME"):
        return Path(os.environ["SHOWCASE_HOME"])
    # A wheel installs as plain files (never zipped), so the resource is a real folder; resolved,
    # so in a checkout every path names the folder itself, not the link to it.
    return Path(str(resources.files("showcase") / "_data")).resolve()


DATA_ROOT = _data_root()
TASKS_DIR = DATA_ROOT / "tasks"
HARNESS_DIR = DATA_ROOT / "harness"
CHECKS_DIR = DATA_ROOT / "checks"


def cache_dir() -> Path:
    root = os.environ.get("SHOWCASE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "showcase"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
