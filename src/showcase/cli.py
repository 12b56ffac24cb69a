"""The one `showcase` command. Each part of the engine registers its own subcommands."""

import functools
import importlib
import json
import sys

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from showcase import __version__
from showcase.errors import ShowcaseError
from showcase.visible import visible

# Each subcommand and the module whose `register(app)` adds it. A module is imported only when one
# of its commands runs (or `--help` lists them all), so `showcase schema` never loads Playwright,
# Docker or uvicorn.
COMMANDS: dict[str, str] = {
    "doctor": "showcase.doctor",
    "gate": "showcase.gate.cli",
    "check": "showcase.check.cli",
    "clip": "showcase.clip.cli",
    "replay": "showcase.replay",
    "report": "showcase.report.cli",
    "rate": "showcase.report.cli",
    "run": "showcase.run.cli",
    "demo": "showcase.run.cli",
    "finalize": "showcase.run.cli",
    "image": "showcase.sandbox.cli",
    "sandbox": "showcase.sandbox.cli",
    "batch": "showcase.batch.cli",
}


@functools.cache
def _commands_of(module: str) -> dict[str, click.Command]:
    part = typer.Typer()
    importlib.import_module(module).register(part)
    return typer.main.get_group(part).commands


class _LazyGroup(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and name in COMMANDS:
            command = _commands_of(COMMANDS[name]).get(name)
        return command


app = typer.Typer(
    cls=_LazyGroup,
    name="showcase",
    help="Measure what a language model builds as a coding agent: a sealed run, every version of "
    "the page kept, a ten-point browser check, a clip and a report anyone can re-check.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

# `showcase schema NAME` prints the JSON schema of each file we write, from its pydantic model.
SCHEMAS: dict[str, str] = {
    "gate-log": "showcase.gate.log.GateLogLine",
    "gate-stats": "showcase.gate.log.GateStats",
    "sandbox-spec": "showcase.sandbox.base.SandboxSpec",
    "harness": "showcase.harness.Harness",
    "check": "showcase.check.models.CheckReport",
    "clip": "showcase.clip.model.ClipResult",
    "replay-script": "showcase.replay.ReplayScript",
    "contract": "showcase.runfolder.artefacts.Contract",
    "run-info": "showcase.runfolder.artefacts.RunInfo",
    "versions": "showcase.runfolder.artefacts.VersionRecord",
    "final-choice": "showcase.runfolder.artefacts.FinalChoice",
    "sampling": "showcase.runfolder.artefacts.SamplingFile",
    "events": "showcase.runfolder.artefacts.RunEvent",
    "rating": "showcase.report.rating.Rating",
    "batch-plan": "showcase.batch.plan.Plan",
    "batch": "showcase.batch.record.BatchRecord",
}


@app.callback(invoke_without_command=True)
def _main(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        print(__version__)
        raise typer.Exit()


@app.command()
def schema(name: str = typer.Argument(..., help="Which file: " + ", ".join(sorted(SCHEMAS)) if SCHEMAS else "")) -> None:
    """Print the JSON schema of one of the files a run or a check writes."""
    if name not in SCHEMAS:
        err.print(f"error: unknown schema {name!r}; known: {', '.join(sorted(SCHEMAS))}")
        raise typer.Exit(2)
    module, _, attr = SCHEMAS[name].rpartition(".")
    model = getattr(importlib.import_module(module), attr)
    print(json.dumps(model.model_json_schema(), indent=2))


def main() -> None:
    """Entry point: our own errors become one line and their exit code, never a traceback."""
    try:
        # Outside standalone mode click returns a command's exit code instead of exiting with it.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except ShowcaseError as exc:
        err.print(f"error: {visible(exc)}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors come through here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
