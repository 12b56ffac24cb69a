"""Reading answers on the way back: tokens and finish reason, and the hidden usage chunk.

A stream is passed on event by event as soon as each event is complete; only an unfinished
event's tail waits for the next chunk.
"""

import json

import orjson
from dataclasses import dataclass
from typing import Any

from showcase.gate.rewrite import RESPONSES



def _event_ends(data: bytes, start: int = 0):
    """Offsets just past each blank line (an event's end: \n\n, with \r before either \n).

    bytes.find (memchr) jumps from one \n to the next: a regex scans every byte and crawled
    through a 64 MiB event at a few MB/s."""
    find = data.find
    size = len(data)
    i = find(b"\n", start)
    while i != -1:
        j = i + 1
        if j < size and data[j] == 13:  # \r
            j += 1
        if j < size and data[j] == 10:  # \n
            yield j + 1
            i = find(b"\n", j + 1)
        else:
            i = find(b"\n", i + 1)


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


class EventTooLarge(Exception):
    """One event grew past the per-event cap without its blank line."""


class StreamTap:
    """Feed upstream SSE bytes in, get the bytes to pass on out; facts collect on the way.

    Linear in the stream's length: each chunk is scanned once (with the 3 bytes before it, where
    an event end may straddle two chunks) and an unfinished event is kept as a list of chunks,
    joined once when its end arrives, never recopied per chunk. An event larger than
    `max_event_bytes` raises EventTooLarge.

    With `hide_usage`, the usage-only chunk the gate asked for (choices empty, usage set) is
    dropped so a client that did not ask never sees it.
    """

    def __init__(self, api: str, hide_usage: bool, max_event_bytes: int = 8 << 20) -> None:
        self.api = api
        self.hide_usage = hide_usage
        self.max_event_bytes = max_event_bytes
        self.facts = AnswerFacts()
        self._parts: list[bytes] = []  # the unfinished event, as it arrived
        self._size = 0
        self._tail = b""  # its last 3 bytes

    def feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        cap = self.max_event_bytes
        if self._parts:
            probe = self._tail + chunk
            end = next(_event_ends(probe), None)
            if end is None:
                self._parts.append(chunk)
                self._size += len(chunk)
                self._tail = probe[-3:]
                if self._size > cap:
                    raise EventTooLarge(f"one event passed {cap} bytes without its end")
                return b""
            cut = end - len(self._tail)
            event = b"".join(self._parts) + chunk[:cut]
            self._parts, self._size, self._tail = [], 0, b""
            if len(event) > cap:
                raise EventTooLarge(f"one event of {len(event)} bytes, over the {cap}-byte cap")
            if self._keep(event):
                out.append(event)
            chunk = chunk[cut:]
        last_end = 0
        for end in _event_ends(chunk):
            if end - last_end > cap:
                raise EventTooLarge(f"one event of {end - last_end} bytes, over the {cap}-byte cap")
            event = chunk[last_end:end]
            if self._keep(event):
                out.append(event)
            last_end = end
        if last_end < len(chunk):
            rest = chunk[last_end:]
            self._parts, self._size, self._tail = [rest], len(rest), rest[-3:]
            if self._size > cap:
                raise EventTooLarge(f"one event passed {cap} bytes without its end")
        return b"".join(out)

    def flush(self) -> bytes:
        """The unfinished tail at the end of the stream (passed on as is)."""
        tail = b"".join(self._parts)
        self._parts, self._size, self._tail = [], 0, b""
        if tail.strip():
            self._keep(tail)
        return tail

    def drop(self) -> int:
        """Forget the unfinished tail (a cut stream must not glue half an event to its error event)."""
        dropped = self._size
        self._parts, self._size, self._tail = [], 0, b""
        return dropped

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


def stream_end(api: str) -> bytes:
    """How that API's stream says it is over, after an error event (chat/completions: [DONE])."""
    return b"" if api == RESPONSES else b"data: [DONE]\n\n"
