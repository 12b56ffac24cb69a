"""Requests an agent could send to reach past the gate, and shot.sh callers that hold nothing.

Each test is one class of attack on the boundary (docs/gate.md, docs/boundary.md) and asserts
what must be true. The gate's tests run a real gate in front of tests/gate_upstream.py's recording
upstream and assert what the upstream RECEIVED. The shot.sh tests serve the run's own gate with
its shot.sh route (showcase.run.orchestrate.make_gate) over real HTTP.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from gate_upstream import KEY, MODEL, post, raw_http, received_since, rig, upstream, wait_until  # noqa: F401  (fixtures)


MSG = [{"role": "user", "content": "build a voxel world"}]




# ----------------------------------------------------------------------------- 1. the allow-list


def test_hosted_shell_tool_does_not_reach_the_upstream(rig, upstream):
    """`{"type": "shell", "environment": {"type": "container_auto"}}` is OpenAI's HOSTED shell: the
    provider provisions a container and runs the model's commands there (with the network its
    `network_policy` allows); `container_reference` names a container of the operator's account.
    A shell with an environment that is not local is a provider-side tool: removed."""
    r = rig()
    n = len(upstream.received)
    tools = [
        {"type": "shell", "environment": {"type": "container_auto",
                                          "network_policy": {"type": "allowlist", "allowed_domains": ["evil.example"]}}},
        {"type": "shell", "environment": {"type": "container_reference", "container_id": "cntr_of_the_operator"}},
        {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}},
    ]
    assert post(r, "/v1/responses", {"input": "hi", "tools": tools}).status_code == 200
    sent = received_since(upstream, n)[0]["body"]
    assert "environment" not in json.dumps(sent.get("tools", [])), sent["tools"]
    assert "container_auto" not in json.dumps(sent) and "cntr_of_the_operator" not in json.dumps(sent), sent


def test_tool_choice_naming_provider_tools_is_not_forwarded(rig, upstream):
    """A tool_choice of type `allowed_tools` naming `web_search` and an `mcp` server beside the
    agent's own function (chat and Responses): only the function is named upstream."""
    r = rig()
    n = len(upstream.received)
    fn_chat = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]
    chat_choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "web_search"}]}}
    assert post(r, "/v1/chat/completions", {"messages": MSG, "tools": fn_chat, "tool_choice": chat_choice}).status_code == 200
    resp_choice = {"type": "allowed_tools", "mode": "auto",
                   "tools": [{"type": "mcp", "server_label": "evil"}, {"type": "web_search"}]}
    assert post(r, "/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f"}],
                                     "tool_choice": resp_choice}).status_code == 200
    chat, resp = (got["body"] for got in received_since(upstream, n))
    for sent in (chat, resp):
        text = json.dumps(sent.get("tool_choice"))
        assert "web_search" not in text and "mcp" not in text, sent.get("tool_choice")


def test_unknown_subfields_inside_forwarded_fields_are_removed(rig, upstream):
    """"An unknown field is removed" at every depth: a function tool with a `server_url`, a chat
    tool with a `web_search` object beside its function, a custom tool with a `server_url`, an
    unknown key in `response_format` and `text.format` never reach the upstream, each logged."""
    r = rig()
    n = len(upstream.received)
    chat_tools = [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}},
         "web_search": {"search_context_size": "high"}},
        {"type": "custom", "custom": {"name": "c"}, "server_url": "http://evil.example/mcp"},
    ]
    assert post(r, "/v1/chat/completions", {
        "messages": MSG, "tools": chat_tools,
        "response_format": {"type": "json_object", "smuggled": {"n": 16}},
    }).status_code == 200
    assert post(r, "/v1/responses", {
        "input": "hi",
        "tools": [{"type": "function", "name": "f", "parameters": {}, "server_url": "http://evil.example/mcp"}],
        "text": {"format": {"type": "text", "smuggled": True}},
    }).status_code == 200
    chat, resp = (got["body"] for got in received_since(upstream, n))
    for sent in (chat, resp):
        text = json.dumps(sent)
        assert "evil.example" not in text and "smuggled" not in text and "web_search" not in text, text
    lines = r.lines(2)
    removed = [e.field for line in lines for e in line.fields.removed]
    assert any("server_url" in field for field in removed), removed  # and each is logged with why


def test_client_headers_do_not_reach_the_upstream(rig, upstream):
    """`OpenAI-Organization` and `OpenAI-Project` would choose which organisation or project of the
    operator's key is billed and whose data the request may touch; `OpenAI-Beta` turns on beta
    behaviour; cookies and `X-*` headers are not the gate's to pass. None reaches the upstream."""
    r = rig()
    n = len(upstream.received)
    sent_headers = {
        "OpenAI-Organization": "org-someone-else", "OpenAI-Project": "proj-someone-else",
        "OpenAI-Beta": "assistants=v2", "Cookie": "session=stolen", "api-key": "agent-chosen",
        "X-Smuggled": "1", "Prefer": "respond-async", "Idempotency-Key": "k1",
    }
    assert post(r, "/v1/chat/completions", {"messages": MSG}, headers=sent_headers).status_code == 200
    got = {k.lower() for k in received_since(upstream, n)[0]["headers"]}
    leaked = sorted(got & {h.lower() for h in sent_headers})
    assert leaked == [], f"client headers that reached the upstream: {leaked}"


def test_query_string_of_a_generation_request_is_not_forwarded(rig, upstream):
    """A POST to /v1/chat/completions?api-version=...&n=16&store=true reaches the upstream without
    its query (upstreams that read parameters from the query, e.g. an Azure-style `api-version`,
    would otherwise get what the body's allow-list removed)."""
    r = rig()
    n = len(upstream.received)
    assert post(r, "/v1/chat/completions?api-version=2099-01-01&n=16&store=true", {"messages": MSG}).status_code == 200
    assert received_since(upstream, n)[0]["query"] == ""


def test_models_id_reaches_the_upstream_as_the_gate_checked_it(rig, upstream):
    """GET /v1/models/{id}: the upstream decodes exactly the id the gate checked.
    `x%3Fpurpose%3Dfine-tune` stays one id (never the query purpose=fine-tune), and the
    double-encoded `%252e%252e%252ffiles` never becomes /v1/models/../files upstream."""
    r = rig()
    port = r.server.tcp_port
    head = f"HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    n = len(upstream.received)
    raw_http(port, f"GET /v1/models/x%3Fpurpose%3Dfine-tune {head}".encode())
    raw_http(port, f"GET /v1/models/%252e%252e%252ffiles {head}".encode())
    got = received_since(upstream, n)
    for request in got:
        assert request["query"] == "", request
        assert ".." not in request["path"].split("/"), request
    assert not any(request["path"].endswith("/files") and "/models/" in request["path"] for request in got), got


def test_trailing_slash_path_is_not_forwarded_as_sent(rig, upstream):
    """POST /v1/chat/completions/ is served as chat and goes upstream as /v1/chat/completions
    (the upstream sees only the exact paths docs/gate.md lists)."""
    r = rig()
    n = len(upstream.received)
    post(r, "/v1/chat/completions/", {"messages": MSG})
    for request in received_since(upstream, n):
        assert request["path"] in ("/v1/chat/completions",), request["path"]


@pytest.mark.parametrize("name,path,raw", [
    ("include holds a list", "/v1/responses",
     b'{"input": "hi", "include": ["reasoning.encrypted_content", ["x"]]}'),
    ("a lone surrogate in a message", "/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "file name \\udce9.txt"}]}'),
    ("deeply nested JSON", "/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "x"}], "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
])
def test_valid_but_hostile_json_gets_a_clear_answer_not_a_gate_fault(rig, upstream, name, path, raw):
    """Bodies that are one JSON object but odd: an `include` item that is a list, a lone
    surrogate (what Python's json writes for a file name with invalid UTF-8), nesting 100,000
    deep. Each gets a clear answer (4xx or forwarded), never a 500 gate fault, and its body is
    kept under bodies/."""
    r = rig()
    answer = post(r, path, raw=raw, timeout=60)
    assert answer.status_code != 500 and "gate fault" not in answer.text, (name, answer.status_code, answer.text[:300])
    line = r.lines(1)[-1]
    assert any(b.endswith(".request.json") for b in line.bodies), line.bodies


def test_gate_log_stays_bounded_whatever_the_field_names(rig, upstream):
    """A gate.log line stays bounded whatever the agent names its fields: 100 unknown fields with
    100 KB names, a 1 MiB subfield name of `text`."""
    r = rig()
    log = r.log_dir / "gate.log"
    names = {f"{i:03d}" + "k" * 100_000: 1 for i in range(100)}
    assert post(r, "/v1/chat/completions", {"messages": MSG, **names}, timeout=120).status_code == 200
    assert post(r, "/v1/responses", {"input": "hi", "text": {"k" * (1 << 20): 1}}, timeout=120).status_code == 200
    r.lines(2)
    sizes = [len(line) for line in log.read_bytes().splitlines()]
    assert max(sizes) < 256 * 1024, f"gate.log lines of {sizes} bytes"


def test_a_run_gate_waits_for_a_non_streamed_answer_until_the_hard_stop(tmp_path):
    """An answer's time bound is the run's: a non-streamed answer (the builtin agent's and
    mini-swe-agent's) arrives whole, so the run's gate waits for it until the hard stop, not a
    fixed 30 minutes. (Checked on the gate the run builds, not by waiting 30 minutes.)"""
    from showcase.run.options import RunOptions
    from showcase.run.orchestrate import RunPlan, make_gate
    from showcase.runfolder.artefacts import RunLayout
    from showcase.task import load_task

    limit_s = 7200
    opts = RunOptions(upstream="http://127.0.0.1:9/v1", model="m", out=tmp_path / "run", limit_s=limit_s)
    plan = RunPlan(opts=opts, task=load_task("voxel"), harness=None, sampling={}, limit_s=limit_s, inject_s=5400,
                   answer_limit=262144)
    layout = RunLayout(tmp_path / "run")
    layout.make()
    gate = make_gate(plan, layout, "key", None, lambda name, why: None)
    waits = gate.config.upstream_timeout_s
    assert waits.first_byte_s is None or waits.first_byte_s >= limit_s, (
        f"a non-streamed answer is cut after {waits.first_byte_s:g} s in a run whose hard stop is at {limit_s} s")


# ----------------------------------------------------------------------------- 2. shot.sh's bound


@pytest.fixture
def shot_gate(tmp_path):
    """The run's own gate with its shot.sh route (make_gate, as showcase run builds it), over TCP."""
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
    (layout.work / "game.html").write_text(
        "<!doctype html><title>ok</title><p>hello world</p><script>window.ready = true</script>")
    try:
        yield server.tcp_port, figures, layout
    finally:
        server.stop()


def _shot_head(length: int) -> bytes:
    from showcase.run.shot import SHOT_PATH

    return (f"POST {SHOT_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


SHOT_BODY = json.dumps({"file": "game.html"}).encode()


@pytest.mark.browser
def test_shot_callers_that_never_finish_their_body_do_not_hold_the_slots(shot_gate):
    """Four callers that send the head and all of the body but its last byte hold no place in
    line (1 running + 3 waiting): a complete shot.sh request beside them is checked, not told
    "busy". docs/boundary.md: "Every wait has a bound"."""
    port, figures, _ = shot_gate
    stalled = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(_shot_head(len(SHOT_BODY)) + SHOT_BODY[:-1])
        stalled.append(s)
    try:
        time.sleep(3)
        answer = httpx.post(f"http://127.0.0.1:{port}/_showcase/shot", json={"file": "game.html"},
                            headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
        assert answer.status_code != 429, f"a complete shot.sh request was told busy: {answer.text[:200]}"
    finally:
        for s in stalled:
            s.close()


def test_shot_requests_add_up_when_callers_leave_mid_body(shot_gate):
    """Callers that leave while sending their body are counted (dropped): run-info.json's
    shot_requests always add up (asked = answered + busy + dropped)."""
    port, figures, _ = shot_gate
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(_shot_head(50) + b'{"fi')
        time.sleep(0.2)
        s.close()
    assert wait_until(lambda: figures.asked == 4, 10), figures
    assert wait_until(lambda: figures.asked == figures.answered + figures.busy + figures.dropped, 10), figures
