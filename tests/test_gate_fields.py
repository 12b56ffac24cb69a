"""What reaches the upstream of a hostile request, field by field, on each endpoint.

The gate forwards only what a coding agent needs (docs/gate.md, "What it forwards"): each request
below asks for everything an agent should not get (16 answers, provider-side tools, answers kept
or run at the provider, log probabilities, its own sampling, fields nobody knows) beside what it
needs. The scripted upstream (tests/gate_upstream.py) keeps what it received: the forwarded body
is asserted whole, and gate.log's `fields` says each change and removal with its reason.
"""

import json
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from gate_upstream import KEY, MODEL, MSG, rig, upstream  # noqa: E402,F401

from showcase.gate.log import MAX_FIELD_ENTRIES, GateLogLine

SAMPLED = {"temperature": 0.6, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True}}  # the rig's sampling file
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}}, "required": ["command"]}}}
SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {
    "command": {"type": "array", "items": {"type": "string"}}}, "required": ["command"]}}
PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
WEB = {"type": "web_search_preview"}
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}
MCP = {"type": "mcp", "server_label": "elsewhere", "server_url": "https://mcp.example.com/sse"}

ONE_ANSWER = "one answer per request: more would multiply the answer limit"
STORE = "nothing is kept at the provider"
SAMPLING = "sampling is the sampling file's"
LOGPROBS = "log probabilities only when the sampling file asks for them"
PROVIDER_TOOL = "a provider-side tool: the provider would run it, beyond the gate"
IDENTITY = "tags the request at the provider, under the operator's account"
TIER = "the provider's price tier is the operator's choice"
STATE = "refers to what the provider keeps of the operator's account"
UNKNOWN = "unknown field"
FILE = "the sampling file"


def post(r, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{r.base}/{path}", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=20)


def changed(line: GateLogLine) -> set[tuple]:
    return {(c.field, c.present, json.dumps(c.requested), json.dumps(c.enforced), c.why) for c in line.fields.changed}


def removed(line: GateLogLine) -> list[tuple]:
    return sorted((f.field, json.dumps(f.value, sort_keys=True), f.why) for f in line.fields.removed)


def change(field: str, requested, enforced, why: str, present: bool = True) -> tuple:
    return (field, present, json.dumps(requested), json.dumps(enforced), why)


def gone(field: str, value, why: str) -> tuple:
    return (field, json.dumps(value, sort_keys=True), why)


def test_chat_hostile_request(rig, upstream):
    r = rig()
    answer = post(r, "chat/completions", {
        "model": "gpt-4o", "messages": MSG, "n": 16, "logprobs": True, "top_logprobs": 20, "seed": 7,
        "temperature": 0, "reasoning_effort": "high", "tools": [BASH, WEB], "tool_choice": "auto",
        "parallel_tool_calls": True, "store": True, "user": "someone", "metadata": {"who": "agent"},
        "service_tier": "priority", "web_search_options": {"search_context_size": "high"}, "frobnicate": {"x": 1},
        "stream": True, "stream_options": {"include_usage": True, "include_obfuscation": True},
        "stop": ["\n\nUser:"], "response_format": {"type": "text"}, "max_tokens": 100,
    })
    assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
    assert upstream.last()["body"] == {
        "model": MODEL, "messages": MSG, "n": 1, "tools": [BASH], "tool_choice": "auto", "parallel_tool_calls": True,
        "store": False, "stream": True, "stream_options": {"include_usage": True}, "stop": ["\n\nUser:"],
        "response_format": {"type": "text"}, "max_tokens": 100, **SAMPLED,
    }
    [line] = r.lines(1)
    assert changed(line) == {
        change("n", 16, 1, ONE_ANSWER), change("store", True, False, STORE), change("model", "gpt-4o", MODEL, "the run's model"),
        change("temperature", 0, 0.6, FILE), change("top_k", None, 20, FILE, present=False),
        change("chat_template_kwargs.enable_thinking", None, True, FILE, present=False),
    }
    assert removed(line) == sorted([
        gone("logprobs", True, LOGPROBS), gone("top_logprobs", 20, LOGPROBS), gone("seed", 7, SAMPLING),
        gone("reasoning_effort", "high", SAMPLING), gone("tools", WEB, PROVIDER_TOOL), gone("user", "someone", IDENTITY),
        gone("metadata", {"who": "agent"}, IDENTITY), gone("service_tier", "priority", TIER),
        gone("web_search_options", {"search_context_size": "high"}, PROVIDER_TOOL), gone("frobnicate", {"x": 1}, UNKNOWN),
        gone("stream_options.include_obfuscation", True, UNKNOWN),
    ])
    assert line.fields.not_listed == 0 and line.status == 200 and not line.shortened


def test_completions_hostile_request(rig, upstream):
    r = rig()
    answer = post(r, "completions", {
        "model": "x", "prompt": "def f(", "suffix": "\n", "n": 8, "best_of": 8, "logprobs": 5, "echo": True,
        "temperature": 1.5, "frequency_penalty": 2, "user": "someone", "stop": ["\n\n"], "max_tokens": 99999,
        "unknown_knob": 1,
    })
    assert answer.json()["choices"][0]["text"] == " world"
    assert upstream.last()["body"] == {
        "model": MODEL, "prompt": "def f(", "suffix": "\n", "n": 1, "best_of": 1, "stop": ["\n\n"], "max_tokens": 4096,
        **SAMPLED,
    }
    [line] = r.lines(1)
    assert changed(line) == {
        change("n", 8, 1, ONE_ANSWER), change("best_of", 8, 1, ONE_ANSWER), change("model", "x", MODEL, "the run's model"),
        change("temperature", 1.5, 0.6, FILE), change("top_k", None, 20, FILE, present=False),
        change("chat_template_kwargs.enable_thinking", None, True, FILE, present=False),
        change("max_tokens", 99999, 4096, "the run's answer limit"),
    }
    assert removed(line) == sorted([
        gone("logprobs", 5, LOGPROBS), gone("echo", True, "billed output a coding agent does not need"),
        gone("frequency_penalty", 2, SAMPLING), gone("user", "someone", IDENTITY), gone("unknown_knob", 1, UNKNOWN),
    ])
    assert line.shortened and "99999 capped at 4096" in line.shortened_why


CODEX_INPUT = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build a voxel world"}]}]


def hostile_responses_request() -> dict:
    return {
        "model": "gpt-5", "instructions": "You are a coding agent.", "input": CODEX_INPUT,
        "tools": [SHELL, WEB, CODE, PATCH, MCP], "tool_choice": "auto", "parallel_tool_calls": True,
        "background": True, "store": True, "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content", "code_interpreter_call.outputs", "message.output_text.logprobs"],
        "top_logprobs": 20, "previous_response_id": "resp_of_someone_else", "metadata": {"who": "agent"},
        "user": "someone", "safety_identifier": "someone", "service_tier": "priority", "prompt_cache_key": "k1",
        "text": {"format": {"type": "text"}, "verbosity": "high"}, "truncation": "auto", "temperature": 2,
        "top_p": 0.1, "max_tool_calls": 50, "stream": True, "secret_knob": {"a": 1},
    }


def test_responses_hostile_request(rig, upstream):
    r = rig()
    answer = post(r, "responses", hostile_responses_request())
    assert answer.status_code == 200 and "event: response.completed" in answer.text
    assert upstream.last()["body"] == {
        "model": MODEL, "instructions": "You are a coding agent.", "input": CODEX_INPUT, "tools": [SHELL, PATCH],
        "tool_choice": "auto", "parallel_tool_calls": True, "store": False, "include": ["reasoning.encrypted_content"],
        "text": {"format": {"type": "text"}}, "truncation": "auto", "stream": True, "max_output_tokens": 4096, **SAMPLED,
    }
    [line] = r.lines(1)
    assert changed(line) == {
        change("store", True, False, STORE), change("model", "gpt-5", MODEL, "the run's model"),
        change("temperature", 2, 0.6, FILE), change("top_k", None, 20, FILE, present=False),
        change("chat_template_kwargs.enable_thinking", None, True, FILE, present=False),
        change("max_output_tokens", None, 4096, "the run's answer limit", present=False),
    }
    assert removed(line) == sorted([
        gone("tools", WEB, PROVIDER_TOOL), gone("tools", CODE, PROVIDER_TOOL), gone("tools", MCP, PROVIDER_TOOL),
        gone("background", True, "would run the answer at the provider, beyond the gate's bounds"),
        gone("reasoning", {"effort": "high", "summary": "auto"}, "reasoning is the sampling file's, and it sets none"),
        gone("include", "code_interpreter_call.outputs", "asks the provider for more than the answer"),
        gone("include", "message.output_text.logprobs", LOGPROBS), gone("top_logprobs", 20, LOGPROBS),
        gone("previous_response_id", "resp_of_someone_else", STATE), gone("metadata", {"who": "agent"}, IDENTITY),
        gone("user", "someone", IDENTITY), gone("safety_identifier", "someone", IDENTITY),
        gone("service_tier", "priority", TIER), gone("prompt_cache_key", "k1", STATE),
        gone("text.verbosity", "high", SAMPLING), gone("top_p", 0.1, SAMPLING),
        gone("max_tool_calls", 50, PROVIDER_TOOL), gone("secret_knob", {"a": 1}, UNKNOWN),
    ])


def test_responses_reasoning_and_logprobs_when_the_sampling_file_sets_them(rig, upstream):
    r = rig(settings={"sampling": {"temperature": 0.2, "reasoning": {"effort": "low"}, "top_logprobs": 3}})
    post(r, "responses", hostile_responses_request())
    sent = upstream.last()["body"]
    # The file's effort with the agent's own summary request; logprobs because the file asks for them.
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"} and sent["top_logprobs"] == 3
    assert sent["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert sent["temperature"] == 0.2 and "top_p" not in sent and "top_k" not in sent
    [line] = r.lines(1)
    assert {change("reasoning.effort", "high", "low", FILE), change("top_logprobs", 20, 3, FILE),
            change("temperature", 2, 0.2, FILE)} <= changed(line)
    assert not any(f.field.startswith(("reasoning", "top_logprobs")) for f in line.fields.removed)


def test_only_provider_tools_leaves_no_tools_at_all(rig, upstream):
    r = rig()
    post(r, "responses", {"model": "x", "input": "hi", "tools": [WEB], "tool_choice": {"type": "web_search_preview"},
                          "parallel_tool_calls": False})
    assert upstream.last()["body"] == {"model": MODEL, "input": "hi", "store": False, "max_output_tokens": 4096, **SAMPLED}
    post(r, "chat/completions", {"model": "x", "messages": MSG, "tools": [{"type": "retrieval"}], "tool_choice": "required"})
    assert upstream.last()["body"] == {"model": MODEL, "messages": MSG, "max_tokens": 4096, **SAMPLED}
    first, second = r.lines(2)
    assert removed(first) == sorted([
        gone("tools", WEB, PROVIDER_TOOL), gone("tool_choice", {"type": "web_search_preview"}, PROVIDER_TOOL),
        gone("parallel_tool_calls", False, "no tool is left")])
    assert removed(second) == sorted([
        gone("tools", {"type": "retrieval"}, "not a tool type the agent runs itself"),
        gone("tool_choice", "required", "no tool is left")])


def test_models_requests_carry_no_body_and_no_query(rig, upstream):
    r = rig()
    answer = httpx.request("GET", f"{r.base}/models?limit=5", content=b'{"delete": "everything"}',
                           headers={"authorization": f"Bearer {KEY}"}, timeout=20)
    assert answer.json()["data"][0]["id"] == MODEL
    assert (upstream.last()["size"], upstream.last()["query"]) == (0, "")
    [line] = r.lines(1)
    assert [(f.field, f.value, f.value_bytes, f.why) for f in line.fields.removed] == [
        ("body", None, 24, "a models request has no body"),
        ("query string", "limit=5", None, "the gate forwards no query string")]


def test_what_a_line_says_of_fields_is_bounded(rig, upstream):
    r = rig()
    body = {"model": "x", "messages": MSG, "huge": "y" * 5000, **{f"knob{n:03d}": n for n in range(150)}}
    post(r, "chat/completions", body)
    assert set(upstream.last()["body"]) == {"model", "messages", "max_tokens", *SAMPLED}
    [line] = r.lines(1)
    assert len(line.fields.changed) + len(line.fields.removed) == MAX_FIELD_ENTRIES
    assert line.fields.not_listed == 5 + 151 - MAX_FIELD_ENTRIES  # 5 changes (model, the file's 3, max_tokens), 151 removed
    huge = line.fields.removed[0]
    assert (huge.field, huge.value, huge.value_bytes, huge.why) == ("huge", None, 5002, UNKNOWN)
    written = (r.log_dir / "gate.log").read_bytes()
    assert len(written) < 20_000 and b"yyyy" not in written
