"""Unit tests of the gate's pure parts: request rewriting and reading answers on the way back."""

import json

import pytest

from showcase.gate.config import GateConfig, load_sampling
from showcase.gate.rewrite import (
    ABSENT, CHAT, COMPLETIONS, MODELS, OTHER, RESPONSES, append_user_turn, ask_stream_usage, classify,
    force_fields, limit_answer, rewrite_request,
)
from showcase.gate.stream import StreamTap, read_answer, stream_error_event
from showcase.errors import UserError


def test_classify_paths():
    assert classify("/v1/chat/completions") == CHAT
    assert classify("/v1/completions") == COMPLETIONS
    assert classify("/v1/responses") == RESPONSES
    assert classify("/v1/models") == MODELS
    assert classify("/v1/models/some-model") == MODELS
    assert classify("/v1/embeddings") == OTHER
    assert classify("/admin") is None
    assert classify("/v1/../etc/passwd") is None
    assert classify("/v2/chat/completions") is None


def test_force_fields_merges_nested_and_records_each_leaf():
    body = {"temperature": 0, "chat_template_kwargs": {"enable_thinking": False, "keep": 1}, "messages": []}
    out, changes = force_fields(body, {"temperature": 0.6, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True}})
    assert out == {"temperature": 0.6, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True, "keep": 1}, "messages": []}
    assert changes["temperature"].requested == 0 and changes["temperature"].enforced == 0.6
    assert changes["top_k"].requested is ABSENT
    assert changes["chat_template_kwargs.enable_thinking"].requested is False
    assert changes["chat_template_kwargs.enable_thinking"].enforced is True
    assert body["chat_template_kwargs"]["enable_thinking"] is False  # the input is never mutated


def test_force_fields_object_over_missing_or_scalar():
    out, changes = force_fields({"extra_body": 3}, {"extra_body": {"a": {"b": 1}}, "new": {"x": 2}})
    assert out == {"extra_body": {"a": {"b": 1}}, "new": {"x": 2}}
    assert changes["extra_body.a.b"].requested == 3 and changes["new.x"].requested is ABSENT


def test_answer_limit_set_capped_or_kept():
    out, changes, why = limit_answer(CHAT, {"messages": []}, 1000)
    assert out["max_tokens"] == 1000 and changes["max_tokens"].requested is ABSENT and why is None
    out, _, why = limit_answer(CHAT, {"max_tokens": 50}, 1000)
    assert out["max_tokens"] == 50 and why is None
    out, _, why = limit_answer(CHAT, {"max_completion_tokens": 5000, "max_tokens": 10}, 1000)
    assert out == {"max_completion_tokens": 1000, "max_tokens": 10}
    assert "max_completion_tokens 5000 capped at 1000" in why
    out, _, why = limit_answer(RESPONSES, {"max_output_tokens": 2000}, 1000)
    assert out["max_output_tokens"] == 1000 and why
    out, _, why = limit_answer(COMPLETIONS, {"max_tokens": "lots"}, 1000)
    assert out["max_tokens"] == 1000 and "not a positive integer" in why


def test_stream_usage_asked_and_hidden_only_when_client_did_not_ask():
    out, changes, hide = ask_stream_usage({"stream": True, "stream_options": {"other": 1}})
    assert out["stream_options"] == {"other": 1, "include_usage": True} and hide
    assert changes["stream_options.include_usage"].requested is ABSENT
    out, _, hide = ask_stream_usage({"stream": True, "stream_options": {"include_usage": True}})
    assert not hide


def test_finish_now_appended_as_last_user_turn_in_each_api():
    out, ok = append_user_turn(CHAT, {"messages": [{"role": "tool", "content": "x"}]}, "FINISH")
    assert ok and out["messages"][-1] == {"role": "user", "content": "FINISH"} and len(out["messages"]) == 2
    out, ok = append_user_turn(RESPONSES, {"input": "build it"}, "FINISH")
    assert ok and out["input"] == "build it\n\nFINISH"  # a string input is one user turn: it stays one
    out, ok = append_user_turn(RESPONSES, {"input": [{"type": "function_call_output", "output": "ok"}]}, "FINISH")
    assert ok and out["input"][-1]["role"] == "user" and len(out["input"]) == 2
    out, ok = append_user_turn(COMPLETIONS, {"prompt": "abc"}, "FINISH")
    assert ok and out["prompt"].endswith("\n\nFINISH")
    _, ok = append_user_turn(COMPLETIONS, {"prompt": [1, 2, 3]}, "FINISH")
    assert not ok  # token ids: nowhere to put text, and the record says so


def test_finish_now_joins_a_last_user_turn_never_a_second_one():
    """Templates that demand strict user/assistant alternation reject two user turns in a row."""
    system = {"role": "system", "content": "you build pages"}
    out, ok = append_user_turn(CHAT, {"messages": [system, {"role": "user", "content": "build it", "name": "op"}]}, "FINISH")
    assert ok and out["messages"] == [system, {"role": "user", "content": "build it\n\nFINISH", "name": "op"}]
    parts = [{"type": "text", "text": "build it"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    out, ok = append_user_turn(CHAT, {"messages": [{"role": "user", "content": parts}]}, "FINISH")
    assert ok and out["messages"] == [{"role": "user", "content": [*parts, {"type": "text", "text": "FINISH"}]}]
    assert len(parts) == 2  # the input is never mutated
    out, ok = append_user_turn(CHAT, {"messages": [{"role": "assistant", "content": "done?"}]}, "FINISH")
    assert ok and [m["role"] for m in out["messages"]] == ["assistant", "user"]
    out, ok = append_user_turn(CHAT, {"messages": []}, "FINISH")
    assert ok and out["messages"] == [{"role": "user", "content": "FINISH"}]
    # Responses input items, as Codex CLI sends them (developer item, then the user's).
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build it"}]}
    out, ok = append_user_turn(RESPONSES, {"input": [developer, user]}, "FINISH")
    assert ok and out["input"] == [developer, {**user, "content": [*user["content"], {"type": "input_text", "text": "FINISH"}]}]
    out, ok = append_user_turn(RESPONSES, {"input": [{"role": "user", "content": "build it"}]}, "FINISH")
    assert ok and out["input"] == [{"role": "user", "content": "build it\n\nFINISH"}]
    out, ok = append_user_turn(RESPONSES, {"input": [developer]}, "FINISH")
    assert ok and out["input"] == [developer, {"type": "message", "role": "user", "content": "FINISH"}]


def test_rewrite_request_all_together():
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 99999}
    rw = rewrite_request(CHAT, body, model="served", sampling={"temperature": 0.7}, answer_limit=4096,
                         finish_now_text="stop now")
    assert rw.body["model"] == "served" and rw.body["temperature"] == 0.7 and rw.body["max_tokens"] == 4096
    assert rw.body["stream_options"] == {"include_usage": True} and rw.hide_usage
    assert rw.injected and rw.body["messages"] == [{"role": "user", "content": "hi\n\nstop now"}]
    assert rw.shortened_why and body["max_tokens"] == 99999 and len(body["messages"]) == 1
    assert rw.changes["model"].requested == "gpt-4o"


def test_the_sampling_files_objects_replace_the_agents_unknown_subfields():
    """The file's object is merged key by key into the agent's only where the gate knows the agent's
    other subfields (Responses' reasoning.summary, text.format); template kwargs it does not know."""
    body = {"messages": [], "chat_template_kwargs": {"enable_thinking": False, "keep": 1}}
    rw = rewrite_request(CHAT, body, model="m", sampling={"chat_template_kwargs": {"enable_thinking": True}},
                         answer_limit=None, finish_now_text=None)
    assert rw.body == {"messages": [], "chat_template_kwargs": {"enable_thinking": True}, "model": "m"}
    assert [(r.path, r.value, r.why) for r in rw.removed] == [("chat_template_kwargs.keep", 1, "unknown field")]
    assert rw.changes["chat_template_kwargs.enable_thinking"].why == "the sampling file"
    body = {"input": "hi", "text": {"format": {"type": "text"}, "verbosity": "high", "odd": 1}}
    rw = rewrite_request(RESPONSES, body, model="m", sampling={"text": {"verbosity": "low"}}, answer_limit=None,
                         finish_now_text=None)
    assert rw.body["text"] == {"format": {"type": "text"}, "verbosity": "low"}
    assert [r.path for r in rw.removed] == ["text.odd"] and rw.body["store"] is False


def test_a_line_written_before_fields_had_reasons_still_reads():
    from showcase.gate.log import GateLogLine

    old = {"time": "t", "t_s": 1.0, "id": "000001", "kind": "api", "method": "POST", "path": "/v1/chat/completions",
           "status": 200, "latency_ms": 1.0,
           "fields": {"model": {"present": True, "requested": "gpt-4o", "enforced": "served"}}}
    line = GateLogLine.model_validate(old)
    assert line.fields.change("model").requested == "gpt-4o" and line.fields.removed == []


def test_rewrite_other_api_only_forces_model():
    rw = rewrite_request(OTHER, {"model": "m", "input": "x"}, model="served", sampling={"temperature": 1},
                         answer_limit=10, finish_now_text="stop")
    assert rw.body == {"model": "served", "input": "x"} and not rw.injected


def _sse(*objs) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs) + b"data: [DONE]\n\n"


def test_stream_tap_hides_usage_chunk_across_chunk_boundaries():
    stream = _sse(
        {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    )
    tap = StreamTap(CHAT, hide_usage=True)
    out = b"".join(tap.feed(stream[i:i + 7]) for i in range(0, len(stream), 7)) + tap.flush()
    assert b'"usage"' not in out and out.endswith(b"data: [DONE]\n\n") and b'"content": "a"' in out
    assert (tap.facts.prompt_tokens, tap.facts.answer_tokens, tap.facts.finish_reason) == (5, 2, "stop")
    shown = StreamTap(CHAT, hide_usage=False)
    assert shown.feed(stream) == stream


def test_stream_tap_crlf_events_and_responses_usage():
    done = {"type": "response.completed", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                                          "usage": {"input_tokens": 9, "output_tokens": 4}}}
    stream = b"event: response.completed\r\ndata: " + json.dumps(done).encode() + b"\r\n\r\n"
    tap = StreamTap(RESPONSES, hide_usage=False)
    assert tap.feed(stream[:20]) == b"" and tap.feed(stream[20:]) == stream
    assert tap.facts.finish_reason == "incomplete: max_output_tokens" and tap.facts.answer_tokens == 4


def test_read_answer_and_error_events():
    facts = read_answer(CHAT, json.dumps({"choices": [{"finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode())
    assert (facts.prompt_tokens, facts.finish_reason) == (3, "tool_calls")
    assert read_answer(CHAT, b"not json").finish_reason is None
    event = stream_error_event(RESPONSES, "boom", "upstream_reset")
    assert event.startswith(b"event: error\ndata: ") and json.loads(event.split(b"data: ")[1])["message"] == "boom"
    assert json.loads(stream_error_event(CHAT, "boom", "x")[6:])["error"]["message"] == "boom"


def test_config_and_sampling_file_errors(tmp_path):
    with pytest.raises(ValueError, match="may not set model"):
        GateConfig(upstream="http://x/v1", model="m", log_dir=tmp_path, sampling={"model": "other"})
    with pytest.raises(ValueError, match="finish_now_text"):
        GateConfig(upstream="http://x/v1", model="m", log_dir=tmp_path, finish_now_after_s=5)
    bad = tmp_path / "s.json"
    bad.write_text("[1, 2]")
    with pytest.raises(UserError, match="one JSON object"):
        load_sampling(bad)
    bad.write_text("{nope")
    with pytest.raises(UserError, match="not JSON"):
        load_sampling(bad)
    with pytest.raises(UserError, match="does not exist"):
        load_sampling(tmp_path / "missing.json")
    bad.write_text('{"max_tokens": 5}')
    with pytest.raises(UserError, match="max_tokens"):
        load_sampling(bad)
