"""A scripted OpenAI-compatible upstream for the gate's tests and bench: it stands in for the model.
Below it, the rig the gate's tests share: a real gate (uvicorn, Unix socket and TCP) in front of it.

What it does is chosen per request by a `[script:NAME key=value ...]` marker in the request's
text (`said()`, `scripted()`: the gate forwards the conversation as sent, and no client header):
ok (default), tool, error400, error500, html502, reset (stream breaks after two events), stall (stream
goes silent), slow (headers late), and the hostile ones: endless (an event every 0.1 s, for a
minute), flood (events as fast as it can, for a minute), bigevent (one event of `size` bytes,
64 MiB by default, in 64 KiB chunks), huge (a non-streamed answer of `size` bytes), hold (two
events, then silence for a minute); long (a chat stream that sends an event every 0.1 s for
`seconds` seconds, 3 by default, then ends as a model's answer does); codex (Responses: the events Codex CLI reads, with a reasoning
item and two parallel tool calls). Every request it receives is kept in `.received` so tests
check what the gate actually sent upstream; `.sent` counts the bytes of each bigevent stream.
"""

import asyncio
import json
import re
import socket
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "served-model"
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


SCRIPT = re.compile(rb"\[script:(\w+)((?: \w+=[\w.]+)*)\]")


def scripted(text: str, script: str, **params: object) -> str:
    """`text` with the marker that makes the upstream play `script` (with its parameters)."""
    return f"{text} [script:{script}{''.join(f' {k}={v}' for k, v in params.items())}]"


def said(script: str, **params: object) -> list[dict]:
    """A chat conversation whose answer is `script`."""
    return [{"role": "user", "content": scripted("build a voxel world", script, **params)}]


def _script_of(raw: bytes) -> tuple[str, dict[str, str]]:
    found = SCRIPT.search(raw)
    if found is None:
        return "ok", {}
    params = dict(pair.split("=", 1) for pair in found.group(2).decode().split())
    return found.group(1).decode(), params


class ScriptedUpstream:
    def __init__(self, stall_s: float = 3.0) -> None:
        self.received: list[dict] = []
        self.sent: list[int] = []
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST", "DELETE"])])

    def last(self) -> dict:
        return self.received[-1]

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.received.append({"path": request.url.path, "query": request.url.query, "headers": dict(request.headers),
                                  "body": body, "size": len(raw)})
        script, params = _script_of(raw)
        path = request.url.path
        if script == "error500":
            return JSONResponse({"error": {"message": "model crashed", "type": "server_error", "code": 500}}, 500)
        if script == "error400":
            return JSONResponse({"error": {"message": "context too long", "type": "invalid_request_error",
                                           "code": "context_length_exceeded"}}, 400)
        if script == "html502":
            return Response("<html><body>Bad Gateway</body></html>", 502, media_type="text/html")
        if script == "slow":
            await asyncio.sleep(self.stall_s)
        if script == "huge":
            return Response(b'{"pad": "' + b"x" * int(params.get("size", 1 << 20)) + b'"}',
                            media_type="application/json")
        if script in ("endless", "flood", "bigevent", "hold", "long"):
            return StreamingResponse(self._hostile(script, params, request.url.path), media_type="text/event-stream")
        if path == "/v1/models":
            return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
        if path.startswith("/v1/models/") and request.method == "GET":
            return JSONResponse({"id": path.rsplit("/", 1)[1], "object": "model", "owned_by": "test"})
        if path == "/v1/echo-size":
            return JSONResponse({"size": len(raw)})
        body = body or {}
        if path == "/v1/chat/completions":
            if body.get("stream"):
                return self._sse(self._chat_events(body, script), script)
            return JSONResponse(self._chat_answer(body, script))
        if path == "/v1/completions":
            if body.get("stream"):
                return self._sse(self._completion_events(body), script)
            return JSONResponse({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": MODEL,
                                 "choices": [{"index": 0, "text": " world", "finish_reason": "length", "logprobs": None}],
                                 "usage": USAGE})
        if path == "/v1/responses":
            if script == "codex":
                events = self._codex_events(body)
                if body.get("stream"):
                    return self._sse(events, "ok")
                return JSONResponse(events[-1]["response"])
            if body.get("stream"):
                return self._sse(self._response_events(), script)
            return JSONResponse(self._response_object())
        return JSONResponse({"object": "other", "path": path, "size": len(raw)})

    # ----- chat ------------------------------------------------------------------------------

    def _chat_answer(self, body: dict, script: str) -> dict:
        message: dict = {"role": "assistant", "content": "hello", "reasoning_content": "thinking it over"}
        finish = "stop"
        if script == "tool":
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": "ls -la"})}}]}
            finish = "tool_calls"
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": USAGE}

    def _chat_events(self, body: dict, script: str) -> list[dict]:
        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        events = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "hmm"})]
        if script == "tool":
            events += [
                chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                       "function": {"name": "bash", "arguments": ""}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": '}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
                chunk({}, "tool_calls"),
            ]
        else:
            events += [chunk({"content": "hel"}), chunk({"content": "lo"}), chunk({}, "stop")]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                           "choices": [], "usage": USAGE})
        return events

    def _completion_events(self, body: dict) -> list[dict]:
        events = [{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": MODEL,
                   "choices": [{"index": 0, "text": t, "finish_reason": f, "logprobs": None}]}
                  for t, f in ((" wor", None), ("ld", "length"))]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": MODEL,
                           "choices": [], "usage": USAGE})
        return events

    # ----- responses -------------------------------------------------------------------------

    def _response_object(self, status: str = "completed") -> dict:
        return {
            "id": "resp_1", "object": "response", "created_at": 1, "model": MODEL, "status": status,
            "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": "hello", "annotations": []}]}],
            "usage": {"input_tokens": 13, "output_tokens": 5, "total_tokens": 18,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        }

    def _response_events(self) -> list[dict]:
        created = {**self._response_object("in_progress"), "output": [], "usage": None}
        return [
            {"type": "response.created", "sequence_number": 0, "response": created},
            {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "hel", "logprobs": []},
            {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "lo", "logprobs": []},
            {"type": "response.completed", "sequence_number": 3, "response": self._response_object()},
        ]

    def _codex_events(self, body: dict) -> list[dict]:
        """A reasoning item, then two function calls in one turn (parallel tool calls), as Codex reads them."""
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
                     "encrypted_content": "opaque-blob"}
        calls = [{"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "shell",
                  "arguments": json.dumps({"command": ["bash", "-lc", command]}), "status": "completed"}
                 for n, command in ((1, "ls"), (2, "cat game.html"))]
        usage = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940,
                 "input_tokens_details": {"cached_tokens": 512}, "output_tokens_details": {"reasoning_tokens": 16}}
        final = {**self._response_object(), "output": [reasoning, *calls], "usage": usage,
                 "parallel_tool_calls": body.get("parallel_tool_calls", True), "store": body.get("store", True),
                 "reasoning": body.get("reasoning")}
        created = {**final, "status": "in_progress", "output": [], "usage": None}
        events: list[dict] = [{"type": "response.created", "response": created},
                              {"type": "response.in_progress", "response": created}]
        events += [{"type": "response.output_item.added", "output_index": 0, "item": {**reasoning, "summary": []}},
                   {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
                    "summary_index": 0, "delta": "plan"},
                   {"type": "response.output_item.done", "output_index": 0, "item": reasoning}]
        for n, call in enumerate(calls, start=1):
            events += [{"type": "response.output_item.added", "output_index": n, "item": {**call, "arguments": "", "status": "in_progress"}},
                       {"type": "response.function_call_arguments.delta", "item_id": call["id"], "output_index": n,
                        "delta": call["arguments"]},
                       {"type": "response.function_call_arguments.done", "item_id": call["id"], "output_index": n,
                        "arguments": call["arguments"]},
                       {"type": "response.output_item.done", "output_index": n, "item": call}]
        events.append({"type": "response.completed", "response": final})
        return [{**event, "sequence_number": n} for n, event in enumerate(events)]

    async def _hostile(self, script: str, params: dict[str, str], path: str):
        """Streams no real model sends (and one long one that it might); each stops by itself within a minute."""
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                 "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        deadline = time.monotonic() + 60
        if script == "bigevent":
            size = int(params.get("size", 64 << 20))
            piece = b"x" * 65536
            index = len(self.sent)
            self.sent.append(0)
            yield b'data: {"pad": "'
            while self.sent[index] < size and time.monotonic() < deadline:
                yield piece
                self.sent[index] += len(piece)
                await asyncio.sleep(0)
            yield b'"}\n\n' + b"data: [DONE]\n\n"
            return
        if script == "long":
            end = time.monotonic() + float(params.get("seconds", 3))
            while time.monotonic() < end:
                yield event
                await asyncio.sleep(0.1)
            last = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield b"data: " + json.dumps(last).encode() + b"\n\n" + b"data: [DONE]\n\n"
            return
        if script == "hold":
            if path == "/v1/responses":
                created = {"type": "response.created", "sequence_number": 0,
                           "response": {**self._response_object("in_progress"), "output": [], "usage": None}}
                event = b"event: response.created\ndata: " + json.dumps(created).encode() + b"\n\n"
            yield event + event
            await asyncio.sleep(60)
            return
        while time.monotonic() < deadline:
            yield event * (64 if script == "flood" else 1)
            await asyncio.sleep(0 if script == "flood" else 0.1)

    # ----- the wire --------------------------------------------------------------------------

    def _sse(self, events: list[dict], script: str) -> StreamingResponse:
        responses_api = bool(events) and "sequence_number" in events[0]

        async def gen():
            for n, event in enumerate(events):
                if script == "reset" and n == 2:
                    raise ConnectionResetError("scripted reset mid-stream")
                if script == "stall" and n == 2:
                    await asyncio.sleep(self.stall_s)
                prefix = f"event: {event['type']}\n".encode() if responses_api else b""
                yield prefix + b"data: " + json.dumps(event).encode() + b"\n\n"
            if not responses_api:
                yield b"data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")


def post(r, path: str, body=None, *, raw: bytes | None = None, headers: dict | None = None, timeout: float = 30):
    """A request to the rig's gate as the agent would send it (raw bytes when given), with the key."""
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(r.base.removesuffix("/v1") + path, content=content, timeout=timeout,
                      headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", **(headers or {})})


def raw_http(port: int, request: bytes, timeout: float = 30) -> bytes:
    """One request as bytes on a fresh connection (no client library normalises it); what came back
    before the server closed, reset or went silent."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return data
            if not chunk:
                return data
            data += chunk


def received_since(up, n: int) -> list[dict]:
    """What the upstream received after its first n requests."""
    return up.received[n:]


def wait_until(predicate, timeout_s: float = 5.0) -> bool:
    """Poll `predicate` until true or the bound passes (records land after the answer's last byte)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# ----- a gate in front of it: the rig the gate's tests share ---------------------------------

from showcase.gate.app import create_gate  # noqa: E402
from showcase.gate.config import GateConfig, UpstreamTimeouts  # noqa: E402
from showcase.gate.log import GateStats, read_log  # noqa: E402
from showcase.gate.server import AppServer, GateServer  # noqa: E402

KEY = "run-key-123"
FINISH = "Time is up: finish now and leave game.html as it is."
MSG = [{"role": "user", "content": "build a voxel world"}]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def upstream():
    scripted = ScriptedUpstream(stall_s=4.0)
    with AppServer(scripted.app, ["tcp:127.0.0.1:0"]) as server:
        scripted.url = f"http://127.0.0.1:{server.tcp_port}/v1"
        yield scripted


class Rig:
    """One gate in front of the scripted upstream, with its clock, log folder and clients."""

    def __init__(self, upstream, tmp_path: Path, **overrides) -> None:
        self.upstream = upstream
        self.clock = FakeClock()
        self.log_dir = tmp_path / "log"
        settings = dict(
            upstream=upstream.url, model=MODEL, key=KEY, log_dir=self.log_dir,
            sampling={"temperature": 0.6, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True}},
            sampling_source="sampling.json", answer_limit=4096, finish_now_after_s=5400, finish_now_text=FINISH,
            hard_stop_after_s=7200, upstream_timeout_s=UpstreamTimeouts(stall_s=1.5, first_byte_s=2.0, connect_s=2),
        )
        settings.update(overrides.pop("settings", {}))
        self.gate = create_gate(GateConfig(**settings), clock=self.clock, **overrides)
        self.server = GateServer(self.gate, [f"unix:{tmp_path}/gate.sock", "tcp:127.0.0.1:0"]).start()
        self.base = f"http://127.0.0.1:{self.server.tcp_port}/v1"
        self.gate.start_clock()

    def sdk(self, key: str = KEY) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base, api_key=key, max_retries=0, timeout=10)

    def lines(self, n: int):
        assert wait_until(lambda: (self.log_dir / "gate.log").exists()
                          and len((self.log_dir / "gate.log").read_text().splitlines()) >= n), "log line missing"
        return read_log(self.log_dir / "gate.log")

    def stats(self, finished: int) -> GateStats:
        """gate-stats.json once it counts `finished` requests (it lands just after each log line)."""
        def read() -> GateStats:
            return GateStats.model_validate_json((self.log_dir / "gate-stats.json").read_text())

        assert wait_until(lambda: read().requests + read().tool_requests >= finished), "stats not updated"
        return read()

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def rig(upstream, tmp_path):
    made = []

    def make(**overrides) -> Rig:
        made.append(Rig(upstream, tmp_path / f"g{len(made)}", **overrides))
        return made[-1]

    yield make
    for r in made:
        r.close()


