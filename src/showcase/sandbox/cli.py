"""`showcase image build|list|prune` and `showcase sandbox self-check`."""

import json
import time

import typer
from rich.console import Console
from rich.table import Table

from showcase.errors import InfraError, UserError
from showcase.harness import known_harnesses
from showcase.sandbox.base import get_backend, known_backends
from showcase.sandbox.conformance import CHECK_NAMES, CHECKS, CheckResult, run_conformance
from showcase.sandbox.image import ensure_image, image_digest, list_images, prune_images

out = Console()
err = Console(stderr=True)

image_app = typer.Typer(
    help="Sandbox images, built offline and cached by content hash: a Debian base (debootstrap + "
    "docker import, or any local image named with --base) and one layer per harness (harness/<id>/).",
    no_args_is_help=True,
)
sandbox_app = typer.Typer(help="The sealed container the agent runs in.", no_args_is_help=True)


class _Progress:
    """Build steps on stderr: a spinner with the latest step, and each stage's first line kept."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.started = time.monotonic()
        self.status = None
        self.stage = None

    def __enter__(self):
        if not self.quiet:
            self.status = err.status("starting")
            self.status.__enter__()
        return self

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        stage = message.split(":", 1)[0]
        line = f"[{time.monotonic() - self.started:5.0f} s] {message}"
        if stage != self.stage or "ready" in message or "done" in message:
            err.print(line, markup=False, highlight=False)
            self.stage = stage
        self.status.update(line[:120])

    def __exit__(self, *exc):
        if self.status:
            self.status.__exit__(*exc)


@image_app.command("build")
def image_build(
    harness: list[str] = typer.Option(None, "--harness", "-H", help="Harness id(s) to build a layer for (default: all known)."),
    no_harness: bool = typer.Option(False, "--no-harness", help="Build only the base + user layer (what `sandbox self-check` uses)."),
    base: str = typer.Option(None, help="Use this local image as the base instead of bootstrapping Debian (never pulled)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """Build what is missing (base first, then the harness layers) and print the tags."""
    targets: list[str | None] = [None] if no_harness else (harness or known_harnesses())
    if not targets:
        raise UserError("no harness folders under harness/; use --no-harness to build the base only")
    built = []
    with _Progress(quiet=as_json) as progress:
        for target in targets:
            started = time.monotonic()
            tag = ensure_image(target, base=base, progress=progress)
            built.append({"harness": target, "tag": tag, "id": image_digest(tag), "seconds": round(time.monotonic() - started, 1)})
    if as_json:
        print(json.dumps(built, indent=2))
        return
    table = Table("harness", "tag", "id", "seconds")
    for row in built:
        table.add_row(row["harness"] or "(none)", row["tag"], row["id"][7:19], f"{row['seconds']:.1f}")
    out.print(table)


@image_app.command("list")
def image_list(as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout.")) -> None:
    """List showcase's images (base and layers) on this engine."""
    images = list_images()
    if as_json:
        print(json.dumps(images, indent=2))
        return
    table = Table("kind", "harness", "id", "size MB", "created", "tags")
    table.columns[-1].overflow = "fold"
    for i in images:
        table.add_row(i["kind"] or "", i["harness"] or "", i["id"][7:19], str(i["size_mb"]),
                      (i["created"] or "")[:16].replace("T", " "), ", ".join(i["tags"]) or "(untagged)")
    out.print(table)


@image_app.command("prune")
def image_prune(
    all_images: bool = typer.Option(False, "--all", help="Remove every showcase image, current ones too."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Remove outdated showcase images: keep the current base and the newest layer per harness on it."""
    removed = prune_images(all_images=all_images)
    if as_json:
        print(json.dumps({"removed": removed}, indent=2))
        return
    out.print("\n".join(f"removed {tag}" for tag in removed) or "nothing to prune")


@sandbox_app.command("self-check")
def self_check(
    backend: list[str] = typer.Option(None, "--backend", "-b", help=f"Backend(s) to check (default: all known: {', '.join(known_backends())})."),
    harness: str = typer.Option(None, "--harness", "-H", help="Check on this harness's image (default: the base + user layer)."),
    base: str = typer.Option(None, help="Base image to build on (default: bootstrapped Debian)."),
    only: list[str] = typer.Option(None, "--only", help=f"Run only these checks: {', '.join(CHECK_NAMES)}."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
) -> None:
    """Run the conformance suite: real attempts from inside a sandbox to get out, reach the host, exhaust memory, pids and disk, then kill and audit. Exit 3 if any fails."""
    unknown = set(only or []) - set(CHECK_NAMES)
    if unknown:
        raise UserError(f"unknown check(s) {sorted(unknown)}; known: {', '.join(CHECK_NAMES)}")
    backends = backend or known_backends()
    for name in backends:
        reason = get_backend(name).unavailable_reason()
        if reason:
            raise InfraError(f"backend {name}: {reason}")
    with _Progress(quiet=as_json) as progress:
        image = ensure_image(harness, base=base, progress=progress)
    report: dict[str, list[dict]] = {}
    failed = 0
    for name in backends:
        table = Table("check", "result", "what happened", "s", title=f"sandbox self-check: {name} on {image}", show_lines=True)

        def show(result: CheckResult) -> None:
            if not as_json:
                err.print(f"  {result.name}: {'pass' if result.passed else 'FAIL'} ({result.seconds:.1f} s)")

        results = run_conformance(name, image, only=only, on_result=show)
        failed += sum(not r.passed for r in results)
        report[name] = [r.model_dump() for r in results]
        what = {c.name: c.what for c in CHECKS}
        for r in results:
            table.add_row(f"{r.name}\n[dim]{what[r.name]}[/dim]", "[green]pass[/green]" if r.passed else "[red]FAIL[/red]",
                          r.detail, f"{r.seconds:.1f}")
        if not as_json:
            out.print(table)
    if as_json:
        print(json.dumps({"image": image, "backends": report, "failed": failed}, indent=2))
    if failed:
        raise InfraError(f"{failed} conformance check(s) failed: this machine cannot run sealed sandboxes as published")


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
    app.add_typer(sandbox_app, name="sandbox")
