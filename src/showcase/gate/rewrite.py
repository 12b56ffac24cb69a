"""Pure request rewriting: what the gate forces into a request, and a record of what it changed.

Nothing here does I/O or mutates its input; every function is unit tested on plain dicts.
"""

from dataclasses import dataclass, field
from typing import Any

CHAT = "chat"
COMPLETIONS = "completions"
RESPONSES = "responses"
MODELS = "models"
OTHER = "other"
GENERATION_APIS = (CHAT, COMPLETIONS, RESPONSES)
# What a coding agent needs, and all the gate forwards: anything else (files, batches, deleting a
# model, ...) would spend the operator's key beyond the run's settings.
SERVED_METHODS = {CHAT: ("POST",), COMPLETIONS: ("POST",), RESPONSES: ("POST",), MODELS: ("GET",)}

# Which field holds the answer limit in each generation API; chat knows two names.
ANSWER_LIMIT_FIELDS = {
    CHAT: ("max_completion_tokens", "max_tokens"),
    COMPLETIONS: ("max_tokens",),
    RESPONSES: ("max_output_tokens",),
}
# The field we add when a request sets none (max_tokens is the one every local server knows).
ANSWER_LIMIT_DEFAULT_FIELD = {CHAT: "max_tokens", COMPLETIONS: "max_tokens", RESPONSES: "max_output_tokens"}

ABSENT: Any = object()  # marks "the client's request did not have this field"


def classify(path: str) -> str | None:
    """Which API a request path belongs to; None when it is outside the API (not under /v1/)."""
    if not path.startswith("/v1/") or "/../" in path + "/" or "/./" in path + "/":
        return None
    rest = path[4:].rstrip("/")
    if rest == "chat/completions":
        return CHAT
    if rest == "completions":
        return COMPLETIONS
    if rest == "responses":
        return RESPONSES
    if rest == "models" or rest.startswith("models/"):
        return MODELS
    return OTHER


@dataclass
class Change:
    """One field the gate looked at: what the client sent (ABSENT if nothing) and what went upstream."""

    requested: Any
    enforced: Any


@dataclass
class Rewrite:
    """The request as it goes upstream, and why it differs from the one the client sent."""

    body: dict[str, Any]
    changes: dict[str, Change] = field(default_factory=dict)  # dotted path -> change
    shortened_why: str | None = None
    injected: bool = False
    hide_usage: bool = False  # the client did not ask for a stream's usage chunk: drop it on the way back


def force_fields(body: dict[str, Any], forced: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], dict[str, Change]]:
    """Merge `forced` into `body`: objects key by key (recursively), anything else replaced whole.

    Returns the new body and one Change per forced leaf, keyed by its dotted path.
    """
    out = dict(body)
    changes: dict[str, Change] = {}
    for key, value in forced.items():
        path = f"{prefix}{key}"
        current = body.get(key, ABSENT)
        if isinstance(value, dict) and value and isinstance(current, dict):
            out[key], sub = force_fields(current, value, prefix=f"{path}.")
            changes.update(sub)
        elif isinstance(value, dict) and value:
            out[key] = value
            for leaf, leaf_value in _leaves(value, f"{path}."):
                changes[leaf] = Change(ABSENT if current is ABSENT else current, leaf_value)
        else:
            out[key] = value
            changes[path] = Change(current, value)
    return out, changes


def _leaves(obj: dict[str, Any], prefix: str):
    for key, value in obj.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def limit_answer(api: str, body: dict[str, Any], limit: int) -> tuple[dict[str, Any], dict[str, Change], str | None]:
    """Set the answer limit where a request has none; cap it where it asks more.

    Returns the new body, the changes, and why the request counts as shortened (None if it does not).
    """
    names = ANSWER_LIMIT_FIELDS[api]
    present = [name for name in names if body.get(name) is not None]
    out = dict(body)
    changes: dict[str, Change] = {}
    shortened = []
    if not present:
        name = ANSWER_LIMIT_DEFAULT_FIELD[api]
        out[name] = limit
        changes[name] = Change(body.get(name, ABSENT), limit)
    for name in present:
        asked = body[name]
        valid = isinstance(asked, int) and not isinstance(asked, bool) and asked > 0
        enforced = min(asked, limit) if valid else limit
        out[name] = enforced
        changes[name] = Change(asked, enforced)
        if valid and asked > limit:
            shortened.append(f"{name} {asked} capped at {limit}")
        elif not valid:
            shortened.append(f"{name} {asked!r} is not a positive integer; set to {limit}")
    return out, changes, "; ".join(shortened) or None


def ask_stream_usage(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Change], bool]:
    """Ask a chat/completions stream for its usage chunk so token counts are exact.

    Returns the new body, the change, and whether the client had not asked (so the chunk is hidden).
    """
    options = body.get("stream_options")
    asked = options.get("include_usage", ABSENT) if isinstance(options, dict) else ABSENT
    if asked is True:
        return body, {"stream_options.include_usage": Change(True, True)}, False
    out = dict(body)
    out["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return out, {"stream_options.include_usage": Change(asked, True)}, True


def _merged_content(content: Any, text: str, part_type: str) -> Any:
    """A user turn's content with `text` added at its end (None if that content has no place for it)."""
    if isinstance(content, str):
        return f"{content}\n\n{text}" if content else text
    if isinstance(content, list):
        return [*content, {"type": part_type, "text": text}]
    return None


def append_user_turn(api: str, body: dict[str, Any], text: str) -> tuple[dict[str, Any], bool]:
    """Put `text` in the last user turn. Returns the new body and whether it could be placed.

    When the conversation already ends with a user turn, the text joins that turn: a second user
    turn in a row breaks chat templates that demand strict user/assistant alternation.
    """
    out = dict(body)
    if api == CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return body, False
        last = messages[-1] if messages else None
        if isinstance(last, dict) and last.get("role") == "user":
            merged = _merged_content(last.get("content"), text, "text")
            if merged is not None:
                out["messages"] = [*messages[:-1], {**last, "content": merged}]
                return out, True
        out["messages"] = [*messages, {"role": "user", "content": text}]
        return out, True
    if api == RESPONSES:
        given = body.get("input")
        turn = {"type": "message", "role": "user", "content": text}
        if given is None:
            out["input"] = [turn]
        elif isinstance(given, str):
            out["input"] = _merged_content(given, text, "input_text")
        elif isinstance(given, list):
            last = given[-1] if given else None
            merged = None
            if isinstance(last, dict) and last.get("role") == "user" and last.get("type", "message") == "message":
                merged = _merged_content(last.get("content"), text, "input_text")
            out["input"] = [*given[:-1], {**last, "content": merged}] if merged is not None else [*given, turn]
        else:
            return body, False
        return out, True
    if api == COMPLETIONS:
        # A raw prompt has no turns: the message goes at its end, as the last thing the model reads.
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            out["prompt"] = f"{prompt}\n\n{text}"
        elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            out["prompt"] = [f"{p}\n\n{text}" for p in prompt]
        else:
            return body, False
        return out, True
    return body, False


def rewrite_request(
    api: str,
    body: dict[str, Any],
    *,
    model: str,
    sampling: dict[str, Any],
    answer_limit: int | None,
    finish_now_text: str | None,
) -> Rewrite:
    """Everything the gate forces into one parsed request body, in one place.

    - every API with a JSON body naming a model: the model name;
    - generation APIs: the sampling fields, the answer limit, the stream's usage chunk,
      and (when `finish_now_text` is given) the finish-now user turn.
    """
    changes: dict[str, Change] = {}
    out = dict(body)
    if api in GENERATION_APIS or "model" in body:
        changes["model"] = Change(body.get("model", ABSENT), model)
        out["model"] = model
    if api not in GENERATION_APIS:
        return Rewrite(out, changes)
    out, forced = force_fields(out, sampling)
    changes.update(forced)
    shortened_why = None
    if answer_limit is not None:
        out, limited, shortened_why = limit_answer(api, out, answer_limit)
        changes.update(limited)
    hide_usage = False
    if out.get("stream") is True and api in (CHAT, COMPLETIONS):
        out, usage, hide_usage = ask_stream_usage(out)
        changes.update(usage)
    injected = False
    if finish_now_text:
        out, injected = append_user_turn(api, out, finish_now_text)
    return Rewrite(out, changes, shortened_why, injected, hide_usage)
