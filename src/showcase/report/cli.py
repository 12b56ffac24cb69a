"""`showcase report RUN_DIR [RUN_DIR...] [-o OUT]`: a page for a person to look at."""

import json
from pathlib import Path

import typer
from rich.console import Console

from showcase.report.render import write_comparison, write_run_report


def report(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="One run folder (its report) or several (a comparison page).", show_default=False),
    out: Path = typer.Option(
        None, "-o", "--out",
        help="Where to write. One run: default RUN_DIR/report.html. Several: default ./comparison.html "
        "(each run's own report.html is refreshed too, so the links resolve).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
) -> None:
    """Write a self-contained HTML report of a run, or a sortable page comparing several runs.

    The page needs no network: styles, script and charts are inline; the screenshot, clip and
    versions are linked from the run folder by relative paths, so keep the folder together.
    A run that was killed before it finished still gets a page that says what is missing.
    """
    if len(run_dirs) == 1:
        path = write_run_report(run_dirs[0], out)
        result = {"report": str(path)}
    else:
        path = write_comparison(run_dirs, out if out is not None else Path("comparison.html"))
        result = {"comparison": str(path), "reports": [str(Path(d) / "report.html") for d in run_dirs]}
    if as_json:
        print(json.dumps(result))
    else:
        Console().print(f"wrote {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(report)
