"""The gate on the wire: real openai SDK and curl clients, a scripted upstream, real uvicorn.

What the upstream actually received is the proof of rewriting; gate.log and gate-stats.json are
read back through their pydantic models.
"""

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).parent))
from gate_upstream import FINISH, KEY, MODEL, MSG, Rig, ScriptedUpstream, rig, said, scripted, upstream  # noqa: E402,F401

from showcase.gate.app import create_gate
from showcase.gate.config import GateConfig, GateLimits, UpstreamTimeouts
from showcase.gate.log import read_log
from showcase.gate.probe import probe_upstream
from showcase.gate.server import AppServer

def test_chat_non_stream_rewrites_and_records(rig, upstream):
    r = rig()
    answer = r.sdk().chat.completions.create(model="gpt-4o", messages=MSG, temperature=0)
    assert answer.choices[0].message.content == "hello"
    sent = upstream.last()["body"]
    assert sent["model"] == MODEL and sent["temperature"] == 0.6 and sent["top_k"] == 20
    assert sent["chat_template_kwargs"] == {"enable_thinking": True} and sent["max_tokens"] == 4096
    assert sent["messages"] == MSG  # no finish-now before its time
    assert "authorization" not in upstream.last()["headers"]  # the run's key never leaves the gate
    [line] = r.lines(1)
    assert (line.kind, line.api, line.status, line.stream) == ("api", "chat", 200, False)
    changed = {c.field: c for c in line.fields.changed}
    assert changed["model"].requested == "gpt-4o" and changed["model"].enforced == MODEL
    assert changed["model"].why == "the run's model"
    assert changed["temperature"].requested == 0 and changed["temperature"].enforced == 0.6
    assert changed["temperature"].why == "the sampling file"
    assert not changed["max_tokens"].present and changed["max_tokens"].enforced == 4096
    assert line.fields.removed == []
    assert (line.prompt_tokens, line.answer_tokens, line.finish_reason) == (11, 7, "stop")
    assert not (line.injected or line.blocked or line.shortened) and line.error is None
    request_body = json.loads((r.log_dir / line.bodies[0]).read_text())
    assert request_body["model"] == "gpt-4o"
    assert json.loads((r.log_dir / f"bodies/{line.id}.upstream.json").read_text()) == sent
    assert json.loads((r.log_dir / f"bodies/{line.id}.response.json").read_text())["usage"]["prompt_tokens"] == 11
    stats = r.stats(1)
    assert (stats.requests, stats.errors, stats.prompt_tokens, stats.answer_tokens) == (1, 0, 11, 7)
    assert r.gate.last_request_id == line.id == stats.last_request_id


def test_chat_stream_usage_exact_and_hidden_from_client(rig, upstream):
    r = rig()
    chunks = list(r.sdk().chat.completions.create(model="x", messages=MSG, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"
    assert all(c.usage is None and c.choices for c in chunks)  # the usage chunk it did not ask for is hidden
    assert upstream.last()["body"]["stream_options"] == {"include_usage": True}
    [line] = r.lines(1)
    assert line.stream and (line.prompt_tokens, line.answer_tokens, line.finish_reason) == (11, 7, "stop")
    assert b'"usage"' in (r.log_dir / f"bodies/{line.id}.response.sse").read_bytes()  # kept in the record
    # A client that asks gets it.
    chunks = list(r.sdk().chat.completions.create(model="x", messages=MSG, stream=True,
                                                   stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == 7


def test_tool_calls_and_reasoning_pass_through(rig):
    r = rig()
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
    answer = r.sdk().chat.completions.create(model="x", messages=said("tool"), tools=tools)
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "bash" and json.loads(call.function.arguments) == {"command": "ls -la"}
    stream = r.sdk().chat.completions.create(model="x", messages=said("tool"), tools=tools, stream=True)
    chunks = list(stream)
    args = "".join(tc.function.arguments or "" for c in chunks for tc in (c.choices[0].delta.tool_calls or []))
    assert json.loads(args) == {"command": "ls"}
    assert any(getattr(c.choices[0].delta, "reasoning_content", None) == "hmm" for c in chunks)
    lines = r.lines(2)
    assert [l.finish_reason for l in lines] == ["tool_calls", "tool_calls"]


def test_answer_limit_caps_and_counts_shortened(rig, upstream):
    r = rig()
    r.sdk().chat.completions.create(model="x", messages=MSG, max_tokens=100000)
    assert upstream.last()["body"]["max_tokens"] == 4096
    r.sdk().chat.completions.create(model="x", messages=MSG, max_completion_tokens=100)
    assert upstream.last()["body"]["max_completion_tokens"] == 100 and "max_tokens" not in upstream.last()["body"]
    first, second = r.lines(2)
    assert first.shortened and "100000 capped at 4096" in first.shortened_why and not second.shortened
    assert r.stats(2).shortened == 1


def test_finish_now_from_its_time_on(rig, upstream):
    r = rig()
    r.clock.now += 5399
    r.sdk().chat.completions.create(model="x", messages=MSG)
    assert upstream.last()["body"]["messages"] == MSG
    r.clock.now += 2
    r.sdk().chat.completions.create(model="x", messages=MSG)
    # The conversation ends with a user turn: the text joins it (templates demand alternation).
    assert upstream.last()["body"]["messages"] == [{"role": "user", "content": f"{MSG[0]['content']}\n\n{FINISH}"}]
    after_tool = [*MSG, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    r.sdk().chat.completions.create(model="x", messages=after_tool)
    assert upstream.last()["body"]["messages"] == [*after_tool, {"role": "user", "content": FINISH}]
    r.clock.now += 60
    r.sdk().responses.create(model="x", input="go on")
    assert upstream.last()["body"]["input"] == f"go on\n\n{FINISH}"
    lines = r.lines(4)
    assert [l.injected for l in lines] == [False, True, True, True]
    stats = r.stats(4)
    assert stats.finish_now_count == 3 and stats.finish_now_first_s == pytest.approx(5401)
    assert stats.finish_now_first_at == lines[1].time
    roles = [m["role"] for m in upstream.received[-3]["body"]["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:]))  # no two turns of one role in a row


def test_responses_api_stream_and_not(rig, upstream):
    r = rig()
    answer = r.sdk().responses.create(model="x", input="hi", max_output_tokens=999999)
    assert answer.output_text == "hello"
    sent = upstream.last()["body"]
    assert sent["max_output_tokens"] == 4096 and sent["model"] == MODEL and sent["temperature"] == 0.6
    events = list(r.sdk().responses.create(model="x", input="hi", stream=True))
    assert [e.type for e in events][-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "hello"
    first, second = r.lines(2)
    assert first.shortened and (first.prompt_tokens, first.answer_tokens, first.finish_reason) == (13, 5, "completed")
    assert second.stream and (second.prompt_tokens, second.answer_tokens) == (13, 5)


def test_completions_models_and_other_paths(rig, upstream):
    r = rig()
    sdk = r.sdk()
    assert sdk.completions.create(model="x", prompt="hello").choices[0].text == " world"
    assert upstream.last()["body"]["max_tokens"] == 4096
    text = "".join(c.choices[0].text for c in sdk.completions.create(model="x", prompt="hello", stream=True) if c.choices)
    assert text == " world"
    assert [m.id for m in sdk.models.list()] == [MODEL]
    assert sdk.models.retrieve(MODEL).id == MODEL
    lines = r.lines(4)
    assert [l.api for l in lines] == ["completions", "completions", "models", "models"]
    assert lines[1].answer_tokens == 7 and lines[1].finish_reason == "length"


def test_upstream_base_without_v1(rig, upstream):
    r = rig(settings={"upstream": upstream.url.removesuffix("/v1")})
    response = httpx.get(f"{r.base}/models", headers={"authorization": f"Bearer {KEY}"})
    assert response.json()["data"][0]["id"] == MODEL
    assert (upstream.last()["path"], upstream.last()["query"]) == ("/v1/models", "")


def test_api_v1_models_answered_from_upstream_other_api_paths_refused(rig, upstream):
    r = rig()
    root = r.base.removesuffix("/v1")
    auth = {"authorization": f"Bearer {KEY}"}
    response = httpx.get(f"{root}/api/v1/models", headers=auth)
    assert response.status_code == 200 and response.json()["data"][0]["id"] == MODEL
    assert upstream.last()["path"] == "/v1/models"
    before = len(upstream.received)
    for method, path in (("POST", "/api/v1/models"), ("GET", "/api/v1/chat/completions"), ("GET", "/api/v2/models")):
        refused = httpx.request(method, f"{root}{path}", headers=auth)
        assert refused.status_code == 404 and "outside the API" in refused.json()["error"]["message"], path
    assert len(upstream.received) == before
    lines = r.lines(4)
    assert [(l.path, l.api, l.blocked) for l in lines] == [
        ("/api/v1/models", "models", False), ("/api/v1/models", None, True),
        ("/api/v1/chat/completions", None, True), ("/api/v2/models", None, True)]


def test_refusals_are_blocked_in_api_format_and_never_reach_upstream(rig, upstream):
    r = rig()
    before = len(upstream.received)
    with pytest.raises(openai.AuthenticationError):
        r.sdk(key="wrong").chat.completions.create(model="x", messages=MSG)
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "--unix-socket", str(r.server.socket_path),
                          "http://gate/v1/chat/completions", "-d", "{}"], capture_output=True, text=True, timeout=20)
    body, code = out.stdout.rsplit("\n", 1)
    assert code == "401" and json.loads(body)["error"]["code"] == "invalid_api_key"
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {KEY}",
                          f"http://127.0.0.1:{r.server.tcp_port}/admin/secrets"], capture_output=True, text=True, timeout=20)
    body, code = out.stdout.rsplit("\n", 1)
    assert code == "404" and "outside the API" in json.loads(body)["error"]["message"]
    r.clock.now += 7200
    with pytest.raises(openai.PermissionDeniedError, match="hard stop"):
        r.sdk().chat.completions.create(model="x", messages=MSG)
    assert len(upstream.received) == before
    lines = r.lines(4)
    assert all(l.blocked for l in lines)
    assert [l.blocked_why for l in lines] == ["wrong or missing key", "wrong or missing key", "path outside the API", "hard stop"]
    stats = r.stats(4)
    assert (stats.requests, stats.blocked, stats.errors, stats.hard_stopped) == (4, 4, 0, True)


def test_hard_stop_called_by_the_run(rig):
    r = rig()
    r.sdk().models.list()
    r.gate.hard_stop()
    with pytest.raises(openai.PermissionDeniedError):
        r.sdk().models.list()
    assert r.lines(2)[1].blocked_why == "hard stop"


def test_upstream_errors_answered_in_api_format(rig):
    """5xx, a non-JSON 502 from a proxy, and a 4xx: each reaches the client as an API error."""
    r = rig()
    with pytest.raises(openai.InternalServerError, match="model crashed"):
        r.sdk().chat.completions.create(model="x", messages=said("error500"))
    with pytest.raises(openai.APIStatusError) as caught:
        r.sdk().chat.completions.create(model="x", messages=said("html502"))
    assert caught.value.status_code == 502 and "Bad Gateway" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        r.sdk().chat.completions.create(model="x", messages=said("error400"))
    assert caught.value.code == "context_length_exceeded"  # the upstream's own error, untouched
    lines = r.lines(3)
    assert [l.status for l in lines] == [500, 502, 400] and all(l.error for l in lines)
    assert r.stats(3).errors == 3


def test_reset_and_stall_mid_stream_told_to_client_and_gate_lives_on(rig):
    r = rig()
    sdk = r.sdk()
    with pytest.raises(openai.APIError, match="reset mid-stream"):
        for _ in sdk.chat.completions.create(model="x", messages=said("reset"), stream=True):
            pass
    with pytest.raises(openai.APIError, match="stalled"):
        for _ in sdk.chat.completions.create(model="x", messages=said("stall"), stream=True):
            pass
    events = list(sdk.responses.create(model="x", input=scripted("hi", "reset"), stream=True))
    assert events[-1].type == "error" and "reset" in events[-1].message
    assert sdk.chat.completions.create(model="x", messages=MSG).choices[0].message.content == "hello"
    lines = r.lines(4)
    assert ["reset" in (lines[0].error or ""), "stalled" in (lines[1].error or ""), bool(lines[2].error), lines[3].error] == [True, True, True, None]
    assert r.stats(4).errors == 3


def test_upstream_slow_headers_and_refused(rig, upstream):
    r = rig()
    with pytest.raises(openai.APIStatusError) as caught:
        r.sdk().chat.completions.create(model="x", messages=said("slow"))
    assert caught.value.status_code == 504
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]  # closed again before the gate dials it
    dead = rig(settings={"upstream": f"http://127.0.0.1:{dead_port}/v1"})
    with pytest.raises(openai.APIStatusError) as caught:
        dead.sdk().chat.completions.create(model="x", messages=MSG)
    assert caught.value.status_code == 502 and "refused" in caught.value.message
    assert dead.lines(1)[0].error.startswith("upstream refused")


def test_large_body_through_unix_socket_with_curl(rig, upstream, tmp_path):
    r = rig()
    big = {"model": "x", "messages": [{"role": "user", "content": "y" * 3_000_000}]}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    out = subprocess.run(["curl", "-s", "--unix-socket", str(r.server.socket_path), "-H", f"Authorization: Bearer {KEY}",
                          "-H", "Content-Type: application/json", "--data-binary", f"@{path}",
                          "http://gate/v1/chat/completions"], capture_output=True, text=True, timeout=30)
    assert json.loads(out.stdout)["choices"][0]["message"]["content"] == "hello"
    assert len(upstream.last()["body"]["messages"][0]["content"]) == 3_000_000
    [line] = r.lines(1)
    assert line.bytes_in == path.stat().st_size
    mode = stat.S_IMODE(os.stat(r.server.socket_path).st_mode)
    assert mode == 0o666  # a non-root user in the sandbox can connect


def test_extra_route_needs_key_and_is_logged_as_tool(tmp_path, rig):
    async def shot(request: Request):
        return JSONResponse({"shot": (await request.json())["file"]})

    r = rig(extra_routes=[Route("/_showcase/shot", shot, methods=["POST"])])
    url = f"http://127.0.0.1:{r.server.tcp_port}/_showcase/shot"
    assert httpx.post(url, json={"file": "game.html"}).status_code == 401
    ok = httpx.post(url, json={"file": "game.html"}, headers={"authorization": f"Bearer {KEY}"})
    assert ok.json() == {"shot": "game.html"}
    lines = r.lines(2)
    assert [(l.kind, l.status, l.blocked) for l in lines] == [("tool", 401, True), ("tool", 200, False)]
    assert r.stats(2).tool_requests == 2 and r.gate.last_request_id is None
    r.gate.hard_stop(refuse_tools=False)  # the run may still want a last screenshot
    assert httpx.post(url, json={"file": "x"}, headers={"authorization": f"Bearer {KEY}"}).status_code == 200
    r.gate.hard_stop()
    assert httpx.post(url, json={"file": "x"}, headers={"authorization": f"Bearer {KEY}"}).status_code == 403


def test_client_gone_mid_stream_still_recorded(rig):
    r = rig()
    with httpx.stream("POST", f"{r.base}/chat/completions", json={"model": "x", "messages": said("stall"), "stream": True},
                      headers={"authorization": f"Bearer {KEY}"}, timeout=10) as response:
        next(response.iter_bytes())  # take the first event, then hang up during the stall
    [line] = r.lines(1)
    assert line.stream and line.client_gone and line.error is None
    assert line.not_completed and line.not_completed_why == "the client left before the answer ended"
    assert r.stats(1).not_completed == 1


def test_a_client_gone_before_its_answer_ends_the_wait(rig, upstream):
    """The upstream takes 4 s to answer; the client gives up after half a second: the gate stops
    waiting then (the upstream's work is dropped with its connection) and counts it as never completed."""
    r = rig()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{r.base}/chat/completions", json={"model": "x", "messages": said("slow")}, timeout=0.5,
                   headers={"authorization": f"Bearer {KEY}"})
    [line] = r.lines(1)
    assert line.client_gone and line.not_completed and line.error is None and not line.shortened
    assert line.latency_ms < 3000  # not the upstream's 4 s
    stats = r.stats(1)
    assert (stats.requests, stats.not_completed, stats.errors) == (1, 1, 0)


def test_refuses_a_log_folder_that_holds_a_run(upstream, tmp_path):
    (tmp_path / "gate.log").write_text('{"id": "000001"}\n')
    with pytest.raises(Exception, match="already holds a gate log"):
        create_gate(GateConfig(upstream=upstream.url, model=MODEL, log_dir=tmp_path))


async def test_probe_upstream(upstream):
    assert await probe_upstream(upstream.url, MODEL, None, timeout_s=5) is None
    reason = await probe_upstream(upstream.url, "no-such-model", None, timeout_s=5)
    assert "no model 'no-such-model'" in reason and MODEL in reason
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    assert "refused" in await probe_upstream(f"http://127.0.0.1:{dead_port}/v1", MODEL, None, timeout_s=5)


def test_cli_serves_until_terminated(upstream, tmp_path):
    finish = tmp_path / "finish.txt"
    finish.write_text(FINISH)
    sampling = tmp_path / "sampling.json"
    sampling.write_text(json.dumps({"temperature": 0.3}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "showcase.cli", "gate", "--upstream", upstream.url, "--model", MODEL,
         "--listen", "tcp:127.0.0.1:0", "--listen", f"unix:{tmp_path}/g.sock", "--sampling-file", str(sampling),
         "--answer-limit", "64", "--finish-now-after", "0", "--finish-now-text", str(finish),
         "--log-dir", str(tmp_path / "log"), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        where = json.loads(proc.stdout.readline())
        out = subprocess.run(["curl", "-s", "--unix-socket", where["socket_path"], "http://gate/v1/chat/completions",
                              "-H", "Content-Type: application/json", "-d", json.dumps({"messages": MSG})],
                             capture_output=True, text=True, timeout=20)
        assert json.loads(out.stdout)["choices"][0]["message"]["content"] == "hello"
        sent = upstream.last()["body"]
        assert (sent["temperature"], sent["max_tokens"]) == (0.3, 64)
        assert sent["messages"] == [{"role": "user", "content": f"{MSG[0]['content']}\n\n{FINISH}"}]
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode == 0, proc.stderr.read()
    [line] = read_log(tmp_path / "log" / "gate.log")
    assert line.injected and line.status == 200


def test_cli_help_shows_the_answer_bound():
    out = subprocess.run([sys.executable, "-m", "showcase.cli", "gate", "--help"], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0
    [row] = [row for row in out.stdout.splitlines() if "--answer-timeout" in row]
    assert "default: 3600" in row and "cut" in row


def test_cli_bad_input_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "showcase.cli", "gate", "--upstream", "ftp://x", "--model", "m",
                          "--no-probe", "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "http(s) URL" in out.stderr


async def test_concurrent_mixed_requests_each_get_one_line(rig):
    import asyncio

    # Generous bounds: 24 streams at once on a loaded 2-core machine must not trip the stall bound
    # (nor the cap on requests at once: test_gate_bounds.py has its own test).
    r = rig(settings={"upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30),
                      "limits": GateLimits(max_requests_at_once=64)})
    client = openai.AsyncOpenAI(base_url=r.base, api_key=KEY, max_retries=0, timeout=60)

    async def one(n: int):
        script = ("ok", "tool", "error500", "reset")[n % 4]
        try:
            stream = await client.chat.completions.create(model="x", messages=said(script), stream=True)
            async for _ in stream:
                pass
            return "ok"
        except openai.APIError:
            return "error"

    results = await asyncio.gather(*(one(n) for n in range(24)))
    await client.close()
    errors = [l.error for l in read_log(r.log_dir / "gate.log") if l.error] if r.gate.flush_records() else None
    assert results.count("error") == 12, errors  # error500 and reset, six of each
    assert await asyncio.to_thread(r.gate.flush_records)
    lines = read_log(r.log_dir / "gate.log")
    assert len(lines) == 24 and len({l.id for l in lines}) == 24
    stats = r.stats(24)
    assert (stats.requests, stats.errors) == (24, 12) and stats.answer_tokens == 12 * 7


def test_listen_addresses_checked(tmp_path):
    from showcase.errors import UserError
    from showcase.gate.server import parse_listen

    assert parse_listen("tcp:127.0.0.1:0") == ("tcp", ("127.0.0.1", 0))
    assert parse_listen("unix:/run/g.sock") == ("unix", "/run/g.sock")
    with pytest.raises(UserError, match="bad listen address"):
        parse_listen("127.0.0.1:80")
    server = AppServer(JSONResponse({}), [f"unix:{tmp_path}/{'x' * 120}.sock"])
    with pytest.raises(UserError, match="longer than 107 bytes"):
        server.start()
    (tmp_path / "plain").write_text("not a socket")
    with pytest.raises(UserError, match="not a socket"):
        AppServer(JSONResponse({}), [f"unix:{tmp_path}/plain"]).start()
    assert (tmp_path / "plain").read_text() == "not a socket"  # never replaced


def test_https_upstream_with_a_private_ca(tmp_path):
    import trustme

    ca = trustme.CA()
    pem = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    scripted = ScriptedUpstream()
    with AppServer(scripted.app, ["tcp:127.0.0.1:0"], ssl_certfile=str(pem), ssl_keyfile=str(pem)) as server:
        scripted.url = f"https://127.0.0.1:{server.tcp_port}/v1"
        trusted = Rig(scripted, tmp_path / "a", settings={"upstream_ca_file": ca_file})
        untrusted = Rig(scripted, tmp_path / "b")
        try:
            assert trusted.sdk().chat.completions.create(model="x", messages=MSG).choices[0].message.content == "hello"
            assert scripted.last()["body"]["model"] == MODEL
            with pytest.raises(openai.APIStatusError) as caught:
                untrusted.sdk().chat.completions.create(model="x", messages=MSG)
            assert caught.value.status_code == 502 and "CERTIFICATE_VERIFY_FAILED" in caught.value.message
        finally:
            trusted.close()
            untrusted.close()
