"""The gate's Responses path, as Codex CLI uses it, with the same tests as the chat path.

Codex CLI speaks only the Responses API: every turn is a streamed POST /v1/responses carrying
`instructions`, `developer` and `user` input items, its tools, `parallel_tool_calls`,
`reasoning`, `include: ["reasoning.encrypted_content"]` and `store: false`, and it reads the
reasoning item, the function calls and the usage of `response.completed`. Clients: the openai
SDK (sync and async), curl (TCP and the Unix socket) and httpx; the upstream is the scripted one.
"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gate_upstream import FINISH, KEY, MODEL, UpstreamTimeouts, rig, scripted, upstream  # noqa: E402,F401

from showcase.gate.log import read_log

SHELL = {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.",
         "strict": False, "parameters": {"type": "object", "additionalProperties": False, "required": ["command"],
                                         "properties": {"command": {"type": "array", "items": {"type": "string"}},
                                                        "workdir": {"type": "string"}}}}
DEVELOPER = {"type": "message", "role": "developer",
             "content": [{"type": "input_text", "text": "<permissions instructions>sandbox: none</permissions instructions>"}]}
CONTEXT = {"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": "<environment_context><cwd>/work</cwd></environment_context>"}]}
TASK = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build a voxel world"}]}


def codex_request(*more_input: dict, stream: bool = True, script: str = "codex") -> dict:
    """A turn as Codex CLI sends it (its fields, its item shapes); the upstream answers with `script`."""
    return {
        "model": "gpt-5-codex", "instructions": scripted("You are a coding agent running in a terminal.", script),
        "input": [DEVELOPER, CONTEXT, TASK, *more_input], "tools": [SHELL], "tool_choice": "auto",
        "parallel_tool_calls": True, "reasoning": {"effort": "medium", "summary": "auto"}, "store": False,
        "stream": stream, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199a2b4-run",
        "text": {"verbosity": "medium"},
    }


def post(base: str, body: dict, key: str = KEY) -> httpx.Response:
    return httpx.post(f"{base}/responses", json=body, headers={"authorization": f"Bearer {key}"},
                      timeout=20)


def test_codex_turn_rewritten_and_everything_else_kept(rig, upstream):
    r = rig()
    stream = r.sdk().responses.create(**codex_request())
    events = list(stream)
    asked = codex_request()
    # Kept as Codex sent them: what a coding agent needs. Forced: the model, the sampling, the
    # answer limit. Removed: its reasoning (the sampling file sets none), its text verbosity
    # (sampling) and its cache key (provider-side state); nothing added that Responses lacks.
    assert upstream.last()["body"] == {
        **{name: asked[name] for name in ("instructions", "input", "tools", "tool_choice", "parallel_tool_calls",
                                          "store", "stream", "include")},
        "model": MODEL, "temperature": 0.6, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True},
        "max_output_tokens": 4096,
    }
    # What Codex reads back: the reasoning item (with its encrypted content), both calls, the usage.
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert done[0].type == "reasoning" and done[0].encrypted_content == "opaque-blob"
    assert [(c.type, c.call_id, json.loads(c.arguments)["command"][-1]) for c in done[1:]] == [
        ("function_call", "call_1", "ls"), ("function_call", "call_2", "cat game.html")]
    final = events[-1]
    assert final.type == "response.completed" and final.response.usage.input_tokens_details.cached_tokens == 512
    assert [e.sequence_number for e in events] == list(range(len(events)))
    [line] = r.lines(1)
    assert (line.api, line.stream, line.status) == ("responses", True, 200)
    assert (line.prompt_tokens, line.answer_tokens, line.finish_reason) == (900, 40, "completed")
    assert line.fields.change("model").requested == "gpt-5-codex" and not line.fields.change("max_output_tokens").present
    assert sorted((f.field, f.value, f.why) for f in line.fields.removed) == [
        ("prompt_cache_key", "0199a2b4-run", "refers to what the provider keeps of the operator's account"),
        ("reasoning", {"effort": "medium", "summary": "auto"}, "reasoning is the sampling file's, and it sets none"),
        ("text.verbosity", "medium", "sampling is the sampling file's")]
    assert b'"usage"' in (r.log_dir / f"bodies/{line.id}.response.sse").read_bytes()


def test_codex_turn_not_streamed(rig, upstream):
    r = rig()
    answer = r.sdk().responses.create(**codex_request(stream=False))
    assert [item.type for item in answer.output] == ["reasoning", "function_call", "function_call"]
    assert answer.usage.output_tokens_details.reasoning_tokens == 16 and answer.store is False
    assert upstream.last()["body"]["store"] is False
    [line] = r.lines(1)
    assert not line.stream and (line.prompt_tokens, line.answer_tokens, line.finish_reason) == (900, 40, "completed")


def test_stream_passes_byte_for_byte_as_the_upstream_sent_it(rig, upstream):
    """curl, TCP to the upstream directly and the Unix socket through the gate: the same bytes."""
    r = rig()
    common = ["-sN", "-H", "Content-Type: application/json", "-d"]
    gated = subprocess.run(["curl", *common, json.dumps(codex_request()), "-H", f"Authorization: Bearer {KEY}",
                            "--unix-socket", str(r.server.socket_path), "http://gate/v1/responses"],
                           capture_output=True, timeout=20)
    forwarded = json.dumps(upstream.last()["body"])  # the same request, as the gate forwarded it
    direct = subprocess.run(["curl", *common, forwarded, f"{upstream.url}/responses"], capture_output=True, timeout=20)
    assert gated.stdout == direct.stdout and gated.stdout.count(b"event: response.output_item.done") == 3
    assert upstream.received[-1]["body"] == upstream.received[-2]["body"]  # the gate sent what it was told to


def test_answer_limit_capped_and_counted(rig, upstream):
    r = rig()
    post(r.base, {**codex_request(), "max_output_tokens": 100000})
    assert upstream.last()["body"]["max_output_tokens"] == 4096
    post(r.base, {**codex_request(), "max_output_tokens": 500})
    assert upstream.last()["body"]["max_output_tokens"] == 500
    first, second = r.lines(2)
    assert first.shortened and "max_output_tokens 100000 capped at 4096" in first.shortened_why
    assert not second.shortened and r.stats(2).shortened == 1


def test_finish_now_in_codex_input_items(rig, upstream):
    r = rig()
    r.clock.now += 5401
    call = {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"command": ["ls"]}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "game.html"}
    post(r.base, codex_request(call, output))
    assert upstream.last()["body"]["input"][-1] == {"type": "message", "role": "user", "content": FINISH}
    assert upstream.last()["body"]["input"][:-1] == codex_request(call, output)["input"]
    post(r.base, codex_request())  # ends with the user's own item: the text joins it
    sent = upstream.last()["body"]["input"]
    assert len(sent) == 3 and sent[-1]["content"] == [*TASK["content"], {"type": "input_text", "text": FINISH}]
    assert sent[0] == DEVELOPER
    lines = r.lines(2)
    assert all(l.injected for l in lines) and r.stats(2).finish_now_count == 2


def test_refusals_on_the_responses_path_never_reach_upstream(rig, upstream):
    r = rig()
    before = len(upstream.received)
    with pytest.raises(openai.AuthenticationError):
        r.sdk(key="wrong").responses.create(**codex_request())
    bad = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "--unix-socket", str(r.server.socket_path),
                          "-H", f"Authorization: Bearer {KEY}", "http://gate/v1/responses", "-d", "[1, 2]"],
                         capture_output=True, text=True, timeout=20)
    body, code = bad.stdout.rsplit("\n", 1)
    assert code == "400" and json.loads(body)["error"]["code"] == "invalid_body"
    assert httpx.get(f"{r.base}/responses", headers={"authorization": f"Bearer {KEY}"}).status_code == 405
    with pytest.raises(openai.NotFoundError, match="not served"):
        r.sdk().responses.retrieve("resp_1")
    r.clock.now += 7200
    with pytest.raises(openai.PermissionDeniedError, match="hard stop"):
        r.sdk().responses.create(**codex_request())
    assert len(upstream.received) == before
    lines = r.lines(5)
    assert [l.blocked_why for l in lines] == ["wrong or missing key", "body not a JSON object", "method not allowed",
                                              "path not served", "hard stop"]


def test_upstream_errors_on_the_responses_path(rig):
    r = rig()
    with pytest.raises(openai.InternalServerError, match="model crashed"):
        r.sdk().responses.create(**codex_request(script="error500"))
    with pytest.raises(openai.APIStatusError) as caught:
        r.sdk().responses.create(**codex_request(script="html502"))
    assert caught.value.status_code == 502 and "Bad Gateway" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        r.sdk().responses.create(**codex_request(script="error400"))
    assert caught.value.code == "context_length_exceeded"
    assert [l.status for l in r.lines(3)] == [500, 502, 400] and r.stats(3).errors == 3


def test_reset_stall_and_client_gone_mid_stream(rig):
    r = rig()
    sdk = r.sdk()
    events = list(sdk.responses.create(**codex_request(script="reset")))
    assert events[-1].type == "error" and events[-1].code == "upstream_reset"
    events = list(sdk.responses.create(**codex_request(script="stall")))
    assert events[-1].type == "error" and events[-1].code == "upstream_stall" and "stalled" in events[-1].message
    assert [e.type for e in events[:-1]] == ["response.created", "response.output_text.delta"]  # whole events first
    with httpx.stream("POST", f"{r.base}/responses", json=codex_request(script="hold"), timeout=10,
                      headers={"authorization": f"Bearer {KEY}"}) as response:
        next(response.iter_bytes())
    assert sdk.responses.create(**codex_request()).__class__  # the gate lives on
    lines = r.lines(4)
    assert ["reset" in lines[0].error, "stalled" in lines[1].error] == [True, True]
    assert lines[2].client_gone and lines[2].error is None and lines[3].error is None


def test_large_codex_history_through_the_unix_socket(rig, upstream, tmp_path):
    r = rig()
    history = [{"type": "function_call_output", "call_id": f"call_{n}", "output": "y" * 100_000} for n in range(30)]
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(codex_request(*history)))
    out = subprocess.run(["curl", "-sN", "--unix-socket", str(r.server.socket_path), "-H", f"Authorization: Bearer {KEY}",
                          "-H", "Content-Type: application/json", "--data-binary", f"@{path}",
                          "http://gate/v1/responses"], capture_output=True, timeout=60)
    assert out.stdout.rstrip().endswith(b"}") and b"event: response.completed" in out.stdout
    assert upstream.last()["body"]["input"][3:] == history
    [line] = r.lines(1)
    assert line.bytes_in == path.stat().st_size and line.prompt_tokens == 900


async def test_concurrent_codex_turns_each_get_one_line(rig):
    r = rig(settings={"upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30)})
    client = openai.AsyncOpenAI(base_url=r.base, api_key=KEY, max_retries=0, timeout=60)

    async def one(n: int) -> str:
        script = ("codex", "codex", "error500", "reset")[n % 4]
        try:
            events = [e async for e in await client.responses.create(**codex_request(script=script))]
        except openai.APIError:
            return "refused"
        return "ok" if events[-1].type == "response.completed" else "error event"

    results = await asyncio.gather(*(one(n) for n in range(16)))
    await client.close()
    assert sorted(results) == ["error event"] * 4 + ["ok"] * 8 + ["refused"] * 4
    assert await asyncio.to_thread(r.gate.flush_records)
    lines = read_log(r.log_dir / "gate.log")
    assert len(lines) == 16 and len({l.id for l in lines}) == 16
    stats = r.stats(16)
    assert (stats.requests, stats.errors, stats.prompt_tokens) == (16, 8, 8 * 900)
