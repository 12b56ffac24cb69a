"""Round 3 of attacks on the gate, written from its promises (docs/gate.md, docs/boundary.md) as an
agent would try them. Each test asserts what must be true; the ones that fail today are marked
xfail(strict) with the hole they show. The upstream is tests/gate_upstream.py's recording server
(or a small one of this file's own), so each test checks what the upstream actually RECEIVED.
"""

import json
import socket
import threading
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_upstream import FINISH, KEY, MODEL, Rig, post, raw_http, received_since, rig, upstream, wait_until  # noqa: F401  (fixtures)
from showcase.gate.config import GateLimits
from showcase.gate.log import GateStats, stats_from_log
from showcase.gate.server import AppServer

MSG = [{"role": "user", "content": "build a voxel world"}]
LIMIT = 4096  # the rig's answer limit


def hole(why: str):
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"HOLE: {why}")



def head(method: str, target: str, extra: str = "") -> bytes:
    return (f"{method} {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n{extra}"
            f"Connection: close\r\n\r\n").encode()



def one_sent(up, n: int) -> dict:
    got = received_since(up, n)
    assert len(got) == 1, got
    return got[0]["body"]


# ----------------------------------------------------------------------------- 1. more answers


def test_completions_prompt_list_is_one_answer_not_many(rig, upstream):
    """docs/gate.md: "`n`, `best_of` forced to 1: more answers would multiply the answer limit".
    But /v1/completions takes `prompt` as a LIST of prompts (strings, or token-id lists) and
    answers each: `{"prompt": ["a"] * 64}` is 64 answers of up to the answer limit each, billed to
    the operator, in one request whose record counts one. Impact: n=64 by another name.
    A prompt of token ids is not one either: the finish-now message would have no place in it.
    Only one prompt, a string, is forwarded; the others are removed and logged with why."""
    r = rig()
    n = len(upstream.received)
    for prompt in (["write a poem"] * 64, [[1, 2, 3]] * 64, [1, 2, 3, 4]):
        post(r, "/v1/completions", {"prompt": prompt})
    for got in received_since(upstream, n):
        assert not isinstance(got["body"].get("prompt"), list), f"the upstream was asked {got['body']['prompt']!r}"
    for line in r.lines(3):
        assert [f.why for f in line.fields.removed if f.field == "prompt"] == [
            "not one prompt (a string): a list is one answer per prompt"], line.fields


@pytest.mark.parametrize("field,value", [("n", "16"), ("n", 16.0), ("n", [16]), ("best_of", "8")])
def test_forced_count_fields_in_odd_forms(rig, upstream, field, value):
    """`n`/`best_of` as a string, a float or a list (pydantic upstreams coerce "16" to 16) still
    reach the upstream as 1."""
    r = rig()
    n = len(upstream.received)
    path, body = ("/v1/completions", {"prompt": "x"}) if field == "best_of" else ("/v1/chat/completions", {"messages": MSG})
    post(r, path, {**body, field: value})
    sent = one_sent(upstream, n)
    assert sent.get(field, 1) == 1 and type(sent.get(field, 1)) is int, sent


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": MSG, "store": "true"}),
    ("/v1/responses", {"input": "hi", "store": 1}),
    ("/v1/responses", {"input": "hi", "store": None}),
])
def test_store_in_odd_forms_is_false(rig, upstream, path, body):
    """`store` as a string, 1 or null: the upstream still gets false (Responses keeps answers unless told)."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    sent = one_sent(upstream, n)
    assert sent.get("store", False) is False, sent
    if path == "/v1/responses":
        assert sent.get("store") is False, sent


# ----------------------------------------------------------------------------- 2. longer answers


LIMIT_CASES = [
    ("chat max_tokens null", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": null}', "max_tokens"),
    ("chat max_tokens string", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "1000000"}', "max_tokens"),
    ("chat max_tokens float", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e9}', "max_tokens"),
    ("chat max_tokens NaN", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": NaN}', "max_tokens"),
    ("chat max_completion_tokens null", "/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": null}', "max_tokens"),
    ("completions max_tokens null", "/v1/completions", b'{"prompt": "x", "max_tokens": null}', "max_tokens"),
    ("completions max_tokens string", "/v1/completions", b'{"prompt": "x", "max_tokens": "1000000"}', "max_tokens"),
    ("responses max_output_tokens null", "/v1/responses", b'{"input": "x", "max_output_tokens": null}', "max_output_tokens"),
    ("responses max_output_tokens string", "/v1/responses", b'{"input": "x", "max_output_tokens": "1000000"}', "max_output_tokens"),
    ("responses max_output_tokens NaN", "/v1/responses", b'{"input": "x", "max_output_tokens": NaN}', "max_output_tokens"),
    ("chat max_tokens -1", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
    ("chat max_completion_tokens -1", "/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1}', "max_tokens"),
    ("completions max_tokens -1", "/v1/completions", b'{"prompt": "x", "max_tokens": -1}', "max_tokens"),
    ("responses max_output_tokens -1", "/v1/responses", b'{"input": "x", "max_output_tokens": -1}', "max_output_tokens"),
    ("chat max_tokens 0", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', "max_tokens"),
]


@pytest.mark.parametrize("name,path,raw,limit_field", LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_answer_limit_holds_whatever_form_the_agent_sends(rig, upstream, name, path, raw, limit_field):
    """docs/gate.md: the answer limit is "set where a request has none, capped where it asks
    more". A null, a numeric string (pydantic upstreams coerce it), a float or NaN (orjson writes
    NaN as null) must still reach the upstream as an integer at most the run's limit; an upstream
    given null applies no limit at all (the model's whole context, billed). -1 and 0 are "no
    limit" to llama.cpp's server and Ollama (`n_predict`/`num_predict` -1 = until the context is
    full), so the upstream must get a positive integer."""
    r = rig()
    n = len(upstream.received)
    post(r, path, raw=raw)
    sent = one_sent(upstream, n)
    fields = ("max_tokens", "max_completion_tokens") if limit_field == "max_tokens" else (limit_field,)
    values = {f: sent[f] for f in fields if sent.get(f) is not None}
    assert values and all(type(v) is int and 0 < v <= LIMIT for v in values.values()), (
        f"{name}: the upstream got {({f: sent.get(f, 'absent') for f in fields})}")


# ----------------------------------------------------------------------------- 3. odd types of forwarded fields


ODD_TYPES = [pytest.param(*case, id=case[0]) for case in [
    ("chat stream as a string", "/v1/chat/completions", {"messages": MSG, "stream": "true"}, "stream", (bool,)),
    ("chat stream as an object", "/v1/chat/completions", {"messages": MSG, "stream": {"n": 16}}, "stream", (bool,)),
    ("chat parallel_tool_calls object", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "function", "function": {"name": "bash"}}],
      "parallel_tool_calls": {"web_search": True}}, "parallel_tool_calls", (bool,)),
    ("chat stop object", "/v1/chat/completions", {"messages": MSG, "stop": {"smuggled": {"n": 16}}}, "stop", (str, list)),
    ("responses truncation object", "/v1/responses", {"input": "hi", "truncation": {"smuggled": {"n": 16}}},
     "truncation", (str,)),
    ("responses instructions object", "/v1/responses", {"input": "hi", "instructions": {"smuggled": {"n": 16}}},
     "instructions", (str, list)),
    ("completions suffix object", "/v1/completions", {"prompt": "x", "suffix": {"smuggled": {"n": 16}}}, "suffix", (str,)),
]]


@pytest.mark.parametrize("name,path,body,field,types", ODD_TYPES)
def test_forwarded_fields_of_a_type_not_understood_are_not_forwarded(rig, upstream, name, path, body, field, types):
    """"forward upstream only what we understand": a forwarded field whose value is of a type the
    API does not define (an object where a bool or string belongs) is not understood, so it must
    not reach the upstream as sent (removed, or refused with 400) - else an unknown structure rides
    to the upstream under a known name, past the allow-list that holds "at every depth"."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    got = received_since(upstream, n)
    if got:
        sent = got[0]["body"]
        assert field not in sent or isinstance(sent[field], types), f"{name}: upstream got {field}={sent[field]!r}"


def test_stream_as_a_string_keeps_the_record_true(rig, upstream):
    """`"stream": "true"` is truthy to the upstream (pydantic's lax bool; the recording upstream
    streams), but not `True` to the gate: it forces no `include_usage`, parses the event stream as
    one JSON answer and records no tokens. gate.log / gate-stats.json then under-count what the
    operator was billed. Impact: a record that lies (answer_tokens 0 for a full answer)."""
    r = rig()
    answer = post(r, "/v1/chat/completions", {"messages": MSG, "stream": "true"})
    assert answer.status_code == 200
    line = r.lines(1)[-1]
    assert line.answer_tokens == 7, f"tokens recorded: prompt {line.prompt_tokens}, answer {line.answer_tokens}"


# ----------------------------------------------------------------------------- 4. subfields and tool_choice


def test_responses_local_tools_carry_no_other_subfield(rig, upstream):
    """`local_shell`, `shell` and `apply_patch` go with "`type` alone; a `shell` may say
    `environment: {"type": "local"}`": an `environment` with a container id beside its local type,
    or a server_url on local_shell, never reaches the upstream."""
    r = rig()
    n = len(upstream.received)
    tools = [
        {"type": "shell", "environment": {"type": "local", "container_id": "cntr_of_the_operator",
                                          "network_policy": {"type": "allowlist", "allowed_domains": ["evil.example"]}}},
        {"type": "local_shell", "server_url": "http://evil.example/mcp"},
        {"type": "apply_patch", "server_url": "http://evil.example/mcp"},
    ]
    post(r, "/v1/responses", {"input": "hi", "tools": tools})
    text = json.dumps(one_sent(upstream, n))
    assert "evil.example" not in text and "cntr_of_the_operator" not in text, text


@pytest.mark.parametrize("choice", [
    {"type": "web_search_preview"}, {"type": "file_search"}, {"type": "code_interpreter"},
    {"type": "mcp", "server_label": "evil"}, {"type": "image_generation"},
    {"type": "function", "name": "bash", "server_url": "http://evil.example"},
])
def test_responses_tool_choice_names_only_the_agents_tools(rig, upstream, choice):
    """`tool_choice` forwards "an object naming one of the agent's own tools": an object that
    forces a provider tool (or carries an unknown subfield) never reaches the upstream."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "bash"}], "tool_choice": choice})
    sent = one_sent(upstream, n)
    got = sent.get("tool_choice")
    assert got is None or isinstance(got, str) or (got.get("type") == "function" and set(got) <= {"type", "name"}), got


def test_chat_functions_and_function_call_carry_no_other_subfield(rig, upstream):
    """The older `functions`/`function_call` forms: "each function's `name`, `description`,
    `parameters`; `function_call` as a string or `{name}`" - nothing else at any depth."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {
        "messages": MSG,
        "functions": [{"name": "bash", "parameters": {"type": "object"}, "server_url": "http://evil.example"}],
        "function_call": {"name": "bash", "server_url": "http://evil.example"},
    })
    assert "evil.example" not in json.dumps(one_sent(upstream, n))


@pytest.mark.parametrize("body", [
    {"input": "hi", "include": "code_interpreter_call.outputs"},
    {"input": "hi", "include": {"file_search_call.results": True}},
    {"input": "hi", "text": "smuggled"},
    {"input": "hi", "stream_options": ["smuggled"]},
], ids=["include string", "include object", "text string", "stream_options list"])
def test_responses_odd_shapes_of_filtered_fields(rig, upstream, body):
    """A filtered field in a shape the filter does not expect (`include` as one string or an
    object, `text` as a string, `stream_options` as a list) is not forwarded as sent."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/responses", body)
    got = received_since(upstream, n)
    if got:
        sent = got[0]["body"]
        text = json.dumps({k: v for k, v in sent.items() if k in ("include", "text", "stream_options")})
        assert "code_interpreter" not in text and "file_search" not in text and "smuggled" not in text, sent


def test_chat_response_format_odd_shapes(rig, upstream):
    """`response_format` as a bare string, or a json_schema with an unknown key: neither goes as sent."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG, "response_format": "smuggled"})
    post(r, "/v1/chat/completions", {"messages": MSG, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {}, "smuggled": 1}}})
    for got in received_since(upstream, n):
        assert "smuggled" not in json.dumps(got["body"].get("response_format")), got["body"]


# ----------------------------------------------------------------------------- 5. sampling-file interplay


def test_merged_sampling_objects_keep_the_allow_list(rig, upstream):
    """Where the gate merges the sampling file's object with the agent's (`reasoning`, `text`), the
    agent's side still passes the allow-list: only `summary`/`generate_summary` of its
    `reasoning`, only `format` (with its named subfields) of its `text`."""
    r = rig(settings={"sampling": {"reasoning": {"effort": "low"}, "text": {"verbosity": "low"}}})
    n = len(upstream.received)
    post(r, "/v1/responses", {
        "input": "hi",
        "reasoning": {"effort": "high", "summary": "auto", "smuggled": {"n": 16}},
        "text": {"verbosity": "high", "smuggled": 1,
                 "format": {"type": "json_schema", "name": "x", "schema": {}, "smuggled": 1}},
    })
    sent = one_sent(upstream, n)
    assert "smuggled" not in json.dumps(sent), sent
    assert sent["reasoning"]["effort"] == "low" and sent["text"]["verbosity"] == "low", sent


# ----------------------------------------------------------------------------- 6. finish now


def _past_finish_now(r) -> None:
    r.clock.now += 5400 + 10


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": None}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": {"text": "x"}}]}),
    ("/v1/responses", {"input": []}),
    ("/v1/responses", {"instructions": "build a voxel world"}),
    ("/v1/responses", {"input": [{"role": "user", "content": "x"}]}),
    ("/v1/responses", {"input": [{"type": "message", "role": "user", "content": None}]}),
], ids=["user content null", "user content object", "input empty",
        "no input", "easy input message", "message content null"])
def test_finish_now_reaches_the_model_whatever_the_conversation_looks_like(rig, upstream, path, body):
    """docs/gate.md: "from finish_now_after_s ... the task's message becomes the last user turn".
    An agent that shapes its conversation (a user turn with a null or object content, no input at
    all) must not keep the model from seeing it. (A token-id prompt or a list of prompts never
    reaches the upstream: test_completions_prompt_list_is_one_answer_not_many.)"""
    r = rig()
    _past_finish_now(r)
    n = len(upstream.received)
    post(r, path, body)
    got = received_since(upstream, n)
    assert got, "nothing reached the upstream"
    text = json.dumps(got[0]["body"])
    assert FINISH in text, f"no finish-now text upstream: {text[:400]}"


# ----------------------------------------------------------------------------- 7. paths, methods, HTTP


@pytest.mark.parametrize("target", [
    "/v1/models/../files",
    "/v1/models/%2e%2e/files",
    "/v1/models/.%2E/files",
    "/v1/models/x/../../files",
    "/v1/models/served-model/..",
    "/api/v1/models/../../v1/files",
])
def test_models_path_never_walks_upstream(rig, upstream, target):
    """GET /v1/models/{id}: "the upstream decodes exactly the id the gate checked". A `..` segment
    (literal or %2e-encoded) must not reach the upstream as a dot segment: an upstream behind
    any proxy that normalises paths (nginx, most frameworks) would serve /v1/files - the
    operator's uploaded files - for the agent."""
    r = rig()
    n = len(upstream.received)
    raw_http(r.server.tcp_port, head("GET", target))
    for got in received_since(upstream, n):
        assert ".." not in got["path"].split("/"), got["path"]


@pytest.mark.parametrize("method,target", [
    ("OPTIONS", "/v1/chat/completions"), ("PUT", "/v1/chat/completions"), ("PATCH", "/v1/responses"),
    ("TRACE", "/v1/models"), ("OPTIONS", "*"), ("GET", "/v1/%66iles"), ("POST", "/v1/files%2f"),
    ("GET", "//v1/files"), ("GET", "/v1//files"), ("GET", "/v1/./files"),
    ("POST", "http://evil.example/v1/files"), ("DELETE", "/api/v1/models"), ("GET", "/api/v1/files"),
])
def test_odd_methods_and_targets_never_reach_the_upstream(rig, upstream, method, target):
    """Only the five API routes (and the read-only /api/v1/models alias) are served: other
    methods, percent-encoded or doubled paths, absolute-form targets never reach the upstream."""
    r = rig()
    n = len(upstream.received)
    raw_http(r.server.tcp_port, head(method, target, "Content-Length: 2\r\nContent-Type: application/json\r\n")
             .replace(b"\r\n\r\n", b"\r\n\r\n{}"))
    got = received_since(upstream, n)
    assert not any(g["path"] not in ("/v1/models",) for g in got), got


@pytest.mark.parametrize("authorization", [
    f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", "Bearer", "Bearer ", f"Basic {KEY}", f"{KEY}",
    f"Bearer {KEY}\x00",
])
def test_key_check_is_exact(rig, upstream, authorization):
    """The per-run key is compared exactly: a prefix, a longer key or another scheme is refused."""
    r = rig()
    n = len(upstream.received)
    answer = raw_http(r.server.tcp_port, (f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\n"
                                          f"Connection: close\r\n\r\n").encode())
    assert received_since(upstream, n) == [], answer[:200]


def test_content_type_and_accept_go_upstream_as_understood(rig, upstream):
    """Only `Content-Type` and `Accept` are forwarded: their values are the client's. An agent's
    charset or parameters the gate did not read (`charset=utf-16` would make the upstream decode
    the gate's UTF-8 JSON as something else; arbitrary parameters) should not reach the upstream."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG},
         headers={"Content-Type": "application/json; charset=utf-16; x-smuggled=1", "Accept": "x/" + "y" * 8000})
    got = received_since(upstream, n)[0]["headers"]
    assert "smuggled" not in got.get("content-type", "") and len(got.get("accept", "")) < 200, got


# ----------------------------------------------------------------------------- 8. bounds: memory, gate.log


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_memory_stays_bounded_with_many_unfinished_bodies(rig, upstream):
    """docs/gate.md bounds each body (`max_request_bytes`), but nothing bounds how many are held at
    once: 120 connections each sending 1.9 MiB of a 2 MiB body and then waiting (a run's gate has
    no `answer_s`: they are held until the hard stop) make the gate hold ~230 MiB. With the default
    32 MiB cap, 200 connections are 6.4 GB: the host process (gate, watcher, run) is OOM-killed.
    Impact: the agent crashes its own run's host with a few lines of Python.
    Closed by `limits.max_held_request_bytes` (64 MiB): past it a request is answered 503
    `gate_busy` at once and its connection closed, counted as blocked."""
    # Requests at once are capped too (16 by default): raised here so the bodies' own cap is what holds.
    r = rig(settings={"limits": GateLimits(max_request_bytes=2 << 20, max_requests_at_once=1000)})
    body_len = 2 << 20
    chunk = b"x" * ((2 << 20) - (128 << 10))
    before = _rss_bytes()
    held = []
    try:
        for _ in range(120):
            s = socket.create_connection(("127.0.0.1", r.server.tcp_port), timeout=30)
            s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                       f"Content-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n").encode())
            s.sendall(chunk)
            held.append(s)
        time.sleep(3)
        grown = _rss_bytes() - before
        held[-1].settimeout(10)
        refused = held[-1].recv(65536)
    finally:
        for s in held:
            s.close()
    # Bounded: ~66 MiB (the 64 MiB cap and buffers); unbounded: ~228 MiB. The line between them
    # leaves room for what else this process allocates meanwhile (records of earlier tests).
    assert grown < 128 << 20, f"the gate holds {grown / (1 << 20):.0f} MiB for 120 unfinished uploads"
    assert refused.startswith(b"HTTP/1.1 503") and b"gate_busy" in refused, refused[:300]
    # Their bodies are given back once they are gone: a request is served again.
    assert wait_until(lambda: post(r, "/v1/chat/completions", {"messages": MSG}).status_code == 200, 10)
    lines = r.lines(121)
    assert sum(line.blocked_why == "request bodies held over the gate's cap" for line in lines) >= 60, \
        [line.blocked_why for line in lines][:5]


class EchoingUpstream:
    """An upstream that answers 400 with the request's own text in its message, as validators do
    ("Input should be a valid ...: <your input>")."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        self.received.append({"path": request.url.path, "size": len(raw)})
        if request.url.path == "/v1/models":
            return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        return JSONResponse({"error": {"message": "invalid input: " + raw.decode("utf-8", "replace"),
                                       "type": "invalid_request_error", "code": "bad"}}, 400)


@pytest.fixture
def echoing():
    up = EchoingUpstream()
    with AppServer(up.app, ["tcp:127.0.0.1:0"]) as server:
        up.url = f"http://127.0.0.1:{server.tcp_port}/v1"
        yield up


def test_gate_log_line_bounded_when_the_upstream_echoes_the_agents_input(echoing, tmp_path):
    """gate.log lines are bounded "whatever the agent sends", but the `error` of a line is the
    upstream's error message, and upstreams echo the offending input back (pydantic/vLLM
    validation errors quote it). An 8 MB message gives an 8 MB gate.log line, every request:
    gate.log grows by the agent's upload size each time, outside the bodies/ caps."""
    r = Rig(echoing, tmp_path)
    try:
        answer = post(r, "/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * (8 << 20)}]},
                      timeout=120)
        assert answer.status_code == 400
        r.lines(1)
        sizes = [len(line) for line in (r.log_dir / "gate.log").read_bytes().splitlines()]
        assert max(sizes) < 256 * 1024, f"gate.log lines of {sizes} bytes"
    finally:
        r.close()


def test_gate_log_line_bounded_for_a_huge_path(rig, upstream):
    """A 60 KB path (404) or model id is logged by its start and length, not whole (uvicorn's
    parser refuses a request line of ~100 KB and more with its own 400, before the gate)."""
    r = rig()
    raw_http(r.server.tcp_port, head("GET", "/v1/" + "a" * 60_000))
    raw_http(r.server.tcp_port, head("GET", "/v1/models/" + "a" * 60_000))
    raw_http(r.server.tcp_port, head("GET", "/" + "a" * 60_000))
    r.lines(3)
    sizes = [len(line) for line in (r.log_dir / "gate.log").read_bytes().splitlines()]
    assert max(sizes) < 64 * 1024, sizes


# ----------------------------------------------------------------------------- 9. records add up


def test_stats_add_up_after_odd_requests(rig, upstream):
    """After a mix of odd requests (OPTIONS, 404, 401, 405, 413 by a chunked body, a body that is
    not JSON, a client gone mid-body), gate-stats.json, the stats rebuilt from gate.log and the
    lines agree, and every request the gate answered has its line."""
    r = rig(settings={"limits": GateLimits(max_request_bytes=1 << 20)})
    port = r.server.tcp_port
    raw_http(port, head("OPTIONS", "/v1/chat/completions"))
    raw_http(port, head("GET", "/v1/files"))
    raw_http(port, head("GET", "/nope"))
    raw_http(port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw_http(port, head("DELETE", "/v1/models/x"))
    raw_http(port, head("POST", "/v1/chat/completions", "Transfer-Encoding: chunked\r\n")
             + b"".join(b"%x\r\n" % (64 << 10) + b"x" * (64 << 10) + b"\r\n" for _ in range(20)) + b"0\r\n\r\n")
    post(r, "/v1/chat/completions", raw=b"not json")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head("POST", "/v1/chat/completions", "Content-Length: 100\r\n")[:-len(b"Connection: close\r\n\r\n")]
                  + b"\r\n{\"messa")
        time.sleep(0.3)
    post(r, "/v1/chat/completions", {"messages": MSG})
    expected = 9
    lines = r.lines(expected)
    assert wait_until(lambda: GateStats.model_validate_json((r.log_dir / "gate-stats.json").read_text()).requests
                      >= expected, 10)
    live = GateStats.model_validate_json((r.log_dir / "gate-stats.json").read_text())
    rebuilt = stats_from_log(r.log_dir / "gate.log")
    assert len(lines) == expected == live.requests, (len(lines), live.requests)
    for field in ("requests", "blocked", "not_completed", "errors", "prompt_tokens", "answer_tokens"):
        assert getattr(live, field) == getattr(rebuilt, field), field
    assert live.blocked == sum(live.blocked_why.values()), live


# ----------------------------------------------------------------------------- 10. hard stop


def test_hard_stop_refuses_the_alias_and_pipelined_requests(rig, upstream):
    """After the hard stop nothing reaches the upstream: not the /api/v1/models alias, not a
    request pipelined behind one sent before the stop on a kept-alive connection."""
    r = rig()
    port = r.server.tcp_port
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n".encode())
        time.sleep(0.5)
        s.recv(65536)
        r.gate.hard_stop()
        n = len(upstream.received)
        body = json.dumps({"messages": MSG}).encode()
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
        raw_http(port, head("GET", "/api/v1/models"))
        time.sleep(1)
        assert received_since(upstream, n) == []
    finally:
        s.close()


# ----------------------------------------------------------------------------- 11. more shapes


def test_allowed_tools_entries_carry_no_other_subfield(rig, upstream):
    """`allowed_tools` keeps only the agent's own tools in its list, and the allow-list holds "at
    every depth": an entry naming the agent's function with a server_url beside it is not sent so."""
    r = rig()
    n = len(upstream.received)
    fn = [{"type": "function", "function": {"name": "bash"}}]
    post(r, "/v1/chat/completions", {"messages": MSG, "tools": fn, "tool_choice": {
        "type": "allowed_tools", "allowed_tools": {"mode": "auto", "smuggled": 1, "tools": [
            {"type": "function", "function": {"name": "bash", "server_url": "http://evil.example"},
             "server_url": "http://evil.example"}]}}})
    post(r, "/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "bash"}], "tool_choice": {
        "type": "allowed_tools", "mode": "auto", "smuggled": 1,
        "tools": [{"type": "function", "name": "bash", "server_url": "http://evil.example"}]}})
    for got in received_since(upstream, n):
        text = json.dumps(got["body"].get("tool_choice"))
        assert "evil.example" not in text and "smuggled" not in text, text


NESTED = [
    ("nested in a message", "/v1/chat/completions", lambda d: {"messages": [{"role": "user", "content": "x",
                                                                          "extra": d}]}),
    ("nested in parameters", "/v1/chat/completions", lambda d: {"messages": MSG, "tools": [
        {"type": "function", "function": {"name": "bash", "parameters": d}}]}),
    ("nested unknown field", "/v1/responses", lambda d: {"input": "hi", "smuggled": d}),
    ("nested in an input item", "/v1/responses", lambda d: {"input": [{"role": "user", "content": "x", "extra": d}]}),
]


@pytest.mark.parametrize("name,path,make", NESTED, ids=[c[0] for c in NESTED])
@pytest.mark.parametrize("depth", [260, 600])
def test_nesting_between_the_parsers_limits_gets_a_clear_answer(rig, upstream, name, path, make, depth):
    """orjson reads 1024 levels but writes only 255: a body nested between the two is parsed,
    then must still be written upstream and into the records. It gets a clear answer (forwarded,
    or 400 `invalid_body`), never a gate fault, and its line lands in gate.log."""
    r = rig()
    nested: object = 1
    for _ in range(depth):
        nested = [nested]
    answer = post(r, path, make(nested))
    assert answer.status_code in (200, 400) and "gate fault" not in answer.text, (answer.status_code, answer.text[:300])
    post(r, path, make(1))
    lines = r.lines(2)
    assert len(lines) == 2, lines


@pytest.mark.parametrize("body", [
    {"messages": MSG, "\udce9": 1},
    {"messages": MSG, "smuggled": 10 ** 30},
    {"messages": [{"role": "user", "content": "x", "big": 10 ** 30}]},
    {"messages": MSG, "tools": [{"type": "function", "function": {"name": "f"}, "\udce9x": 1}]},
    {"messages": MSG, "model": "\udce9"},
    {"messages": MSG, "n": "\udce9"},
    {"messages": MSG, "max_tokens": "\udce9"},
    {"messages": MSG, "smuggled": "\udce9"},
], ids=["surrogate field name", "big int removed", "big int in content", "surrogate subfield name of a tool",
        "surrogate model", "surrogate n", "surrogate max_tokens", "surrogate removed value"])
def test_odd_names_and_numbers_keep_the_records(rig, upstream, body):
    """A field named with a lone surrogate (what Python's json writes for a file name with invalid
    UTF-8: an agent's tool that dumps a directory listing as JSON keys makes one without trying), an
    integer past 64 bits (orjson will not write it), a surrogate in a forced field's value: the
    request gets a clear answer, its line and the next request's land in gate.log, gate-stats.json
    counts both, and `Gate.flush_records()` (which the run waits on) returns. Impact when not: one
    request silences every record of the rest of the run (gate.log, gate-stats.json, bodies/),
    and a run that flushes its records hangs."""
    r = rig()
    raw = json.dumps(body).encode()
    answer = post(r, "/v1/chat/completions", raw=raw)
    assert answer.status_code in (200, 400) and "gate fault" not in answer.text, (answer.status_code, answer.text[:300])
    post(r, "/v1/chat/completions", {"messages": MSG})
    flush = threading.Thread(target=r.gate.flush_records, daemon=True)
    flush.start()
    flush.join(60)  # it returns at once when the writer lives; the bound only keeps a dead writer from hanging the test
    assert not flush.is_alive(), "Gate.flush_records() did not return in 60 s"
    assert len(r.lines(2)) == 2
    assert r.stats(2).requests == 2


def test_what_the_gate_writes_to_disk_has_a_cap(rig, upstream):
    """docs/boundary.md: "The host's free space drops by at most the cap, plus what the host itself
    writes with caps of its own". bodies/ has one (`max_stored_bytes`), gate.log has none: a
    request of 100 unknown fields of 999 bytes (removed, so the upstream sees a tiny request and
    bills a few tokens) writes a ~110 KB line, every time. 60 such requests here write ~6 MB past a
    1 MiB storage cap; an agent looping for two hours at loopback speed fills the host's disk.
    What the gate writes should stay under its storage cap plus a small, fixed cost per request."""
    cap = 1 << 20
    r = rig(settings={"limits": GateLimits(max_stored_bytes=cap)})
    fields = {f"f{i:03d}": "v" * 990 for i in range(100)}
    count = 60
    with httpx.Client(timeout=30) as client:
        for _ in range(count):
            client.post(r.base + "/chat/completions", json={"messages": MSG, **fields},
                        headers={"Authorization": f"Bearer {KEY}"})
    lines = r.lines(count)
    r.gate.flush_records()
    written = sum(p.stat().st_size for p in r.log_dir.rglob("*") if p.is_file())
    assert written < cap + count * 16 * 1024, f"{written / (1 << 20):.1f} MiB written for {count} requests"
    # Past the cap a line still says what was done, by count, and why it lists nothing.
    last = lines[-1].fields
    assert last.removed == [] and last.not_listed >= 100 and "cap on what the gate stores" in last.not_listed_why, last


ODD_SHAPES = [
    ("/v1/chat/completions", {"messages": MSG, "tools": {"type": "web_search"}}),
    ("/v1/chat/completions", {"messages": MSG, "tools": "web_search"}),
    ("/v1/chat/completions", {"messages": MSG, "tools": [None, 1, "web_search", [{"type": "web_search"}]]}),
    ("/v1/chat/completions", {"messages": MSG, "tools": [{"type": "function", "function": None}]}),
    ("/v1/chat/completions", {"messages": MSG, "tools": [{"type": "function", "function": "web_search"}]}),
    ("/v1/chat/completions", {"messages": MSG, "tool_choice": ["web_search"]}),
    ("/v1/chat/completions", {"messages": MSG, "tool_choice": {"type": "allowed_tools", "allowed_tools": None}}),
    ("/v1/chat/completions", {"messages": MSG, "tool_choice": {"type": "allowed_tools",
                                                               "allowed_tools": {"tools": "web_search"}}}),
    ("/v1/chat/completions", {"messages": MSG, "functions": "web_search", "function_call": ["web_search"]}),
    ("/v1/chat/completions", {"messages": MSG, "functions": [None, {"name": None}]}),
    ("/v1/chat/completions", {"messages": MSG, "response_format": None, "stream_options": None}),
    ("/v1/chat/completions", {"messages": MSG, "response_format": {"type": "json_schema", "json_schema": "web_search"}}),
    ("/v1/chat/completions", {"messages": MSG, "stream": True, "stream_options": ["web_search"]}),
    ("/v1/chat/completions", {"messages": {"role": "user", "content": "x"}}),
    ("/v1/chat/completions", {"messages": [None, "x", 1]}),
    ("/v1/chat/completions", {"messages": MSG, "chat_template_kwargs": "web_search"}),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "shell", "environment": None}]}),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "shell", "environment": "local"}]}),
    ("/v1/responses", {"input": "hi", "tools": [{"type": ["web_search"]}, {"type": None}, {"type": {"a": 1}}]}),
    ("/v1/responses", {"input": "hi", "include": [None, 1, {"a": "web_search"}]}),
    ("/v1/responses", {"input": "hi", "text": {"format": None}}),
    ("/v1/responses", {"input": "hi", "text": {"format": "web_search"}}),
    ("/v1/responses", {"input": "hi", "reasoning": "high"}),
    ("/v1/responses", {"input": {"role": "user", "content": "x"}}),
    ("/v1/responses", {"input": [None, 1, "x"]}),
    ("/v1/responses", {"input": "hi", "tool_choice": {"type": "allowed_tools", "tools": None}}),
    ("/v1/completions", {"prompt": None}),
    ("/v1/completions", {"prompt": {"a": 1}}),
    ("/v1/completions", {"prompt": "x", "stream": True, "stream_options": "web_search"}),
]


@pytest.mark.parametrize("path,body", ODD_SHAPES, ids=[f"{p.rsplit('/', 1)[1]}-{i}" for i, (p, _) in enumerate(ODD_SHAPES)])
@pytest.mark.parametrize("finish_now", [False, True], ids=["before", "finish-now"])
def test_odd_shapes_get_a_clear_answer_and_no_provider_tool(rig, upstream, path, body, finish_now):
    """Fields the gate filters, in shapes it might not expect (null, a string, an object where a
    list belongs, null entries), before and after finish-now (which rewrites the conversation):
    a clear answer, never a gate fault; nothing naming `web_search` reaches the upstream outside
    the conversation; the line is written."""
    r = rig(settings={"sampling": {"temperature": 0.6, "reasoning": {"effort": "low"}, "text": {"verbosity": "low"}}}
            if path == "/v1/responses" else {})
    if finish_now:
        r.clock.now += 5500
    n = len(upstream.received)
    answer = post(r, path, body)
    assert answer.status_code != 500 and "gate fault" not in answer.text, (answer.status_code, answer.text[:300])
    for got in received_since(upstream, n):
        outside = {k: v for k, v in got["body"].items() if k not in ("messages", "input", "prompt")}
        assert "web_search" not in json.dumps(outside), outside
    assert len(r.lines(1)) == 1


@pytest.mark.parametrize("reading", [False, True], ids=["not reading", "reading"])
def test_a_client_that_stops_reading_then_leaves_is_noticed_and_recorded(rig, upstream, reading):
    """docs/gate.md: "the client leaves ... mid-stream: nothing; the upstream's connection is
    dropped, so its work stops too", counted as not completed. A client that reads nothing for 2 s
    of a fast stream and then hangs up: the gate kept reading the upstream (its work goes on,
    billed) and writing into a dead connection until the answer-size cap, and its line said status
    200, `client_gone: false`, `not_completed: false`, `bytes_out` 64 MiB, though the client got a
    few KB. Impact: the upstream is spent for nobody, and gate.log / gate-stats.json / the run's
    sentence count an answer delivered that never was. Closed: one watcher notices the client
    leave, reading or not, within a turn of the loop; the upstream is not read further (what the
    gate read of it is its stored response body)."""
    from showcase.gate.config import UpstreamTimeouts

    r = rig(settings={"upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30, connect_s=2)})
    body = json.dumps({"messages": [{"role": "user", "content": "x [script:flood]"}], "stream": True}).encode()
    c = socket.create_connection(("127.0.0.1", r.server.tcp_port), timeout=30)
    if not reading:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    if reading:
        got = 0
        while got < 1 << 20:
            got += len(c.recv(1 << 16))
    else:
        time.sleep(2)
    c.close()
    left = time.monotonic()
    log = r.log_dir / "gate.log"
    assert wait_until(lambda: log.exists() and log.read_text().strip() != "", 60), "no line a minute after the client left"
    noticed_s = time.monotonic() - left
    line = r.lines(1)[-1]
    assert line.client_gone and line.not_completed, (line.status, line.error, line.client_gone, line.not_completed)
    assert line.not_completed_why == "the client left before the answer ended", line.not_completed_why
    assert noticed_s < 5, f"the line came {noticed_s:.1f} s after the client left"
    assert line.bytes_out < 16 << 20, f"bytes_out {line.bytes_out} for a client that read at most 1 MiB"
    [answer] = [name for name in line.bodies if name.endswith(".response.sse")] or [line.bodies_not_kept]
    read_upstream = (r.log_dir / answer).stat().st_size
    assert read_upstream < 16 << 20, f"the gate read {read_upstream} bytes of the upstream for a client that left"
