"""A stand-in model: an OpenAI-compatible server that replays a recorded conversation.

The offline demo and the tests need a "model" that answers like a real endpoint without a
network or a GPU. This server plays a script of assistant turns, one per POST
/v1/chat/completions, in order, whatever the client sent: it is lenient on input on purpose,
because it stands in for a model, not for an API validator. It records every request body it
got, so tests can assert on what really arrived (e.g. that the gate appended a finish-now
message or forced max_tokens).

A script may also speak of what to do rather than which tool to call: a call named `@write`
({path, content}) or `@shell` ({command}) is turned, for each request, into a call of the tool
the requesting agent offers for it, found by its schema (a `command`/`cmd` property: a shell; a
path and a content property: a file writer). Pages go through the shell as a heredoc into a
temporary file and a rename, so the host sees only whole versions; without a shell, through the
file writer. Other required arguments get plain values. So one recorded conversation plays
through any agent (tasks/voxel/demo/generic.json). Such a script's `side_answer` answers, without
moving the script on, the requests that offer no tools at all (a title or a summary).

An agent without tools that edits files from the answer's text (aider's whole-file format: the
file name on a line, then the whole file fenced) is recognised by its system prompt; its requests
get the script's next `@write` turn as such a listing, in the fence the request asks for. The
script's shell-only turns are passed over for it: such an agent runs its checks itself.

Both APIs are served: POST /v1/chat/completions and POST /v1/responses, streamed or not.

A turn may wait for a user message: `"until_user_contains": "finish now"` keeps answering the
turn's filler (by default a `shell` call `sleep 5`) until the last user message of a request
contains that text; tests of the clock use it to make an agent that never stops by itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from showcase.errors import InfraError, UserError
from showcase.task import DEFAULT_OUTPUT_FILE


class ReplayToolCall(BaseModel):
    """One tool call of a scripted assistant turn."""

    name: str = Field(description="tool (function) name, e.g. 'shell' or 'write_file'")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="arguments as an object (sent JSON-encoded) or as the raw string to send"
    )
    id: str | None = Field(None, description="tool call id; generated when missing")


class ReplayUsage(BaseModel):
    prompt_tokens: int = Field(description="tokens the request is said to have used")
    completion_tokens: int = Field(description="tokens the answer is said to have used")


class ReplayTurn(BaseModel):
    """One assistant answer of the script."""

    content: str | None = Field(None, description="assistant text (may be empty when there are tool calls)")
    tool_calls: list[ReplayToolCall] = Field(default_factory=list, description="tool calls, in OpenAI order")
    delay_s: float = Field(0.0, ge=0, description="wait this long before answering (a slow model)")
    usage: ReplayUsage | None = Field(None, description="usage figures to report; estimated from sizes when missing")
    until_user_contains: str | None = Field(
        None,
        description="answer `filler` instead of this turn until the last user message of a request contains "
        "this text (case-insensitive); then answer this turn and move on",
    )
    filler: ReplayTurn | None = Field(None, description="the waiting answer; default: a shell call `sleep 5`")
    http_status: int | None = Field(
        None, ge=400, le=599, description="answer this HTTP error instead (content becomes the error message): "
        "a stand-in for an endpoint that refuses or breaks"
    )


class ReplayScript(BaseModel):
    """A recorded conversation: what the stand-in model answers, turn by turn."""

    model: str = Field("replay", description="model name listed by /v1/models and echoed in answers")
    description: str = Field("", description="what this conversation shows")
    turns: list[ReplayTurn] = Field(description="assistant turns, one per chat-completions request")
    final: ReplayTurn = Field(
        default_factory=lambda: ReplayTurn(content="DONE"),
        description="answered to every request after the script is exhausted",
    )
    side_answer: str | None = Field(
        None,
        description="answered to requests that offer no tools (title, summary), without moving the script on; "
        "None: such requests take the next turn like any other",
    )


DEFAULT_FILLER = ReplayTurn(
    content="Still working.", tool_calls=[ReplayToolCall(name="@shell", arguments={"command": "sleep 5"})]
)


def load_script(source: str | os.PathLike | dict | ReplayScript) -> ReplayScript:
    """A script from a path, a parsed dict or a ReplayScript; bad input is a one-line UserError."""
    if isinstance(source, ReplayScript):
        return source
    if isinstance(source, dict):
        data, where = source, "script"
    else:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"replay script {path} not found")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"replay script {path} is not JSON: {exc}") from exc
        where = str(path)
    try:
        return ReplayScript.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise UserError(f"replay script {where}: {loc}: {first['msg']}") from exc


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: dict) -> str:
    """The last user message's text, from chat `messages` or from Responses `input`."""
    if not isinstance(body, dict):
        return ""
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        msgs = body.get("input")
        if isinstance(msgs, str):
            return msgs
    for msg in reversed(msgs if isinstance(msgs, list) else []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return _text_of(msg.get("content"))
    return ""


def offered_tools(body: dict) -> list[tuple[str, dict]]:
    """(name, JSON schema of its parameters) of every function tool a request offers, chat or Responses form."""
    tools = body.get("tools") if isinstance(body, dict) else None
    out = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name, params = fn.get("name"), fn.get("parameters")
        if isinstance(name, str):
            out.append((name, params if isinstance(params, dict) else {}))
    return out


_SHELL_WORDS = ("bash", "shell", "exec", "terminal", "command", "run")
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "absolute_path", "target_file")
_CONTENT_KEYS = ("content", "contents", "file_text", "text", "new_content")


def _props(schema: dict) -> dict:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def find_shell_tool(tools: list[tuple[str, dict]]) -> tuple[str, str, dict] | None:
    """(tool name, its command property, schema) of the offered shell, if any."""
    found = []
    for name, schema in tools:
        for key in ("command", "cmd", "commands"):
            if key in _props(schema):
                rank = 0 if any(w in name.lower() for w in _SHELL_WORDS) else 1
                found.append((rank, len(_props(schema)), name, key, schema))
                break
    if not found:
        return None
    _, _, name, key, schema = min(found, key=lambda f: (f[0], f[1]))
    return name, key, schema


def find_write_tool(tools: list[tuple[str, dict]]) -> tuple[str, str, str, dict] | None:
    """(tool name, path property, content property, schema) of the offered file writer, if any."""
    for name, schema in tools:
        props = {k.lower(): k for k in _props(schema)}
        path = next((props[k] for k in _PATH_KEYS if k in props), None)
        content = next((props[k] for k in _CONTENT_KEYS if k in props), None)
        if path and content and not any(k in props for k in ("old_string", "old_str", "old_text")):
            return name, path, content, schema
    return None


def _fill_required(schema: dict, args: dict, what: str) -> dict:
    """Plain values for required arguments the script does not give (a description, a timeout...)."""
    props = _props(schema)
    for key in schema.get("required") or []:
        if key in args or not isinstance(key, str):
            continue
        spec = props.get(key) if isinstance(props.get(key), dict) else {}
        kind = spec.get("type")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        if spec.get("enum"):
            args[key] = spec["enum"][0]
        elif kind in ("integer", "number"):
            args[key] = 600000 if "ms" in key.lower() else (600 if "timeout" in key.lower() else 1)
        elif kind == "boolean":
            args[key] = False
        elif kind == "array":
            args[key] = []
        elif kind == "object":
            args[key] = {}
        else:
            args[key] = what
    return args


HEREDOC_END = "SHOWCASE_PAGE_EOF"


def adapt_call(call: ReplayToolCall, tools: list[tuple[str, dict]]) -> ReplayToolCall:
    """A script's `@write`/`@shell` as a call of the tool the agent offers; other calls as they are."""
    if call.name not in ("@write", "@shell") or not isinstance(call.arguments, dict):
        return call
    args = call.arguments
    shell = find_shell_tool(tools)
    if call.name == "@write":
        path, content = str(args.get("path", DEFAULT_OUTPUT_FILE)), str(args.get("content", ""))
        writer = find_write_tool(tools)
        if shell is not None and writer is not None and "background" in _props(shell[2]):
            # A shell with its own background switch (Hermes's terminal) refuses a foreground
            # command with a bare '&' in it, and pages have them (&middot;): its file writer then.
            shell = None
        if shell is None:
            if writer is None:
                raise ValueError("the request offers neither a shell nor a file-writing tool")
            name, path_key, content_key, schema = writer
            out = _fill_required(schema, {path_key: path, content_key: content}, f"Write {path}")
            return ReplayToolCall(name=name, arguments=out, id=call.id)
        if f"\n{HEREDOC_END}\n" in f"\n{content}\n":
            raise ValueError(f"the page contains the heredoc delimiter {HEREDOC_END}")
        tmp = f"{path}.part"
        body = content if content.endswith("\n") else content + "\n"
        command = f"cat > {tmp} <<'{HEREDOC_END}'\n{body}{HEREDOC_END}\nmv {tmp} {path} && ls -la {path}"
        what = f"Write {path}"
    else:
        if shell is None:
            raise ValueError("the request offers no shell tool")
        command, what = str(args.get("command", "")), "Run a command"
    name, key, schema = shell
    spec = _props(schema).get(key) or {}
    if spec.get("type") == "array":  # an argv (Codex's shell) or a list of commands (Cline's run_commands)
        value: Any = [command] if key == "commands" else ["bash", "-lc", command]
    else:
        value = command
    return ReplayToolCall(name=name, arguments=_fill_required(schema, {key: value}, what), id=call.id)


# aider's whole-file edit format names itself so in its system prompt.
_WHOLE_FILE_MARK = "*file listing* format"
_FENCE_OPEN = re.compile(r"Second line: opening (\S+)")
_FENCE_CLOSE = re.compile(r"Final line: closing (\S+)")


def whole_file_fence(body: dict) -> tuple[str, str] | None:
    """The fence a tool-less request wants file listings in, when it edits from whole-file listings."""
    if not isinstance(body, dict) or offered_tools(body):
        return None
    msgs = body.get("messages")
    text = "\n".join(_text_of(m.get("content")) for m in msgs if isinstance(m, dict) and m.get("role") == "system") \
        if isinstance(msgs, list) else ""
    if _WHOLE_FILE_MARK not in text:
        return None
    opened, closed = _FENCE_OPEN.search(text), _FENCE_CLOSE.search(text)
    return (opened.group(1) if opened else "```", closed.group(1) if closed else "```")


def as_file_listings(turn: ReplayTurn, fence: tuple[str, str]) -> ReplayTurn:
    """The turn's `@write` calls as whole-file listings in its text; every other call is dropped."""
    parts = [turn.content] if turn.content else []
    for call in turn.tool_calls:
        if call.name != "@write" or not isinstance(call.arguments, dict):
            continue
        path, content = str(call.arguments.get("path", DEFAULT_OUTPUT_FILE)), str(call.arguments.get("content", ""))
        body = content if content.endswith("\n") else content + "\n"
        if any(line.startswith(fence) for line in body.splitlines()):
            return ReplayTurn(content=f"replay: {path} has a line starting with the fence {fence[0]}", http_status=400)
        parts.append(f"{path}\n{fence[0]}\n{body}{fence[1]}")
    return ReplayTurn(content="\n\n".join(parts) + "\n", delay_s=turn.delay_s, usage=turn.usage)


def adapt_turn(turn: ReplayTurn, body: dict) -> ReplayTurn:
    """The turn with its abstract calls made concrete for this request's tools."""
    if not any(c.name.startswith("@") for c in turn.tool_calls):
        return turn
    tools = offered_tools(body)
    if not tools:  # a client that says nothing of its tools gets the plain names (shell, write_file)
        plain = {"@shell": "shell", "@write": "write_file"}
        calls = [c.model_copy(update={"name": plain.get(c.name, c.name)}) for c in turn.tool_calls]
        return turn.model_copy(update={"tool_calls": calls})
    try:
        calls = [adapt_call(c, tools) for c in turn.tool_calls]
    except ValueError as exc:
        names = ", ".join(n for n, _ in tools) or "none"
        return ReplayTurn(content=f"replay: cannot play this turn: {exc} (tools offered: {names})",
                          http_status=400)
    return turn.model_copy(update={"tool_calls": calls})


class Replayer:
    """The script's state: which turn comes next, and every request seen so far."""

    def __init__(self, script: ReplayScript, record_path: Path | None = None, pace_s: float = 0.0):
        self.script = script
        self.pace_s = pace_s  # delay of every turn that sets none: a demo that unfolds at watching speed
        self.record_path = Path(record_path) if record_path else None
        self.requests: list[dict] = []  # request bodies, in arrival order
        self.headers: list[dict[str, str]] = []  # their headers, same order
        self.index = 0  # next turn of script.turns
        self._lock = threading.Lock()

    @property
    def exhausted(self) -> bool:
        return self.index >= len(self.script.turns)

    def next_turn(self, body: dict, headers: dict[str, str]) -> ReplayTurn:
        """Record the request and pick the answer; only a turn really answered moves the script on."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if self.record_path:
                # Append-only, one line per request: a crash loses at most the line being written.
                with self.record_path.open("a") as f:
                    f.write(json.dumps({"t": time.time(), "body": body}) + "\n")
            fence = whole_file_fence(body)
            if fence is not None:
                return self._whole_file_turn(fence)
            if self.script.side_answer is not None and not offered_tools(body):
                return ReplayTurn(content=self.script.side_answer)
            if self.exhausted:
                return adapt_turn(self.script.final, body)
            turn = self.script.turns[self.index]
            wanted = turn.until_user_contains
            if wanted and wanted.lower() not in last_user_text(body).lower():
                return adapt_turn(turn.filler or DEFAULT_FILLER, body)
            self.index += 1
            return adapt_turn(turn, body)


    def _whole_file_turn(self, fence: tuple[str, str]) -> ReplayTurn:
        """The next turn that writes a file, as listings; then the final turn's text (lock held)."""
        turns = self.script.turns

        def pass_shell_turns() -> None:
            while self.index < len(turns) and not any(c.name == "@write" for c in turns[self.index].tool_calls):
                self.index += 1

        pass_shell_turns()
        if self.exhausted:
            return as_file_listings(self.script.final, fence)
        turn = turns[self.index]
        self.index += 1
        pass_shell_turns()  # the checks after it are the agent's own: the script is played once it is written
        return as_file_listings(turn, fence)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)  # the usual ~4 characters a token; only a plausible figure


def _tool_calls_json(turn: ReplayTurn) -> list[dict]:
    return [
        {
            "id": call.id or f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
            },
        }
        for call in turn.tool_calls
    ]


def _usage(turn: ReplayTurn, body: dict, tool_calls: list[dict]) -> dict:
    if turn.usage:
        prompt, completion = turn.usage.prompt_tokens, turn.usage.completion_tokens
    else:
        prompt = _estimate_tokens(json.dumps(body.get("messages", body.get("input", "")), ensure_ascii=False))
        completion = _estimate_tokens((turn.content or "") + json.dumps(tool_calls))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _sse(obj: dict | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def _sse_event(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def _responses_answer(turn: ReplayTurn, body: dict, model: str):
    """A turn in Responses form: the whole response object, or its stream of events."""
    tool_calls = _tool_calls_json(turn)
    usage = _usage(turn, body, tool_calls)
    rid = f"resp_{uuid.uuid4().hex}"
    items: list[dict] = []
    if turn.content:
        items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.content, "annotations": []}]})
    for call in tool_calls:
        items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "call_id": call["id"],
                      "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                      "status": "completed"})
    response = {
        "id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
        "model": model, "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "error": None, "incomplete_details": None,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }
    if not body.get("stream"):
        return JSONResponse(response)

    async def events():
        seq = 0

        def ev(kind: str, **fields) -> bytes:
            nonlocal seq
            seq += 1
            return _sse_event({"type": kind, "sequence_number": seq, **fields})

        yield ev("response.created", response=response | {"status": "in_progress", "output": [], "usage": None})
        yield ev("response.in_progress", response=response | {"status": "in_progress", "output": [], "usage": None})
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                yield ev("response.output_item.added", output_index=index,
                         item=item | {"status": "in_progress", "content": []})
                part = {"type": "output_text", "text": "", "annotations": []}
                yield ev("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part)
                for i in range(0, len(text), 64):
                    yield ev("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                             delta=text[i: i + 64])
                yield ev("response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text)
                yield ev("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                         part=part | {"text": text})
            else:
                args = item["arguments"]
                yield ev("response.output_item.added", output_index=index,
                         item=item | {"status": "in_progress", "arguments": ""})
                for i in range(0, len(args), 512):
                    yield ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                             delta=args[i: i + 512])
                yield ev("response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=args)
            yield ev("response.output_item.done", output_index=index, item=item)
        yield ev("response.completed", response=response)

    return StreamingResponse(events(), media_type="text/event-stream")


async def _read_body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else {}
        return body if isinstance(body, dict) else {"_raw": body}
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"_raw": raw.decode("utf-8", "replace")}


def create_app(replayer: Replayer) -> Starlette:
    """The ASGI app: /v1/chat/completions and /v1/responses (stream or not) and /v1/models."""
    model_name = replayer.script.model

    async def models(request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "showcase-replay"}]}
        )

    async def next_turn(request: Request) -> tuple[dict, ReplayTurn, JSONResponse | None]:
        """The request's body, the turn that answers it (after its pace), and its replayed error if any."""
        body = await _read_body(request)
        turn = replayer.next_turn(body, dict(request.headers))
        delay = turn.delay_s or replayer.pace_s
        if delay:
            await asyncio.sleep(delay)
        if not turn.http_status:
            return body, turn, None
        message = turn.content or f"replayed error {turn.http_status}"
        return body, turn, JSONResponse({"error": {"message": message, "type": "replay_error", "code": turn.http_status}},
                                        status_code=turn.http_status)

    async def responses(request: Request):
        body, turn, error = await next_turn(request)
        if error is not None:
            return error
        return _responses_answer(turn, body, body.get("model") or model_name)

    async def completions(request: Request):
        body, turn, error = await next_turn(request)
        if error is not None:
            return error
        tool_calls = _tool_calls_json(turn)
        usage = _usage(turn, body, tool_calls)
        finish = "tool_calls" if tool_calls else "stop"
        base = {
            "id": f"chatcmpl-replay-{uuid.uuid4().hex[:16]}",
            "created": int(time.time()),
            "model": body.get("model") or model_name,
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.content}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return JSONResponse(
                base
                | {
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                }
            )
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))

        async def chunks():
            def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
                obj = base | {
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
                }
                if include_usage:
                    obj["usage"] = None  # as OpenAI does: only the last chunk carries usage
                return _sse(obj)

            yield chunk({"role": "assistant", "content": ""})
            text = turn.content or ""
            for i in range(0, len(text), 64):  # a few pieces, so clients really assemble a stream
                yield chunk({"content": text[i : i + 64]})
            for i, call in enumerate(tool_calls):
                head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
                yield chunk({"tool_calls": [head]})
                args = call["function"]["arguments"]
                for j in range(0, len(args), 512):
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 512]}}]})
            yield chunk({}, finish)
            if include_usage:
                yield _sse(base | {"object": "chat.completion.chunk", "choices": [], "usage": usage})
            yield _sse("[DONE]")

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/chat/completions", completions, methods=["POST"]),  # clients given a base URL without /v1
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/responses", responses, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/models", models, methods=["GET"]),
        ]
    )


class ReplayServer:
    """The replay app served on a TCP port by the gate's AppServer (uvicorn in a background thread).

    with ReplayServer("tasks/voxel/demo/builtin.json") as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
        ...
        server.requests  # every request body received
    """

    START_TIMEOUT_S = 10.0
    STOP_TIMEOUT_S = 10.0

    def __init__(
        self,
        script: str | os.PathLike | dict | ReplayScript,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike | None = None,
        pace_s: float = 0.0,
    ):
        self.replayer = Replayer(load_script(script), Path(record_path) if record_path else None, pace_s)
        self.app = create_app(self.replayer)
        self.host = host
        self.port = port
        self._server = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        return self.replayer.requests

    @property
    def script(self) -> ReplayScript:
        return self.replayer.script

    def wait_for_requests(self, count: int, timeout_s: float = 30.0) -> bool:
        """Wait (bounded) until at least `count` requests have arrived; False if they did not in time."""
        deadline = time.monotonic() + timeout_s
        while len(self.replayer.requests) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def start(self) -> "ReplayServer":
        from showcase.gate.server import AppServer  # uvicorn loads only when a replay is served

        host = f"[{self.host}]" if ":" in self.host else self.host
        server = AppServer(self.app, [f"tcp:{host}:{self.port}"], start_timeout_s=self.START_TIMEOUT_S,
                           stop_timeout_s=self.STOP_TIMEOUT_S)
        try:
            server.start()
        except InfraError as exc:
            if "cannot listen" in str(exc):  # a port the caller named is taken: their input, not our machine
                raise UserError(f"replay server {exc}") from None
            raise
        self._server, self.port = server, server.tcp_port
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        self._server = None

    def __enter__(self) -> "ReplayServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        script: Path = typer.Option(..., "--script", help="JSON script of assistant turns, e.g. tasks/voxel/demo/builtin.json"),
        port: int = typer.Option(8765, "--port", help="TCP port to listen on (0: any free port)"),
        host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
        record: Path | None = typer.Option(None, "--record", help="append every request body to this JSON-lines file"),
        pace_s: float = typer.Option(0.0, "--pace-s", min=0, help="wait this long before each answer whose turn sets no delay_s"),
    ) -> None:
        """Serve a recorded conversation as an OpenAI-compatible model (a stand-in for demos and tests).

        Every POST /v1/chat/completions or /v1/responses answers the script's next assistant turn (streamed or not),
        then the script's final turn ("DONE") forever. Stop it with Ctrl-C.
        """
        server = ReplayServer(script, host=host, port=port, record_path=record, pace_s=pace_s)
        server.start()
        s = server.script
        print(f"replaying {script} ({len(s.turns)} turns, model {s.model!r}) at {server.base_url}", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
            print(f"served {len(server.requests)} requests", flush=True)
