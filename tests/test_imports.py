"""The package's layers and its lack of import circles, as pyproject.toml's [tool.importlinter]
contracts state them, hold for this checkout (function-level imports count too)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# lint-imports beside this interpreter: the test extra installs it into the project's venv.
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the package under root/src, with root/pyproject.toml's contracts."""
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: pip install -e '.[test]' (scripts/setup.sh does)"
    path = [str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


def test_every_import_keeps_to_the_layers_and_no_package_has_a_circle():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_an_import_that_climbs_or_closes_a_circle_is_named(tmp_path):
    """The contracts are live: in a copy of the package, host/ reaching up into run/ (inside a
    function, as a lazy import would) and a circle between two check modules are both reported."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    package = tmp_path / "src" / "showcase"
    shutil.copytree(REPO / "src" / "showcase", package, ignore=shutil.ignore_patterns("_data", "__pycache__"))
    (package / "host" / "climbs.py").write_text("def options():\n    from showcase.run import options\n    return options\n")
    (package / "check" / "measurements.py").write_text(
        (package / "check" / "measurements.py").read_text() + "\nfrom showcase.check import scoring  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "showcase.host.climbs -> showcase.run.options" in result.stdout, result.stdout
    assert "No cycles are allowed in showcase.check" in result.stdout, result.stdout
