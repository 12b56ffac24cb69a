"""One run folder as the report shows it: the files read through showcase.runfolder.artefacts, on the
models their writers use, plus what the page derives from them (versions with their files,
tokens over time, the moments of the run).

A file that is missing, cut or of another shape is left out and said so (RunFiles.problems);
everything else on the page still shows. "not recorded" means a missing file or a field its
model allows to be null, never a field name the report had to guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from showcase.check.rubric import load_rubric
from showcase.gate.log import GateLogLine
from showcase.host.monitor import ForeignProcess
from showcase.report.rating import Rating, read_rating
from showcase.runfolder.artefacts import (
    SHOTS_WAITING, FinalChoice, RunEvent, RunFiles, RunLayout, VersionRecord, read_run,
)
from showcase.run.summary import run_sentences, unfinished_run_sentences, versions_sentence

_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".webp")
MAX_PROMPT_BYTES = 1 << 20


@dataclass
class Version:
    """One distinct version of the page (versions.jsonl folded), with what the page links to."""

    record: VersionRecord
    file: str | None  # path relative to the run folder, when the kept file is there
    thumb: str | None = None  # a screenshot taken while this version was current, relative to the run folder
    thumb_note: str | None = None  # where the thumbnail comes from
    own_picture: bool = False  # the thumbnail is the load check's picture of this very version
    chosen: bool = False

    n = property(lambda self: self.record.n)
    t_s = property(lambda self: self.record.t_s)
    sha256 = property(lambda self: self.record.sha256)
    size = property(lambda self: self.record.size)
    loaded = property(lambda self: self.record.loaded_without_errors)  # None: never load-checked
    errors = property(lambda self: self.record.load_errors)
    request_id = property(lambda self: self.record.last_request_id)
    check_failure = property(lambda self: self.record.check_failure)  # the load check itself failed


@dataclass
class Item:
    id: str
    name: str
    points: float | None  # None: the check did not score it
    max_points: float
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
    n: int = 0  # requests so far, this one included


def _stored(name: str) -> property:
    """A file of the run as read_run left it: the report keeps no copy of its own."""
    return property(lambda self: getattr(self.files, name))


@dataclass
class RunView:
    """Everything the report shows about one run: the run folder's files (RunFiles, on their
    writers' models) and what the page derives from them."""

    files: RunFiles
    label: str | None = None  # how a comparison names it (the folder name, made unique)
    versions: list[Version] = field(default_factory=list)
    screenshot: str | None = None
    clip: str | None = None
    agent_shots: list[AgentShot] = field(default_factory=list)
    rating: Rating | None = None
    prompt: str | None = None  # the exact prompt the agent got (task/prompt.txt)

    dir = property(lambda self: self.files.layout.root)
    command = _stored("command")
    contract = _stored("contract")
    sampling = _stored("sampling")
    run_info = _stored("run_info")
    gate_stats = _stored("gate_stats")
    final_choice = _stored("final_choice")
    check = _stored("check")
    clip_info = _stored("clip")  # clip.json; `clip` is the video's file name
    gate_lines = _stored("gate_lines")
    events = _stored("events")
    problems = _stored("problems")  # the report adds its own (prompt, rating) to the run's list

    # ---- setup ---------------------------------------------------------------------------
    @property
    def setup(self) -> list[tuple[str, str]]:
        """The few lines that say what was run, on what terms (contract.json)."""
        c = self.contract
        if c is None:
            return []
        lim, box = c.limits, c.sandbox_limits
        finish = "never" if lim.finish_now_after_s is None else f"from {lim.finish_now_after_s / 60:g} min"
        mem = f"{box.memory_bytes / (1 << 30):.2f}".rstrip("0").rstrip(".") + " GiB" if box.memory_bytes else "no memory limit"
        peak = self.run_info.container_limits.peak_memory_bytes if self.run_info else None
        mem += f" (peak {peak / (1 << 20):,.0f} MiB)" if peak is not None else " (peak not recorded)"
        rows = [
            ("model", f"{c.model} at {c.upstream_url}"),
            ("harness", f"{c.harness.id} {c.harness.version}, task {c.task_id}"),
            ("sampling", ", ".join(f"{k} {fmt_value(v)}" for k, v in c.sampling.items()) or "none forced"),
            ("limits", f"hard stop at {lim.hard_stop_s / 60:g} min, finish-now {finish}, answers up to "
                       f"{lim.answer_limit:,} tokens" + (f", context {lim.context_size:,}" if lim.context_size else "")),
            ("machine", f"sandbox {fmt_value(box.cpus)} CPU, {mem}, network {box.network}; "
                        f"browser {c.versions.chromium or 'not recorded'}, ffmpeg {(c.versions.ffmpeg or 'not recorded').removeprefix('ffmpeg version ')}, "
                        f"showcase {c.versions.showcase}" + (f"; host load {self.host_load_words}" if self.host_load_words else "")),
        ]
        return rows

    @property
    def prompt_matches(self) -> bool | None:
        """The prompt shown is the one the contract's sha256 names (None: nothing to compare)."""
        if self.prompt is None or self.contract is None:
            return None
        import hashlib

        return hashlib.sha256(self.prompt.encode()).hexdigest() == self.contract.prompt_sha256

    @property
    def host_load_words(self) -> str | None:
        samples = self.run_info.host_load if self.run_info else []
        if not samples:
            return None
        loads = sorted(s.load1 for s in samples)
        return f"{loads[len(loads) // 2]:.1f} median, {loads[-1]:.1f} peak (1-min average, {len(loads):,} samples)"

    @property
    def foreign_processes(self) -> list[ForeignProcess]:
        procs = self.run_info.foreign_processes if self.run_info else []
        return sorted(procs, key=lambda p: -p.cpu_seconds)

    # ---- requests: one definition ----------------------------------------------------------
    @property
    def api_lines(self) -> list[GateLogLine]:
        """What the agent asked the model (gate.log lines of kind 'api'); shot.sh and the run's
        other endpoints are 'tool' lines, counted apart."""
        return [line for line in self.gate_lines if line.kind == "api"]

    @property
    def requests(self) -> int | None:
        if self.run_info:
            return self.run_info.requests
        if self.gate_stats:
            return self.gate_stats.requests
        return len(self.api_lines) if self.gate_lines else None

    @property
    def tool_requests(self) -> int:
        if self.gate_stats:
            return self.gate_stats.tool_requests
        return sum(1 for line in self.gate_lines if line.kind != "api")

    @property
    def shot_words(self) -> str | None:
        """What became of the agent's shot.sh requests (run-info's shot_requests), in one line."""
        s = self.run_info.shot_requests if self.run_info else None
        if s is None:
            return None
        return (f"shot.sh requests: {s.asked:,} asked, {s.answered:,} answered, {s.busy:,} told \"busy, try again\" "
                f"(one check ran and {SHOTS_WAITING} waited already), {s.dropped:,} dropped (the caller had left "
                "before its check started).")

    @property
    def hard_stopped(self) -> bool:
        """The hard stop happened (not merely the gate closed after the agent ended by itself)."""
        return self.hard_stop_s is not None and (self._event("hard_stop") is not None or (
            self.run_info is not None and self.run_info.agent_end == "killed_at_hard_stop"))

    # ---- who ran -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.label or self.dir.name or str(self.dir)

    @property
    def model(self) -> str | None:
        return self.contract.model if self.contract else None

    @property
    def harness(self) -> str | None:
        return f"{self.contract.harness.id} {self.contract.harness.version}" if self.contract else None

    @property
    def world_title(self) -> str | None:
        return self.run_info.world_title if self.run_info else None

    @property
    def task(self) -> str | None:
        return self.contract.task_id if self.contract else None

    # ---- check ---------------------------------------------------------------------------
    @property
    def score(self) -> float | None:
        return self.check.total if self.check else None

    @property
    def score_max(self) -> float:
        return self.check.max_total if self.check else load_rubric().max_total

    @property
    def check_summary(self) -> str | None:
        return self.check.summary if self.check else None

    @property
    def items(self) -> list[Item]:
        """The rubric's items in its order, each with the check's result; an item the check did
        not score shows its name and points from the rubric and no score."""
        if self.check is None:
            return []
        scored = {it.id: it for it in self.check.items}
        rubric = load_rubric().items
        out = []
        for item_id in [*rubric, *(i for i in scored if i not in rubric)]:
            it = scored.get(item_id)
            if it is None:
                spec = rubric[item_id]
                out.append(Item(item_id, spec.name, None, spec.points, None, "not scored by this check", []))
            else:
                out.append(Item(it.id, it.name, it.points, it.max_points, it.passed, it.reason, flatten(it.figures)))
        return out

    def figure(self, item_id: str, key: str) -> float | None:
        """One number the check measured (e.g. item 5's fps), None when not recorded."""
        it = next((i for i in self.check.items if i.id == item_id), None) if self.check else None
        return _number(it.figures.get(key)) if it else None

    @property
    def item_points(self) -> dict[str, float | None]:
        return {it.id: it.points for it in self.items}

    @property
    def rubric_version(self) -> str | None:
        if self.check:
            return self.check.rubric_version
        return self.contract.checker_rubric_version if self.contract else None

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
        return f"{sum(1 for it in items if it.passed)}/{len(items)}"

    # ---- run -----------------------------------------------------------------------------
    def _event(self, name: str) -> RunEvent | None:
        return next((e for e in self.events if e.event == name), None)

    def event_time(self, name: str) -> float | None:
        """Seconds since start of the first event of this name: the moment itself (detail.at_s,
        on the run's clock) when the event carries it, else when it was logged."""
        ev = self._event(name)
        if ev is None:
            return None
        at = ev.detail.get("at_s")
        return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else ev.t_s

    def event_detail(self, name: str, key: str) -> Any:
        ev = self._event(name)
        return ev.detail.get(key) if ev else None

    @property
    def finish_now_s(self) -> float | None:
        t = self.event_time("finish_now_first")
        if t is None and self.run_info:
            t = self.run_info.finish_now_first_s
        if t is None and self.gate_stats:
            t = self.gate_stats.finish_now_first_s
        return t

    @property
    def finish_now_from_s(self) -> float | None:
        if self.contract:
            return self.contract.limits.finish_now_after_s
        if self.run_info:
            return self.run_info.finish_now_after_s
        return _number(self.event_detail("agent_started", "inject_after_s"))

    @property
    def limit_s(self) -> float | None:
        if self.contract:
            return self.contract.limits.hard_stop_s
        return _number(self.event_detail("agent_started", "limit_s"))

    @property
    def hard_stop_s(self) -> float | None:
        t = self.event_time("hard_stop")
        if t is None and self.run_info and self.run_info.agent_end == "killed_at_hard_stop":
            t = self.limit_s
        return t

    @property
    def ended_s(self) -> float | None:
        return self.event_time("agent_ended")

    @property
    def minutes(self) -> float | None:
        if self.run_info:
            return self.run_info.minutes_run
        return self.ended_s / 60 if self.ended_s is not None else None

    @property
    def start_epoch(self) -> float | None:
        """The run's t=0 as epoch seconds (to place files by their modification time)."""
        epoch = _number(self.event_detail("agent_started", "start_epoch"))
        if epoch is not None:
            return epoch
        for when in (self.run_info and self.run_info.started_at, self.gate_stats and self.gate_stats.clock_started_at):
            try:
                t = datetime.fromisoformat(when.replace("Z", "+00:00")) if when else None
            except ValueError:
                t = None
            if t is not None and t.tzinfo is not None:
                return t.timestamp()
        return None

    @property
    def last_record_s(self) -> float | None:
        """The latest time any record of the run carries (a killed run's best guess at its end)."""
        ts = [v.t_s for v in self.versions if v.t_s is not None]
        ts += [p.t_s for p in self.token_points]
        ts += [e.t_s for e in self.events]
        return max(ts) if ts else None

    @property
    def ended_how(self) -> str | None:
        if self.run_info:
            return self.run_info.agent_end
        how = self.event_detail("agent_ended", "how")
        return str(how) if how is not None else None

    @property
    def prompt_tokens(self) -> int | None:
        if self.run_info:
            return self.run_info.prompt_tokens
        if self.gate_stats:
            return self.gate_stats.prompt_tokens
        return self.token_points[-1].prompt if self.token_points else None

    @property
    def answer_tokens(self) -> int | None:
        if self.run_info:
            return self.run_info.answer_tokens
        if self.gate_stats:
            return self.gate_stats.answer_tokens
        return self.token_points[-1].answer if self.token_points else None

    @property
    def total_tokens(self) -> int | None:
        p, a = self.prompt_tokens, self.answer_tokens
        if p is None and a is None:
            return None
        return (p or 0) + (a or 0)

    @property
    def versions_seen(self) -> int | None:
        if self.run_info:
            return self.run_info.versions_seen
        return len(self.versions) if self.versions else None

    @property
    def versions_loaded(self) -> int | None:
        if self.run_info:
            return self.run_info.versions_loaded_without_errors
        return sum(1 for v in self.versions if v.loaded) if self.versions else None

    @property
    def chosen(self) -> Version | None:
        return next((v for v in self.versions if v.chosen), None)

    @property
    def choice_rule(self) -> str | None:
        return self.final_choice.rule_text if self.final_choice else None

    @property
    def token_points(self) -> list[TokenPoint]:
        """Cumulative prompt and answer tokens after each gate request, in time order
        (requests before the run's clock started carry no time and are left out)."""
        if getattr(self, "_token_points", None) is not None:
            return self._token_points  # type: ignore[has-type]
        rows = sorted((line.t_s, line.prompt_tokens or 0, line.answer_tokens or 0, str(line.status))
                      for line in self.api_lines if line.t_s is not None)
        out, cp, ca = [], 0, 0
        for t, p, a, status in rows:
            cp += p
            ca += a
            out.append(TokenPoint(t, cp, ca, status, len(out) + 1))
        self._token_points = out
        return out

    @property
    def clip_caption(self) -> str | None:
        """One line on how the clip was made, from clip.json."""
        ci = self.clip_info
        if not ci:
            return None
        parts = [f"{ci.seconds:g} s at {ci.fps:g} fps"]
        if ci.mode == "virtual":
            parts.append("virtual time (the page's clock advanced one frame step per frame)")
        else:
            parts.append("real time (what a viewer of this machine sees)")
        if ci.frames:
            parts.append(f"{ci.distinct_frames:,} of {ci.frames:,} frames differ from the one before")
        if ci.renderer:
            parts.append(f"renderer {ci.renderer}")
        line = "; ".join(parts)
        return f"{line}. {ci.note}" if ci.note else line

    @property
    def refused_entries(self) -> list[str]:
        """What the host would not read of the agent's files ("game.html was a link: not kept")."""
        out = list(self.run_info.refused_entries) if self.run_info else []
        for ev in self.events:
            if ev.event == "entry_refused":
                d = ev.detail
                text = str(d.get("text") or f"{d.get('file', '?')} was {d.get('reason', 'refused')}: not kept")
                if text not in out:
                    out.append(text)
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
        if self.final_choice is None:
            reasons.append("no version was chosen (final-choice.json is missing)")
        if self.check is None:
            reasons.append("the browser check did not run (check.json is missing)")
        return reasons

    @property
    def run_summary(self) -> str:
        """The run's sentences (showcase.run.summary): run-info's own, else made from what the run left."""
        records = [v.record for v in self.versions]
        if self.run_info is None:
            return f"{unfinished_run_sentences(self.last_record_s, self.gate_stats)} {versions_sentence(records, None)}"
        info = self.run_info
        return f"{info.summary_run or run_sentences(info)} {info.summary_versions or versions_sentence(records, self.final_choice)}"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts/lists (or a model) -> [('a.b', 'value'), ...] for key/value tables."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
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
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value) if value else "none"
    return str(value)


# ---- reading ---------------------------------------------------------------------------------


def _versions(layout: RunLayout, records: list[VersionRecord], choice: FinalChoice | None) -> list[Version]:
    out = []
    for record in records:
        # `file` is a bare name the watcher gave; anything else is not a file of versions/
        rel = f"versions/{record.file}" if "/" not in record.file and record.file not in ("", ".", "..") else None
        path = layout.root / rel if rel else None
        ok = path is not None and path.is_file() and not path.is_symlink()
        v = Version(record=record, file=rel if ok else None, chosen=choice is not None and choice.n == record.n)
        picture = _inside(layout.root, record.picture)
        if picture is not None:
            v.thumb, v.own_picture = picture, True
            v.thumb_note = "the load check's picture of this version"
        out.append(v)
    return out


def _inside(root: Path, rel: str | None) -> str | None:
    """rel as a plain image file inside the run folder, else None (a path the report may link)."""
    if not rel or rel.startswith("/") or "\\" in rel or Path(rel).suffix.lower() not in _IMAGE_EXT:
        return None
    parts = Path(rel).parts
    if any(p in ("", ".", "..") for p in parts):
        return None
    here = root
    for p in parts:  # no link on the way: the report never follows one
        here = here / p
        if here.is_symlink():
            return None
    path = root / rel
    return Path(rel).as_posix() if path.is_file() else None


def _read_prompt(layout: RunLayout, problems: list[str]) -> str | None:
    path = layout.task_dir / "prompt.txt"
    if not path.is_file() or path.is_symlink():
        return None
    if path.stat().st_size > MAX_PROMPT_BYTES:
        problems.append(f"task/prompt.txt is over {MAX_PROMPT_BYTES:,} bytes; not shown")
        return None
    return path.read_bytes().decode("utf-8", errors="replace")


def _read_agent_shots(run: RunView, layout: RunLayout) -> None:
    """The agent's shot.sh screenshots, placed on the run's clock by their file times; a version
    borrows the last shot taken while it was the current one."""
    d = layout.shots_dir
    if not d.is_dir() or d.is_symlink() or layout.work.is_symlink():  # the agent's folder: a link leads off the run
        return
    start = run.start_epoch
    shots = []
    for p in sorted(d.iterdir()):
        if p.suffix.lower() not in _IMAGE_EXT or p.is_symlink() or not p.is_file():
            continue
        t = p.stat().st_mtime - start if start is not None else None
        shots.append(AgentShot(path=p.relative_to(layout.root).as_posix(), t_s=t))
    shots.sort(key=lambda s: (s.t_s is None, s.t_s or 0.0, s.path))
    run.agent_shots = shots
    timed = [v for v in run.versions if v.t_s is not None]
    for i, v in enumerate(timed):
        if v.own_picture:
            continue
        until = timed[i + 1].t_s if i + 1 < len(timed) else float("inf")
        during = [s for s in shots if s.t_s is not None and v.t_s <= s.t_s < until]
        if during:
            v.thumb = during[-1].path
            v.thumb_note = (f"no picture of its own: the agent's shot.sh screenshot at {during[-1].t_s / 60:.1f} min "
                            f"({Path(during[-1].path).name}), taken while this version was current")


def load_run(run_dir: Path) -> RunView:
    """Read everything a run folder holds. Never raises on a missing or broken file."""
    files = read_run(run_dir)
    layout = files.layout
    run = RunView(files=files)
    run.versions = _versions(layout, files.versions, files.final_choice)
    _read_agent_shots(run, layout)
    run.rating = read_rating(layout.root, run.problems)
    run.prompt = _read_prompt(layout, run.problems)
    for path, attr in ((layout.screenshot, "screenshot"), (layout.clip, "clip")):
        if path.is_file() and not path.is_symlink() and path.stat().st_size > 0:
            setattr(run, attr, path.name)
    return run


def looks_like_run(run_dir: Path) -> bool:
    return RunLayout(Path(run_dir)).looks_like_run()

