"""`showcase check PAGE...`: the ten-point browser check, several pages in parallel."""

import asyncio
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from showcase.check.models import CheckReport
from showcase.check.remote import check_on_ray
from showcase.check.runner import check_page, read_page, write_report
from showcase.errors import InfraError, InternalError, ShowcaseError, UserError
from showcase.visible import visible

err = Console(stderr=True)


def _short(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _figures_line(figures: dict) -> str:
    """Figures of one item for the table: nested values flattened, floats to 3 digits, text cut,
    one line each (the page's text in them has its control characters made visible)."""
    parts = []
    for k, v in figures.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={_short(b)}" for a, b in v.items() if not isinstance(b, (dict, list)))
        elif isinstance(v, float):
            v = _short(v)
        elif isinstance(v, list):
            v = "; ".join(map(str, v[:3])) + (" ..." if len(v) > 3 else "")
        elif isinstance(v, str) and len(v) > 60:
            v = v[:60] + "..."
        parts.append(visible(f"{k}: {v}"))
    return "\n".join(parts)


def print_report(report: CheckReport, console: Console) -> None:
    """The items as a table, then the summary. Every cell is plain text (never read as markup) with
    its control characters visible: titles, text samples and error lines are the page's."""
    table = Table(title=Text(visible(f"{report.page}: {report.total:g} / {report.max_total:g}")), show_lines=True)
    table.add_column("#")
    table.add_column("item")
    table.add_column("points", justify="right")
    table.add_column("figures", overflow="fold")
    table.add_column("reason", overflow="fold")
    for item in report.items:
        style = "green" if item.passed else ("yellow" if item.points else "red")
        table.add_row(item.id, item.name, Text(f"{item.points:g}/{item.max_points:g}", style=style),
                      Text(_figures_line(item.figures)), Text(visible(item.reason)))
    console.print(table)
    console.print(Text(visible(report.summary)))


def check(
    pages: list[Path] = typer.Argument(..., help="HTML page(s) to score.", show_default=False),
    out: Path = typer.Option(Path("out/check"), "--out", help="Folder for check.json and screenshot.png; with several pages, one subfolder per file stem."),
    as_json: bool = typer.Option(False, "--json", help="Print the report(s) as JSON (a list when several pages) instead of tables."),
    npm_dir: Path | None = typer.Option(None, "--npm-dir", envvar="SHOWCASE_NPM_DIR", help="Folder with the npm tarballs of the task's import map (default: the showcase cache)."),
    workers: int = typer.Option(
        1, "--workers", min=1, max=8,
        help="Pages scored at the same time. More is faster, but checks at once share the cores: a page beside another check draws fewer frames (item 5).",
    ),
    ray: str | None = typer.Option(None, "--ray", help="Score the pages on this Ray cluster's showcase nodes (the ray extra); see docs/batch.md."),
    seed: int | None = typer.Option(
        None, "--seed", min=0, max=2**31 - 1,
        help="Seed of the control steps' wheel and drag (check.json records it; the same seed sends the same events again). Default: a new one per page.",
    ),
) -> None:
    """Score each page on the ten items of the browser check (checks/rubric.toml).

    Writes check.json and screenshot.png per page and prints the items, their figures and the
    summary. A broken page is scored (exit 0); a missing or non-HTML file is exit 2; a machine that
    cannot run the check (no Chromium, no WebGL, a browser crash) is exit 3, never a score.
    """
    htmls = {path: read_page(path) for path in pages}  # every input checked before anything runs
    if len(pages) == 1:
        dirs = {pages[0]: out}
    else:
        stems = [p.stem for p in pages]
        dup = sorted({s for s in stems if stems.count(s) > 1})
        if dup:
            raise UserError(f"several pages share the file stem {dup[0]!r}; their results would share {out / dup[0]}")
        dirs = {p: out / p.stem for p in pages}
    if ray is not None and seed is not None:
        raise UserError("--seed applies to checks run here; with --ray each page draws its own seed (its check.json records it)")
    if ray is not None:
        reports, failures, _ = check_on_ray(htmls, dirs, npm_dir, ray)
        reports = {p: reports[p] for p in htmls if p in reports}
    else:
        reports, failures = asyncio.run(_check_all(htmls, dirs, npm_dir, workers, quiet=as_json, seed=seed))
    if as_json:
        data = [json.loads(r.model_dump_json()) for r in reports.values()]
        print(json.dumps(data[0] if len(pages) == 1 and data else data, indent=2))
    else:
        console = Console()
        for path in pages:
            if path in reports:
                print_report(reports[path], console)
                console.print(Text(visible(f"wrote {dirs[path] / 'check.json'} and screenshot.png") + "\n", style="dim"))
    if failures:
        # The gravest failure ends the command with its exit code (printed by showcase's main): the
        # machine's (3) before a fault of showcase itself (1); the others are printed here. Pages
        # that were scored keep their files.
        items = sorted(failures.items(), key=lambda kv: not isinstance(kv[1], InfraError))
        for path, exc in items[1:]:
            err.print(f"error: {visible(path)}: {visible(exc)}", markup=False, highlight=False, soft_wrap=True)
        path, exc = items[0]
        raise type(exc)(f"{path}: {exc}") if len(pages) > 1 else exc


async def _check_all(htmls: dict[Path, bytes], dirs: dict[Path, Path], npm_dir: Path | None, workers: int, quiet: bool,
                     seed: int | None = None):
    reports: dict[Path, CheckReport] = {}
    failures: dict[Path, Exception] = {}
    limit = asyncio.Semaphore(workers)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} pages"),
                  TimeElapsedColumn(), console=err, transient=True, disable=quiet or not err.is_terminal) as progress:
        bar = progress.add_task("browser check", total=len(htmls))

        async def one(path: Path, html: bytes) -> None:
            async with limit:
                try:
                    out = dirs[path]
                    report = await check_page(html, npm_dir=npm_dir, screenshot_path=out / "screenshot.png", page_name=str(path),
                                              seed=seed)
                    write_report(report, out)
                    reports[path] = report
                except ShowcaseError as exc:
                    failures[path] = exc
                except Exception as exc:
                    # Neither the page's fault (that is scored) nor the machine's (InfraError): ours.
                    # It fails this page alone; the others go on.
                    failures[path] = InternalError(exc)
                progress.advance(bar)

        await asyncio.gather(*(one(p, h) for p, h in htmls.items()))
    return {p: reports[p] for p in htmls if p in reports}, failures


def register(app: typer.Typer) -> None:
    app.command()(check)
