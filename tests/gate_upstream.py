"""A scripted OpenAI-compatible upstream for the gate's tests and bench: it stands in for the model.

What it does is chosen per request by the `x-script` header (the gate passes headers through):
ok (default), tool, error400, error500, html502, reset (stream breaks after two events), stall (stream
goes silent), slow (headers late). Every request it receives is kept in `.received` so tests
check what the gate actually sent upstream.
"""

import asyncio
import json
import threading
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "served-model"
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


class ScriptedUpstream:
    def __init__(self, stall_s: float = 3.0) -> None:
        self.received: list[dict] = []
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
        script = request.headers.get("x-script", "ok")
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


def wait_until(predicate, timeout_s: float = 5.0) -> bool:
    """Poll `predicate` until true or the bound passes (records land after the answer's last byte)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
