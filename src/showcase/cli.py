"""The one `showcase` command. Each part of the engine registers its own subcommands."""

import importlib
import json
import sys

import typer
from rich.console import Console

from showcase import __version__
from showcase.errors import ShowcaseError

app = typer.Typer(
    name="showcase",
    help="Measure what a language model builds as a coding agent: a sealed run, every version of "
    "the page kept, a ten-point browser check, a clip and a report anyone can re-check.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

# Modules with a `register(app)` that adds their commands; one line per part of the engine.
COMMAND_MODULES = [
    "showcase.doctor",
    "showcase.gate.cli",
    "showcase.sandbox.cli",
    "showcase.check.cli",
    "showcase.clip",
    "showcase.replay",
    "showcase.report.cli",
    "showcase.run.cli",
]

# `showcase schema NAME` prints the JSON schema of each file we write, from its pydantic model.
SCHEMAS: dict[str, str] = {
    "gate-log": "showcase.gate.log.GateLogLine",
    "gate-stats": "showcase.gate.log.GateStats",
    "sandbox-spec": "showcase.sandbox.base.SandboxSpec",
    "harness": "showcase.harness.Harness",
    "check": "showcase.check.models.CheckReport",
    "clip": "showcase.clip.ClipResult",
    "replay-script": "showcase.replay.ReplayScript",
    "contract": "showcase.run.artefacts.Contract",
    "run-info": "showcase.run.artefacts.RunInfo",
    "versions": "showcase.run.artefacts.VersionRecord",
    "final-choice": "showcase.run.artefacts.FinalChoice",
    "sampling": "showcase.run.artefacts.SamplingFile",
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


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    """Entry point: our own errors become one line and their exit code, never a traceback."""
    try:
        # Outside standalone mode click returns a command's exit code instead of exiting with it.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except ShowcaseError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
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
