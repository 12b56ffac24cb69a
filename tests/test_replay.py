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


# Tool schemas as real agents send them (trimmed to what matters): the replay finds the shell or
# the file writer by its schema, whatever it is called.
OPENCODE_TOOLS = [
    {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"filePath": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {
        "content": {"type": "string"}, "filePath": {"type": "string"}}, "required": ["content", "filePath"]}}},
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}, "timeout": {"type": "number"}, "description": {"type": "string"}},
        "required": ["command", "description"]}}},
]
CODEX_TOOLS = [  # Responses form, an argv shell
    {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {
        "command": {"type": "array", "items": {"type": "string"}}, "workdir": {"type": "string"}}, "required": ["command"]}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
]
CLINE_TOOLS = [{"type": "function", "function": {"name": "run_commands", "parameters": {"type": "object", "properties": {
    "commands": {"type": "array", "items": {"type": "string"}}}, "required": ["commands"]}}}]
WRITER_ONLY = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
    "file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}}}]

PAGE = "<!doctype html>\n<p>it's a \"page\" with $HOME, `ticks` and a \\ backslash</p>\n"
ADAPTIVE = {"model": "replay-generic", "side_answer": "A title",
            "turns": [{"content": "Writing.", "tool_calls": [{"name": "@write", "arguments": {"path": "game.html", "content": PAGE}}]},
                      {"content": "DONE"}]}


def run_shell_call(name: str, args: dict, cwd) -> None:
    """Run the command the replay chose exactly as the agent's shell would: bash, in the work folder."""
    if name == "run_commands":
        (command,) = args["commands"]
        argv = ["bash", "-c", command]
    elif isinstance(args["command"], list):
        argv = args["command"]
    else:
        argv = ["bash", "-c", args["command"]]
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.mark.parametrize("tools", [OPENCODE_TOOLS, CLINE_TOOLS], ids=["opencode", "cline"])
def test_write_goes_through_the_agents_own_shell_and_makes_the_exact_page(tmp_path, tools):
    with ReplayServer(ADAPTIVE) as server:
        c = client(server)
        title = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "name this session"}])
        first = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], tools=tools)
        assert server.replayer.index == 1  # the title request did not move the script on
    assert title.choices[0].message.content == "A title"
    call = first.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    assert call.function.name in ("bash", "run_commands")
    if call.function.name == "bash":
        assert isinstance(args["description"], str) and args["description"]  # a required argument got a value
    run_shell_call(call.function.name, args, tmp_path)
    assert (tmp_path / "game.html").read_text() == PAGE
    assert not (tmp_path / "game.html.part").exists()  # written aside, then renamed: only whole versions


def test_without_a_shell_the_file_writer_is_used():
    with ReplayServer(ADAPTIVE) as server:
        answer = client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}],
                                                        tools=WRITER_ONLY)
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "write_file"
    assert json.loads(call.function.arguments) == {"file_path": "game.html", "content": PAGE}


def test_a_request_with_no_usable_tool_gets_a_clear_error():
    tools = [{"type": "function", "function": {"name": "think", "parameters": {"type": "object", "properties": {"thought": {"type": "string"}}}}}]
    with ReplayServer(ADAPTIVE) as server:
        with pytest.raises(openai.BadRequestError, match="neither a shell nor a file-writing tool.*think"):
            client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], tools=tools)


def test_responses_api_not_streamed_and_streamed(tmp_path):
    with ReplayServer(ADAPTIVE) as server:
        c = client(server)
        first = c.responses.create(model="m", input=[{"role": "developer", "content": "be brief"},
                                                     {"role": "user", "content": "go"}], tools=CODEX_TOOLS, store=False)
        with c.responses.stream(model="m", input="go on", tools=CODEX_TOOLS) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        after = c.responses.create(model="m", input="more?", tools=CODEX_TOOLS)
    calls = [item for item in first.output if item.type == "function_call"]
    assert first.output[0].type == "message" and first.output_text == "Writing."
    assert len(calls) == 1 and calls[0].name == "shell" and calls[0].call_id
    argv = json.loads(calls[0].arguments)["command"]
    assert argv[:2] == ["bash", "-lc"]
    subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True, timeout=30)
    assert (tmp_path / "game.html").read_text() == PAGE
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    # Streamed: the events the SDK assembles, ending with response.completed; the script's last turn.
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text == "DONE" and not [i for i in final.output if i.type == "function_call"]
    assert after.output_text == "DONE"  # exhausted: the final turn


# aider's system prompt as it sends it (trimmed): no tools, edits as whole-file listings, in the
# fence it picked for the files in the chat.
AIDER_SYSTEM = ("Act as an expert software developer.\nYou MUST use this *file listing* format:\n\npath/to/filename.js\n"
                "{open}\n// entire file content ...\n{close}\n\nEvery *file listing* MUST use this format:\n"
                "- First line: the filename with any originally provided path\n- Second line: opening {open}\n"
                "- ... entire content of the file ...\n- Final line: closing {close}\n")


@pytest.mark.parametrize("fence", [("```", "```"), ("<source>", "</source>")], ids=["backticks", "source"])
def test_a_whole_file_editor_gets_listings_and_shell_turns_pass_it_by(fence):
    script = {"model": "m", "side_answer": "A title", "turns": [
        {"content": "A look first.", "tool_calls": [{"name": "@shell", "arguments": {"command": "ls"}}]},
        *ADAPTIVE["turns"][:1],
        {"content": "Checking.", "tool_calls": [{"name": "@shell", "arguments": {"command": "shot.sh game.html"}}]}]}
    system = {"role": "system", "content": AIDER_SYSTEM.format(open=fence[0], close=fence[1])}
    with ReplayServer(script) as server:
        c = client(server)
        title = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "name this session"}])
        stream = c.chat.completions.create(model="m", messages=[system, {"role": "user", "content": "go"}], stream=True)
        first = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        last = c.chat.completions.create(model="m", messages=[system, {"role": "user", "content": "report"}])
        assert server.replayer.exhausted
    assert title.choices[0].message.content == "A title"
    assert first == f"Writing.\n\ngame.html\n{fence[0]}\n{PAGE}{fence[1]}\n"
    assert last.choices[0].message.content == "DONE\n"  # the script's own end, no listing


HERMES_TOOLS = [
    {"type": "function", "function": {"name": "terminal", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}, "background": {"type": "boolean"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
]


def test_a_shell_that_refuses_a_bare_ampersand_gets_pages_through_the_file_writer():
    page = "<p>a &middot; b</p>\n"
    script = {"model": "m", "turns": [
        {"content": "Writing.", "tool_calls": [{"name": "@write", "arguments": {"path": "game.html", "content": page}}]},
        {"content": "Checking.", "tool_calls": [{"name": "@shell", "arguments": {"command": "shot.sh game.html"}}]}]}
    with ReplayServer(script) as server:
        c = client(server)
        write, check = (c.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}],
                                                  tools=HERMES_TOOLS).choices[0].message.tool_calls[0] for _ in range(2))
    assert (write.function.name, json.loads(write.function.arguments)) == ("write_file", {"path": "game.html", "content": page})
    assert (check.function.name, json.loads(check.function.arguments)) == ("terminal", {"command": "shot.sh game.html"})
