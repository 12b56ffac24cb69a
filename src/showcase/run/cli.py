"""`showcase run`, `showcase demo` and `showcase finalize`."""

import datetime as dt
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from showcase.run.options import RunOptions
from showcase.task import DEFAULT_TASK
from showcase.visible import visible

console = Console(stderr=True, highlight=False)


def _say(message: str) -> None:
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    # The message may name the agent's files: shown as plain text, its control characters visible.
    console.print(Text.assemble((stamp, "dim"), " ", visible(message)), soft_wrap=True)


def run(
    upstream: str = typer.Option(..., help="OpenAI-compatible base URL of the model, e.g. http://HOST:PORT/v1."),
    model: str = typer.Option(..., help="Model name; forced into every request."),
    out: Path = typer.Option(..., help="Run folder to create; refused if it already holds a run."),
    task: str = typer.Option(DEFAULT_TASK, help="Task id (a folder under tasks/)."),
    harness: str = typer.Option("builtin", help="Agent harness (a folder under harness/): builtin, mini-swe-agent, ..."),
    sampling_file: Path | None = typer.Option(None, help="JSON object of fields forced into every request."),
    limit_s: float | None = typer.Option(None, help="Hard stop in seconds (task default 7200)."),
    inject_after_s: float | None = typer.Option(None, help="Finish-now message from this second on (task default 5400)."),
    answer_limit: int | None = typer.Option(None, help="Answer token limit (task default 262144)."),
    ctx: int | None = typer.Option(None, help="Context size of the served model, recorded in the contract."),
    memory: str = typer.Option("1.25g", help="Container memory limit; swap is equal (no extra swap)."),
    disk: str = typer.Option("4g", help="Hard cap of what the agent writes (/work and /logs together), kernel-enforced."),
    cpus: float | None = typer.Option(None, help="Container CPUs (default min(4, host))."),
    pids_limit: int | None = typer.Option(None, help="Container pids limit (default 512)."),
    backend: str = typer.Option("docker", help="Sandbox backend."),
    base_image: str | None = typer.Option(None, help="Build on this local image instead of a debootstrapped Debian."),
    npm_dir: Path | None = typer.Option(None, envvar="SHOWCASE_NPM_DIR", help="Folder of the import map's npm tarballs."),
    clip: bool = typer.Option(True, help="Record clip.mp4 of the version that counts."),
    clip_seconds: float = typer.Option(15, help="Length of the clip in seconds (on the page's virtual clock)."),
) -> None:
    """Run the task once: a sealed agent, every version kept, the check, the clip, the report.

    The upstream key, if any, is read from SHOWCASE_UPSTREAM_KEY (never from the command line,
    never written to disk).
    """
    from showcase.run.orchestrate import execute_run

    opts = RunOptions(
        task=task, harness=harness, upstream=upstream, model=model, out=out,
        upstream_key=os.environ.get("SHOWCASE_UPSTREAM_KEY"), sampling_file=sampling_file,
        limit_s=limit_s, inject_after_s=inject_after_s, answer_limit=answer_limit, ctx=ctx,
        memory=memory, disk=disk, cpus=cpus, pids_limit=pids_limit, backend=backend, base_image=base_image,
        npm_dir=npm_dir, clip=clip, clip_seconds=clip_seconds, command_line=["showcase", *sys.argv[1:]],
    )
    folder = execute_run(opts, say=_say)
    print(folder)


def demo(
    out: Path | None = typer.Option(None, help="Run folder (default runs/demo-<time>)."),
    harness: str = typer.Option("builtin", help="Any harness under harness/ (builtin, mini-swe-agent, opencode, ...)."),
    npm_dir: Path | None = typer.Option(None, envvar="SHOWCASE_NPM_DIR", help="Folder of the import map's npm tarballs."),
    disk: str = typer.Option("4g", help="Hard cap of what the agent writes (/work and /logs together), kernel-enforced."),
) -> None:
    """The whole pipeline offline, against a replay model: a recorded conversation builds a page
    in several versions through a real agent in a real sealed container."""
    from showcase.harness import demo_script, load_harness
    from showcase.replay import ReplayServer
    from showcase.run.orchestrate import execute_run
    from showcase.task import load_task

    script = demo_script(load_harness(harness), load_task().dir / "demo")
    out = out or Path("runs") / f"demo-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    with ReplayServer(script) as server:
        _say(f"demo: replay model at {server.base_url} plays {script.name}")
        opts = RunOptions(
            harness=harness, upstream=server.base_url, model=server.replayer.script.model, out=out,
            limit_s=900, inject_after_s=600, npm_dir=npm_dir, disk=disk, command_line=["showcase", *sys.argv[1:]],
        )
        folder = execute_run(opts, say=_say)
    print(folder)


def finalize(
    run_dir: Path = typer.Argument(..., help="A run folder whose run was interrupted (or to redo its check)."),
    npm_dir: Path | None = typer.Option(None, envvar="SHOWCASE_NPM_DIR", help="Folder of the import map's npm tarballs."),
    clip: bool = typer.Option(True, help="Record clip.mp4 of the version that counts."),
) -> None:
    """Complete a run from what is on disk: stop what is left, choose the final version, check, clip, report."""
    from showcase.run.orchestrate import finalize as finalize_run

    print(finalize_run(run_dir, say=_say, npm_dir=npm_dir, clip=clip))


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(demo)
    app.command()(finalize)
