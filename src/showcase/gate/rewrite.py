"""Pure request rewriting: what the gate forwards, removes and forces, and a record of each change.

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

# Why a field was changed or removed: short fixed reasons, as gate.log says them.
WHY_MODEL = "the run's model"
WHY_SAMPLING_FILE = "the sampling file"
WHY_ANSWER_LIMIT = "the run's answer limit"
WHY_USAGE = "usage asked for exact token counts"
WHY_ONE_ANSWER = "one answer per request: more would multiply the answer limit"
WHY_STORE = "nothing is kept at the provider"
WHY_SAMPLING = "sampling is the sampling file's"
WHY_REASONING = "reasoning is the sampling file's, and it sets none"
WHY_LOGPROBS = "log probabilities only when the sampling file asks for them"
WHY_PROVIDER_TOOL = "a provider-side tool: the provider would run it, beyond the gate"
WHY_TOOL_TYPE = "not a tool type the agent runs itself"
WHY_NO_TOOL_LEFT = "no tool is left"
WHY_INCLUDE = "asks the provider for more than the answer"
WHY_BACKGROUND = "would run the answer at the provider, beyond the gate's bounds"
WHY_PROVIDER_STATE = "refers to what the provider keeps of the operator's account"
WHY_IDENTITY = "tags the request at the provider, under the operator's account"
WHY_SERVICE_TIER = "the provider's price tier is the operator's choice"
WHY_BILLED_EXTRA = "billed output a coding agent does not need"
WHY_NOT_AN_OBJECT = "not a JSON object"
WHY_NOT_A_LIST = "not a JSON array"
WHY_UNKNOWN = "unknown field"
WHY_MODELS_BODY = "a models request has no body"

# Tool types whose calls the agent itself runs (function tools, and OpenAI's own schemas for a
# client-run shell and patch tool); the rest are run by the provider, or not known.
AGENT_TOOL_TYPES = {
    CHAT: frozenset({"function", "custom"}),
    RESPONSES: frozenset({"function", "custom", "local_shell", "shell", "apply_patch"}),
}
PROVIDER_TOOL_PREFIXES = ("web_search", "file_search", "code_interpreter", "computer", "image_generation", "mcp")
# What `include` may ask of a Responses answer: the reasoning a stateless (store: false) client
# sends back; log probabilities only when the sampling file asks for them (top_logprobs).
INCLUDE_ALWAYS = frozenset({"reasoning.encrypted_content"})
INCLUDE_WITH_LOGPROBS = frozenset({"message.output_text.logprobs"})


@dataclass(frozen=True)
class Rule:
    """What the gate does with one request field."""

    kind: str  # forward | remove | force | object | tools | tool_choice | include
    why: str = ""
    value: Any = None  # force: the value sent
    always: bool = False  # force: also when the client did not send the field
    sub: "dict[str, Rule] | None" = None  # object: its subfields (others are removed)
    only_with_sampling: bool = False  # object: forwarded only when the sampling file sets it too


FORWARD = Rule("forward")


def _remove(why: str, *names: str) -> dict[str, Rule]:
    return {name: Rule("remove", why) for name in names}


_SAMPLING_NAMES = ("temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "presence_penalty",
                   "frequency_penalty", "repetition_penalty", "logit_bias")
# Every field each endpoint may carry, and what becomes of it; a field not named is removed
# ("unknown field"). The sampling file's own fields are always the ones sent (force_fields).
ALLOWED: dict[str, dict[str, Rule]] = {
    CHAT: {
        **dict.fromkeys(("model", "messages", "parallel_tool_calls", "functions", "function_call", "stream",
                         "response_format", "stop", "max_tokens", "max_completion_tokens"), FORWARD),
        "tools": Rule("tools"),
        "tool_choice": Rule("tool_choice"),
        "stream_options": Rule("object", sub={"include_usage": FORWARD}),
        "n": Rule("force", WHY_ONE_ANSWER, value=1),
        "store": Rule("force", WHY_STORE, value=False),
        **_remove(WHY_SAMPLING, *_SAMPLING_NAMES, "reasoning_effort", "verbosity", "reasoning", "thinking",
                  "enable_thinking", "chat_template_kwargs"),
        **_remove(WHY_LOGPROBS, "logprobs", "top_logprobs"),
        **_remove(WHY_PROVIDER_TOOL, "web_search_options"),
        **_remove(WHY_IDENTITY, "user", "safety_identifier", "metadata"),
        **_remove(WHY_SERVICE_TIER, "service_tier"),
        **_remove(WHY_PROVIDER_STATE, "prompt_cache_key", "prompt_cache_retention"),
        **_remove(WHY_BILLED_EXTRA, "audio", "modalities", "prediction"),
    },
    COMPLETIONS: {
        **dict.fromkeys(("model", "prompt", "suffix", "stream", "stop", "max_tokens"), FORWARD),
        "stream_options": Rule("object", sub={"include_usage": FORWARD}),
        "n": Rule("force", WHY_ONE_ANSWER, value=1),
        "best_of": Rule("force", WHY_ONE_ANSWER, value=1),
        **_remove(WHY_SAMPLING, *_SAMPLING_NAMES),
        **_remove(WHY_LOGPROBS, "logprobs"),
        **_remove(WHY_BILLED_EXTRA, "echo"),
        **_remove(WHY_IDENTITY, "user"),
    },
    RESPONSES: {
        **dict.fromkeys(("model", "input", "instructions", "stream", "max_output_tokens", "parallel_tool_calls",
                         "truncation"), FORWARD),
        "tools": Rule("tools"),
        "tool_choice": Rule("tool_choice"),
        "include": Rule("include"),
        "text": Rule("object", sub={"format": FORWARD, "verbosity": Rule("remove", WHY_SAMPLING)}),
        "reasoning": Rule("object", WHY_REASONING, only_with_sampling=True,
                          sub={"summary": FORWARD, "generate_summary": FORWARD, "effort": Rule("remove", WHY_SAMPLING)}),
        "stream_options": Rule("object", sub={"include_obfuscation": FORWARD}),
        "store": Rule("force", WHY_STORE, value=False, always=True),  # Responses keeps answers unless told not to
        **_remove(WHY_SAMPLING, *_SAMPLING_NAMES),
        **_remove(WHY_LOGPROBS, "top_logprobs"),
        **_remove(WHY_BACKGROUND, "background"),
        **_remove(WHY_PROVIDER_STATE, "previous_response_id", "conversation", "prompt", "prompt_cache_key",
                  "prompt_cache_retention"),
        **_remove(WHY_PROVIDER_TOOL, "max_tool_calls"),
        **_remove(WHY_IDENTITY, "user", "safety_identifier", "metadata"),
        **_remove(WHY_SERVICE_TIER, "service_tier"),
    },
    MODELS: {},  # GET: no body goes upstream
}


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
    """One field the gate set: what the client sent (ABSENT if nothing), what went upstream, and why."""

    requested: Any
    enforced: Any
    why: str = ""


@dataclass
class Removed:
    """One field (or one entry of a list field) the gate did not forward, and why."""

    path: str  # dotted path, e.g. "reasoning.effort"; a list entry is named by its list ("tools")
    value: Any
    why: str


@dataclass
class Rewrite:
    """The request as it goes upstream, and why it differs from the one the client sent."""

    body: dict[str, Any]
    changes: dict[str, Change] = field(default_factory=dict)  # dotted path -> change
    shortened_why: str | None = None
    injected: bool = False
    hide_usage: bool = False  # the client did not ask for a stream's usage chunk: drop it on the way back
    removed: list[Removed] = field(default_factory=list)


def force_fields(body: dict[str, Any], forced: dict[str, Any], prefix: str = "",
                 why: str = WHY_SAMPLING_FILE) -> tuple[dict[str, Any], dict[str, Change]]:
    """Merge `forced` into `body`: objects key by key (recursively), anything else replaced whole.

    Returns the new body and one Change per forced leaf, keyed by its dotted path.
    """
    out = dict(body)
    changes: dict[str, Change] = {}
    for key, value in forced.items():
        path = f"{prefix}{key}"
        current = body.get(key, ABSENT)
        if isinstance(value, dict) and value and isinstance(current, dict):
            out[key], sub = force_fields(current, value, prefix=f"{path}.", why=why)
            changes.update(sub)
        elif isinstance(value, dict) and value:
            out[key] = value
            for leaf, leaf_value in _leaves(value, f"{path}."):
                changes[leaf] = Change(ABSENT if current is ABSENT else current, leaf_value, why)
        else:
            out[key] = value
            changes[path] = Change(current, value, why)
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
        changes[name] = Change(body.get(name, ABSENT), limit, WHY_ANSWER_LIMIT)
    for name in present:
        asked = body[name]
        valid = isinstance(asked, int) and not isinstance(asked, bool) and asked > 0
        enforced = min(asked, limit) if valid else limit
        out[name] = enforced
        changes[name] = Change(asked, enforced, WHY_ANSWER_LIMIT)
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
        return body, {"stream_options.include_usage": Change(True, True, WHY_USAGE)}, False
    out = dict(body)
    out["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return out, {"stream_options.include_usage": Change(asked, True, WHY_USAGE)}, True


def _tool_why(api: str, tool: Any) -> str | None:
    """Why a tool is not forwarded; None when the agent runs it itself."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if isinstance(kind, str) and kind in AGENT_TOOL_TYPES[api]:
        return None
    if isinstance(kind, str) and kind.startswith(PROVIDER_TOOL_PREFIXES):
        return WHY_PROVIDER_TOOL
    return WHY_TOOL_TYPE


def _allow_object(path: str, value: dict[str, Any], sub: dict[str, Rule],
                  file_sets: dict[str, Any]) -> tuple[dict[str, Any], list[Removed]]:
    """An object field keeps only its known subfields (and those the sampling file sets, which it replaces)."""
    kept: dict[str, Any] = {}
    removed: list[Removed] = []
    for key, item in value.items():
        rule = sub.get(key)
        if key in file_sets or (rule is not None and rule.kind == "forward"):
            kept[key] = item
        else:
            removed.append(Removed(f"{path}.{key}", item, rule.why if rule is not None else WHY_UNKNOWN))
    return kept, removed


def allow_fields(api: str, body: dict[str, Any], sampling: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Change], list[Removed]]:
    """Keep what `ALLOWED` forwards for `api`, force what it forces, remove the rest.

    A field the sampling file sets is left for `force_fields` to replace (so its change is
    logged once, as the file's). Returns the new body, the forced changes and the removed fields.
    """
    table = ALLOWED.get(api, {})
    out: dict[str, Any] = {}
    changes: dict[str, Change] = {}
    removed: list[Removed] = []
    for key, value in body.items():
        rule = table.get(key)
        file_value = sampling.get(key, ABSENT)
        if file_value is not ABSENT:
            if isinstance(file_value, dict) and isinstance(value, dict):
                sub = rule.sub if rule is not None and rule.kind == "object" else {}
                out[key], gone = _allow_object(key, value, sub or {}, file_value)
                removed += gone
            else:
                out[key] = value  # replaced whole by the file's value
            continue
        if rule is None:
            removed.append(Removed(key, value, WHY_UNKNOWN))
        elif rule.kind == "forward":
            out[key] = value
        elif rule.kind == "remove":
            removed.append(Removed(key, value, rule.why))
        elif rule.kind == "force":
            out[key] = rule.value
            changes[key] = Change(value, rule.value, rule.why)
        elif rule.kind == "object":
            if rule.only_with_sampling:
                removed.append(Removed(key, value, rule.why))
            elif not isinstance(value, dict):
                removed.append(Removed(key, value, WHY_NOT_AN_OBJECT))
            else:
                kept, gone = _allow_object(key, value, rule.sub or {}, {})
                removed += gone
                if kept or not value:  # an object emptied by the removals is not sent at all
                    out[key] = kept
        elif rule.kind == "tools":
            if not isinstance(value, list):
                removed.append(Removed(key, value, WHY_NOT_A_LIST))
                continue
            kept = []
            for tool in value:
                why = _tool_why(api, tool)
                if why is None:
                    kept.append(tool)
                else:
                    removed.append(Removed(key, tool, why))
            if kept or not value:
                out[key] = kept
        elif rule.kind == "tool_choice":
            kind = value.get("type") if isinstance(value, dict) else None
            if isinstance(value, str) or kind == "allowed_tools" or (isinstance(value, dict) and _tool_why(api, value) is None):
                out[key] = value
            else:
                removed.append(Removed(key, value, WHY_PROVIDER_TOOL if isinstance(kind, str) and
                                       kind.startswith(PROVIDER_TOOL_PREFIXES) else WHY_TOOL_TYPE))
        elif rule.kind == "include":
            if not isinstance(value, list):
                removed.append(Removed(key, value, WHY_NOT_A_LIST))
                continue
            allowed = INCLUDE_ALWAYS | (INCLUDE_WITH_LOGPROBS if "top_logprobs" in sampling else frozenset())
            kept = [item for item in value if isinstance(item, str) and item in allowed]
            removed += [Removed(key, item, WHY_LOGPROBS if item in INCLUDE_WITH_LOGPROBS else WHY_INCLUDE)
                        for item in value if not (isinstance(item, str) and item in allowed)]
            if kept or not value:
                out[key] = kept
    for key, rule in table.items():
        if rule.kind == "force" and rule.always and key not in body and key not in sampling:
            out[key] = rule.value
            changes[key] = Change(ABSENT, rule.value, rule.why)
    if "tools" in body and isinstance(body["tools"], list) and body["tools"] and "tools" not in out:
        # Every tool was the provider's: nothing is left to choose from or to call in parallel.
        for key in ("tool_choice", "parallel_tool_calls"):
            if key in out:
                removed.append(Removed(key, out.pop(key), WHY_NO_TOOL_LEFT))
    return out, changes, removed


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

    - generation APIs: only the fields `ALLOWED` forwards (the rest removed, n/best_of/store forced);
    - every API with a JSON body naming a model: the model name;
    - generation APIs: the sampling fields, the answer limit, the stream's usage chunk,
      and (when `finish_now_text` is given) the finish-now user turn.
    """
    changes: dict[str, Change] = {}
    removed: list[Removed] = []
    out = dict(body)
    if api in GENERATION_APIS:
        out, changes, removed = allow_fields(api, body, sampling)
    if api in GENERATION_APIS or "model" in body:
        changes["model"] = Change(body.get("model", ABSENT), model, WHY_MODEL)
        out["model"] = model
    if api not in GENERATION_APIS:
        return Rewrite(out, _real(changes))
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
    return Rewrite(out, _real(changes), shortened_why, injected, hide_usage, removed)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _real(changes: dict[str, Change]) -> dict[str, Change]:
    """Only what the gate actually changed: a field it set to the value the client sent is no change."""
    return {path: c for path, c in changes.items() if c.requested is ABSENT or not _same(c.requested, c.enforced)}
