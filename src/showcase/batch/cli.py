"""`showcase batch PLAN.toml --out DIR [--ray ADDRESS]`: every run of a plan, a live table, a comparison page."""

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from showcase.batch.record import BatchRecord
from showcase.visible import visible

console = Console(stderr=True, highlight=False)

STYLE = {"pending": "dim", "running": "cyan", "finalizing": "yellow", "done": "green", "failed": "red"}


def _elapsed(state) -> str:
    if not state.started_at:
        return ""
    end = dt.datetime.fromisoformat(state.ended_at) if state.ended_at else dt.datetime.now(dt.timezone.utc)
    seconds = (end - dt.datetime.fromisoformat(state.started_at)).total_seconds()
    return f"{seconds / 60:.1f} min"


def progress_table(record: BatchRecord) -> Table:
    done = sum(1 for r in record.runs if r.state == "done")
    table = Table(title=f"batch: {done}/{len(record.runs)} runs done", title_justify="left")
    for column in ("run", "state", "node", "time", "score", "note"):
        table.add_column(column, justify="right" if column in ("time", "score") else "left", overflow="fold")
    for r in record.runs:
        note = r.error or ("kept from before" if r.kept else "")
        # A run's error may quote what its agent wrote: plain text, control characters visible.
        table.add_row(Text(visible(r.name)), Text(r.state, style=STYLE[r.state]), Text(visible(r.node or "")),
                      _elapsed(r), "" if r.score is None else f"{r.score:g}/10", Text(visible(note)))
    return table


def batch(
    plan: Path = typer.Argument(..., help="PLAN.toml: its setup tables (upstream or replay, model, harness, sampling, limits, repeats)."),
    out: Path = typer.Option(..., "--out", help="Batch folder: one folder per run, batch.json, comparison.html. "
                             "Given again, the batch resumes: finished runs are kept."),
    ray: str | None = typer.Option(None, "--ray", help="Address of a Ray cluster to spread the runs over "
                                   "(the ray extra of showcase); default: this machine."),
) -> None:
    """Run every setup of a plan as often as it says, with the machine's bounds, then compare them all."""
    from showcase.batch.run import run_batch

    live = Live(console=console, refresh_per_second=1, transient=False) if console.is_terminal else None

    def say(line: str) -> None:
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        (live.console if live else console).print(Text.assemble((stamp, "dim"), " ", visible(line)), soft_wrap=True)

    states: dict[str, str] = {}

    def update(record: BatchRecord) -> None:
        if live is not None:
            live.update(progress_table(record), refresh=True)
            return
        for r in record.runs:  # no terminal: one line per change of state
            if states.get(r.name) != r.state:
                states[r.name] = r.state
                say(f"{r.name}: {r.state}" + (f" ({r.error})" if r.error else "") + (f", {r.score:g}/10" if r.score is not None else ""))

    if live is not None:
        live.start()
    try:
        record = run_batch(plan, out, say=say, update=update, ray_address=ray)
    finally:
        if live is not None:
            live.stop()
    if record.comparison:
        print(out / record.comparison)


def register(app: typer.Typer) -> None:
    app.command()(batch)
