"""`showcase gate`: the gate alone, in the foreground, until Ctrl-C."""

import asyncio
import json
import signal
import threading
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.console import Console

from showcase.errors import UserError
from showcase.gate.app import create_gate
from showcase.gate.config import GateConfig, GateLimits, UpstreamTimeouts, load_sampling
from showcase.gate.probe import probe_upstream
from showcase.gate.server import GateServer


def gate(
    upstream: str = typer.Option(..., help="The model's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."),
    model: str = typer.Option(..., help="Model name forced into every request."),
    listen: list[str] = typer.Option(
        ["tcp:127.0.0.1:8765"], help="Where to listen: unix:PATH or tcp:HOST:PORT (repeat for several)."
    ),
    sampling_file: Path | None = typer.Option(None, help="JSON object of request fields forced into every request."),
    answer_limit: int | None = typer.Option(None, min=1, help="Answer token limit: set where absent, capped where larger."),
    finish_now_after: float | None = typer.Option(
        None, "--finish-now-after", min=0, help="Seconds after start from which the finish-now message is appended."
    ),
    finish_now_text: Path | None = typer.Option(None, help="File holding the finish-now message."),
    hard_stop_after: float | None = typer.Option(None, min=0, help="Seconds after start from which every request is refused."),
    log_dir: Path = typer.Option(Path("gate-log"), help="Folder for gate.log, gate-stats.json and bodies/ (must not hold a gate.log)."),
    key: str | None = typer.Option(None, help="Key clients must send as 'Authorization: Bearer KEY' (default: none checked)."),
    upstream_key: str | None = typer.Option(None, envvar="SHOWCASE_UPSTREAM_KEY", help="Key sent to the upstream."),
    upstream_ca_file: Path | None = typer.Option(None, help="CA (PEM) that signed an HTTPS upstream's certificate."),
    stall_timeout: float = typer.Option(300.0, min=0.1, help="Seconds of silence mid-stream before the gate gives up."),
    first_byte_timeout: float = typer.Option(1800.0, min=0.1, help="Seconds to wait for the upstream's answer to begin."),
    answer_timeout: float = typer.Option(
        3600.0, min=0.1, help="Seconds from a request's arrival to its answer's last byte; an answer still running "
        "then is cut (a run's own gate has no such bound: its answers are cut at the run's hard stop)."
    ),
    probe: bool = typer.Option(True, help="Check the upstream lists the model before serving."),
    as_json: bool = typer.Option(False, "--json", help="Print the listening addresses as one JSON line."),
) -> None:
    """Run the gate alone: an OpenAI-compatible proxy that logs and enforces the run's settings.

    The clock starts when it starts listening; Ctrl-C stops it. Records go to --log-dir.
    """
    text = None
    if finish_now_text is not None:
        try:
            text = finish_now_text.read_text()
        except OSError as exc:
            raise UserError(f"finish-now file {finish_now_text}: {exc.strerror or exc}") from None
    sampling = load_sampling(sampling_file) if sampling_file else {}
    try:
        config = GateConfig(
            upstream=upstream, model=model, api_key_upstream=upstream_key, key=key, sampling=sampling,
            sampling_source=str(sampling_file) if sampling_file else None, answer_limit=answer_limit,
            finish_now_after_s=finish_now_after, finish_now_text=text, hard_stop_after_s=hard_stop_after,
            log_dir=log_dir, upstream_ca_file=upstream_ca_file,
            upstream_timeout_s=UpstreamTimeouts(stall_s=stall_timeout, first_byte_s=first_byte_timeout),
            limits=GateLimits(answer_s=answer_timeout),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"gate settings: {'.'.join(map(str, first['loc']))}: {first['msg'].removeprefix('Value error, ')}") from None
    if probe:
        reason = asyncio.run(probe_upstream(config.upstream, model, upstream_key, timeout_s=10, ca_file=upstream_ca_file))
        if reason:
            raise UserError(f"{reason} (--no-probe serves anyway)")
    the_gate = create_gate(config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with GateServer(the_gate, listen=listen) as server:
        the_gate.start_clock()
        where = {"socket_path": str(server.socket_path) if server.socket_path else None, "tcp_port": server.tcp_port,
                 "log_dir": str(log_dir)}
        if as_json:
            print(json.dumps(where), flush=True)
        else:
            Console(stderr=True).print(
                f"gate: listening on {', '.join(listen)} (tcp port {server.tcp_port}); records in {log_dir}; Ctrl-C stops"
            )
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass


def register(app: typer.Typer) -> None:
    app.command()(gate)
