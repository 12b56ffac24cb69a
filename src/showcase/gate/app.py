"""The gate: an OpenAI-compatible reverse proxy that enforces one run's settings on the wire.

Every request is answered (by the upstream, or by the gate in the API's own error format) and
recorded: one gate.log line, its bodies, and gate-stats.json, all written when it finishes.
"""

import asyncio
import hmac
import inspect
import json
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore
import orjson
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from showcase.gate.config import GateConfig
from showcase.gate.log import (
    GateLogLine, GateRecorder, GateStats, RemovedField, RequestFields, count_finish_now, count_request, utc_now,
)
from showcase.gate.rewrite import (
    ABSENT, GENERATION_APIS, MODELS, OTHER, SERVED_METHODS, WHY_MODELS_BODY, WHY_QUERY, Rewrite, classify,
    rewrite_request, upstream_path,
)
from showcase.gate.transport import AsyncioBackend, connection_refused
from showcase.gate.stream import (
    AnswerFacts, EventTooLarge, StreamTap, error_object, read_answer, stream_end, stream_error_event,
)

_DROP_DOWNSTREAM = frozenset(
    b"content-length content-encoding transfer-encoding connection keep-alive date server".split()
)
# What can go wrong on the way to the upstream and back (httpcore's own exceptions, plus the OS's).
_TRANSPORT_ERRORS = (httpcore.NetworkError, httpcore.ProtocolError, OSError)
_CUT_SEND_GRACE_S = 5.0  # for a cut stream's error event to reach a client that may not read
_TIMER_SLACK_S = 0.05  # a bound that fired this close to a deadline was that deadline's


# GET paths outside /v1/ answered from an upstream /v1/ route: read-only, and only these (Hermes
# Agent lists models at /api/v1/models); every other path outside /v1/ is refused.
READ_ONLY_ALIASES = {"/api/v1/models": "/v1/models"}


def _json_bytes(obj: Any) -> bytes:
    """orjson; the stdlib for what orjson will not write (an integer past 64 bits, a lone surrogate
    read from a \\udcXX escape: escaped again, as the client sent it). RecursionError past the
    stdlib's depth: the caller refuses the body."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()


def _parse_json(body: bytes) -> Any:
    """orjson for speed (MB bodies), the stdlib for what orjson rejects (NaN, huge integers)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


MAX_LOGGED_PATH_CHARS = 2000  # the path is the agent's: gate.log keeps its start and its length


def _bounded_path(path: str) -> str:
    return path if len(path) <= MAX_LOGGED_PATH_CHARS else f"{path[:MAX_LOGGED_PATH_CHARS]}... ({len(path):,} characters)"


MAX_LOGGED_REASON_CHARS = 100  # a finish reason is a word; the upstream (steered by the agent) may send any text


def _bounded_reason(reason: object) -> str | None:
    if reason is None:
        return None
    text = reason if isinstance(reason, str) else repr(reason)
    if len(text) <= MAX_LOGGED_REASON_CHARS:
        return text
    return f"{text[:MAX_LOGGED_REASON_CHARS]}... ({len(text):,} characters)"


def _seconds(bound: float | None) -> str:
    return f"{bound:g} s" if bound is not None else "the hard stop"


class _Live:
    """One answer under way: its deadline, the bound it waits under now, and why it must end."""

    __slots__ = ("deadline", "timeout", "cut", "send_stuck", "watcher", "sent")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # the serving loop's time at which the answer is cut (inf: only at the hard stop)
        self.timeout: asyncio.Timeout | None = None  # set while waiting for the upstream
        self.cut: tuple[str, str] | None = None  # (error code, why) once it must end
        self.send_stuck = False  # a send to the client outlived the answer's deadline
        self.watcher: asyncio.Future | None = None  # waits for the client to hang up, from the body's end to the answer's
        self.sent = 0  # stream bytes handed to the client's connection while the client was there

    def client_gone(self) -> bool:
        return self.cut is not None and self.cut[0] == "client_gone"


class _HeldBodiesFull(Exception):
    """Taking this body (or its next chunk) would pass the gate-wide cap on request bodies held at once."""


class _GateApp:
    """The gate as an ASGI 3 app (a plain object with an async __call__, as servers expect)."""

    def __init__(self, gate: "Gate") -> None:
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.gate._asgi(scope, receive, send)


class Gate:
    """One run's gate. Build it with `create_gate`; serve `.app` with any ASGI server."""

    def __init__(
        self,
        config: GateConfig,
        clock: Callable[[], float] = time.monotonic,
        extra_routes: list[Route] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.recorder = GateRecorder(config.log_dir, keep_bodies=config.keep_bodies,
                                     max_body_bytes=config.limits.max_stored_body_bytes,
                                     max_total_bytes=config.limits.max_stored_bytes)
        now = utc_now()
        self.stats = GateStats(started_at=now, updated_at=now)
        self.last_request_id: str | None = None
        self._seq = 0
        self._t0: float | None = None
        self._stopped = False
        self._refuse_tools_when_stopped = True
        self._pool: httpcore.AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the serving loop, for the hard stop's cut
        self._live: set[_Live] = set()
        self._held_request_bytes = 0  # request-body bytes of every request under way (limits.max_held_request_bytes)
        upstream = urlsplit(config.upstream)
        self._upstream_host = upstream.netloc.rpartition("@")[2].encode("idna")
        # The upstream's origin, parsed once (not once per request).
        self._upstream_scheme = upstream.scheme.encode()
        self._upstream_hostname = (upstream.hostname or "").encode("idna")
        self._upstream_port = upstream.port
        self._upstream_prefix = upstream.path.rstrip("/")
        # The run's own endpoints go through Starlette's router; everything else comes straight to
        # the proxy (no router or middleware on the path every model request takes).
        self._tool_routes: list[Route] = [self._tool_route(route) for route in extra_routes or []]
        self._tools_app = Starlette(routes=list(self._tool_routes))
        self.app = _GateApp(self)
        self.recorder.stats(self.stats)

    # ----- the run's clock -------------------------------------------------------------------

    def start_clock(self) -> None:
        """The run's t=0: finish-now and the hard stop count from here."""
        self._t0 = self.clock()
        self.stats.clock_started_at = utc_now()
        self._write_stats()

    def elapsed(self) -> float | None:
        """Seconds since start_clock(); None before it."""
        return None if self._t0 is None else self.clock() - self._t0

    def hard_stop(self, refuse_tools: bool = True) -> None:
        """Refuse every model request from now on (and the extra routes too, unless told not to),
        and cut every answer still under way. Safe to call from any thread."""
        self._stopped = True
        self._refuse_tools_when_stopped = refuse_tools
        self.stats.hard_stopped = True
        self._write_stats()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._cut_live, "run_over", "the run's hard stop passed")
            except RuntimeError:  # the loop closed in between: nothing is under way any more
                pass

    def _is_stopped(self) -> bool:
        if not self._stopped and self.config.hard_stop_after_s is not None:
            elapsed = self.elapsed()
            if elapsed is not None and elapsed >= self.config.hard_stop_after_s:
                self._stopped = True
                self.stats.hard_stopped = True
        return self._stopped

    def _finish_now_due(self) -> bool:
        after = self.config.finish_now_after_s
        elapsed = self.elapsed()
        return after is not None and elapsed is not None and elapsed >= after

    def flush_records(self, timeout_s: float = 30.0) -> bool:
        """Block until every record handed over so far is on disk (False if the bound passed)."""
        return self.recorder.flush(timeout_s)

    async def aclose(self) -> None:
        """Close the upstream connections and the log. Call from the loop that served requests."""
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None
        self._write_stats()
        self.recorder.close()

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if scope["type"] != "http" or any(route.matches(scope)[0] != Match.NONE for route in self._tool_routes):
            await self._tools_app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            await self._serve(request, scope, receive, send)
        finally:
            # The body's bytes are held until its answer ended (the record and the stream need them).
            self._held_request_bytes -= request.scope.get("gate.held_bytes", 0)

    async def _serve(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._proxy(request)
        live: _Live | None = getattr(response, "gate_live", None)
        if live is not None:
            # The stream's sends raise OSError once the client left (ASGI 2.4's contract, kept by
            # _bounded_send), so Starlette does not start a second listener for the disconnect:
            # the gate's own watcher (started when the body ended) is the one that notices.
            scope = {**scope, "asgi": {**scope.get("asgi", {}), "spec_version": "2.4"}}
        try:
            await response(scope, receive, send if live is None else self._bounded_send(send, live))
        except (TimeoutError, ClientDisconnect):
            # (Starlette raises a send's OSError, TimeoutError included, as ClientDisconnect.)
            if live is None or not (live.send_stuck or live.client_gone()):
                raise
            # The client left mid-stream, or stopped reading and held the stream past its deadline
            # or the hard stop: close the pipe now (its finally records the line and drops the
            # upstream's connection; uvicorn closes the connection of an answer left unfinished).
            await response.body_iterator.aclose()
        finally:
            if live is not None and live.watcher is not None:
                live.watcher.cancel()
            unstarted = getattr(response, "gate_if_unstarted", None)
            if unstarted is not None:
                await unstarted()

    # ----- requests --------------------------------------------------------------------------

    def _next_id(self) -> str:
        self._seq += 1
        return f"{self._seq:06d}"

    def _new_line(self, request: Request, kind: str) -> GateLogLine:
        return GateLogLine(
            time=utc_now(), t_s=self.elapsed(), id=self._next_id(), kind=kind, method=request.scope["method"],
            path=_bounded_path(request.scope["path"]), status=0, latency_ms=0.0,
        )

    def _key_ok(self, request: Request) -> bool:
        if self.config.key is None:
            return True
        auth = request.headers.get("authorization", "")
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
        return hmac.compare_digest(given.encode(), self.config.key.encode())

    @property
    def pool(self) -> httpcore.AsyncConnectionPool:
        # httpx's own transport core, used directly: the gate needs none of httpx's client layer
        # (cookies, redirects, auth, URL models), which was the largest single share of its CPU.
        # Made on first use so it belongs to the event loop that serves the requests.
        if self._pool is None:
            # Idle connections are dropped after 4 s: servers on uvicorn (vLLM among them) close theirs
            # after 5 s, and a request sent on a socket the server is closing fails with no retry
            # (a generation is not safe to send twice).
            plain = self.config.upstream.startswith("http://")
            ca_file = self.config.upstream_ca_file
            self._pool = httpcore.AsyncConnectionPool(
                max_connections=1024, max_keepalive_connections=64, keepalive_expiry=4.0, retries=0,
                network_backend=AsyncioBackend() if plain else None,
                ssl_context=ssl.create_default_context(cafile=str(ca_file)) if ca_file else None,
            )
        return self._pool

    def _upstream_url(self, path: str) -> httpcore.URL:
        """A served /v1/... path under the upstream's base (whose own /v1 is not doubled); no query."""
        prefix = self._upstream_prefix
        target = prefix + path[3:] if prefix.endswith("/v1") else prefix + path
        return httpcore.URL(scheme=self._upstream_scheme, host=self._upstream_hostname,
                            port=self._upstream_port, target=target.encode())

    async def _proxy(self, request: Request) -> Response:
        arrived = time.perf_counter()
        line = self._new_line(request, "api")
        self.last_request_id = line.id
        self.stats.last_request_id = line.id
        try:
            # Everything that can refuse a request is decided from its head alone: a body is
            # read only once the request is known to be one the gate will forward.
            if not self._key_ok(request):
                return self._refuse(line, arrived, request, 401, "invalid_api_key", "wrong or missing key",
                                    "wrong or missing API key (send the run's key as 'Authorization: Bearer KEY')")
            if self._is_stopped():
                return self._refuse(line, arrived, request, 403, "run_over", "hard stop",
                                    "the run's hard stop has passed; the gate refuses every request")
            path = request.scope["path"]
            target = READ_ONLY_ALIASES.get(path, path) if line.method == "GET" else path
            api = classify(target)
            line.api = api
            if api not in (None, OTHER):
                request.scope["gate.upstream_path"] = upstream_path(api, target)
            if api is None:
                return self._refuse(line, arrived, request, 404, "not_found", "path outside the API",
                                    f"{line.path} is outside the API; the gate serves /v1/ only")
            if api == OTHER:
                return self._refuse(line, arrived, request, 404, "not_served", "path not served",
                                    f"{line.path} is not served: the gate answers POST /v1/chat/completions, "
                                    "/v1/completions, /v1/responses and GET /v1/models only")
            if line.method not in SERVED_METHODS[api]:
                return self._refuse(line, arrived, request, 405, "method_not_allowed", "method not allowed",
                                    f"{line.method} {line.path} is not served; use {' or '.join(SERVED_METHODS[api])}")
            cap = self.config.limits.max_requests_at_once
            if len(self._live) >= cap:
                return self._refuse(line, arrived, request, 429, "too_many_requests", "requests at once over the cap",
                                    f"{cap} requests are under way already; send the next when one has ended")
            # From here the request is under way: the hard stop (and the answer's own bound, if
            # any) cuts it, its body still arriving or its answer.
            loop = asyncio.get_running_loop()
            answer_s = self.config.limits.answer_s
            live = _Live(loop.time() + answer_s if answer_s is not None else float("inf"))
            self._live.add(live)
            handed_over = False
            try:
                response = await self._read_and_forward(request, line, arrived, api, live, loop)
                handed_over = isinstance(response, StreamingResponse)
                return response
            finally:
                if not handed_over:
                    self._live.discard(live)
        except ClientDisconnect:  # gone while sending its body: nothing to forward, nobody to answer
            line.client_gone = True
            line.not_completed_why = "the client left while sending its body"
            return self._answer_error(line, arrived, b"", 400, "client_gone", "the client left while sending its body")
        except Exception as exc:  # a gate bug must cost one answer, never the gate or the record
            line.error = f"gate fault: {exc.__class__.__name__}: {exc}"
            return self._answer_error(line, arrived, request.scope.get("gate.body", b""), 500, "gate_error", line.error)

    async def _read_and_forward(self, request: Request, line: GateLogLine, arrived: float, api: str, live: _Live,
                                loop: asyncio.AbstractEventLoop) -> Response:
        cap = self.config.limits.max_request_bytes
        try:
            async with asyncio.timeout(self._wait_s(live, loop, None)) as live.timeout:
                read = await self._read_body(request, cap, line)
        except TimeoutError:
            return self._body_cut(line, arrived, self._cut_due(live, loop, _TIMER_SLACK_S))
        except _HeldBodiesFull:
            held_cap = self.config.limits.max_held_request_bytes
            return self._refuse(line, arrived, request, 503, "gate_busy", "request bodies held over the gate's cap",
                                f"the gate holds at most {held_cap} bytes of request bodies at once, and this body "
                                "would pass it; retry once other requests have ended")
        finally:
            live.timeout = None
        if read is None:
            return self._refuse(line, arrived, request, 413, "request_too_large", f"body over {cap} bytes",
                                f"the request body is larger than the gate's {cap}-byte cap")
        body = read
        request.scope["gate.body"] = body  # kept with the record if the gate itself fails on it
        rewrite = None
        send = body
        if api in GENERATION_APIS:
            try:
                parsed = _parse_json(body) if body else None
            except (ValueError, UnicodeDecodeError):
                parsed = None
            except RecursionError:
                return self._refuse_too_deep(line, arrived, body)
            if not isinstance(parsed, dict):
                return self._refuse(line, arrived, body, 400, "invalid_body",
                                    "empty body" if not body else "body not a JSON object",
                                    "the request body must be one JSON object")
            try:
                rewrite = self._rewrite(api, parsed, line)
                send = _json_bytes(rewrite.body)
            except RecursionError:
                return self._refuse_too_deep(line, arrived, body)
        elif api == MODELS and body:
            line.fields = RequestFields(removed=[RemovedField(field="body", why=WHY_MODELS_BODY, value_bytes=len(body))])
            send = b""
        query = request.scope["query_string"]
        if query:
            line.fields.add_removed("query string", WHY_QUERY, query.decode("latin-1"))
        # From the body's end to the answer's, a client that leaves ends the answer: while the
        # upstream is awaited and while a stream flows (the watcher then outlives this call, and
        # _asgi cancels it when the stream ends). No answer is worked out (and paid for) for nobody.
        live.watcher = asyncio.ensure_future(self._watch_client(request.receive, live, loop))
        response: Response | None = None
        try:
            response = await self._forward_live(request, line, arrived, api, body, send, rewrite, live, loop)
            return response
        finally:
            if not isinstance(response, StreamingResponse):
                live.watcher.cancel()

    @staticmethod
    async def _watch_client(receive: Receive, live: _Live, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for the client to hang up (its body is read: nothing else comes), then cut the answer."""
        while (await receive())["type"] != "http.disconnect":
            pass
        if live.cut is None:
            live.cut = ("client_gone", "the client left before the answer ended")
        if live.timeout is not None and not live.timeout.expired():
            live.timeout.reschedule(loop.time())

    async def _read_body(self, request: Request, cap: int, line: GateLogLine) -> bytes | None:
        """The whole body, or None as soon as it is known to pass `cap` (the rest is never read).
        Raises _HeldBodiesFull when it would pass the gate-wide cap on bodies held at once, by its
        Content-Length or by what arrived: each connection holds at most what uvicorn buffers.

        `line.bytes_in` counts what arrived so far, so a body cut on its way is recorded as such.
        What is taken is added to the gate's count and to the request's scope (`gate.held_bytes`),
        from which _asgi gives it back when the request's answer has ended."""
        held_cap = self.config.limits.max_held_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > cap:
                return None
            if self._held_request_bytes + int(declared) > held_cap:
                raise _HeldBodiesFull
        scope = request.scope
        parts: list[bytes] = []
        async for chunk in request.stream():
            line.bytes_in += len(chunk)
            if line.bytes_in > cap:
                return None
            if self._held_request_bytes + len(chunk) > held_cap:
                raise _HeldBodiesFull
            self._held_request_bytes += len(chunk)
            scope["gate.held_bytes"] = scope.get("gate.held_bytes", 0) + len(chunk)
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _body_cut(self, line: GateLogLine, arrived: float, cut: tuple[str, str] | None) -> Response:
        """A body still arriving at the hard stop (or past the answer's own bound): never forwarded,
        answered at once, and the connection closed rather than the rest read."""
        line.not_completed = True
        answer_s = self.config.limits.answer_s
        if cut is None or cut[0] == "run_over" or answer_s is None:
            line.not_completed_why = "its body was still arriving at the hard stop"
            response = self._answer_error(line, arrived, b"", 403, "run_over",
                                          "the run's hard stop passed while the request body was still arriving")
        else:
            line.not_completed_why = f"its body was still arriving after {answer_s:g} s"
            response = self._answer_error(line, arrived, b"", 408, "request_too_slow",
                                          f"the request body was still arriving after {answer_s:g} s")
        response.headers["connection"] = "close"
        return response

    def _rewrite(self, api: str, parsed: dict[str, Any], line: GateLogLine) -> Rewrite:
        cfg = self.config
        due = api in GENERATION_APIS and self._finish_now_due()
        rewrite = rewrite_request(
            api, parsed, model=cfg.model, sampling=cfg.sampling, answer_limit=cfg.answer_limit,
            finish_now_text=cfg.finish_now_text if due else None,
        )
        line.fields = RequestFields.bounded(
            [(path, c.why, c.requested is not ABSENT, None if c.requested is ABSENT else c.requested, c.enforced)
             for path, c in rewrite.changes.items()],
            [(r.path, r.why, r.value) for r in rewrite.removed],
        )
        if rewrite.shortened_why:
            line.shortened = True
            line.shortened_why = rewrite.shortened_why
        if rewrite.injected:
            line.injected = True
            count_finish_now(self.stats, line)  # now, not when the answer ends: the run announces it
        return rewrite

    # ----- cutting answers -------------------------------------------------------------------

    def _cut_live(self, code: str, why: str) -> None:
        """In the serving loop: end every answer still under way (the hard stop)."""
        loop = asyncio.get_running_loop()
        for live in list(self._live):
            if live.cut is None:
                live.cut = (code, why)
            if live.timeout is not None and not live.timeout.expired():
                live.timeout.reschedule(loop.time())

    def _cut_due(self, live: _Live, loop: asyncio.AbstractEventLoop, slack: float = 0.0) -> tuple[str, str] | None:
        """Whether this answer must end now, and why (the hard stop, or its own time cap).

        `slack`: after a bound fired, what counts as "at" the deadline (timers fire a tick early)."""
        if live.cut is None:
            after = self.config.hard_stop_after_s
            elapsed = self.elapsed()
            if self._is_stopped() or (slack and after is not None and elapsed is not None and elapsed >= after - slack):
                live.cut = ("run_over", "the run's hard stop passed")
            elif loop.time() >= live.deadline - slack:
                live.cut = ("answer_too_long", f"answer still running at the {self.config.limits.answer_s:g} s cap on one answer")
        return live.cut

    def _wait_s(self, live: _Live, loop: asyncio.AbstractEventLoop, bound: float | None) -> float | None:
        """`bound` (None: none), shortened to what is left of the answer's time and of the run;
        None when nothing bounds the wait (hard_stop() still ends it: it reschedules the timeout)."""
        wait = live.deadline - loop.time()
        if bound is not None:
            wait = min(wait, bound)
        after = self.config.hard_stop_after_s
        elapsed = self.elapsed()
        if after is not None and elapsed is not None:
            wait = min(wait, after - elapsed)
        return None if wait == float("inf") else max(wait, 0.0)

    def _mark_cut(self, line: GateLogLine, why: str) -> None:
        line.shortened = True
        line.shortened_why = f"{line.shortened_why}; answer cut: {why}" if line.shortened_why else f"answer cut: {why}"
        line.error = f"answer cut: {why}"

    def _bounded_send(self, send: Send, live: _Live) -> Send:
        """`send` to a stream's client, bounded by the answer's deadline and the hard stop: a client
        that stops reading must not hold the answer (and its upstream connection) for ever.

        Once the watcher saw the client leave, a send raises OSError (as ASGI 2.4 asks of a server;
        uvicorn would drop the bytes silently) and nothing more is counted as sent."""
        loop = asyncio.get_running_loop()

        async def bounded(message: dict) -> None:
            if live.client_gone():
                raise OSError("the client left")
            # Once cut, only the error event and the end are left to send: a short grace for them.
            bound = _CUT_SEND_GRACE_S if live.cut is not None else None
            try:
                async with asyncio.timeout(self._wait_s(live, loop, bound)) as live.timeout:
                    await send(message)
            except TimeoutError:
                if live.client_gone():  # the watcher ended the wait: the client left while it was not reading
                    raise OSError("the client left") from None
                live.send_stuck = True
                self._cut_due(live, loop, _TIMER_SLACK_S)
                raise
            finally:
                live.timeout = None
            live.sent += len(message.get("body", b""))

        return bounded

    # ----- the upstream ----------------------------------------------------------------------

    async def _forward_live(
        self, request: Request, line: GateLogLine, arrived: float, api: str,
        body: bytes, send: bytes, rewrite: Rewrite | None, live: _Live, loop: asyncio.AbstractEventLoop,
    ) -> Response:
        t = self.config.upstream_timeout_s
        limits = self.config.limits
        # No client header goes upstream: OpenAI-Organization/-Project would choose whom of the
        # operator's account is billed, OpenAI-Beta turns on beta behaviour, a Content-Type could
        # name another charset. The gate says itself what it sends and what it reads.
        streamed = rewrite is not None and rewrite.body.get("stream") is True
        headers = [(b"host", self._upstream_host), (b"accept-encoding", b"identity"),
                   (b"accept", b"text/event-stream" if streamed else b"application/json")]
        if send or request.method == "POST":
            headers.append((b"content-type", b"application/json"))
            headers.append((b"content-length", str(len(send)).encode()))
        if self.config.api_key_upstream:
            headers.append((b"authorization", f"Bearer {self.config.api_key_upstream}".encode()))
        upstream_request = httpcore.Request(
            request.method, self._upstream_url(request.scope["gate.upstream_path"]), headers=headers, content=send,
            extensions={"timeout": {"connect": t.connect_s,
                                    "read": None if t.first_byte_s is None else max(t.first_byte_s, t.stall_s) + 1,
                                    "write": t.write_s, "pool": t.connect_s}},
        )
        bodies = (body, send if rewrite is not None and send != body else None)
        try:
            async with asyncio.timeout(self._wait_s(live, loop, t.first_byte_s)) as live.timeout:
                upstream = await self.pool.handle_async_request(upstream_request)
        except httpcore.ConnectTimeout as exc:
            return self._upstream_fault(line, arrived, bodies, 504, "upstream_unreachable",
                                        f"upstream did not accept a connection within {t.connect_s:g} s ({exc})")
        except (httpcore.ConnectError, ConnectionRefusedError) as exc:
            reason = str(exc) or exc.__class__.__name__
            if connection_refused(exc):
                return self._upstream_fault(line, arrived, bodies, 502, "upstream_refused",
                                            f"upstream refused the connection: {reason}")
            return self._upstream_fault(line, arrived, bodies, 502, "upstream_unreachable",
                                        f"cannot connect to the upstream: {reason}")
        except (TimeoutError, httpcore.TimeoutException):
            cut = self._cut_due(live, loop, _TIMER_SLACK_S)
            if cut is not None:
                return self._cut_answer(line, arrived, bodies, cut)
            return self._upstream_fault(line, arrived, bodies, 504, "upstream_timeout",
                                        f"upstream sent no answer within {_seconds(t.first_byte_s)}")
        except _TRANSPORT_ERRORS as exc:
            return self._upstream_fault(line, arrived, bodies, 502, "upstream_closed",
                                        f"upstream closed the connection before answering: {exc.__class__.__name__} {exc}")
        finally:
            live.timeout = None
        line.first_byte_ms = (time.perf_counter() - arrived) * 1000
        out_headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in upstream.headers if k.lower() not in _DROP_DOWNSTREAM}
        out_headers["x-showcase-request-id"] = line.id
        status = upstream.status
        if status < 400 and out_headers.get("content-type", "").startswith("text/event-stream"):
            line.stream = True
            line.status = status
            tap = StreamTap(api, hide_usage=rewrite.hide_usage if rewrite else False, max_event_bytes=limits.max_event_bytes)
            started = [False]
            response = StreamingResponse(
                self._pipe(upstream, tap, line, arrived, bodies, started, live), status_code=status, headers=out_headers
            )

            async def if_unstarted() -> None:
                # The client left before the stream's first read: the pipe never ran its finally.
                if not started[0]:
                    self._live.discard(live)
                    line.client_gone = True
                    self._finish(line, arrived, bodies, b"", "response.sse", api, tap.facts)
                    with anyio.CancelScope(shield=True):
                        await upstream.aclose()

            response.gate_if_unstarted = if_unstarted  # type: ignore[attr-defined]
            response.gate_live = live  # type: ignore[attr-defined]
            return response
        parts: list[bytes] = []
        size = 0
        cut: tuple[str, str] | None = None
        try:
            chunks = upstream.aiter_stream()
            async with asyncio.timeout(self._wait_s(live, loop, t.first_byte_s)) as live.timeout:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limits.max_answer_bytes:
                        cut = ("answer_too_large", f"answer passed the {limits.max_answer_bytes}-byte cap on one answer")
                        break
                    parts.append(chunk)
        except (TimeoutError, httpcore.TimeoutException):
            cut = self._cut_due(live, loop, _TIMER_SLACK_S)
            if cut is None:
                return self._upstream_fault(line, arrived, bodies, 504, "upstream_timeout",
                                            f"upstream body did not arrive within {_seconds(t.first_byte_s)}")
        except _TRANSPORT_ERRORS as exc:
            return self._upstream_fault(line, arrived, bodies, 502, "upstream_reset",
                                        f"upstream connection reset while sending the body: {exc.__class__.__name__}")
        finally:
            live.timeout = None
            await upstream.aclose()
        if cut is not None:
            return self._cut_answer(line, arrived, bodies, cut)
        content = parts[0] if len(parts) == 1 else b"".join(parts)
        line.status = status
        if status >= 400:
            text = content.decode("utf-8", "replace")
            line.error = f"upstream answered {status}: {text[:300]}"
            try:
                parsed = json.loads(content)
                is_api_error = isinstance(parsed, dict) and "error" in parsed
            except (ValueError, UnicodeDecodeError):
                is_api_error = False
            if not is_api_error:  # e.g. an HTML page from a proxy: the client gets the API's format
                content = _json_bytes(error_object(line.error, "upstream_error", status))
                out_headers["content-type"] = "application/json"
        line.bytes_out = len(content)
        return Response(
            content, status_code=status, headers=out_headers,
            background=BackgroundTask(self._finish_after, line, arrived, bodies, content, "response.json", api),
        )

    def _cut_answer(self, line: GateLogLine, arrived: float, bodies: tuple[bytes, bytes | None],
                    cut: tuple[str, str]) -> Response:
        """A non-streamed answer ended by a cap, the hard stop or its client leaving: an API error that says which."""
        code, why = cut
        if code == "client_gone":  # nobody reads this answer: not an error, a request never completed
            line.client_gone = True
            return self._answer_error(line, arrived, bodies, 400, code, why)
        self._mark_cut(line, why)
        status = {"run_over": 403, "answer_too_long": 504}.get(code, 502)
        return self._answer_error(line, arrived, bodies, status, code, line.error or why)

    async def _pipe(self, upstream: httpcore.Response, tap: StreamTap, line: GateLogLine, arrived: float,
                    bodies: tuple[bytes, bytes | None], started: list[bool], live: _Live):
        """Pass a stream on event by event; a fault or a cut becomes an error event, then the end."""
        started[0] = True
        loop = asyncio.get_running_loop()
        stall = self.config.upstream_timeout_s.stall_s
        limits = self.config.limits
        keep_up_to = limits.max_stored_body_bytes if self.recorder.keep_bodies else 0
        received: list[bytes] = []
        size = 0
        chunks = upstream.aiter_stream()
        ended = False
        fault: tuple[str, str] | None = None
        try:
            while True:
                # A turn for the loop per chunk: with a fast upstream and a client connection that
                # never blocks (or a departed one, whose writes uvicorn drops), nothing here would
                # wait, and the watcher (and every other request) would get no turn until the end.
                await asyncio.sleep(0)
                if self._cut_due(live, loop) is not None:
                    break
                try:
                    async with asyncio.timeout(self._wait_s(live, loop, stall)) as live.timeout:
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if self._cut_due(live, loop, _TIMER_SLACK_S) is None:
                        fault = ("upstream_stall", f"upstream stalled: no bytes for {stall:g} s mid-stream")
                    break
                except (*_TRANSPORT_ERRORS, httpcore.TimeoutException) as exc:
                    fault = ("upstream_reset", f"upstream connection reset mid-stream: {exc.__class__.__name__} {exc}".strip())
                    break
                finally:
                    live.timeout = None
                size += len(chunk)
                if size <= keep_up_to:
                    received.append(chunk)
                if size > limits.max_answer_bytes:
                    live.cut = ("answer_too_large", f"answer passed the {limits.max_answer_bytes}-byte cap on one answer")
                    break
                try:
                    out = tap.feed(chunk)
                except EventTooLarge as exc:
                    live.cut = ("event_too_large", f"{exc} (cap {limits.max_event_bytes} bytes)")
                    break
                if out:
                    yield out
            if live.client_gone():
                return  # nobody to tell (the finally records it)
            if live.cut is not None:
                self._mark_cut(line, live.cut[1])
                fault = (live.cut[0], line.error or live.cut[1])
            if fault is not None:
                tap.drop()  # half an event must not swallow the error event
                line.error = line.error or fault[1]
                api = line.api or ""
                tail = stream_error_event(api, fault[1], fault[0]) + stream_end(api)
            else:
                tail = tap.flush()
            if tail:
                yield tail
            ended = True
        finally:
            # Record first and without awaiting: when the client went away this task is being
            # cancelled, and every await below would be cancelled again.
            self._live.discard(live)
            if live.watcher is not None:
                live.watcher.cancel()
            line.bytes_out = live.sent
            line.client_gone = not ended
            stopped_reading = not ended and live.cut is not None and not live.client_gone()
            if stopped_reading and not (line.error or "").startswith("answer cut"):
                self._mark_cut(line, f"{live.cut[1]} (the client had stopped reading)")
            if not line.error and tap.facts.error:
                line.error = f"upstream error in stream: {tap.facts.error}"
            self._finish(line, arrived, bodies, received, "response.sse", line.api or "", tap.facts, answer_size=size)
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    # ----- answers the gate gives itself -----------------------------------------------------

    def _refuse(self, line: GateLogLine, arrived: float, body: bytes | Request, status: int, code: str, why: str,
                message: str) -> Response:
        """Refused, never forwarded. Given the Request itself, its body was never read: the
        connection is then closed after the answer rather than the rest of the body read."""
        line.blocked = True
        line.blocked_why = why
        if isinstance(body, Request):
            headers = body.headers
            unread = headers.get("content-length", "0") not in ("0", "") or "transfer-encoding" in headers
            response = self._answer_error(line, arrived, b"", status, code, message)
            if unread:
                response.headers["connection"] = "close"
            return response
        return self._answer_error(line, arrived, body, status, code, message)

    def _refuse_too_deep(self, line: GateLogLine, arrived: float, body: bytes) -> Response:
        return self._refuse(line, arrived, body, 400, "invalid_body", "body nested too deeply",
                            "the request body is nested deeper than the gate reads")

    def _upstream_fault(self, line: GateLogLine, arrived: float, bodies: tuple[bytes, bytes | None],
                        status: int, code: str, message: str) -> Response:
        line.error = message
        return self._answer_error(line, arrived, bodies, status, code, message)

    def _answer_error(self, line: GateLogLine, arrived: float, bodies: bytes | tuple[bytes, bytes | None],
                      status: int, code: str, message: str) -> Response:
        kind = "invalid_request_error" if status < 500 else "upstream_error"
        if status == 500:
            kind = "server_error"
        content = _json_bytes(error_object(message, kind, code))
        line.status = status
        line.bytes_out = len(content)
        if isinstance(bodies, bytes):
            bodies = (bodies, None)
        return Response(
            content, status_code=status, media_type="application/json",
            headers={"x-showcase-request-id": line.id},
            background=BackgroundTask(self._finish_after, line, arrived, bodies, content, "response.json", line.api or ""),
        )

    # ----- records ---------------------------------------------------------------------------

    async def _finish_after(self, *args: Any) -> None:
        # Async on purpose: Starlette runs a sync background function in a worker thread, and the
        # records and counters belong to the event loop's thread.
        self._finish(*args)

    def _finish(self, line: GateLogLine, arrived: float, bodies: tuple[bytes, bytes | None],
                answer: bytes | list[bytes], answer_suffix: str, api: str, facts: AnswerFacts | None = None,
                answer_size: int | None = None) -> None:
        """Write the request's bodies, its log line and the stats. Synchronous on purpose (see _pipe)."""
        line.latency_ms = round((time.perf_counter() - arrived) * 1000, 3)
        if line.first_byte_ms is not None:
            line.first_byte_ms = round(line.first_byte_ms, 3)
        if facts is None and not line.blocked and api in GENERATION_APIS and isinstance(answer, bytes):
            facts = read_answer(api, answer)
        if line.client_gone and not line.not_completed:
            line.not_completed = True
            line.not_completed_why = line.not_completed_why or "the client left before the answer ended"
        if facts is not None:
            line.prompt_tokens = facts.prompt_tokens
            line.answer_tokens = facts.answer_tokens
            line.finish_reason = _bounded_reason(facts.finish_reason)
        request_body, upstream_body = bodies
        if answer_size is None:
            answer_size = len(answer) if isinstance(answer, bytes) else sum(map(len, answer))
        for suffix, data, size in (("request.json", request_body, len(request_body)),
                                   ("upstream.json", upstream_body, len(upstream_body or b"")),
                                   (answer_suffix, answer, answer_size)):
            if not size:
                continue
            name, why = self.recorder.body(line.id, suffix, data, size)
            if name:
                line.bodies.append(name)
            elif why:
                line.bodies_not_kept.append(f"{line.id}.{suffix}: {why}")
        self._count(line)
        self.recorder.line(line)
        self._write_stats()

    def _count(self, line: GateLogLine) -> None:
        count_request(self.stats, line)
        self.stats.bodies_kept_bytes = self.recorder.kept_bytes

    def _write_stats(self) -> None:
        self.stats.updated_at = utc_now()
        self.recorder.stats(self.stats)

    # ----- the run's own endpoints -----------------------------------------------------------

    def _tool_route(self, route: Route) -> Route:
        """The same route, behind the run's key and the hard stop, logged as kind 'tool'."""
        endpoint = route.endpoint

        async def guarded(request: Request) -> Response:
            arrived = time.perf_counter()
            line = self._new_line(request, "tool")
            if self._is_stopped() and self._refuse_tools_when_stopped:
                return self._refuse(line, arrived, b"", 403, "run_over", "hard stop",
                                    "the run's hard stop has passed; the gate refuses every request")
            if not self._key_ok(request):
                return self._refuse(line, arrived, b"", 401, "invalid_api_key", "wrong or missing key",
                                    "wrong or missing API key (send the run's key as 'Authorization: Bearer KEY')")
            try:
                if inspect.iscoroutinefunction(endpoint):
                    response = await endpoint(request)
                else:
                    response = await run_in_threadpool(endpoint, request)
            except Exception as exc:
                line.error = f"{exc.__class__.__name__}: {exc}"
                return self._answer_error(line, arrived, b"", 500, "tool_error", line.error)
            line.status = response.status_code
            self._finish(line, arrived, (b"", None), b"", "response.json", "")
            return response

        return Route(route.path, guarded, methods=list(route.methods or ["GET"]), name=route.name)


def create_gate(
    config: GateConfig,
    clock: Callable[[], float] = time.monotonic,
    extra_routes: list[Route] | None = None,
) -> Gate:
    """A gate for one run; its records go to config.log_dir (which must not hold a gate.log yet)."""
    return Gate(config, clock=clock, extra_routes=extra_routes)
