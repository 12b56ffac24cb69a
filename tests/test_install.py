"""`pip install .` (not editable) into a fresh venv outside the checkout: the installed package
finds its data (checks/, tasks/, harness/) as package resources, `showcase schema` loads none of
the heavy libraries, and `showcase check` scores a page in real Chromium.

No network: the package is installed alone (--no-deps, --no-index, no build isolation); its
dependencies come from the test's own interpreter through a .pth file.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
PAGE = CHECKOUT / "tests" / "pages" / "navigate_away.html"  # scores in ~10 s: it leaves 1.5 s after ready
HEAVY = ("playwright", "docker", "uvicorn", "starlette", "numpy", "PIL")


def _copy_source(to: Path) -> Path:
    """The files a build reads, copied (links kept as links) so nothing is built inside the checkout."""
    to.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, to / name)
    for name in ("src", "checks", "tasks", "harness"):
        shutil.copytree(CHECKOUT / name, to / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return to


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("install")
    source = _copy_source(root / "source")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    # Dependencies (and pip, setuptools for the build) from the running interpreter, after the venv's own.
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", str(source)],
        check=True, timeout=300, cwd=root, env={**os.environ, "PIP_NO_CACHE_DIR": "1"},
    )
    shutil.rmtree(source)  # the installed package must not lean on the tree it was built from
    return env_dir


def _run(venv: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SHOWCASE_HOME", "PYTHONPATH")}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True,
                          timeout=timeout, cwd=venv.parent, env=env)


def test_the_installed_package_carries_its_data(venv):
    probe = _run(venv, "python", "-c", (
        "import json, sys, showcase, showcase.paths as p, showcase.task as t, showcase.check.rubric as r;"
        "print(json.dumps([showcase.__file__, str(p.CHECKS_DIR), t.known_tasks(), r.load_rubric().version]))"
    ))
    assert probe.returncode == 0, probe.stderr
    module, checks, tasks, rubric = json.loads(probe.stdout)
    assert Path(module).is_relative_to(venv) and Path(checks).is_relative_to(venv)
    assert not Path(module).is_relative_to(CHECKOUT)
    assert "voxel" in tasks and rubric
    assert (Path(checks).parent / "tasks" / "voxel" / "demo").is_dir()  # what `showcase demo` plays


def test_schema_runs_without_the_heavy_libraries(venv):
    out = _run(venv, "showcase", "schema", "contract")
    assert out.returncode == 0, out.stderr
    assert "prompt_sha256" in json.loads(out.stdout)["properties"]
    loaded = _run(venv, "python", "-c", (
        "import sys; from showcase.cli import app, main; import showcase.runfolder.artefacts, showcase.report.load;"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    ))
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout.replace("'", '"')) == []


@pytest.mark.browser
def test_installed_check_scores_a_page(venv, tmp_path):
    out_dir = tmp_path / "check"
    done = _run(venv, "showcase", "check", str(PAGE), "--out", str(out_dir), "--json", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out_dir / "check.json").read_text())
    items = {i["id"]: i for i in report["items"]}
    assert len(items) == 11
    # three.js came through the installed task's import map (no failed request), the page got
    # ready, and the browser saw it leave; the rubric's names come from the installed checks/
    assert items["1"]["passed"] and items["2"]["passed"], (items["1"]["reason"], items["2"]["reason"])
    assert report["left"] and "navigated away" in report["left"]
    assert [items[i]["name"] for i in ("1", "2")] == ["loads", "ready"]
