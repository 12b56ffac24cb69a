"""Serve an ASGI app (the gate, the replay model) in uvicorn on a background thread, for callers that are not async.

Listens on any mix of Unix sockets and TCP addresses. We bind the sockets ourselves (uvicorn
takes one address only) and hand them to uvicorn; a Unix socket is made 0666 after bind so a
non-root user inside a container can connect through the bind mount.
"""

import asyncio
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from showcase.errors import InfraError, UserError

if TYPE_CHECKING:  # AppServer also serves apps that are not a gate (the replay model)
    from showcase.gate.app import Gate


def parse_listen(spec: str) -> tuple[str, str | tuple[str, int]]:
    """'unix:/path/gate.sock' -> ('unix', path); 'tcp:HOST:PORT' -> ('tcp', (host, port))."""
    kind, _, rest = spec.partition(":")
    if kind == "unix" and rest:
        return "unix", rest
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            return "tcp", (host.strip("[]"), int(port))
    raise UserError(f"bad listen address {spec!r}: use unix:/path/to.sock or tcp:HOST:PORT (port 0 = any free one)")


def _loop_factory():
    """uvloop when installed: it halves the event loop's share of the gate's per-request cost."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _bind(spec: str) -> socket.socket:
    kind, where = parse_listen(spec)
    if kind == "unix":
        path = Path(where)  # type: ignore[arg-type]
        if len(os.fsencode(path)) > 107:  # sun_path holds 108 bytes with the final NUL
            raise UserError(f"socket path {path} is longer than 107 bytes; use a shorter run folder")
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise UserError(f"{path} exists and is not a socket; will not replace it")
            path.unlink()  # a stale socket from an earlier gate
        path.parent.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise InfraError(f"cannot listen on {path}: {exc}") from None
        os.chmod(path, 0o666)
    else:
        host, port = where  # type: ignore[misc]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise InfraError(f"cannot listen on {host}:{port}: {exc}") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class AppServer:
    """Runs one ASGI app in uvicorn on its own thread and event loop (any mix of unix:/tcp: addresses)."""

    def __init__(self, app, listen: list[str], on_close=None, start_timeout_s: float = 15.0,
                 stop_timeout_s: float = 15.0, **uvicorn_options) -> None:
        if not listen:
            raise UserError("a server needs at least one listen address")
        for spec in listen:
            parse_listen(spec)
        self.app = app
        self.listen = list(listen)
        self._on_close = on_close
        self._uvicorn_options = uvicorn_options  # e.g. ssl_certfile/ssl_keyfile
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.tcp_port: int | None = None
        self.socket_path: Path | None = None
        self._sockets: list[socket.socket] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self):
        """Bind, serve, and return once uvicorn is listening (bounded by start_timeout_s)."""
        try:
            for spec in self.listen:
                sock = _bind(spec)
                self._sockets.append(sock)
                if sock.family == socket.AF_UNIX:
                    self.socket_path = self.socket_path or Path(sock.getsockname())
                elif self.tcp_port is None:
                    self.tcp_port = sock.getsockname()[1]
        except BaseException:
            self._close_sockets()
            raise
        config = uvicorn.Config(
            self.app, lifespan="off", log_level="warning", access_log=False,
            timeout_keep_alive=75,  # agents reuse connections between slow turns
            timeout_graceful_shutdown=5, **self._uvicorn_options,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="showcase-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if self._failure is not None or not self._thread.is_alive():
                self.stop()
                raise InfraError(f"the server did not start: {self._failure!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise InfraError(f"the server did not start within {self.start_timeout_s:g} s")
            time.sleep(0.01)
        return self

    def _run(self) -> None:
        async def serve() -> None:
            try:
                await self._server.serve(sockets=self._sockets)
            finally:
                if self._on_close is not None:
                    await self._on_close()

        try:
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                runner.run(serve())
        except BaseException as exc:  # reported to start()/stop(); the thread must not die silently
            self._failure = exc

    def stop(self) -> None:
        """Stop serving (in-flight requests get a few seconds), then remove the socket file."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.stop_timeout_s)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(5)
            self._thread = None
        self._close_sockets()
        if self.socket_path is not None and self.socket_path.is_socket():
            self.socket_path.unlink(missing_ok=True)

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
        self._sockets = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class GateServer(AppServer):
    """Runs one Gate in uvicorn on a background thread; stopping it closes the gate (log, upstream).

    `with GateServer(gate, listen=["unix:/run/gate.sock", "tcp:127.0.0.1:0"]) as server: ...`
    """

    def __init__(self, gate: "Gate", listen: list[str], start_timeout_s: float = 15.0, stop_timeout_s: float = 15.0) -> None:
        super().__init__(gate.app, listen, on_close=gate.aclose, start_timeout_s=start_timeout_s,
                         stop_timeout_s=stop_timeout_s)
        self.gate = gate
