"""A lean asyncio network backend for httpcore, for plain-HTTP upstreams.

httpcore's default backend goes through anyio and sniffio on every read and write; on the gate's
hot path that was a fifth of its CPU per request. This one reads and writes the socket with the
event loop's own sock_recv/sock_sendall. HTTPS upstreams keep httpcore's default backend (TLS).
"""

import asyncio
import errno
import socket
from typing import Any

import httpcore
from httpcore._utils import is_socket_readable


class _SocketStream(httpcore.AsyncNetworkStream):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._loop.sock_recv(self._sock, max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout(f"no bytes within {timeout} s") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or exc.__class__.__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._loop.sock_sendall(self._sock, buffer)
        except TimeoutError:
            raise httpcore.WriteTimeout(f"could not send within {timeout} s") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or exc.__class__.__name__) from exc

    async def aclose(self) -> None:
        self._sock.close()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("this backend serves plain-HTTP upstreams only")

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # httpcore asks this to drop a kept-alive connection the server closed
            return is_socket_readable(self._sock)
        if info == "socket":
            return self._sock
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "client_addr":
            return self._sock.getsockname()
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """TCP connections on the running event loop, TCP_NODELAY set (requests are small and urgent)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        last: Exception | None = None
        try:
            async with asyncio.timeout(timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                for family, kind, proto, _, address in infos:
                    sock = socket.socket(family, kind, proto)
                    sock.setblocking(False)
                    try:
                        if family in (socket.AF_INET, socket.AF_INET6):
                            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        for option in socket_options or ():
                            sock.setsockopt(*option)
                        await loop.sock_connect(sock, address)
                        return _SocketStream(sock)
                    except BaseException as exc:
                        sock.close()
                        if not isinstance(exc, OSError):
                            raise
                        last = exc
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from None
        except OSError as exc:  # name resolution
            raise httpcore.ConnectError(str(exc)) from exc
        if last is not None and getattr(last, "errno", None) == errno.ECONNREFUSED:
            # Said in words: httpcore re-raises this without its cause, and callers tell
            # "nothing listens there" apart from other failures by the message.
            raise httpcore.ConnectError(f"connection refused by {host}:{port}") from last
        raise httpcore.ConnectError(str(last) if last else f"{host}:{port} has no address") from last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await loop.sock_connect(sock, path)
        except TimeoutError:
            sock.close()
            raise httpcore.ConnectTimeout(f"no connection to {path} within {timeout} s") from None
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return _SocketStream(sock)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def connection_refused(exc: BaseException) -> bool:
    """Whether a connect failure was the upstream refusing (nothing listens), through any wrapping."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 10:
        if (isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED
                or "refused" in str(cause).lower()):
            return True
        if isinstance(cause, BaseExceptionGroup):
            return any(connection_refused(sub) for sub in cause.exceptions)
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False
