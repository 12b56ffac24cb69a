"""Reading answers on the way back: tokens and finish reason, and the hidden usage chunk.

A stream is passed on event by event as soon as each event is complete; only an unfinished
event's tail waits for the next chunk.
"""

import json
import re

import orjson
from dataclasses import dataclass
from typing import Any

from showcase.gate.rewrite import RESPONSES

_EVENT_END = re.compile(rb"\r?\n\r?\n")


@dataclass
class AnswerFacts:
    """What the record keeps of an answer."""

    prompt_tokens: int | None = None
    answer_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None  # an error the upstream reported inside a 200 stream


def _usage(facts: AnswerFacts, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    answer = usage.get("completion_tokens", usage.get("output_tokens"))
    if isinstance(prompt, int):
        facts.prompt_tokens = prompt
    if isinstance(answer, int):
        facts.answer_tokens = answer


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error)


def read_object(api: str, obj: Any, facts: AnswerFacts) -> None:
    """Update `facts` from one JSON object: a whole answer or one stream event."""
    if not isinstance(obj, dict):
        return
    if api == RESPONSES:
        kind = obj.get("type")
        if kind == "error":
            facts.error = _error_text(obj)
            return
        response = obj.get("response") if isinstance(obj.get("response"), dict) else obj
        if kind is None or kind in ("response.completed", "response.incomplete", "response.failed"):
            _usage(facts, response.get("usage"))
            status = response.get("status")
            details = response.get("incomplete_details")
            if isinstance(details, dict) and details.get("reason"):
                status = f"{status}: {details['reason']}"
            if status:
                facts.finish_reason = status
            if kind == "response.failed" or response.get("error"):
                facts.error = _error_text(response.get("error"))
        return
    if obj.get("error"):
        facts.error = _error_text(obj["error"])
    if obj.get("usage"):
        _usage(facts, obj["usage"])
    choices = obj.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                facts.finish_reason = choice["finish_reason"]


def read_answer(api: str, body: bytes) -> AnswerFacts:
    """Facts of a whole (non-streamed) JSON answer; an unparseable body yields empty facts."""
    facts = AnswerFacts()
    try:
        read_object(api, json.loads(body), facts)
    except (ValueError, UnicodeDecodeError):
        pass
    return facts


class StreamTap:
    """Feed upstream SSE bytes in, get the bytes to pass on out; facts collect on the way.

    With `hide_usage`, the usage-only chunk the gate asked for (choices empty, usage set) is
    dropped so a client that did not ask never sees it.
    """

    def __init__(self, api: str, hide_usage: bool) -> None:
        self.api = api
        self.hide_usage = hide_usage
        self.facts = AnswerFacts()
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        # Scan only the new bytes (and the 3 before, where an event end may straddle two chunks).
        start = max(0, len(self._pending) - 3)
        data = self._pending + chunk if self._pending else chunk
        last_end = 0
        out: list[bytes] = []
        for match in _EVENT_END.finditer(data, start):
            event = data[last_end:match.end()]
            if self._keep(event):
                out.append(event)
            last_end = match.end()
        self._pending = data[last_end:]
        return b"".join(out)

    def flush(self) -> bytes:
        """The unfinished tail at the end of the stream (passed on as is)."""
        tail, self._pending = self._pending, b""
        if tail.strip():
            self._keep(tail)
        return tail

    def _keep(self, event: bytes) -> bool:
        payload = b"".join(line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:"))
        if not payload or payload.startswith(b"[DONE]"):
            return True
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return True
        read_object(self.api, obj, self.facts)
        if self.hide_usage and isinstance(obj, dict) and obj.get("usage") and obj.get("choices") == []:
            return False
        return True


def error_object(message: str, kind: str, code: str | int | None) -> dict[str, Any]:
    """The OpenAI error object every API answers with."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def stream_error_event(api: str, message: str, code: str, sequence_number: int = 0) -> bytes:
    """An error told inside a stream that already started, in that API's own stream format."""
    if api == RESPONSES:
        data = {"type": "error", "code": code, "message": message, "param": None, "sequence_number": sequence_number}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    return b"data: " + json.dumps(error_object(message, "upstream_error", code)).encode() + b"\n\n"
