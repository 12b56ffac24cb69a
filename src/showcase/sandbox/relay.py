"""The only way out of the sandbox: 127.0.0.1:PORT inside the container -> the gate's Unix socket.

Stdlib only, Python 3.8+: it runs inside the container (bind-mounted read-only at
/opt/showcase/relay.py, not baked into the image, so it can change without a rebuild).

It is a byte pipe, not an HTTP proxy: every chunk is passed on as soon as it arrives in either
direction (Server-Sent Events stream through unbuffered), one task pair per connection (any
number of concurrent connections), half-closes are forwarded. When the gate's socket cannot be
reached the client gets an HTTP 502 with a one-line reason instead of a bare reset.

    python3 relay.py --listen 127.0.0.1:8765 --socket /gate/gate.sock [--lifetime-s N]

With --lifetime-s it is also the sandbox's PID 1: it runs the relay as its child, reaps every
orphan, forwards SIGTERM/SIGINT/SIGHUP, and returns (which ends the container and every process in
it) when the relay ends or N seconds have passed, whatever the host does. As PID 1 of its PID
namespace it cannot be stopped or killed from inside (the kernel drops SIGSTOP/SIGKILL sent to a
namespace's init by its own members); killing the relay only ends the sandbox sooner.
"""

import argparse
import asyncio
import os
import signal
import socket
import struct
import sys
import time

CHUNK = 65536
CONNECT_TIMEOUT_S = 30


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        # One side is gone (a reset): the other side must see it too, e.g. the gate drops a
        # shot.sh request whose caller was killed instead of checking a page for nobody.
        writer.close()


async def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass


def _connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Truly blocking (a Python timeout would make the fd non-blocking and fail with EAGAIN on a
    # full backlog); the kernel bounds the wait for the peer by SO_SNDTIMEO.
    sock.setblocking(True)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", CONNECT_TIMEOUT_S, 0))
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _bad_gateway(reason: str) -> bytes:
    body = f'{{"error": {{"message": "sandbox relay: gate unreachable: {reason}", "type": "relay_error"}}}}\n'
    return (
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


def make_handler(socket_path: str):
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            # A blocking connect (in a thread) waits while the gate's accept backlog is full, where a
            # non-blocking one fails with EAGAIN; bounded by CONNECT_TIMEOUT_S.
            sock = await asyncio.get_running_loop().run_in_executor(None, _connect_unix, socket_path)
            gate_reader, gate_writer = await asyncio.open_unix_connection(sock=sock)
        except OSError as exc:
            try:
                client_writer.write(_bad_gateway(exc.strerror or exc.__class__.__name__))
                await client_writer.drain()
            except (ConnectionError, OSError):
                pass
            await _close(client_writer)
            return
        try:
            await asyncio.gather(_pipe(client_reader, gate_writer), _pipe(gate_reader, client_writer))
        finally:
            await _close(gate_writer)
            await _close(client_writer)

    return handle


async def serve(host: str, port: int, socket_path: str) -> None:
    server = await asyncio.start_server(make_handler(socket_path), host, port, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The sandbox backend waits for this line (then probes the port) before starting the agent.
    print(f"relay ready {host}:{port} -> {socket_path}", flush=True)
    async with server:
        await stop.wait()


def init(lifetime_s: float, relay_argv: list) -> int:
    """PID 1: the relay as child, orphans reaped, and an end at lifetime_s at the latest."""
    deadline = time.monotonic() + lifetime_s
    child = os.fork()
    if child == 0:
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *relay_argv])

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        while True:  # reap every child that has ended (execs' orphans are re-parented to us)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid, status = child, 0
            if pid == 0:
                break
            if pid == child:
                return os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
        left = deadline - time.monotonic()
        if left <= 0:
            print(f"sandbox lifetime of {lifetime_s:.0f} s reached: ending", file=sys.stderr, flush=True)
            return 124
        time.sleep(min(0.5, left))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Relay 127.0.0.1:PORT to the gate's Unix socket.")
    parser.add_argument("--listen", default="127.0.0.1:8765", help="host:port to listen on (loopback)")
    parser.add_argument("--socket", default="/gate/gate.sock", help="the gate's Unix socket")
    parser.add_argument("--lifetime-s", type=float, default=None, help="be PID 1 and end everything after this long")
    args = parser.parse_args(argv)
    if args.lifetime_s is not None:
        return init(args.lifetime_s, ["--listen", args.listen, "--socket", args.socket])
    host, _, port = args.listen.rpartition(":")
    try:
        asyncio.run(serve(host or "127.0.0.1", int(port), args.socket))
    except OSError as exc:
        print(f"relay: cannot listen on {args.listen}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
