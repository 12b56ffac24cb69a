"""Read one run folder into a RunView, tolerating missing, partial and unfinished files.

The files are written by other parts of the engine (run, gate, check) whose pydantic models may
grow; the report reads them as plain dicts and looks fields up under the names they have used, so
a new field never breaks a page and a missing file shows as "not recorded". A run that was killed
before it finished still gets a page that says what is there and what is not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# Files that mark a folder as a run folder (any one of them is enough).
RUN_FILES = (
    "command.txt",
    "contract.json",
    "run-info.json",
    "versions.jsonl",
    "gate.log",
    "events.jsonl",
    "check.json",
    "final-choice.json",
)

# The ten items of checks/rubric.toml, used when check.json gives no name for an item.
ITEM_NAMES = {
    "1": "loads",
    "2": "ready",
    "3": "no console errors",
    "4": "not blank",
    "5": "frame rate",
    "6a": "world size",
    "6b": "English",
    "7": "tour, window 1",
    "8": "tour, window 2",
    "9": "animation",
    "10": "controls",
}
ITEM_MAX = {"1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "6a": 0.5, "6b": 0.5, "7": 1, "8": 1, "9": 1, "10": 1}

_MISSING = object()


def pick(data: Any, *paths: str, default: Any = None) -> Any:
    """The first value found under any of the dotted paths ('a.b.c'); `default` when none is there.

    None counts as "not there", so a later name can still answer.
    """
    for path in paths:
        cur: Any = data
        for key in path.split("."):
            if isinstance(cur, dict) and key in cur:
                cur = cur[key]
            else:
                cur = _MISSING
                break
        if cur is not _MISSING and cur is not None:
            return cur
    return default


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def first_num(*values: Any) -> float | None:
    """The first value that is a number (0 included), as float."""
    for v in values:
        f = as_float(v)
        if f is not None:
            return f
    return None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "ok", "1"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "no", "0"):
        return False
    return None


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 string or epoch seconds -> datetime, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1e9:
        return datetime.fromtimestamp(float(value)).astimezone()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


@dataclass
class Version:
    """One distinct version of the page, as versions.jsonl tells it (updates folded in)."""

    n: int
    t_s: float | None
    sha256: str
    size: int | None
    loaded: bool | None  # loaded without errors; None while its load check had no result
    errors: list[str]
    request_id: str | None
    check_failure: str | None  # the load check itself failed (our fault, not the page's)
    file: str | None  # path relative to the run folder, when the file is there
    thumb: str | None  # screenshot of this version, relative to the run folder
    thumb_note: str | None = None  # where the thumbnail comes from, when it is not the version's own
    chosen: bool = False
    raw: dict = field(default_factory=dict)


@dataclass
class Item:
    id: str
    name: str
    points: float | None
    max_points: float | None
    passed: bool | None
    reason: str
    figures: list[tuple[str, str]]


@dataclass
class AgentShot:
    """A screenshot the agent asked for with shot.sh (work/shots/shot-NNN.png)."""

    path: str  # relative to the run folder
    t_s: float | None  # seconds since the run's start, from the file's time


@dataclass
class TokenPoint:
    t_s: float
    prompt: int
    answer: int
    status: str


@dataclass
class RunView:
    """Everything the report shows about one run; every field may be absent."""

    dir: Path
    label: str | None = None  # how a comparison names it (the folder name, made unique)
    command: str | None = None
    contract: dict | None = None
    sampling: dict | None = None
    run_info: dict | None = None
    gate_stats: dict | None = None
    final_choice: dict | None = None
    check: dict | None = None
    clip_info: dict | None = None  # clip.json, when the clip step wrote one
    gate_lines: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    versions: list[Version] = field(default_factory=list)
    screenshot: str | None = None
    clip: str | None = None
    agent_shots: list[AgentShot] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    # ---- who ran -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.label or self.dir.name or str(self.dir)

    @property
    def model(self) -> str | None:
        return pick(self.contract, "model", "model_name", "upstream.model") or pick(self.run_info, "model")

    @property
    def harness(self) -> str | None:
        name = pick(self.contract, "harness.id", "harness_id", "harness.name", "harness")
        if isinstance(name, dict):
            name = None
        version = pick(self.contract, "harness.version", "harness_version")
        if name and version:
            return f"{name} {version}"
        return name or pick(self.run_info, "harness")

    @property
    def world_title(self) -> str | None:
        return pick(self.run_info, "world_title")

    @property
    def task(self) -> str | None:
        return pick(self.contract, "task_id", "task.id", "task")

    # ---- check ---------------------------------------------------------------------------
    @property
    def score(self) -> float | None:
        return as_float(pick(self.check, "total", "score", "points"))

    @property
    def score_max(self) -> float:
        return as_float(pick(self.check, "max_total", "max", "out_of")) or 10.0

    @property
    def check_summary(self) -> str | None:
        return pick(self.check, "summary", "sentence")

    @property
    def items(self) -> list[Item]:
        raw = pick(self.check, "items", default=[])
        if isinstance(raw, dict):  # {"1": {...}, ...}
            raw = [dict(v, id=k) if isinstance(v, dict) else {"id": k, "points": v} for k, v in raw.items()]
        out = []
        for i, it in enumerate(raw if isinstance(raw, list) else []):
            if not isinstance(it, dict):
                continue
            item_id = str(pick(it, "id", "number", "item", "key", default=i + 1))
            points = as_float(pick(it, "points", "score"))
            max_points = as_float(pick(it, "max_points", "max", "out_of")) or ITEM_MAX.get(item_id)
            passed = as_bool(pick(it, "passed", "ok", "pass"))
            if passed is None and points is not None and max_points:
                passed = points >= max_points
            figures = pick(it, "figures", "measures", "details", default={})
            out.append(
                Item(
                    id=item_id,
                    name=str(pick(it, "name", "title", "label", default=ITEM_NAMES.get(item_id, f"item {item_id}"))),
                    points=points,
                    max_points=max_points,
                    passed=passed,
                    reason=str(pick(it, "reason", "why", "note", default="")),
                    figures=flatten(figures) if isinstance(figures, dict) else ([("", str(figures))] if figures else []),
                )
            )
        return out

    @property
    def items_lost(self) -> str:
        """'frame rate 0.5/1, controls 0/1': the items that did not get all their points."""
        return ", ".join(
            f"{it.name} {fmt_value(it.points)}/{fmt_value(it.max_points)}" for it in self.items if it.passed is False
        )

    @property
    def items_passed(self) -> str | None:
        items = self.items
        if not items:
            return None
        full = sum(1 for it in items if it.passed)
        return f"{full}/{len(items)}"

    # ---- run -----------------------------------------------------------------------------
    def event_time(self, *names: str) -> float | None:
        """Seconds since start of the first event with one of these names."""
        for ev in self.events:
            if ev.get("event") in names:
                # the moment itself (detail.at_s, on the run's clock) beats when it was logged
                t = first_num(pick(ev, "detail.at_s"), ev.get("t_s"))
                if t is not None:
                    return t
        return None

    def event_detail(self, name: str, key: str) -> Any:
        ev = next((e for e in self.events if e.get("event") == name), None)
        return pick(ev, f"detail.{key}") if ev else None

    @property
    def finish_now_s(self) -> float | None:
        t = self.event_time("finish_now_first", "finish_now")
        if t is None:
            t = first_num(pick(self.run_info, "finish_now_first_s"), pick(self.gate_stats, "finish_now_first_s"))
        return t

    @property
    def finish_now_from_s(self) -> float | None:
        return first_num(
            pick(self.contract, "limits.finish_now_after_s", "limits.inject_after_s", "inject_after_s"),
            pick(self.run_info, "finish_now_after_s"),
            self.event_detail("agent_started", "inject_after_s"),
        )

    @property
    def hard_stop_s(self) -> float | None:
        t = self.event_time("hard_stop")
        if t is None and pick(self.run_info, "agent_end") == "killed_at_hard_stop":
            t = self.limit_s
        return t

    @property
    def limit_s(self) -> float | None:
        return first_num(
            pick(self.contract, "limits.hard_stop_s", "limits.limit_s", "limit_s"), self.event_detail("agent_started", "limit_s")
        )

    @property
    def ended_s(self) -> float | None:
        return self.event_time("agent_ended")

    @property
    def minutes(self) -> float | None:
        m = as_float(pick(self.run_info, "minutes_run", "minutes", "duration_min"))
        if m is not None:
            return m
        secs = as_float(pick(self.run_info, "duration_s", "seconds", "elapsed_s"))
        if secs is not None:
            return secs / 60
        start = parse_time(pick(self.run_info, "started_at", "start"))
        end = parse_time(pick(self.run_info, "ended_at", "end"))
        if start and end:
            try:
                return (end - start).total_seconds() / 60
            except TypeError:  # one time with a timezone, one without
                pass
        if self.ended_s is not None:
            return self.ended_s / 60
        return None

    @property
    def start_epoch(self) -> float | None:
        """The run's t=0 as epoch seconds (to place files by their modification time)."""
        epoch = as_float(self.event_detail("agent_started", "start_epoch"))
        if epoch is not None:
            return epoch
        for when in (pick(self.run_info, "started_at"), pick(self.gate_stats, "clock_started_at")):
            t = parse_time(when)
            if t is not None and t.tzinfo is not None:
                return t.timestamp()
        return None

    @property
    def last_record_s(self) -> float | None:
        """The latest time any record of the run carries (a killed run's best guess at its end)."""
        ts = [v.t_s for v in self.versions if v.t_s is not None]
        ts += [p.t_s for p in self.token_points]
        ts += [t for e in self.events if (t := as_float(e.get("t_s"))) is not None]
        return max(ts) if ts else None

    @property
    def ended_how(self) -> str | None:
        how = pick(self.run_info, "agent_end", "ended", "end_reason") or self.event_detail("agent_ended", "how")
        if isinstance(how, dict):
            how = pick(how, "how", "reason", "kind")
        return str(how) if how is not None else None

    @property
    def prompt_tokens(self) -> int | None:
        v = as_float(pick(self.run_info, "prompt_tokens", "tokens.prompt", "usage.prompt_tokens"))
        if v is None:
            v = as_float(pick(self.gate_stats, "prompt_tokens", "tokens.prompt"))
        if v is None and self.token_points:
            v = self.token_points[-1].prompt
        return int(v) if v is not None else None

    @property
    def answer_tokens(self) -> int | None:
        v = as_float(pick(self.run_info, "answer_tokens", "completion_tokens", "tokens.answer", "usage.completion_tokens"))
        if v is None:
            v = as_float(pick(self.gate_stats, "answer_tokens", "completion_tokens", "tokens.answer"))
        if v is None and self.token_points:
            v = self.token_points[-1].answer
        return int(v) if v is not None else None

    @property
    def total_tokens(self) -> int | None:
        p, a = self.prompt_tokens, self.answer_tokens
        if p is None and a is None:
            return None
        return (p or 0) + (a or 0)

    @property
    def versions_seen(self) -> int | None:
        v = as_float(pick(self.run_info, "versions_seen", "versions.seen"))
        return int(v) if v is not None else (len(self.versions) if self.versions else None)

    @property
    def versions_loaded(self) -> int | None:
        v = as_float(pick(self.run_info, "versions_loaded_without_errors", "versions_loaded"))
        if v is not None:
            return int(v)
        return sum(1 for x in self.versions if x.loaded) if self.versions else None

    @property
    def chosen(self) -> Version | None:
        return next((v for v in self.versions if v.chosen), None)

    @property
    def choice_rule(self) -> str | None:
        return pick(self.final_choice, "rule_text", "rule", "reason")

    @property
    def token_points(self) -> list[TokenPoint]:
        """Cumulative prompt and answer tokens after each gate request, in time order."""
        if getattr(self, "_token_points", None) is not None:
            return self._token_points  # type: ignore[has-type]
        rows = []
        start = parse_time(pick(self.run_info, "started_at", "start"))
        for line in self.gate_lines:
            t = as_float(pick(line, "t_s", "since_start_s", "elapsed_s"))
            if t is None and start is not None:
                at = parse_time(pick(line, "at", "time", "ts"))
                if at is not None:
                    try:
                        t = (at - start).total_seconds()
                    except TypeError:  # naive vs aware
                        t = None
            if t is None:
                continue
            p = as_float(pick(line, "prompt_tokens", "tokens.prompt", "usage.prompt_tokens")) or 0
            a = as_float(pick(line, "answer_tokens", "completion_tokens", "tokens.answer", "usage.completion_tokens")) or 0
            rows.append((t, int(p), int(a), str(pick(line, "status", default=""))))
        rows.sort(key=lambda r: r[0])
        out, cp, ca = [], 0, 0
        for t, p, a, status in rows:
            cp += p
            ca += a
            out.append(TokenPoint(t, cp, ca, status))
        self._token_points = out
        return out

    @property
    def clip_caption(self) -> str | None:
        """One line on how the clip was made, from clip.json."""
        ci = self.clip_info
        if not ci:
            return None
        parts = []
        secs, fps = as_float(pick(ci, "seconds")), as_float(pick(ci, "fps"))
        if secs is not None:
            parts.append(f"{secs:g} s" + (f" at {fps:g} fps" if fps else ""))
        mode = pick(ci, "mode")
        if mode == "virtual":
            parts.append("virtual time (the page's clock advanced one frame step per frame)")
        elif mode == "realtime":
            parts.append("real time (what a viewer of this machine sees)")
        frames, distinct = as_float(pick(ci, "frames")), as_float(pick(ci, "distinct_frames"))
        if frames and distinct is not None:
            parts.append(f"{int(distinct):,} of {int(frames):,} frames differ from the one before")
        if pick(ci, "renderer"):
            parts.append(f"renderer {pick(ci, 'renderer')}")
        line = "; ".join(parts)
        note = pick(ci, "note")
        return (line + (". " if line else "") + str(note)) if note else (line or None)

    @property
    def refused_entries(self) -> list[str]:
        """What the host would not read of the agent's files ("game.html was a link: not kept")."""
        out = []
        for ev in self.events:
            if ev.get("event") == "entry_refused":
                d = ev.get("detail") or {}
                text = d.get("text") or f"{d.get('file', '?')} was {d.get('reason', 'refused')}: not kept"
                if text not in out:
                    out.append(str(text))
        return out

    @property
    def finalized(self) -> bool:
        """A finished run has its end recorded, a final choice and a check."""
        return not self.unfinished_reasons

    @property
    def unfinished_reasons(self) -> list[str]:
        reasons = []
        if self.run_info is None:
            reasons.append("run-info.json is missing")
        elif pick(self.run_info, "ended_at", "end", "agent_end") is None:
            reasons.append("run-info.json records no end")
        if self.final_choice is None:
            reasons.append("no version was chosen (final-choice.json is missing)")
        if self.check is None:
            reasons.append("the browser check did not run (check.json is missing)")
        return reasons

    @property
    def run_summary(self) -> str:
        """The run sentence: run-info's own when it has one, else built from the figures."""
        own = " ".join(str(x) for x in (pick(self.run_info, "summary_run"), pick(self.run_info, "summary_versions")) if x)
        return own or str(pick(self.run_info, "summary", default="")) or compose_run_sentence(self)


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts/lists -> [('a.b', 'value'), ...] for key/value tables."""
    out: list[tuple[str, str]] = []
    if isinstance(data, dict):
        if not data and prefix:
            out.append((prefix, "{}"))
        for k, v in data.items():
            out.extend(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(data, list) and data and any(isinstance(x, (dict, list)) for x in data):
        for i, v in enumerate(data):
            out.extend(flatten(v, f"{prefix}[{i}]"))
    else:
        out.append((prefix, fmt_value(data)))
    return out


def fmt_value(value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(fmt_value(v) for v in value) if value else "none"
    return str(value)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def compose_run_sentence(run: RunView) -> str:
    """The sentences of the README's "The files of a run", from whatever figures the run recorded."""
    ri = run.run_info or {}
    parts = []
    m = run.minutes
    ended = run.ended_how
    if m is not None:
        first = f"The agent ran {m:.1f} minutes"
    elif run.last_record_s is not None:
        first = f"The run's end was not recorded; its last record is from {run.last_record_s / 60:.1f} minutes"
    else:
        first = "The agent's running time was not recorded"
    if ended:
        first += f" and ended: {ended}"
    parts.append(first + ".")
    sent = first_num(pick(ri, "finish_now_sent", "finish_now_count"), pick(run.gate_stats, "finish_now_count"))
    fn_from = run.finish_now_from_s
    fn_first = run.finish_now_s
    if sent is not None or fn_first is not None:
        s = "The finish-now message"
        if fn_from is not None:
            s += f" (from {fn_from / 60:g} minutes)"
        if sent == 0:
            s += " was never sent"
        elif sent is not None:
            s += f" was sent {_plural(int(sent), 'time')}"
        else:
            s += " was sent"
        if fn_first is not None:
            s += f", the first at {fn_first / 60:.1f} minutes"
        parts.append(s + ".")
    elif fn_from is not None and m is not None and m * 60 < fn_from:
        parts.append(f"The finish-now message (from {fn_from / 60:g} minutes) was never needed.")
    req = first_num(pick(ri, "requests", "requests.total", "gate.requests"), pick(run.gate_stats, "requests", "total"))
    if req is None and run.gate_lines:
        req = len(run.gate_lines)
    if req is not None:
        errs = first_num(pick(ri, "errors", "gate.errors"), pick(run.gate_stats, "errors", "upstream_errors"))
        blocked = first_num(pick(ri, "blocked", "gate.blocked"), pick(run.gate_stats, "blocked"))
        short = first_num(pick(ri, "shortened", "gate.shortened"), pick(run.gate_stats, "shortened"))

        def few(v: float | None, one: str, many: str, none: str) -> str:
            if v is None:
                return f"{many} not recorded"
            return none if v == 0 else (f"{int(v):,} {one if v == 1 else many}")

        s = (
            f"{_plural(int(req), 'request')}, {few(errs, 'error', 'errors', 'no error')}, "
            f"{few(blocked, 'blocked', 'blocked', 'none blocked')}, {few(short, 'shortened', 'shortened', 'none shortened')}"
        )
        if run.prompt_tokens is not None or run.answer_tokens is not None:
            s += f" ({run.prompt_tokens or 0:,} prompt tokens, {run.answer_tokens or 0:,} answer tokens)"
        parts.append(s + ".")
    seen, loaded = run.versions_seen, run.versions_loaded
    if seen is not None:
        s = f"{_plural(seen, 'version')} of the page {'was' if seen == 1 else 'were'} seen on the way"
        if loaded is not None:
            s += f" and {loaded:,} loaded without errors"
        chosen = run.chosen
        if chosen is not None and run.versions and chosen is run.versions[-1]:
            s += "; the last one counts"
        elif chosen is not None:
            s += f"; version {chosen.n} counts"
        elif run.final_choice is None:
            s += "; no version was chosen"
        parts.append(s + ".")
    else:
        parts.append("No version of the page was recorded.")
    return " ".join(parts)


# ---- reading ---------------------------------------------------------------------------------


def _read_json(run: RunView, name: str) -> dict | None:
    path = run.dir / name
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        run.problems.append(f"{name} could not be read ({str(exc).splitlines()[0]}); shown as not recorded")
        return None
    if not isinstance(data, dict):
        run.problems.append(f"{name} holds no JSON object; shown as not recorded")
        return None
    return data


def _read_jsonl(run: RunView, name: str) -> list[dict]:
    path = run.dir / name
    if not path.is_file():
        return []
    rows, bad = [], 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        run.problems.append(f"{name} could not be read ({exc})")
        return []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1  # a run killed mid-write leaves a cut last line
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    if bad:
        run.problems.append(f"{name}: {_plural(bad, 'line')} could not be read and {'was' if bad == 1 else 'were'} left out")
    return rows


_VERSION_FILE = re.compile(r"^(\d+)-([0-9a-f]+)\.html$")
_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".webp")


def _fold_versions(run: RunView, lines: list[dict]) -> list[Version]:
    """versions.jsonl is append-only: lines with the same n update the earlier one."""
    folded: dict[int, dict] = {}
    for line in lines:
        n = as_float(pick(line, "n", "index", "number"))
        if n is None:
            continue
        folded.setdefault(int(n), {}).update({k: v for k, v in line.items() if v is not None})
    files = {}
    vdir = run.dir / "versions"
    if vdir.is_dir():
        for p in vdir.iterdir():
            m = _VERSION_FILE.match(p.name)
            if m:
                files[(int(m.group(1)), m.group(2))] = p.name
    shots: list[Path] = []
    for d in (run.dir / "work" / "shots", run.dir / "shots", run.dir / "version-shots", vdir):
        if d.is_dir() and not d.is_symlink():  # work/shots is the agent's: a link there leads off the run
            shots.extend(p for p in sorted(d.iterdir()) if p.suffix.lower() in _IMAGE_EXT and not p.is_symlink())
    out = []
    for n in sorted(folded):
        raw = folded[n]
        sha = str(pick(raw, "sha256", "sha", default=""))
        named = pick(raw, "file", "path", "name")
        file = None
        if isinstance(named, str) and named:
            cand = named if "/" in named else f"versions/{named}"
            if (run.dir / cand).is_file():
                file = cand
        if file is None:
            hit = next((f for (fn, fs), f in files.items() if fn == n and (not sha or sha.startswith(fs))), None)
            if hit:
                file = f"versions/{hit}"
        thumb_name = pick(raw, "shot", "screenshot", "thumb")
        thumb = None
        if isinstance(thumb_name, str) and (run.dir / thumb_name).is_file():
            thumb = thumb_name
        elif sha:
            stem = f"{n:04d}-{sha[:8]}"
            hit = next((p for p in shots if p.stem == stem or (sha[:8] in p.stem)), None)
            if hit:
                thumb = hit.relative_to(run.dir).as_posix()
        errors = pick(raw, "load_errors", "errors", default=[])
        if isinstance(errors, str):
            errors = [errors]
        loaded = as_bool(pick(raw, "loaded_without_errors", "loaded_ok", "loaded"))
        size = as_float(pick(raw, "size", "bytes", "size_bytes"))
        out.append(
            Version(
                n=n,
                t_s=as_float(pick(raw, "t_s", "time_s", "since_start_s", "elapsed_s")),
                sha256=sha,
                size=int(size) if size is not None else None,
                loaded=loaded,
                errors=[str(e) for e in errors] if isinstance(errors, list) else [],
                request_id=pick(raw, "last_request_id", "request_id", "gate_request_id"),
                check_failure=pick(raw, "check_failure"),
                file=file,
                thumb=thumb,
                raw=raw,
            )
        )
    return out


def _read_agent_shots(run: RunView) -> None:
    """The agent's shot.sh screenshots, placed on the run's clock by their file times; a version
    without its own screenshot borrows the last shot taken while it was the current one."""
    d = run.dir / "work" / "shots"
    if not d.is_dir() or d.is_symlink():
        return
    start = run.start_epoch
    own = {v.thumb for v in run.versions if v.thumb}
    shots = []
    for p in sorted(d.iterdir()):
        rel = p.relative_to(run.dir).as_posix()
        if p.suffix.lower() not in _IMAGE_EXT or rel in own or p.is_symlink() or not p.is_file():
            continue
        t = p.stat().st_mtime - start if start is not None else None
        shots.append(AgentShot(path=rel, t_s=t))
    shots.sort(key=lambda s: (s.t_s is None, s.t_s or 0.0, s.path))
    run.agent_shots = shots
    timed = [v for v in run.versions if v.t_s is not None]
    for i, v in enumerate(timed):
        if v.thumb:
            continue
        until = timed[i + 1].t_s if i + 1 < len(timed) else float("inf")
        during = [s for s in shots if s.t_s is not None and v.t_s <= s.t_s < until]
        if during:
            v.thumb = during[-1].path
            v.thumb_note = f"the agent's own screenshot at {during[-1].t_s / 60:.1f} min ({Path(during[-1].path).name}), taken while this version was current"


def _mark_chosen(run: RunView) -> None:
    fc = run.final_choice
    if not fc or not run.versions:
        return
    n = as_float(pick(fc, "n", "version_n", "chosen.n"))
    sha = pick(fc, "sha256", "chosen.sha256", "version_sha256")
    for v in run.versions:
        if (n is not None and v.n == int(n)) or (n is None and isinstance(sha, str) and sha and v.sha256 == sha):
            v.chosen = True
            return


def load_run(run_dir: Path) -> RunView:
    """Read everything a run folder holds. Never raises on a missing or broken file."""
    run = RunView(dir=run_dir)
    cmd = run_dir / "command.txt"
    if cmd.is_file():
        try:
            run.command = cmd.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:
            run.problems.append(f"command.txt could not be read ({exc})")
    run.contract = _read_json(run, "contract.json")
    run.sampling = _read_json(run, "sampling.json")
    run.run_info = _read_json(run, "run-info.json")
    run.gate_stats = _read_json(run, "gate-stats.json")
    run.final_choice = _read_json(run, "final-choice.json")
    run.check = _read_json(run, "check.json")
    run.clip_info = _read_json(run, "clip.json")
    run.gate_lines = _read_jsonl(run, "gate.log")
    run.events = sorted(_read_jsonl(run, "events.jsonl"), key=lambda e: as_float(e.get("t_s")) or 0.0)
    run.versions = _fold_versions(run, _read_jsonl(run, "versions.jsonl"))
    _mark_chosen(run)
    _read_agent_shots(run)
    for name in ("screenshot.png",):
        if (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0:
            run.screenshot = name
    if (run_dir / "clip.mp4").is_file() and (run_dir / "clip.mp4").stat().st_size > 0:
        run.clip = "clip.mp4"
    return run


def looks_like_run(run_dir: Path) -> bool:
    return any((run_dir / name).exists() for name in RUN_FILES)
