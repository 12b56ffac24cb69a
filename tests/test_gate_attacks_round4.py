"""Round 4 of attacks on the gate: the edges of what changed (typed forwarded fields, per-type
tool shapes, no client header, the model id re-encoding, gate.log's caps, lone surrogates,
shot.sh's line). Each test asserts what docs/gate.md and docs/boundary.md promise; the gate
runs for real in front of tests/gate_upstream.py's recording upstream (or a small upstream of
the test's own where the answer itself is the attack)."""

import json
import socket
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from gate_upstream import KEY, MODEL, post, raw_http, received_since, rig, upstream, wait_until  # noqa: F401  (fixtures)
from showcase.gate.server import AppServer

MSG = [{"role": "user", "content": "build a voxel world"}]
FN = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}



def get_head(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n".encode()


def sent_upstream(upstream, n: int) -> dict:
    got = upstream.received[n:]
    assert got, "nothing reached the upstream"
    return got[0]["body"]


# ----------------------------------------------------------------------------- 1. typed fields

TYPED = [pytest.param(*case, id=case[0]) for case in [
    ("chat stream 1", "/v1/chat/completions", {"messages": MSG, "stream": 1}, "stream"),
    ("chat stream 0.0", "/v1/chat/completions", {"messages": MSG, "stream": 0.0}, "stream"),
    ("chat parallel_tool_calls 1", "/v1/chat/completions",
     {"messages": MSG, "tools": [FN], "parallel_tool_calls": 1}, "parallel_tool_calls"),
    ("responses stream 1", "/v1/responses", {"input": "hi", "stream": 1}, "stream"),
    ("responses parallel 0", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": "f"}], "parallel_tool_calls": 0}, "parallel_tool_calls"),
    ("completions stream 1", "/v1/completions", {"prompt": "x", "stream": 1}, "stream"),
]]


@pytest.mark.parametrize("name,path,body,field", TYPED)
def test_booleans_are_booleans_not_numbers(rig, upstream, name, path, body, field):
    """docs/gate.md: "`stream` and `parallel_tool_calls` true or false". 1 and 0 are numbers
    (Python's `True == 1` must not make them pass): sent upstream as a number, a strict upstream
    refuses it, a lax one streams an answer the gate may read as not streamed."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    got = upstream.received[n:]
    if got:
        sent = got[0]["body"]
        assert field not in sent or isinstance(sent[field], bool), f"{name}: upstream got {field}={sent[field]!r}"


STOPS = [pytest.param(*case, id=case[0]) for case in [
    ("nested list", ["a", ["b", {"n": 16}]]),
    ("null item", ["a", None]),
    ("number item", ["a", 16]),
    ("object item", [{"smuggled": {"n": 16}}]),
    ("number", 16),
    ("true", True),
]]


@pytest.mark.parametrize("name,stop", STOPS)
def test_stop_is_a_string_or_strings(rig, upstream, name, stop):
    """docs/gate.md: "`stop` a string or strings". A list holding lists, objects, numbers or null
    is not understood: it must not ride upstream under the name `stop`."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG, "stop": stop})
    post(r, "/v1/completions", {"prompt": "x", "stop": stop})
    for got in upstream.received[n:]:
        value = got["body"].get("stop")
        ok = value is None and "stop" not in got["body"] or isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value))
        assert ok, f"{name}: upstream got stop={value!r}"


NAMES = [pytest.param(*case, id=case[0]) for case in [
    ("chat tool name number", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "function", "function": {"name": 16, "parameters": {}}}]}),
    ("chat tool parameters list", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "function", "function": {"name": "a", "parameters": [{"n": 16}]}}]}),
    ("chat custom name object", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "custom", "custom": {"name": {"n": 16}}}]}),
    ("chat function name bool", "/v1/chat/completions",
     {"messages": MSG, "functions": [{"name": True, "parameters": {}}]}),
    ("chat function parameters string", "/v1/chat/completions",
     {"messages": MSG, "functions": [{"name": "a", "parameters": "web_search"}]}),
    ("responses tool name list", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": ["web_search"], "parameters": {}}]}),
    ("responses custom name number", "/v1/responses",
     {"input": "hi", "tools": [{"type": "custom", "name": 7}]}),
    ("responses tool parameters string", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": "web_search"}]}),
]]


@pytest.mark.parametrize("name,path,body", NAMES)
def test_tool_names_are_strings_and_parameters_objects(rig, upstream, name, path, body):
    """docs/gate.md: "a tool's `name` a string and its `parameters` an object", for every form a
    tool takes (chat function/custom, legacy `functions`, Responses function/custom)."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    got = upstream.received[n:]
    if not got:
        return
    sent = got[0]["body"]
    tools = sent.get("tools") or sent.get("functions") or []
    for tool in tools:
        inner = tool.get("function") or tool.get("custom") or tool
        assert isinstance(inner.get("name"), str), f"{name}: upstream got tool {tool!r}"
        assert "parameters" not in inner or isinstance(inner["parameters"], dict), f"{name}: upstream got {tool!r}"


def test_null_in_a_forwarded_typed_field_is_not_forwarded_as_a_value(rig, upstream):
    """A null `stream`, `stop`, `instructions`, `truncation` or `suffix` is none of the types the
    docs list: removed (or sent as absent), never forwarded as an unknown form."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG, "stream": None, "stop": None, "parallel_tool_calls": None,
                                     "tools": [FN]})
    post(r, "/v1/responses", {"input": "hi", "instructions": None, "truncation": None, "stream": None})
    post(r, "/v1/completions", {"prompt": "x", "suffix": None, "stream": None})
    for got in upstream.received[n:]:
        nulls = [k for k, v in got["body"].items() if v is None]
        assert nulls == [], f"{got['path']}: forwarded as null: {nulls}"


# ----------------------------------------------------------------------------- 2. per-type tool shapes


def test_local_shell_environment_carries_nothing_else(rig, upstream):
    """docs/gate.md: "a `shell` may say `environment: {"type": "local"}`". Anything else inside a
    local environment (a `network_policy`, a `container_id`, `skills`) is a subfield the table does
    not name: removed and logged."""
    r = rig()
    n = len(upstream.received)
    tools = [{"type": "shell", "environment": {"type": "local", "container_id": "cntr_of_the_operator",
                                               "network_policy": {"type": "allowlist", "allowed_domains": ["evil.example"]}}}]
    post(r, "/v1/responses", {"input": "hi", "tools": tools})
    text = json.dumps(sent_upstream(upstream, n))
    assert "cntr_of_the_operator" not in text and "evil.example" not in text, text


@pytest.mark.parametrize("env", [{"type": "LOCAL"}, {"type": "local "}, {"type": ["local"]}, {"type": None}, {}],
                         ids=["upper", "space", "list", "null", "empty"])
def test_shell_environment_not_exactly_local_is_removed(rig, upstream, env):
    """Only `environment: {"type": "local"}` is the client's own shell; any other environment is
    the provider's (or not understood): the shell entry must not go upstream with it."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/responses", {"input": "hi", "tools": [{"type": "shell", "environment": env},
                                                      {"type": "function", "name": "f"}]})
    got = upstream.received[n:]
    for tool in (got[0]["body"].get("tools", []) if got else []):
        assert tool.get("type") != "shell" or tool.get("environment") in (None, {"type": "local"}), tool




@pytest.mark.parametrize("path,body", [
    pytest.param("/v1/responses", {"input": "hi", "tools": [{"type": "custom", "name": "c", "format": {
        "type": "grammar", "syntax": "lark", "definition": "start: /x/", "server_url": "http://evil.example"}}]},
        id="responses-grammar-extra"),
    pytest.param("/v1/chat/completions", {"messages": MSG, "tools": [{"type": "custom", "custom": {
        "name": "c", "format": {"type": "text", "server_url": "http://evil.example"}}}]},
        id="chat-text-extra"),
    pytest.param("/v1/responses", {"input": "hi", "tools": [{"type": "custom", "name": "c", "format": "http://evil.example"}]},
                 id="responses-format-string"),
    pytest.param("/v1/chat/completions", {"messages": MSG, "tools": [{"type": "custom", "custom": {
        "name": "c", "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": "x",
                                                                 "server_url": "http://evil.example"}}}}]},
        id="chat-grammar-nested-extra"),
])
def test_custom_tool_format_holds_the_allow_list(rig, upstream, path, body):
    """A custom tool's `format` is `text` or a `grammar` (`syntax`, `definition`); an unknown key
    inside it (or a format that is not an object) is not understood: "The allow-list holds at every
    depth"."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    got = upstream.received[n:]
    if got:
        assert "evil.example" not in json.dumps(got[0]["body"]), got[0]["body"]


@pytest.mark.parametrize("path,body", [
    ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f"}],
                       "tool_choice": {"type": "allowed_tools", "mode": {"web_search": True},
                                       "tools": [{"type": "function", "name": "f"}]}}),
    ("/v1/chat/completions", {"messages": MSG, "tools": [FN],
                              "tool_choice": {"type": "allowed_tools", "allowed_tools": {
                                  "mode": ["web_search"], "tools": [{"type": "function", "function": {"name": "bash"}}]}}}),
], ids=["responses", "chat"])
def test_allowed_tools_mode_is_auto_or_required(rig, upstream, path, body):
    """`allowed_tools`' `mode` is "auto" or "required"; an object or list under it is not
    understood and must not ride upstream."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    text = json.dumps(sent_upstream(upstream, n).get("tool_choice"))
    assert "web_search" not in text, text


def test_allowed_tools_naming_a_removed_hosted_shell_is_not_forwarded(rig, upstream):
    """A hosted shell (environment `container_auto`) is removed from `tools`; an `allowed_tools` or
    a `tool_choice` naming `{"type": "shell"}` then names a tool the agent does not run itself: it
    must not go upstream (an upstream that offers its hosted shell by default would run it)."""
    r = rig()
    n = len(upstream.received)
    tools = [{"type": "shell", "environment": {"type": "container_auto"}}, {"type": "function", "name": "f"}]
    post(r, "/v1/responses", {"input": "hi", "tools": tools, "tool_choice": {"type": "shell"}})
    post(r, "/v1/responses", {"input": "hi", "tools": tools,
                              "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "shell"}]}})
    for got in upstream.received[n:]:
        assert "shell" not in json.dumps(got["body"].get("tool_choice")), got["body"].get("tool_choice")


def test_legacy_function_call_names_only_an_offered_function(rig, upstream):
    """`function_call` as `{name}`: when no function is left (all removed as not understood),
    `function_call` goes neither ("When every tool a request offered was removed ... neither
    are tool_choice"). Also an odd string value is not forwarded."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG, "functions": [{"name": 5}], "function_call": {"name": "web_search"}})
    first = sent_upstream(upstream, n)
    assert "function_call" not in first, first


def test_legacy_function_call_string_is_auto_or_none(rig, upstream):
    """`function_call` as a string is "auto" or "none"; any other string is not understood."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions", {"messages": MSG, "functions": [{"name": "a"}], "function_call": "web_search"})
    second = sent_upstream(upstream, n)
    assert second.get("function_call") in (None, "auto", "none", {"name": "a"}), second


# ----------------------------------------------------------------------------- 3. headers


def test_x_api_key_beside_a_wrong_bearer_is_refused(rig, upstream):
    """The key is checked exactly: a request that carries a wrong `Authorization` and the right
    `x-api-key` is ambiguous. Either way the upstream must get the gate's own key, never the
    agent's header (checked here), and the answer is not a gate fault."""
    r = rig()
    n = len(upstream.received)
    answer = post(r, "/v1/chat/completions", {"messages": MSG},
                  headers={"Authorization": "Bearer agent-chosen", "x-api-key": KEY})
    assert answer.status_code != 500, answer.text
    for got in upstream.received[n:]:
        assert "agent-chosen" not in json.dumps(got["headers"]), got["headers"]


def test_gzip_body_is_refused_clearly(rig, upstream):
    """`Content-Encoding` is not forwarded: a gzip body must be refused (400) or decoded, never
    forwarded as bytes the upstream would read as JSON without the header."""
    import gzip
    r = rig()
    n = len(upstream.received)
    answer = post(r, "/v1/chat/completions", raw=gzip.compress(json.dumps({"messages": MSG}).encode()),
                  headers={"Content-Encoding": "gzip"})
    assert answer.status_code in (200, 400, 415), answer.status_code
    for got in upstream.received[n:]:
        assert got["body"] is not None, got


# ----------------------------------------------------------------------------- 4. the model id


@pytest.mark.parametrize("target,expect", [
    ("/v1/models/org%2Fname", "/v1/models/org/name"),
    ("/v1/models/org/name", "/v1/models/org/name"),
    ("/v1/models/%C3%A9t%C3%A9", "/v1/models/été"),
    ("/v1/models/a%20b", "/v1/models/a b"),
    ("/api/v1/models?purpose=fine-tune", "/v1/models"),
], ids=["encoded-slash", "slash", "unicode", "space", "alias-query"])
def test_model_id_reaches_the_upstream_as_the_gate_read_it(rig, upstream, target, expect):
    """"The upstream decodes exactly the id the gate checked" (and the /api/v1/models alias goes
    as /v1/models): unicode, a space, `#`, `?` and slashes arrive as the same id, with no query."""
    r = rig()
    n = len(upstream.received)
    raw_http(r.server.tcp_port, get_head(target))
    got = upstream.received[n:]
    assert got, "nothing reached the upstream"
    assert got[0]["path"] == expect and got[0]["query"] == "", got[0]


@pytest.mark.parametrize("target", ["/v1/models/%ED%B3%A9", "/v1/models/%FF%FE", "/v1/models/%00x",
                                    "/v1/models/" + "a" * 60000])
def test_odd_model_ids_get_a_clear_answer_and_a_record(rig, upstream, target):
    """An id with invalid UTF-8 (a lone surrogate's bytes), a NUL or 60,000 characters: a clear
    answer (never a gate fault), one gate.log line (bounded) and the stats count it."""
    r = rig()
    answer = raw_http(r.server.tcp_port, get_head(target))
    assert answer.startswith(b"HTTP/1.1 ") and b" 500 " not in answer[:20], answer[:300]
    lines = r.lines(1)
    assert len((r.log_dir / "gate.log").read_bytes()) < 16 * 1024, "gate.log line not bounded"
    assert len(lines) == 1


# ----------------------------------------------------------------------------- 5. gate.log's caps, surrogates


def _answering(payload: bytes, media: str = "application/json"):
    async def handle(request):
        await request.body()
        return Response(payload, media_type=media)
    return Starlette(routes=[Route("/{path:path}", handle, methods=["GET", "POST"])])


def _rig_with(rig, app):
    server = AppServer(app, ["tcp:127.0.0.1:0"]).__enter__()
    url = f"http://127.0.0.1:{server.tcp_port}/v1"
    return server, rig(settings={"upstream": url})


CHAT = {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

ANSWERS = [pytest.param(*case, id=case[0])
           for case in [
    ("surrogate finish_reason", json.dumps({**CHAT, "choices": [{"index": 0, "finish_reason": "\udce9",
                                                                  "message": {"role": "assistant", "content": "x"}}]}).encode(),
     "application/json", False),
    ("huge finish_reason", json.dumps({**CHAT, "choices": [{"index": 0, "finish_reason": "s" * 2_000_000,
                                                            "message": {"role": "assistant", "content": "x"}}]}).encode(),
     "application/json", False),
    ("surrogate finish_reason stream",
     b"data: " + json.dumps({**CHAT, "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "\udce9"}]}).encode()
     + b"\n\ndata: [DONE]\n\n", "text/event-stream", True),
    ("huge finish_reason stream",
     b"data: " + json.dumps({**CHAT, "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": {}, "finish_reason": "s" * 2_000_000}]}).encode()
     + b"\n\ndata: [DONE]\n\n", "text/event-stream", True),
    ("surrogate error message", json.dumps({"error": {"message": "bad \udce9" + "e" * 2_000_000, "type": "x",
                                                      "code": "\udce9"}}).encode(), "application/json", False),
    ("raw invalid utf-8", b'{"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
                          b'"finish_reason": "st\xff\xfeop", "message": {"role": "assistant", "content": "\xed\xb3\xa9"}}]}',
     "application/json", False),
    ("raw invalid utf-8 stream", b'data: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", '
                                 b'"choices": [{"index": 0, "delta": {"content": "\xed\xb3\xa9"}, "finish_reason": "\xff"}]}'
                                 b'\n\ndata: [DONE]\n\n', "text/event-stream", True),
    ("string tokens", json.dumps({**CHAT, "usage": {"prompt_tokens": "\udce9", "completion_tokens": 10 ** 30},
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "x"}}]}).encode(),
     "application/json", False),
]]


@pytest.mark.parametrize("name,payload,media,stream", ANSWERS)
def test_odd_upstream_answers_keep_bounded_true_records(rig, name, payload, media, stream):
    """The upstream's answer is shaped by the model, which the agent steers: a finish_reason that is
    a lone surrogate or 2 MB, an error message of 2 MB with a surrogate, tokens that are strings or
    past 64 bits. The client gets its answer, the line lands, is bounded, and the next request's
    line lands too (the writer lives); stats count both."""
    server, r = _rig_with(rig, _answering(payload, media))
    try:
        post(r, "/v1/chat/completions", {"messages": MSG, "stream": stream})
        post(r, "/v1/chat/completions", {"messages": MSG, "stream": stream})
        assert len(r.lines(2)) == 2
        sizes = [len(x) for x in (r.log_dir / "gate.log").read_bytes().splitlines()]
        assert max(sizes) < 64 * 1024, f"gate.log lines of {sizes} bytes"
        assert r.stats(2).requests == 2
    finally:
        server.__exit__(None, None, None)


def test_gate_log_total_stays_under_the_storage_cap(rig, upstream):
    """"what the agent makes the gate write stays under the cap plus a small, fixed cost per
    request": with a 64 KiB storage cap, 40 requests each of 100 removed fields with 900-byte values
    and 190-character names write about the cap plus 40 x a small fixed cost, not 40 x 100 KB."""
    r = rig(settings={"limits": {"max_stored_bytes": 64 * 1024}})
    body = {"messages": MSG, **{f"{i:03d}" + "k" * 187: "v" * 900 for i in range(100)}}
    for _ in range(40):
        post(r, "/v1/chat/completions", body)
    r.lines(40)
    size = (r.log_dir / "gate.log").stat().st_size
    assert size < 64 * 1024 + 40 * 4096, f"gate.log is {size} bytes"


def test_storage_cap_does_not_hide_what_was_changed(rig, upstream):
    """Past the storage cap a line lists no entries, only `not_listed` and why. The line must still
    say the request was changed (`n` forced, model forced) truthfully: `not_listed` counts every
    entry it left out."""
    r = rig(settings={"limits": {"max_stored_bytes": 1024}})
    big = {"messages": MSG, "pad": "x" * 4000}
    post(r, "/v1/chat/completions", big)
    post(r, "/v1/chat/completions", {"messages": MSG, "n": 16, "model": "other", "web_search_options": {}})
    line = r.lines(2)[-1]
    fields = line.fields
    listed = len(fields.changed) + len(fields.removed)
    assert listed + fields.not_listed >= 3, fields
    assert listed or fields.not_listed_why, fields


# ----------------------------------------------------------------------------- 6. lone surrogates forwarded


@pytest.mark.parametrize("path,raw", [
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stop": ["\\udce9"]}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", '
                             b'"function": {"name": "f\\udce9", "parameters": {"\\udce9": {}}}}]}'),
    ("/v1/responses", b'{"input": "x", "instructions": "\\ud800", "truncation": "\\udfff"}'),
    ("/v1/responses", b'{"input": [{"role": "user", "content": [{"type": "input_text", "text": "\\udce9"}]}],'
                      b' "tool_choice": {"type": "function", "name": "\\udce9"}, "tools": [{"type": "function", "name": "\\udce9"}]}'),
    ("/v1/completions", b'{"prompt": "\\udce9", "suffix": "\\udce9"}'),
], ids=["stop", "tool-name", "instructions", "tool-choice", "prompt-suffix"])
def test_lone_surrogates_are_forwarded_escaped_as_sent(rig, upstream, path, raw):
    """docs/gate.md: "a lone surrogate ... is forwarded escaped, as sent": in any forwarded field,
    the upstream gets the request (not a 400/500) with the surrogate intact."""
    r = rig()
    n = len(upstream.received)
    answer = post(r, path, raw=raw)
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    got = upstream.received[n:]
    assert got and "\udce9" in json.dumps(got[0]["body"], ensure_ascii=False) or "\ud800" in json.dumps(
        got[0]["body"], ensure_ascii=False), got


# ----------------------------------------------------------------------------- 7. shot.sh's line


@pytest.fixture
def shot_gate(tmp_path):
    """The run's own gate with its shot.sh route (make_gate, as showcase run builds it), over TCP.
    No test here gets as far as a browser: every request is answered before a page is loaded."""
    from showcase.gate.server import GateServer
    from showcase.run.options import RunOptions
    from showcase.run.orchestrate import RunPlan, _quick_check_dict, make_gate
    from showcase.runfolder.artefacts import RunLayout, ShotFigures
    from showcase.task import load_task

    opts = RunOptions(upstream="http://127.0.0.1:9/v1", model="m", out=tmp_path / "run", limit_s=7200)
    plan = RunPlan(opts=opts, task=load_task("voxel"), harness=None, sampling={}, limit_s=7200, inject_s=5400,
                   answer_limit=4096)
    layout = RunLayout(tmp_path / "run")
    layout.make()
    figures = ShotFigures()
    gate = make_gate(plan, layout, KEY, _quick_check_dict(None), lambda name, why: None, shots=figures)
    server = GateServer(gate, ["tcp:127.0.0.1:0"]).start()
    gate.start_clock()
    try:
        yield server.tcp_port, figures, gate
    finally:
        server.stop()


def _shot(port: int, raw: bytes, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/_showcase/shot", content=raw, timeout=30,
                      headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", **(headers or {})})


def test_shot_requests_add_up_for_names_the_os_refuses(shot_gate):
    """shot.sh's file name is the agent's: a NUL in it, a lone surrogate (`\\ud800`, which no file
    system encoding can write), a name past the OS's limit. Each gets a clear answer (4xx: the
    agent reads why), never a gate fault, and run-info's shot_requests add up (asked = answered +
    busy + dropped): docs/boundary.md "they always add up"."""
    port, figures, _ = shot_gate
    bodies = [b'{"file": "game\\u0000.html"}', b'{"file": "\\ud800.html"}', json.dumps({"file": "a" * 5000}).encode(),
              b'{"file": "' + b"d/" * 3000 + b'x"}']
    statuses = [_shot(port, raw).status_code for raw in bodies]
    assert wait_until(lambda: figures.asked == len(bodies), 5), figures
    assert figures.asked == figures.answered + figures.busy + figures.dropped, (statuses, figures)
    assert all(400 <= s < 500 for s in statuses), statuses


def test_shot_body_dripped_past_ten_seconds_is_answered_and_counted(shot_gate):
    """"A request takes its place only once its whole body has arrived (within 10 s, else 408)": a
    chunked body that sends a byte a second never holds the route past the bound, and is counted."""
    port, figures, _ = shot_gate
    head = (f"POST /_showcase/shot HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n").encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(head)
        s.settimeout(1.0)
        answer = b""
        while time.monotonic() - started < 15 and not answer:
            try:
                s.sendall(b"1\r\n \r\n")
            except OSError:
                break
            try:
                answer = s.recv(4096)
            except socket.timeout:
                pass
    took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert took < 13, f"answered after {took:.1f} s"
    assert wait_until(lambda: figures.asked == figures.answered + figures.busy + figures.dropped == 1, 5), figures


# ----------------------------------------------------------------------------- 8. typed subfields

SMUGGLE = {"smuggled": {"n": 16}}
SUBFIELDS = [pytest.param(*case, id=case[0]) for case in [
    ("chat include_usage object", "/v1/chat/completions", {"messages": MSG, "stream_options": {"include_usage": SMUGGLE}}),
    ("chat tool description object", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "function", "function": {"name": "a", "description": SMUGGLE}}]}),
    ("chat tool strict object", "/v1/chat/completions",
     {"messages": MSG, "tools": [{"type": "function", "function": {"name": "a", "strict": SMUGGLE}}]}),
    ("chat json_schema name object", "/v1/chat/completions",
     {"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"name": SMUGGLE, "schema": {}}}}),
    ("chat response_format type object", "/v1/chat/completions", {"messages": MSG, "response_format": {"type": SMUGGLE}}),
    ("chat tool_choice function name object", "/v1/chat/completions",
     {"messages": MSG, "tools": [FN], "tool_choice": {"type": "function", "function": {"name": SMUGGLE}}}),
    ("chat tool_choice string unknown", "/v1/chat/completions",
     {"messages": MSG, "tools": [FN], "tool_choice": "smuggled"}),
    ("responses include_obfuscation object", "/v1/responses",
     {"input": "hi", "stream": True, "stream_options": {"include_obfuscation": SMUGGLE}}),
    ("responses text format strict object", "/v1/responses",
     {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {}, "strict": SMUGGLE}}}),
    ("responses tool_choice name object", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": SMUGGLE}}),
    ("responses tool_choice string unknown", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": "f"}], "tool_choice": "smuggled"}),
    ("responses function tool strict object", "/v1/responses",
     {"input": "hi", "tools": [{"type": "function", "name": "f", "strict": SMUGGLE}]}),
    ("completions include_usage object", "/v1/completions",
     {"prompt": "x", "stream": True, "stream_options": {"include_usage": SMUGGLE}}),
]]


@pytest.mark.parametrize("name,path,body", SUBFIELDS)
def test_typed_subfields_hold_their_type(rig, upstream, name, path, body):
    """"forward upstream only what it understands", "at every depth": a subfield the table names
    (`include_usage`, a tool's `description`/`strict`, `json_schema.name`, a tool_choice's name or
    mode string) that holds an object is not understood and must not carry it upstream."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    got = upstream.received[n:]
    if got:
        text = json.dumps(got[0]["body"])
        assert "smuggled" not in text, f"{name}: {text[:400]}"


@pytest.mark.parametrize("path,body,field,expect", [
    ("/v1/chat/completions", {"messages": MSG, "n": True}, "n", 1),
    ("/v1/completions", {"prompt": "x", "best_of": True}, "best_of", 1),
    ("/v1/chat/completions", {"messages": MSG, "store": 0}, "store", False),
    ("/v1/responses", {"input": "hi", "store": 0.0}, "store", False),
], ids=["n-true", "best_of-true", "store-0", "store-0.0"])
def test_forced_fields_go_upstream_as_the_forced_value(rig, upstream, path, body, field, expect):
    """`n`/`best_of` are forced to 1 and `store` to false: Python's `True == 1` and `0 == False`
    must not let the agent's `true` or `0` pass as "already the forced value" (the upstream then
    gets a boolean count or a numeric flag, and the record says nothing was changed)."""
    r = rig()
    n = len(upstream.received)
    post(r, path, body)
    sent = sent_upstream(upstream, n)[field]
    assert sent == expect and type(sent) is type(expect), f"upstream got {field}={sent!r}"


def test_query_string_record_is_bounded(rig, upstream):
    """The removed query string is logged as a removed field: 27 KB of it (under the HTTP parser's
    own limit), of invalid UTF-8 bytes, keeps a bounded line and the next request's line lands."""
    r = rig()
    port = r.server.tcp_port
    query = "a=" + "%ED%B3%A9" * 3000 + "&n=16"
    raw_http(port, (f"POST /v1/chat/completions?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(json.dumps({'messages': MSG}))}\r\n"
                    f"Connection: close\r\n\r\n{json.dumps({'messages': MSG})}").encode())
    post(r, "/v1/chat/completions", {"messages": MSG})
    assert len(r.lines(2)) == 2
    sizes = [len(x) for x in (r.log_dir / "gate.log").read_bytes().splitlines()]
    assert max(sizes) < 8 * 1024, sizes


def test_records_name_only_the_bodies_kept(rig, upstream):
    """Past the storage cap a body is not kept: the line's `bodies` must name only files that exist
    (and `bodies_not_kept` the rest), so a reader of the record never follows it to nothing."""
    r = rig(settings={"limits": {"max_stored_bytes": 8 * 1024}})
    post(r, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * 6000}]})
    post(r, "/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * 6000}], "n": 3})
    post(r, "/v1/chat/completions", {"messages": MSG})
    lines = r.lines(3)
    r.gate.flush_records()
    for line in lines:
        for name in line.bodies:
            assert (r.log_dir / "bodies" / name).is_file() or (r.log_dir / name).is_file(), (line.id, name, line.bodies)


@pytest.mark.parametrize("target", [
    "/v1/models/a%2F..%2F..%2Ffiles", "/v1/models/%2E%2E%2F%2E%2E%2Ffiles", "/v1/models/x%2F%2E%2E",
    "/api/v1/models/%2e%2e%2f%2e%2e%2ffiles", "/v1/models/.%2F..%2Ffiles", "/v1/models/%2F..%2Ffiles",
])
def test_encoded_slashes_and_dots_never_walk_upstream(rig, upstream, target):
    """"slashes kept, for ids like org/name" must not turn an id of `..` segments spelled with
    `%2F` into a path that walks out of /v1/models upstream (a normalising proxy would serve
    /v1/files, the operator's uploads)."""
    r = rig()
    n = len(upstream.received)
    raw_http(r.server.tcp_port, get_head(target))
    for got in upstream.received[n:]:
        assert ".." not in got["path"].split("/") and "." not in got["path"].split("/"), got["path"]
        assert "//" not in got["path"], got["path"]


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": []}),
    ("/v1/responses", {"input": []}),
    ("/v1/responses", {"input": [{"type": "function_call_output", "call_id": "c", "output": "done"}]}),
    ("/v1/responses", {"input": [{"role": "user", "content": []}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": []}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": None}]}),
    ("/v1/responses", {"input": "", "instructions": "x"}),
], ids=["chat-empty", "responses-empty", "responses-tool-output", "responses-empty-parts", "chat-empty-parts",
        "chat-null-content", "responses-empty-string"])
def test_finish_now_reaches_the_model_in_edge_conversations(rig, upstream, path, body):
    """After finish_now_after_s the task's message reaches the model whatever the conversation
    is: empty lists, a user turn with no parts or null content, an empty string."""
    from gate_upstream import FINISH
    r = rig()
    r.clock.now += 5401
    n = len(upstream.received)
    post(r, path, body)
    got = upstream.received[n:]
    if got:
        assert FINISH in json.dumps(got[0]["body"]), got[0]["body"]
