"""`showcase report RUN_DIR [RUN_DIR...] [-o OUT]`: a page for a person to look at; `showcase rate RUN_DIR`:
your own rating of its page (rating.json, report/rating.py)."""

import json
from pathlib import Path

import typer
from rich.console import Console

from showcase.report.rating import write_rating
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


def rate(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="The run folder whose page you rate.", show_default=False),
    score: float = typer.Option(..., "--score", help="Your score of the page, 0 to 10.", show_default=False),
    note: str = typer.Option("", "--note", help="What you saw, in a few words."),
    who: str = typer.Option(None, "--who", help="Who rates (default: your login name)."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not refresh the run's report.html."),
    as_json: bool = typer.Option(False, "--json", help="Print the rating as JSON."),
) -> None:
    """Store your own rating of a run's page in RUN_DIR/rating.json (replacing an earlier one);
    the run's report and any comparison show it."""
    rating = write_rating(run_dir, score, note, who)
    if not no_report:
        write_run_report(run_dir)
    if as_json:
        print(json.dumps(rating.model_dump(mode="json")))
    else:
        Console().print(f"rated {run_dir}: {rating.score:g} / 10 by {rating.who}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(rate)
