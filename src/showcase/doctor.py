"""`showcase doctor`: what this machine has for showcase, and the npm cache filled once."""

import asyncio
import shutil
import subprocess

import typer
from rich.console import Console
from rich.table import Table

from showcase.browser.cdn import default_npm_dir, ensure_npm_cache
from showcase.browser.launch import chromium_version, seal_check
from showcase.check.rubric import load_rubric
from showcase.errors import ShowcaseError
from showcase.host import cpu_share
from showcase.task import DEFAULT_TASK, load_task


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return f"missing ({exc.__class__.__name__})"


def _docker_state() -> str:
    if not shutil.which("docker"):
        return "missing: apt-get install docker.io"
    engine = _tool_version(["docker", "version", "--format", "{{.Server.Version}}"])
    if not engine or engine.startswith(("missing", "Cannot", "error")):
        return "client only: no engine answers (start one: scripts/setup.sh --engine)"
    return f"engine {engine}"


def doctor(
    fill_cache: bool = typer.Option(True, help="Fetch missing npm tarballs of the task's import map (needs npm's registry)."),
    task: str = typer.Option(DEFAULT_TASK, help="Task whose import-map packages to cache."),
) -> None:
    """Check Chromium (and that it runs sealed), ffmpeg, Docker and the offline npm cache; fill the cache if asked."""
    table = Table("part", "state")
    ok = True
    try:
        table.add_row("chromium", chromium_version())
    except ShowcaseError as exc:
        table.add_row("chromium", f"[red]{exc}[/red]")
        ok = False
    try:
        # A real launch: the row shows what /proc says of a running browser, not what we asked for.
        table.add_row("browser seal", asyncio.run(asyncio.wait_for(seal_check(), 90)))
    except (ShowcaseError, asyncio.TimeoutError) as exc:
        table.add_row("browser seal", f"[red]{exc or 'no answer within 90 s'}[/red]")
        ok = False
    with cpu_share.raised(load_rubric().cpu_weight_factor) as share:
        # not a failure: without it a check scores, but a busy machine can take its frames
        table.add_row("check CPU share", share if share.startswith("cgroup") else f"[yellow]{share}[/yellow]")
    table.add_row("ffmpeg", _tool_version(["ffmpeg", "-version"]) if shutil.which("ffmpeg") else "[red]missing: apt-get install ffmpeg[/red]")
    table.add_row("docker", _docker_state())
    try:
        path = ensure_npm_cache(load_task(task).npm, fetch=fill_cache)
        table.add_row("npm cache", f"{path} (integrity checked)")
    except ShowcaseError as exc:
        table.add_row("npm cache", f"[red]{exc}[/red] ({default_npm_dir()})")
        ok = False
    Console().print(table)
    if not ok:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
