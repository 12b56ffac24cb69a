"""What one gate enforces: the run's settings, as one pydantic model the run orchestrator fills."""

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from showcase.errors import UserError

# Fields the gate owns; a sampling file that set them would fight the gate's own rewriting.
RESERVED_SAMPLING_FIELDS = frozenset(
    {"model", "messages", "prompt", "input", "stream", "stream_options", "tools", "tool_choice",
     "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of", "store", "background"}
)


class UpstreamTimeouts(BaseModel):
    """Bounds on every wait for the upstream; a fault past one is answered, never waited out."""

    connect_s: float = Field(10.0, gt=0, description="TCP/Unix connect to the upstream")
    first_byte_s: float | None = Field(
        1800.0, gt=0,
        description="from sending the request to the response headers; for a non-streamed request "
        "that is the whole answer, so this bound is long. None: only the hard stop (a run's gate: "
        "an answer's bound is the run's)",
    )
    stall_s: float = Field(300.0, gt=0, description="longest silence between two chunks once a body flows")
    write_s: float = Field(60.0, gt=0, description="sending the request body upstream")


MiB = 1 << 20


class GateLimits(BaseModel):
    """Caps on what one request may cost the gate: what the agent or the upstream send is never
    taken without a bound, and what goes past one is cut and said so, never waited out."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    max_request_bytes: int = Field(32 * MiB, gt=0)
    """A request body larger than this is refused with 413, unread past the cap (a coding agent's
    whole history is a few MB; images inlined as base64 fit too)."""

    max_held_request_bytes: int = Field(64 * MiB, gt=0)
    """Request bodies the gate holds at once, all requests together (each counted from its first
    byte until its answer ends). A request whose body would pass it is answered 503
    `gate_busy` at once, its connection closed: whatever the number of connections, the gate's
    memory stays bounded (two bodies of the largest size, or dozens of an agent's usual few MB).
    At least `max_request_bytes`, so every body that may be sent can pass alone."""

    max_requests_at_once: int = Field(16, gt=0)
    """Requests under way at once (from the body's first byte to the answer's end). One more is
    answered 429 `too_many_requests` at once, counted as blocked: what a run can cost is bounded
    by this many answers at a time, not by how many the agent opens (a coding agent waits for its
    answer; sub-agents add a few)."""

    max_event_bytes: int = Field(8 * MiB, gt=0)
    """One server-sent event (up to its blank line) larger than this cuts the stream: the biggest
    real event is Responses' final `response.completed`, which repeats the whole answer."""

    max_answer_bytes: int = Field(64 * MiB, gt=0)
    """An answer (streamed or not) larger than this is cut: a 32k-token answer streams a few MB."""

    answer_s: float | None = Field(None, gt=0)
    """Wall time from a request's arrival to its answer's last byte; a stream still running then is
    cut, however steadily it sends (the stall bound only catches silence). None (a run's gate): no
    bound of its own, the answer is cut at the run's hard stop, which is the bound that matters (a
    thinking model writing a 262,144-token answer at 60 tokens/s needs 73 minutes). `showcase
    gate` alone sets one (`--answer-timeout`, default 3600 s)."""

    max_stored_body_bytes: int = Field(64 * MiB, gt=0)
    """A body larger than this is not kept under bodies/; its log line says so."""

    max_stored_bytes: int = Field(1024 * MiB, gt=0)
    """Bodies kept under bodies/ and gate.log's field entries, in all; past it, further bodies are
    not kept and lines list no field entries, only their count (each line says so). Every request
    repeats the agent's history, so a long run keeps hundreds of MB."""

    @model_validator(mode="after")
    def _one_body_fits(self) -> "GateLimits":
        if self.max_held_request_bytes < self.max_request_bytes:
            raise ValueError(f"max_held_request_bytes ({self.max_held_request_bytes}) is below max_request_bytes "
                             f"({self.max_request_bytes}): a body the gate accepts could never be held")
        return self


class GateConfig(BaseModel):
    """Everything the gate enforces on the wire for one run."""

    upstream: str = Field(
        description="base URL of the user's OpenAI-compatible endpoint, as the openai SDK takes it "
        "(e.g. http://127.0.0.1:8000/v1); a base without /v1 gets the client's /v1 path appended"
    )
    model: str = Field(description="model name forced into every request")
    api_key_upstream: str | None = Field(None, description="Bearer key sent to the upstream; None sends no Authorization")
    key: str | None = Field(
        None, description="per-run key the client must present as 'Authorization: Bearer KEY'; None = no key check"
    )
    sampling: dict[str, Any] = Field(
        default_factory=dict,
        description="fields forced into every generation request; nested objects are merged key by key "
        "(e.g. chat_template_kwargs.enable_thinking)",
    )
    sampling_source: str | None = Field(None, description="where the sampling came from (file path), for the record")
    answer_limit: int | None = Field(
        None, gt=0, description="answer tokens: set where a request has none, capped where it asks more"
    )
    finish_now_after_s: float | None = Field(
        None, ge=0, description="from this many seconds after the run's start, append the finish-now user turn"
    )
    finish_now_text: str | None = Field(None, description="the task's finish-now message")
    hard_stop_after_s: float | None = Field(
        None, ge=0, description="from this many seconds after the run's start, refuse every request"
    )
    log_dir: Path = Field(description="folder for gate.log, gate-stats.json and bodies/")
    upstream_timeout_s: UpstreamTimeouts = Field(
        default_factory=UpstreamTimeouts, description="connect / first byte / stall bounds on the upstream"
    )
    upstream_ca_file: Path | None = Field(
        None, description="PEM file of the CA that signed an HTTPS upstream's certificate (default: certifi's CAs)"
    )
    keep_bodies: bool = Field(True, description="keep each request and response body under log_dir/bodies/")
    limits: GateLimits = Field(default_factory=GateLimits, description="caps on bodies, events, answers and stored bodies")

    @field_validator("upstream")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"upstream must be an http(s) URL, got {value!r}")
        return value.rstrip("/")

    @field_validator("sampling")
    @classmethod
    def _no_reserved(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(RESERVED_SAMPLING_FIELDS & value.keys())
        if clash:
            raise ValueError(
                f"sampling may not set {', '.join(clash)}: the gate sets the model, the answer limit "
                "(--answer-limit), streaming, tools and one answer per request itself"
            )
        return value

    @model_validator(mode="after")
    def _finish_now_has_text(self) -> "GateConfig":
        if self.finish_now_after_s is not None and not self.finish_now_text:
            raise ValueError("finish_now_after_s is set but finish_now_text is empty")
        return self


def load_sampling(path: Path) -> dict[str, Any]:
    """Read a sampling file: one JSON object of request fields. Bad input is a one-line UserError."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"sampling file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"sampling file {path}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"sampling file {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"sampling file {path}: must hold one JSON object of request fields, got {type(data).__name__}")
    clash = sorted(RESERVED_SAMPLING_FIELDS & data.keys())
    if clash:
        raise UserError(f"sampling file {path}: may not set {', '.join(clash)} (the gate sets these itself)")
    return data
