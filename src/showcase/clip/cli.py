"""`showcase clip PAGE -o clip.mp4`: record a clip of a saved page."""

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from showcase.visible import visible

err = Console(stderr=True)


def clip(
    page: Path = typer.Argument(..., help="The saved page (one HTML file, e.g. game.html)."),
    out: Path = typer.Option(Path("clip.mp4"), "--out", "-o", help="Where to write the mp4 (written atomically)."),
    seconds: float = typer.Option(15.0, help="Length of the clip in seconds of page time."),
    fps: int = typer.Option(30, help="Frames per second of the clip."),
    size: str = typer.Option("1280x720", help="Viewport and video size, WIDTHxHEIGHT (even numbers)."),
    realtime: bool = typer.Option(
        False, "--realtime",
        help="Record what a viewer of this machine sees (screencast, wall clock) instead of stepping the page's "
        "clock exactly 1/fps per frame. In software GL a rich world then plays as a slide show.",
    ),
    renderer: str = typer.Option(None, help="Software GL to use: llvmpipe or swiftshader (default: the fastest available)."),
    npm_dir: Path = typer.Option(None, help="Folder with the import map's npm tarballs (default: the showcase cache)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (schema: `showcase schema clip`)."),
) -> None:
    """Record a clip of PAGE on its own from load: the automatic camera tour, without input.

    By default the page runs on a virtual clock: requestAnimationFrame, performance.now, Date and
    timers advance exactly 1/fps per frame, Math.random is seeded, so the clip plays at the speed
    the page meant however slowly software GL draws it, and the same page gives the same clip.
    Page faults still give a clip (with a note); a missing file exits 2, no browser/WebGL/ffmpeg 3.
    """
    from showcase.clip.record import parse_size, record_clip_file
    from showcase.errors import UserError

    width_height = parse_size(size)
    if not page.is_file():  # said before the progress bar appears
        raise UserError(f"{page}: no such file")
    with Progress(
        TextColumn("[bold]clip[/bold] {task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("frames"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=as_json,
    ) as bar:
        task = bar.add_task(escape(visible(page.name)), total=None)  # the column reads markup

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = record_clip_file(
            page, out, seconds=seconds, fps=fps, size=width_height, realtime=realtime,
            npm_dir=npm_dir, progress=progress, renderer=renderer,
        )
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    mode = "virtual clock" if result.mode == "virtual" else "real time"
    err.print(
        f"{result.path}: {result.frames} frames, {result.seconds:g} s at {result.fps} fps, "
        f"{result.size[0]}x{result.size[1]}, {mode}, {result.distinct_frames} distinct frames; "
        f"recorded in {result.wall_seconds:.1f} s ({result.renderer})",
        highlight=False, markup=False,
    )
    if result.note:
        err.print(f"note: {visible(result.note)}", highlight=False, markup=False)
    if result.page_errors:
        err.print(f"page errors ({len(result.page_errors)}): {visible(result.page_errors[0])}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command()(clip)
