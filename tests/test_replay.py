"""The replay model server, driven by real clients: the openai SDK, curl, and the `showcase` command."""

import json
import os
import select
import subprocess
import sys
import time

import openai
import pytest

from showcase.errors import UserError
from showcase.replay import ReplayServer, load_script

SCRIPT = {
    "model": "replay-test",
    "turns": [
        {
            "content": "Writing the page.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "game.html", "content": "<h1>" + "x" * 3000 + "</h1>"}}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 800},
        },
        {"content": "Two things at once.", "tool_calls": [
            {"name": "shell", "arguments": {"command": "ls"}, "id": "call_a"},
            {"name": "shot", "arguments": {"path": "game.html"}, "id": "call_b"},
        ]},
        {"content": "All good. " * 30},
    ],
}


def client(server: ReplayServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="run-key-123", max_retries=0, timeout=20)


def test_non_streamed_turns_in_order_with_tool_calls_and_usage():
    with ReplayServer(SCRIPT) as server:
        c = client(server)
        msgs = [{"role": "user", "content": "build it"}]
        first = c.chat.completions.create(model="m", messages=msgs)
        second = c.chat.completions.create(model="m", messages=msgs)
        third = c.chat.completions.create(model="m", messages=msgs)
        after = c.chat.completions.create(model="m", messages=msgs)

    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.type == "function" and call.function.name == "write_file"
    assert json.loads(call.function.arguments) == SCRIPT["turns"][0]["tool_calls"][0]["arguments"]
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.total_tokens) == (1200, 800, 2000)
    assert [t.id for t in second.choices[0].message.tool_calls] == ["call_a", "call_b"]
    assert third.choices[0].message.content == "All good. " * 30 and third.choices[0].finish_reason == "stop"
    assert third.usage.completion_tokens > 0  # estimated when the script gives none
    assert after.choices[0].message.content == "DONE"  # the script is exhausted


def test_streamed_turns_assemble_to_the_same_answer_and_usage_comes_last():
    with ReplayServer(SCRIPT) as server:
        c = client(server)
        chunks = list(c.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], stream=True, stream_options={"include_usage": True}))
        plain = list(c.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=True))

    content, args, name = "", "", None
    for ch in chunks[:-1]:
        assert ch.usage is None
        delta = ch.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            name = tc.function.name or name
            args += tc.function.arguments or ""
    assert content == "Writing the page." and name == "write_file"
    assert json.loads(args) == SCRIPT["turns"][0]["tool_calls"][0]["arguments"]
    assert len(chunks) > 5  # really streamed in pieces
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 2000
    # Without include_usage: no usage chunk, and the second turn's two calls arrive with their indexes.
    assert all(ch.usage is None for ch in plain)
    indexes = {tc.index for ch in plain for tc in (ch.choices[0].delta.tool_calls or [])}
    assert indexes == {0, 1}


def test_models_over_curl_and_every_request_body_is_recorded(tmp_path):
    record = tmp_path / "requests.jsonl"
    with ReplayServer(SCRIPT, record_path=record) as server:
        listing = subprocess.run(["curl", "-sS", "--max-time", "10", f"{server.base_url}/models"],
                                 capture_output=True, text=True, timeout=20)
        c = client(server)
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}], max_tokens=77, temperature=0.3)
        raw = subprocess.run(["curl", "-sS", "--max-time", "10", "-d", "not json at all", f"{server.base_url}/chat/completions"],
                             capture_output=True, text=True, timeout=20)
        bodies = list(server.requests)
        headers = list(server.replayer.headers)

    assert [m["id"] for m in json.loads(listing.stdout)["data"]] == ["replay-test"]
    assert bodies[0]["max_tokens"] == 77 and bodies[0]["temperature"] == 0.3
    assert bodies[0]["messages"] == [{"role": "user", "content": "one"}]
    assert headers[0]["authorization"] == "Bearer run-key-123"
    # Lenient: garbage still gets the next turn, and is recorded as it came.
    assert json.loads(raw.stdout)["choices"][0]["message"]["content"] == "Two things at once."
    assert bodies[1] == {"_raw": "not json at all"}
    assert [json.loads(line)["body"] for line in record.read_text().splitlines()] == bodies


def test_until_user_contains_waits_for_the_finish_now_message():
    script = {
        "turns": [
            {"content": "Starting.", "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
            {"until_user_contains": "finish now", "content": "Finishing as asked. DONE /work/game.html"},
        ],
        "final": {"content": "already done"},
    }
    with ReplayServer(script) as server:
        c = client(server)
        history = [{"role": "user", "content": "Build a voxel world; you will get a message to finish."}]
        answers = [c.chat.completions.create(model="m", messages=history).choices[0].message for _ in range(4)]
        # The gate appends its finish-now text as the last user message (content parts work too).
        finish = history + [{"role": "tool", "tool_call_id": "x", "content": "ok"},
                            {"role": "user", "content": [{"type": "text", "text": "Time is almost up: Finish now."}]}]
        done = c.chat.completions.create(model="m", messages=finish).choices[0].message
        later = c.chat.completions.create(model="m", messages=history).choices[0].message
        assert server.replayer.exhausted
        assert server.wait_for_requests(6, timeout_s=5) and not server.wait_for_requests(7, timeout_s=0.2)

    assert answers[0].content == "Starting."
    for filler in answers[1:]:  # never done on its own
        assert json.loads(filler.tool_calls[0].function.arguments) == {"command": "sleep 5"}
    assert done.content == "Finishing as asked. DONE /work/game.html" and not done.tool_calls
    assert later.content == "already done"


def test_http_error_turns_and_delays():
    script = {"turns": [{"http_status": 403, "content": "hard stop"}, {"content": "slow", "delay_s": 0.5}]}
    with ReplayServer(script) as server:
        c = client(server)
        with pytest.raises(openai.PermissionDeniedError, match="hard stop"):
            c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        t0 = time.monotonic()
        slow = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        waited = time.monotonic() - t0
    assert slow.choices[0].message.content == "slow" and waited >= 0.5  # a lower bound: sleeps never end early
    with ReplayServer({"turns": [{"content": "paced"}]}, pace_s=0.4) as server:
        t0 = time.monotonic()
        paced = client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert paced.choices[0].message.content == "paced" and time.monotonic() - t0 >= 0.4


def test_bad_scripts_are_one_line_user_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_script(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(UserError, match="is not JSON"):
        load_script(bad)
    bad.write_text(json.dumps({"turns": [{"tool_calls": [{"arguments": {}}]}]}))
    with pytest.raises(UserError, match=r"turns\.0\.tool_calls\.0\.name: Field required"):
        load_script(bad)
    # COLUMNS: rich wraps stderr at 80 columns when it is not a terminal (cli.main's console, not ours).
    cli = subprocess.run([sys.executable, "-m", "showcase.cli", "replay", "--script", str(bad)],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "400"})
    assert cli.returncode == 2 and cli.stderr.strip().startswith("error: replay script") and len(cli.stderr.strip().splitlines()) == 1


def test_showcase_replay_command_serves_the_demo(tmp_path):
    from showcase.paths import TASKS_DIR

    proc = subprocess.Popen(
        [sys.executable, "-m", "showcase.cli", "replay", "--script", str(TASKS_DIR / "voxel/demo/builtin.json"), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "showcase replay printed nothing within 30 s"
        line = proc.stdout.readline()
        assert "replaying" in line and "11 turns" in line, line + (proc.stderr.read() if proc.poll() is not None else "")
        base_url = line.rsplit(" at ", 1)[1].strip()
        c = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=20)
        first = c.chat.completions.create(model="replay-builtin", messages=[{"role": "user", "content": "go"}])
        assert first.choices[0].message.tool_calls[0].function.name == "shell"
    finally:
        proc.terminate()
        proc.wait(20)


def test_script_schema_is_published():
    out = subprocess.run([sys.executable, "-m", "showcase.cli", "schema", "replay-script"],
                         capture_output=True, text=True, timeout=60)
    schema = json.loads(out.stdout)
    assert {"model", "turns", "final"} <= set(schema["properties"]) and "ReplayTurn" in schema["$defs"]
