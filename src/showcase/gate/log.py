"""The gate's records: gate.log (one JSON line per request), bodies/ beside it, gate-stats.json.

gate.log is append-only, each line written whole and fsynced (showcase.io.append_jsonl);
gate-stats.json is replaced atomically (showcase.io.write_text_atomic). The files are written by
one writer thread, in the order the gate hands them over, so disk time never stalls the event
loop that serves requests; close() drains it (a hard kill of the process loses at most the few
writes not yet done, and a reader skips a line it cut).
"""

import json
import queue
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field, field_validator

from showcase.errors import UserError
from showcase.io import append_jsonl, scan_jsonl, write_text_atomic

LOG_NAME = "gate.log"
STATS_NAME = "gate-stats.json"
BODIES_DIR = "bodies"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Bounds on what one request's line says of its fields: an agent controls their number and size.
MAX_FIELD_ENTRIES = 100
MAX_LOGGED_VALUE_BYTES = 1000
MAX_LOGGED_NAME_CHARS = 200  # a field's name is the agent's too: 100 names of 100 KB would make a 10 MB line


def _bounded(value: Any) -> tuple[Any, int | None]:
    """(the value, None), or (None, its size in bytes) when it is too long to log.

    A value orjson will not write (an integer past 64 bits, a lone surrogate, deeper than 255)
    is logged by its size alone (the stdlib's, escaped), or none when even that is too deep."""
    try:
        size = len(orjson.dumps(value))
    except TypeError:
        try:
            return None, len(json.dumps(value, ensure_ascii=True, separators=(",", ":")))
        except RecursionError:
            return None, None
    return (None, size) if size > MAX_LOGGED_VALUE_BYTES else (value, None)


def _escaped(value: Any) -> Any:
    """Every string (keys too) with a lone surrogate written as its escape (`\\udce9`): what JSON
    readers take, where the raw code point would make the whole line unwritable."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def _bounded_name(name: str) -> str:
    name = _escaped(name)
    if len(name) <= MAX_LOGGED_NAME_CHARS:
        return name
    return f"{name[:MAX_LOGGED_NAME_CHARS]}... ({len(name):,} characters)"


class ChangedField(BaseModel):
    """One request field the gate set to another value than the client's."""

    field: str = Field(description="dotted path, e.g. 'model', 'reasoning.effort'")
    why: str = Field(description="why the gate set it (a short fixed reason, e.g. 'the sampling file')")
    present: bool = Field(description="whether the client's request had this field at all")
    requested: Any = Field(None, description="the client's value (null when absent or too long to log)")
    requested_bytes: int | None = Field(None, description=f"the client's value's JSON size, when over {MAX_LOGGED_VALUE_BYTES} bytes")
    enforced: Any = Field(None, description="the value sent upstream (null when too long to log)")
    enforced_bytes: int | None = Field(None, description=f"the value's JSON size, when over {MAX_LOGGED_VALUE_BYTES} bytes")


class RemovedField(BaseModel):
    """One request field (or one entry of a list field, such as a tool) the gate did not forward."""

    field: str = Field(description="dotted path; a list entry is named by its list, e.g. 'tools'")
    why: str = Field(description="why it was removed (a short fixed reason, e.g. 'unknown field')")
    value: Any = Field(None, description="the client's value (null when too long to log)")
    value_bytes: int | None = Field(None, description=f"the value's JSON size, when over {MAX_LOGGED_VALUE_BYTES} bytes")


class RequestFields(BaseModel):
    """What the gate changed and removed of one request's fields."""

    changed: list[ChangedField] = Field(default_factory=list, description="fields set to another value, each with why")
    removed: list[RemovedField] = Field(default_factory=list, description="fields not forwarded, each with why")
    not_listed: int = Field(0, description=f"entries left out past the first {MAX_FIELD_ENTRIES} of this request")
    not_listed_why: str | None = Field(
        None, description="why no entry is listed at all (the gate's storage cap was reached: only counted)")

    @classmethod
    def bounded(cls, changed: list[tuple[str, str, bool, Any, Any]], removed: list[tuple[str, str, Any]]) -> "RequestFields":
        """From (field, why, present, requested, enforced) and (field, why, value) tuples, within the bounds."""
        out = cls()
        room = MAX_FIELD_ENTRIES
        for name, why, present, requested, enforced in changed[:room]:
            requested, requested_bytes = _bounded(requested)
            enforced, enforced_bytes = _bounded(enforced)
            out.changed.append(ChangedField(field=_bounded_name(name), why=why, present=present, requested=requested,
                                            requested_bytes=requested_bytes, enforced=enforced,
                                            enforced_bytes=enforced_bytes))
        room -= len(out.changed)
        for name, why, value in removed[:room]:
            out.add_removed(name, why, value)
        out.not_listed = len(changed) + len(removed) - len(out.changed) - len(out.removed)
        return out

    def add_removed(self, name: str, why: str, value: Any) -> None:
        """One more removed field, within the bounds (past them it is only counted)."""
        if len(self.changed) + len(self.removed) >= MAX_FIELD_ENTRIES:
            self.not_listed += 1
            return
        value, value_bytes = _bounded(value)
        self.removed.append(RemovedField(field=_bounded_name(name), why=why, value=value, value_bytes=value_bytes))

    def change(self, name: str) -> ChangedField | None:
        """The change of one field, if the gate changed it."""
        return next((c for c in self.changed if c.field == name), None)


class GateLogLine(BaseModel):
    """One request through the gate: one line of gate.log."""

    time: str = Field(description="UTC time the request arrived (ISO 8601)")
    t_s: float | None = Field(description="seconds since the run's start when it arrived; null before the clock started")
    id: str = Field(description="request id, unique in the run, in arrival order; names the body files")
    kind: Literal["api", "tool"] = Field(description="'api' for a model API request, 'tool' for the run's own endpoints")
    method: str = Field(description="HTTP method")
    path: str = Field(description="request path as the client sent it (query string excluded)")
    api: str | None = Field(
        None, description="chat, completions, responses, models or other (another /v1 path); null outside the API"
    )
    stream: bool = Field(False, description="whether the answer was a server-sent event stream")
    status: int = Field(description="HTTP status the client got")
    fields: RequestFields = Field(
        default_factory=RequestFields, description="the request's fields the gate changed or removed, each with why"
    )
    prompt_tokens: int | None = Field(None, description="prompt tokens as the upstream counted them")
    answer_tokens: int | None = Field(None, description="answer (completion/output) tokens as the upstream counted them")
    latency_ms: float = Field(description="from the request's arrival to the answer's last byte")
    first_byte_ms: float | None = Field(None, description="from arrival to the upstream's response headers")
    finish_reason: str | None = Field(None, description="finish reason (chat/completions) or response status (Responses API)")
    injected: bool = Field(False, description="the finish-now message was appended to this request")
    blocked: bool = Field(False, description="the gate refused the request (it never reached the upstream)")
    blocked_why: str | None = Field(None, description="why it was refused")
    shortened: bool = Field(
        False, description="the request asked for more answer tokens than the answer limit, or its answer was cut"
    )
    shortened_why: str | None = Field(
        None, description="which field asked how much; 'answer cut: ...' when a cap or the hard stop ended the answer"
    )
    error: str | None = Field(None, description="upstream fault (refused, 4xx/5xx, reset, stall), as told to the client")
    client_gone: bool = Field(False, description="the client closed the connection before the answer ended")
    not_completed: bool = Field(
        False, description="the request never completed: its body was still arriving at the hard stop, or its "
        "client left before the answer ended"
    )
    not_completed_why: str | None = Field(None, description="why it never completed")
    bytes_in: int = Field(0, description="request body size as received")
    bytes_out: int = Field(0, description="answer body size as sent to the client")
    bodies: list[str] = Field(default_factory=list, description="body files kept for this request, relative to the log folder")
    bodies_not_kept: list[str] = Field(
        default_factory=list, description="bodies of this request not kept, each with why (over a storage cap)"
    )

    @field_validator("fields", mode="before")
    @classmethod
    def _fields_of_older_lines(cls, value: Any) -> Any:
        # Lines written before fields had `changed`/`removed` held {dotted path: {present, requested, enforced}}.
        if isinstance(value, dict) and value and not value.keys() <= set(RequestFields.model_fields):
            return {"changed": [{"field": name, "why": "forced", **change} for name, change in value.items()
                                if isinstance(change, dict)]}
        return value


class GateStats(BaseModel):
    """The gate's counters: gate-stats.json, rewritten atomically as each request finishes."""

    started_at: str = Field(description="UTC time the gate was created")
    clock_started_at: str | None = Field(None, description="UTC time of the run's t=0 (start_clock); null if never started")
    updated_at: str = Field(description="UTC time of the last update")
    requests: int = Field(0, description="model API requests finished (blocked ones included)")
    not_completed: int = Field(
        0, description="requests that never completed: body still arriving at the hard stop, or client gone before the answer"
    )
    errors: int = Field(0, description="requests that ended in an upstream fault (refused, 4xx/5xx, reset, stall)")
    blocked: int = Field(0, description="requests the gate refused")
    blocked_why: dict[str, int] = Field(default_factory=dict, description="refused requests by reason")
    shortened: int = Field(0, description="requests whose answer limit was capped or whose answer was cut")
    bodies_kept_bytes: int = Field(0, description="bytes of bodies kept under bodies/")
    bodies_not_kept: int = Field(0, description="bodies not kept because a storage cap was reached")
    prompt_tokens: int = Field(0, description="sum of prompt tokens the upstream reported")
    answer_tokens: int = Field(0, description="sum of answer tokens the upstream reported")
    finish_now_count: int = Field(0, description="requests that got the finish-now message")
    finish_now_first_s: float | None = Field(None, description="seconds since the run's start of the first finish-now")
    finish_now_first_at: str | None = Field(None, description="UTC time of the first finish-now")
    tool_requests: int = Field(0, description="requests to the run's own endpoints (kind 'tool')")
    hard_stopped: bool = Field(False, description="the gate refuses everything (the run's hard stop passed)")
    last_request_id: str | None = Field(None, description="id of the latest model API request received")


class GateRecorder:
    """Writes the records into one folder. A folder that already holds a gate.log is refused:
    ids would collide and two runs' lines would mix."""

    def __init__(self, log_dir: Path, keep_bodies: bool = True, max_body_bytes: int | None = None,
                 max_total_bytes: int | None = None) -> None:
        self.dir = Path(log_dir)
        self._dir_str = str(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / LOG_NAME
        self.stats_path = self.dir / STATS_NAME
        self.bodies_dir = self.dir / BODIES_DIR
        if self.log_path.exists() and self.log_path.stat().st_size > 0:
            raise UserError(f"{self.log_path} already holds a gate log; give the gate an empty log folder")
        self.keep_bodies = keep_bodies
        self.max_body_bytes = max_body_bytes
        self.max_total_bytes = max_total_bytes
        self.kept_bytes = 0  # bodies handed over to be kept so far (counted here, not when written)
        # What gate.log's field entries took so far (counted in the writer): they share the storage
        # cap with the bodies, since the agent chooses their size. A line's own facts always land.
        self.fields_bytes = 0
        if keep_bodies:
            self.bodies_dir.mkdir(exist_ok=True)
        self.log_path.touch()
        self.write_errors: list[str] = []  # what could not be written (disk full...), for whoever asks
        self._queue: queue.Queue = queue.Queue()
        self._writer = threading.Thread(target=self._write_loop, name="showcase-gate-records", daemon=True)
        self._writer.start()

    def body_name(self, request_id: str, suffix: str) -> str | None:
        """Where a body will be kept, relative to the log folder (None when bodies are off)."""
        return f"{BODIES_DIR}/{request_id}.{suffix}" if self.keep_bodies else None

    def body(self, request_id: str, suffix: str, data: bytes | list[bytes], size: int) -> tuple[str | None, str | None]:
        """Keep one body of `size` bytes (written in the background).

        Returns (its name relative to the log folder, None), or (None, why it was not kept) when
        it passes a cap; (None, None) when bodies are off."""
        name = self.body_name(request_id, suffix)
        if name is None:
            return None, None
        if self.max_body_bytes is not None and size > self.max_body_bytes:
            return None, f"{size} bytes, over the {self.max_body_bytes}-byte cap on one stored body"
        if self.max_total_bytes is not None and self.kept_bytes + self.fields_bytes + size > self.max_total_bytes:
            return None, f"{size} bytes; the {self.max_total_bytes}-byte cap on all stored bodies is reached"
        self.kept_bytes += size
        self._queue.put(("body", f"{self._dir_str}/{name}", data))
        return name, None

    def line(self, line: GateLogLine) -> None:
        """Hand over a finished line (serialised in the writer thread: nothing changes it any more)."""
        self._queue.put(("line", None, line))

    def stats(self, stats: GateStats) -> None:
        # Serialised now, in the caller's thread: the stats object keeps changing after this call.
        self._queue.put(("stats", None, stats.model_dump_json(indent=2) + "\n"))

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything handed over so far is on disk; False if the bound passed."""
        done = threading.Event()
        self._queue.put(("mark", None, done))
        return done.wait(timeout_s)

    def _write_loop(self) -> None:
        pending_stats: str | None = None
        while True:
            if pending_stats is not None and self._queue.empty():
                # Stats are written once the queue is drained: a burst of requests costs one
                # replace of gate-stats.json, not one each, and the file is still current.
                self._guarded("stats", self.stats_path, self._write_stats, pending_stats)
                pending_stats = None
            kind, path, data = self._queue.get()
            if kind == "stats":
                pending_stats = data
            elif kind == "line":
                self._guarded(kind, self.log_path, self._write_line, data)
            elif kind == "body":
                self._guarded(kind, path, self._write_body, path, data)
            elif kind == "mark":
                if pending_stats is not None:
                    self._guarded("stats", self.stats_path, self._write_stats, pending_stats)
                    pending_stats = None
                data.set()
            elif kind == "stop":
                if pending_stats is not None:
                    self._guarded("stats", self.stats_path, self._write_stats, pending_stats)
                return

    def _guarded(self, kind: str, path: Path, write, *args: Any) -> None:
        try:
            write(*args)
        except Exception as exc:  # a full disk (or a record it cannot write) costs that file, never the writer
            self.write_errors.append(f"{kind} {path}: {exc.__class__.__name__}: {exc}")

    def _write_line(self, line: GateLogLine) -> None:
        entries = line.fields.changed or line.fields.removed
        if entries and self.max_total_bytes is not None:
            try:
                size = len(line.fields.model_dump_json())
            except ValueError:  # a lone surrogate in a value: its escaped form is what lands
                size = len(json.dumps(_escaped(line.fields.model_dump())))
            if self.kept_bytes + self.fields_bytes + size > self.max_total_bytes:
                fields = line.fields
                line.fields = RequestFields(
                    not_listed=len(fields.changed) + len(fields.removed) + fields.not_listed,
                    not_listed_why=f"the {self.max_total_bytes}-byte cap on what the gate stores is reached")
            else:
                self.fields_bytes += size
        try:
            append_jsonl(self.log_path, line)
        except ValueError:
            # A lone surrogate (an agent's field name, an upstream's \\udcXX escape) that the
            # serialiser refuses: the same line with every string escaped.
            append_jsonl(self.log_path, _escaped(line.model_dump()))

    def _write_stats(self, text: str) -> None:
        write_text_atomic(self.stats_path, text)

    @staticmethod
    def _write_body(path: str, data: bytes | list[bytes]) -> None:
        with open(path, "wb") as out:
            if isinstance(data, list):
                out.writelines(data)
            else:
                out.write(data)

    def close(self, timeout_s: float = 30.0) -> None:
        """Write everything still queued."""
        if self._writer.is_alive():
            self._queue.put(("stop", None, None))
            self._writer.join(timeout_s)


def read_log(path: Path) -> list[GateLogLine]:
    """All whole lines of a gate.log, validated; a line torn by a killed gate is left out."""
    return [GateLogLine.model_validate(row) for row in scan_jsonl(path)[0]]


def count_request(stats: GateStats, line: GateLogLine) -> None:
    """Count one finished request into `stats`: the one place the gate's counters are kept
    (the live gate counts each line as it finishes, `stats_from_log` a whole gate.log)."""
    if line.kind == "tool":
        stats.tool_requests += 1
    else:
        stats.requests += 1
        latest = stats.last_request_id
        stats.last_request_id = line.id if latest is None else max(latest, line.id, key=lambda i: (len(i), i))
    if line.blocked:
        stats.blocked += 1
        why = line.blocked_why or "?"
        # A new dict, not an update: start_clock()/hard_stop() may serialise the stats from the
        # run's own thread at this moment, and must never see a dict change size under it.
        stats.blocked_why = {**stats.blocked_why, why: stats.blocked_why.get(why, 0) + 1}
    elif line.error and line.kind == "api":
        stats.errors += 1
    if line.not_completed and line.kind == "api":
        stats.not_completed += 1
    if line.shortened:
        stats.shortened += 1
    stats.bodies_not_kept += len(line.bodies_not_kept)
    stats.prompt_tokens += line.prompt_tokens or 0
    stats.answer_tokens += line.answer_tokens or 0


def count_finish_now(stats: GateStats, line: GateLogLine) -> None:
    """Count a request that got the finish-now message (the live gate does so when it is sent)."""
    stats.finish_now_count += 1
    if stats.finish_now_first_s is None:
        stats.finish_now_first_s = line.t_s
        stats.finish_now_first_at = line.time


def stats_from_log(path: Path) -> GateStats:
    """The gate's counters rebuilt from a gate.log (for a run whose gate-stats.json is missing or torn)."""
    now = utc_now()
    stats = GateStats(started_at=now, updated_at=now)
    for line in read_log(path) if path.exists() else []:
        count_request(stats, line)
        if line.injected:
            count_finish_now(stats, line)
    return stats
