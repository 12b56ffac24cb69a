"""Pure request rewriting: what the gate forwards, removes and forces, and a record of each change.

Nothing here does I/O or mutates its input; every function is unit tested on plain dicts.
"""

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

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
WHY_HOSTED_SHELL = "a shell the provider runs (an environment that is not local)"
WHY_NO_TOOL_LEFT = "no tool is left"
WHY_UNNAMED_TOOL = "a tool without a name (a string) is not one the agent can be called by"
WHY_NOT_OFFERED = "names no tool the request offers"
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
WHY_QUERY = "the gate forwards no query string"

PROVIDER_TOOL_PREFIXES = ("web_search", "file_search", "code_interpreter", "computer", "image_generation", "mcp")
# What `include` may ask of a Responses answer: the reasoning a stateless (store: false) client
# sends back; log probabilities only when the sampling file asks for them (top_logprobs).
INCLUDE_ALWAYS = frozenset({"reasoning.encrypted_content"})
INCLUDE_WITH_LOGPROBS = frozenset({"message.output_text.logprobs"})


@dataclass(frozen=True)
class Rule:
    """What the gate does with one request field (or one subfield, or a list's entries)."""

    kind: str  # forward | remove | force | object | list | tools | tool_choice | functions | function_call | include
    why: str = ""
    value: Any = None  # force: the value sent
    always: bool = False  # force: also when the client did not send the field
    sub: "dict[str, Rule] | None" = None  # object: its subfields (others are removed)
    only_with_sampling: bool = False  # object: forwarded only when the sampling file sets it too
    string_ok: bool = False  # object: a string is forwarded too (e.g. function_call: "auto")
    item: "Rule | None" = None  # list: what each entry is
    accepts: "Callable[[Any], bool] | None" = None  # forward: the values of the type the API takes (else removed, why)


FORWARD = Rule("forward")


def _typed(why: str, accepts: Callable[[Any], bool]) -> Rule:
    return Rule("forward", why, accepts=accepts)


# A forwarded field holds the type the API takes, or it is removed: an object riding upstream
# under a known name (stream: {"n": 16}) is not understood, and `stream: "true"` would stream an
# answer the gate reads as not streamed (no usage asked, no tokens counted).
STRING = _typed("not a string", lambda v: isinstance(v, str))
BOOLEAN = _typed("not true or false", lambda v: isinstance(v, bool))
LIST = _typed("not a JSON array", lambda v: isinstance(v, list))
OBJECT = _typed("not a JSON object", lambda v: isinstance(v, dict))
TEXT_OR_LIST = _typed("neither a string nor a JSON array", lambda v: isinstance(v, (str, list)))
STOP = _typed("neither a string nor an array of strings",
              lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))
# One prompt: a list of prompts is as many answers (n under another name), and token ids leave
# the finish-now message no place.
ONE_PROMPT = _typed("not one prompt (a string): a list is one answer per prompt", lambda v: isinstance(v, str))


def _obj(string_ok: bool = False, **sub: Rule) -> Rule:
    return Rule("object", sub=sub, string_ok=string_ok)


def _remove(why: str, *names: str) -> dict[str, Rule]:
    return {name: Rule("remove", why) for name in names}


_SAMPLING_NAMES = ("temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "presence_penalty",
                   "frequency_penalty", "repetition_penalty", "logit_bias")
# What one function/custom tool is (the agent runs it): its name, what it is for and its arguments
# schema (a JSON schema or a grammar, forwarded as written). Anything else in an entry is removed.
_FUNCTION = {"name": STRING, "description": STRING, "parameters": OBJECT, "strict": BOOLEAN}
# A custom tool's input format: plain text, or a grammar (Responses flat, chat under `grammar`).
_FORMAT = _obj(type=STRING, syntax=STRING, definition=STRING, grammar=_obj(syntax=STRING, definition=STRING))
_CUSTOM = {"name": STRING, "description": STRING, "format": _FORMAT}
_TYPE = {"type": STRING}
TOOL_SHAPES: dict[str, dict[str, Rule]] = {
    CHAT: {"function": _obj(**_TYPE, function=_obj(**_FUNCTION)), "custom": _obj(**_TYPE, custom=_obj(**_CUSTOM))},
    RESPONSES: {"function": _obj(**_TYPE, **_FUNCTION), "custom": _obj(**_TYPE, **_CUSTOM),
                "local_shell": _obj(**_TYPE), "apply_patch": _obj(**_TYPE),
                "shell": _obj(**_TYPE, environment=_obj(**_TYPE))},
}
# How a tool_choice names one tool the agent runs (chat nests the name, Responses does not).
CHOICE_SHAPES: dict[str, dict[str, Rule]] = {
    CHAT: {"function": _obj(**_TYPE, function=_obj(name=STRING)), "custom": _obj(**_TYPE, custom=_obj(name=STRING))},
    RESPONSES: {"function": _obj(**_TYPE, name=STRING), "custom": _obj(**_TYPE, name=STRING),
                "local_shell": _obj(**_TYPE), "apply_patch": _obj(**_TYPE), "shell": _obj(**_TYPE)},
}
TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required"})
# A shell tool whose commands the agent runs has no environment, or a local one; any other
# environment (container_auto, container_reference) is a shell the provider runs.
LOCAL_SHELL_ENVIRONMENTS = frozenset({"local"})
_JSON_SCHEMA = {"name": STRING, "description": STRING, "schema": OBJECT, "strict": BOOLEAN}

# Every field each endpoint may carry, and what becomes of it; a field not named is removed
# ("unknown field"). The sampling file's own fields are always the ones sent (force_fields).
ALLOWED: dict[str, dict[str, Rule]] = {
    CHAT: {
        **dict.fromkeys(("model", "max_tokens", "max_completion_tokens"), FORWARD),  # set by the gate
        "messages": LIST, "parallel_tool_calls": BOOLEAN, "stream": BOOLEAN, "stop": STOP,
        "functions": Rule("functions"),
        "function_call": Rule("function_call"),
        "response_format": _obj(**_TYPE, json_schema=_obj(**_JSON_SCHEMA)),
        "tools": Rule("tools"),
        "tool_choice": Rule("tool_choice"),
        "stream_options": Rule("object", sub={"include_usage": BOOLEAN}),
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
        **dict.fromkeys(("model", "max_tokens"), FORWARD),  # set by the gate
        "prompt": ONE_PROMPT, "suffix": STRING, "stream": BOOLEAN, "stop": STOP,
        "stream_options": Rule("object", sub={"include_usage": BOOLEAN}),
        "n": Rule("force", WHY_ONE_ANSWER, value=1),
        "best_of": Rule("force", WHY_ONE_ANSWER, value=1),
        **_remove(WHY_SAMPLING, *_SAMPLING_NAMES),
        **_remove(WHY_LOGPROBS, "logprobs"),
        **_remove(WHY_BILLED_EXTRA, "echo"),
        **_remove(WHY_IDENTITY, "user"),
    },
    RESPONSES: {
        **dict.fromkeys(("model", "max_output_tokens"), FORWARD),  # set by the gate
        "input": TEXT_OR_LIST, "instructions": STRING, "stream": BOOLEAN, "parallel_tool_calls": BOOLEAN,
        "truncation": STRING,
        "tools": Rule("tools"),
        "tool_choice": Rule("tool_choice"),
        "include": Rule("include"),
        "text": Rule("object", sub={"format": _obj(**_TYPE, **_JSON_SCHEMA), "verbosity": Rule("remove", WHY_SAMPLING)}),
        "reasoning": Rule("object", WHY_REASONING, only_with_sampling=True,
                          sub={"summary": STRING, "generate_summary": STRING, "effort": Rule("remove", WHY_SAMPLING)}),
        "stream_options": Rule("object", sub={"include_obfuscation": BOOLEAN}),
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


# The one path each generation API is sent to upstream, whatever form of it the client used
# (a trailing slash, an encoded slash): the upstream sees only paths the gate serves.
UPSTREAM_PATHS = {CHAT: "/v1/chat/completions", COMPLETIONS: "/v1/completions", RESPONSES: "/v1/responses"}


def upstream_path(api: str, path: str) -> str:
    """The path sent upstream for a request the gate serves; `path` is the decoded one it classified.

    A model id is sent percent-encoded again (its slashes kept, for ids like org/name), so the
    upstream decodes exactly the id the gate checked: `x%3Fa%3D1` stays one id, never a query,
    and a double-encoded `%252e%252e` never becomes a dot segment upstream."""
    if api in UPSTREAM_PATHS:
        return UPSTREAM_PATHS[api]
    model_id = path[len("/v1/models"):].strip("/")
    return "/v1/models" + (f"/{quote(model_id, safe='/')}" if model_id else "")


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
    """Why a tool (or a tool_choice naming one) is not forwarded; None when the agent runs it itself."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if kind == "shell" and "environment" in tool:
        environment = tool["environment"]
        if not (isinstance(environment, dict) and environment.get("type") in LOCAL_SHELL_ENVIRONMENTS):
            return WHY_HOSTED_SHELL
    if isinstance(kind, str) and kind in TOOL_SHAPES[api]:
        return None
    if isinstance(kind, str) and kind.startswith(PROVIDER_TOOL_PREFIXES):
        return WHY_PROVIDER_TOOL
    return WHY_TOOL_TYPE


def _shape(path: str, value: Any, rule: Rule) -> tuple[Any, list[Removed]]:
    """`value` as the rule forwards it (ABSENT: not at all) and what was removed of it, with why.

    Objects keep only the subfields their rule names, at every depth; lists keep the entries
    their item rule forwards. An object emptied by removals is not sent."""
    if rule.kind == "forward":
        if rule.accepts is not None and not rule.accepts(value):
            return ABSENT, [Removed(path, value, rule.why)]
        return value, []
    if rule.kind == "remove":
        return ABSENT, [Removed(path, value, rule.why)]
    if rule.kind == "list":
        if not isinstance(value, list):
            return ABSENT, [Removed(path, value, WHY_NOT_A_LIST)]
        kept, removed = [], []
        for i, item in enumerate(value):
            shaped, gone = _shape(f"{path}[{i}]", item, rule.item or FORWARD)
            removed += gone
            if shaped is not ABSENT:
                kept.append(shaped)
        return (kept if kept or not value else ABSENT), removed
    # an object
    if isinstance(value, str) and rule.string_ok:
        return value, []
    if not isinstance(value, dict):
        return ABSENT, [Removed(path, value, WHY_NOT_AN_OBJECT)]
    out: dict[str, Any] = {}
    removed = []
    for key, item in value.items():
        sub = (rule.sub or {}).get(key)
        if sub is None:
            removed.append(Removed(f"{path}.{key}", item, WHY_UNKNOWN))
            continue
        shaped, gone = _shape(f"{path}.{key}", item, sub)
        removed += gone
        if shaped is not ABSENT:
            out[key] = shaped
    return (out if out or not value else ABSENT), removed


def _allow_object(path: str, value: dict[str, Any], sub: dict[str, Rule],
                  file_sets: dict[str, Any]) -> tuple[dict[str, Any], list[Removed]]:
    """An object the sampling file also sets: the file's subfields (which it replaces) and the known others."""
    kept: dict[str, Any] = {}
    removed: list[Removed] = []
    for key, item in value.items():
        rule = sub.get(key)
        if key in file_sets:
            kept[key] = item
        elif rule is None:
            removed.append(Removed(f"{path}.{key}", item, WHY_UNKNOWN))
        else:
            shaped, gone = _shape(f"{path}.{key}", item, rule)
            removed += gone
            if shaped is not ABSENT:
                kept[key] = shaped
    return kept, removed


def _allow_tools(api: str, value: Any) -> tuple[Any, list[Removed]]:
    """The tools the agent runs itself, each with only the subfields of its type; the rest removed."""
    if not isinstance(value, list):
        return ABSENT, [Removed("tools", value, WHY_NOT_A_LIST)]
    kept, removed = [], []
    for i, tool in enumerate(value):
        why = _tool_why(api, tool)
        if why is not None:
            removed.append(Removed("tools", tool, why))
            continue
        shaped, gone = _shape(f"tools[{i}]", tool, TOOL_SHAPES[api][tool["type"]])
        if tool["type"] in ("function", "custom") and _tool_key(api, shaped)[1] is None:
            removed.append(Removed("tools", tool, WHY_UNNAMED_TOOL))
            continue
        removed += gone
        kept.append(shaped)
    return (kept if kept or not value else ABSENT), removed


def _tool_key(api: str, entry: Any) -> tuple[str, str | None]:
    """(type, name) of a tool or of a tool_choice naming one; name None when it has none (a shell)."""
    if not isinstance(entry, dict):
        return "", None
    kind = entry.get("type")
    holder = entry.get(kind) if api == CHAT and isinstance(entry.get(kind), dict) else entry
    name = holder.get("name") if isinstance(holder, dict) else None
    return (kind if isinstance(kind, str) else ""), (name if isinstance(name, str) else None)


def _allow_functions(value: Any) -> tuple[Any, list[Removed]]:
    """Chat's older form of function tools: each with a name, and only its known subfields."""
    if not isinstance(value, list):
        return ABSENT, [Removed("functions", value, WHY_NOT_A_LIST)]
    kept, removed = [], []
    for i, function in enumerate(value):
        shaped, gone = _shape(f"functions[{i}]", function, _obj(**_FUNCTION))
        if shaped is ABSENT or not isinstance(shaped.get("name"), str):
            removed.append(Removed("functions", function, WHY_UNNAMED_TOOL))
            continue
        removed += gone
        kept.append(shaped)
    return (kept if kept or not value else ABSENT), removed


def _allow_function_call(value: Any, offered: set[str]) -> tuple[Any, list[Removed]]:
    """`auto`, `none`, or `{name}` of a function the request offers."""
    if isinstance(value, str):
        return (value, []) if value in ("auto", "none") else (ABSENT, [Removed("function_call", value, WHY_TOOL_TYPE)])
    shaped, gone = _shape("function_call", value, _obj(name=STRING))
    if shaped is ABSENT or shaped.get("name") not in offered:
        return ABSENT, [*gone, Removed("function_call", value, WHY_NOT_OFFERED)]
    return shaped, gone


def _allow_tool_choice(api: str, value: Any, offered: set[tuple[str, str | None]]) -> tuple[Any, list[Removed]]:
    """A tool_choice of auto/none/required, or naming tools the request offers (after the
    gate's removals: a hosted shell removed from `tools` cannot be chosen)."""
    if isinstance(value, str):
        return (value, []) if value in TOOL_CHOICE_WORDS else (ABSENT, [Removed("tool_choice", value, WHY_TOOL_TYPE)])
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "allowed_tools":
        # chat nests the list ({"allowed_tools": {"mode", "tools"}}); Responses does not
        holder = value.get("allowed_tools") if api == CHAT else value
        if not isinstance(holder, dict) or not isinstance(holder.get("tools"), list):
            return ABSENT, [Removed("tool_choice", value, WHY_NOT_AN_OBJECT)]
        names, removed = [], []
        for i, named in enumerate(holder["tools"]):
            why = _tool_why(api, named)
            if why is not None:
                removed.append(Removed("tool_choice.tools", named, why))
                continue
            shaped, gone = _shape(f"tool_choice.tools[{i}]", named, CHOICE_SHAPES[api][named["type"]])
            if _tool_key(api, shaped) not in offered:
                removed.append(Removed("tool_choice.tools", named, WHY_NOT_OFFERED))
                continue
            removed += gone
            names.append(shaped)
        if not names:
            return ABSENT, [*removed, Removed("tool_choice", value, WHY_NO_TOOL_LEFT)]
        mode = holder.get("mode")
        inner = {"mode": mode, "tools": names} if isinstance(mode, str) else {"tools": names}
        return ({"type": kind, "allowed_tools": inner} if api == CHAT else {"type": kind, **inner}), removed
    why = _tool_why(api, value)
    if why is not None:
        return ABSENT, [Removed("tool_choice", value, why)]
    shaped, gone = _shape("tool_choice", value, CHOICE_SHAPES[api][kind])
    if _tool_key(api, shaped) not in offered:
        return ABSENT, [*gone, Removed("tool_choice", value, WHY_NOT_OFFERED)]
    return shaped, gone


def _allow_include(value: Any, sampling: dict[str, Any]) -> tuple[Any, list[Removed]]:
    if not isinstance(value, list):
        return ABSENT, [Removed("include", value, WHY_NOT_A_LIST)]
    allowed = INCLUDE_ALWAYS | (INCLUDE_WITH_LOGPROBS if "top_logprobs" in sampling else frozenset())
    kept, removed = [], []
    for item in value:
        if isinstance(item, str) and item in allowed:
            kept.append(item)
        else:
            logprobs = isinstance(item, str) and item in INCLUDE_WITH_LOGPROBS
            removed.append(Removed("include", item, WHY_LOGPROBS if logprobs else WHY_INCLUDE))
    return (kept if kept or not value else ABSENT), removed


def allow_fields(api: str, body: dict[str, Any], sampling: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Change], list[Removed]]:
    """Keep what `ALLOWED` forwards for `api`, force what it forces, remove the rest.

    A field the sampling file sets is left for `force_fields` to replace (so its change is
    logged once, as the file's). Returns the new body, the forced changes and the removed fields.
    """
    table = ALLOWED.get(api, {})
    out: dict[str, Any] = {}
    changes: dict[str, Change] = {}
    removed: list[Removed] = []
    chosen: dict[str, Any] = {}  # tool_choice, function_call: judged once the offered tools are known
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
            continue
        if rule.kind == "force":
            out[key] = rule.value
            changes[key] = Change(value, rule.value, rule.why)
            continue
        if rule.kind == "object" and rule.only_with_sampling:
            shaped, gone = ABSENT, [Removed(key, value, rule.why)]
        elif rule.kind == "tools":
            shaped, gone = _allow_tools(api, value)
        elif rule.kind in ("tool_choice", "function_call"):
            chosen[key] = value
            continue
        elif rule.kind == "functions":
            shaped, gone = _allow_functions(value)
        elif rule.kind == "include":
            shaped, gone = _allow_include(value, sampling)
        else:
            shaped, gone = _shape(key, value, rule)
        removed += gone
        if shaped is not ABSENT:
            out[key] = shaped
    if "tool_choice" in chosen:
        offered = {_tool_key(api, tool) for tool in out.get("tools", [])}
        shaped, gone = _allow_tool_choice(api, chosen["tool_choice"], offered)
        removed += gone
        if shaped is not ABSENT:
            out["tool_choice"] = shaped
    if "function_call" in chosen:
        names = {f["name"] for f in out.get("functions", [])}
        shaped, gone = _allow_function_call(chosen["function_call"], names)
        removed += gone
        if shaped is not ABSENT:
            out["function_call"] = shaped
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
