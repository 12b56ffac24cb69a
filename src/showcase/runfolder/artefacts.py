"""The run folder: where each file lives (RunLayout), one pydantic model per file, and the readers.

Every field has a description: `showcase schema NAME` publishes the JSON schema built from
these models, and users compare runs by reading these files. The writers (run, gate, check,
clip) write on these models and `read_run` reads on the same ones, so a renamed field fails
the reader's validation instead of showing as "not recorded".
"""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from showcase.check.models import CheckReport
from showcase.clip.model import ClipResult
from showcase.gate.log import GateLogLine, GateStats
from showcase.host.egress import OutsideAttempts
from showcase.host.monitor import ForeignProcess, LoadSample
from showcase.io import scan_jsonl, write_text_atomic

SCHEMA_VERSION = 1
SHOTS_WAITING = 3  # shot.sh requests that may wait while one is checked; more are answered "busy" at once


@dataclass(frozen=True)
class RunLayout:
    """Where each file of a run lives. One place, so run, finalize and report agree."""

    root: Path

    # what the agent sees
    work = property(lambda self: self.root / "work")  # bind-mounted read-write at /work
    shots_dir = property(lambda self: self.root / "work" / "shots")  # shot.sh screenshots (the agent's folder)
    gate_dir = property(lambda self: self.root / "gate")  # holds gate.sock, bind-mounted read-only at /gate
    task_dir = property(lambda self: self.root / "task")  # the exact prompt bytes, read-only at /task
    agent_dir = property(lambda self: self.root / "agent")  # the agent's own logs (trajectory), rw at /logs
    tools_dir = property(lambda self: self.root / "tools")  # shot.sh and the relay, read-only at /opt/tools

    # what a reader compares runs by
    command = property(lambda self: self.root / "command.txt")
    contract = property(lambda self: self.root / "contract.json")
    sampling = property(lambda self: self.root / "sampling.json")
    run_info = property(lambda self: self.root / "run-info.json")
    gate_stats = property(lambda self: self.root / "gate-stats.json")
    gate_log = property(lambda self: self.root / "gate.log")
    versions_dir = property(lambda self: self.root / "versions")
    versions_log = property(lambda self: self.root / "versions.jsonl")
    final_choice = property(lambda self: self.root / "final-choice.json")
    check = property(lambda self: self.root / "check.json")
    screenshot = property(lambda self: self.root / "screenshot.png")
    clip = property(lambda self: self.root / "clip.mp4")
    clip_info = property(lambda self: self.root / "clip.json")
    report = property(lambda self: self.root / "report.html")
    agent_log = property(lambda self: self.root / "agent.log")
    events_log = property(lambda self: self.root / "events.jsonl")

    def version_picture(self, n: int) -> Path:
        """The load check's screenshot of version n: versions/0003.png beside versions/0003-<sha8>.html."""
        return self.versions_dir / f"{n:04d}.png"

    def holds_a_run(self) -> bool:
        return self.contract.exists() or self.run_info.exists() or self.versions_log.exists()

    def looks_like_run(self) -> bool:
        """Any one of the run's own files is there (a run killed early still has a few)."""
        return any(p.exists() for p in (self.command, self.contract, self.run_info, self.versions_log,
                                        self.gate_log, self.events_log, self.check, self.final_choice))

    def make(self) -> None:
        for d in (self.root, self.work, self.agent_dir, self.gate_dir, self.task_dir, self.tools_dir, self.versions_dir):
            d.mkdir(parents=True, exist_ok=True)

# ---------------------------------------------------------------------------------------------
# Secrets: never written to any run file.

REDACTED = "REDACTED"

# Query parameters that carry credentials in upstream URLs (compared lower-case, '-' as '_').
_SECRET_QUERY_KEYS = {
    "key", "api_key", "apikey", "token", "access_token", "auth", "authorization",
    "secret", "client_secret", "password", "pass", "sig", "signature", "code",
}
# Option names whose value is a secret: --key, --api-key, --token, --password, --openai-api-key ...
_SECRET_OPTION = re.compile(
    r"^--?(?:[\w-]*[-_])?(?:key|api[-_]?key|token|secret|password|passwd|auth|authorization|bearer)$",
    re.IGNORECASE,
)
# Environment assignments typed before the command: OPENAI_API_KEY=..., HF_TOKEN=...
_SECRET_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH))=(.+)$", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# Well-known key shapes, wherever they appear (OpenAI/Anthropic 'sk-...', HF 'hf_...', GitHub 'ghp_...').
# Credential headers passed as text, e.g. curl -H 'x-api-key: abc' or 'Authorization: Basic abc'.
_SECRET_HEADER = re.compile(r"\b((?:x-)?api-key|authorization|proxy-authorization)(\s*:\s*)(.+)$", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,})")
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"]+")


def redact_url(url: str) -> str:
    """The URL with userinfo removed and credential-like query values replaced by REDACTED."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, REDACTED if k.lower().replace("-", "_") in _SECRET_QUERY_KEYS else v) for k, v in pairs],
            safe=REDACTED,
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Redact URLs, Bearer tokens and well-known key shapes inside one free-text string."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _SECRET_HEADER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact_argv(argv: list[str]) -> list[str]:
    """A copy of argv with every secret replaced by REDACTED (the values, never the option names)."""
    out: list[str] = []
    hide_next = False
    leading_env = True  # `KEY=value cmd ...`: only assignments before the command are env
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if leading_env and (m := _SECRET_ENV.match(arg)):
            out.append(f"{m.group(1)}={REDACTED}")
            continue
        if leading_env and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", arg):
            out.append(redact_text(arg))
            continue
        leading_env = False
        name, eq, value = arg.partition("=")
        if _SECRET_OPTION.match(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out


class CommandLine(BaseModel):
    """command.txt: the exact command line as typed, secrets redacted."""

    argv: list[str] = Field(description="the program and its arguments, in order, secrets already redacted")

    @classmethod
    def from_argv(cls, argv: list[str]) -> "CommandLine":
        """Build from a raw argv (e.g. sys.argv); secrets are redacted here, before anything is kept."""
        return cls(argv=redact_argv(list(argv)))

    def text(self) -> str:
        """One shell line that re-types the command (quoted so it pastes back into a shell)."""
        return shlex.join(self.argv)

    def write(self, path: Path | str) -> None:
        write_text_atomic(path, self.text() + "\n")


# ---------------------------------------------------------------------------------------------
# contract.json


class _Strict(BaseModel):
    # A typo in a field name is a bug on our side; fail loudly instead of writing a partial file.
    model_config = ConfigDict(extra="forbid")


class ContractLimits(_Strict):
    hard_stop_s: float = Field(description="seconds after the start when the agent and its container are killed")
    finish_now_after_s: float | None = Field(
        description="seconds after the start from which every request gets the finish-now message; null: never"
    )
    answer_limit: int = Field(description="answer token limit forced into every model request")
    context_size: int | None = Field(description="model context size in tokens the run assumes; null: not stated")


class HarnessInfo(_Strict):
    id: str = Field(description="harness id (folder name under harness/)")
    version: str = Field(description="harness version as pinned in its harness.toml")


class SandboxLimits(_Strict):
    memory_bytes: int | None = Field(description="container memory limit in bytes; null: none")
    cpus: float | None = Field(description="container CPU limit (number of CPUs); null: none")
    pids: int | None = Field(description="container process-count limit; null: none")
    disk_bytes: int | None = Field(None, description="hard cap of what the agent writes (/work and /logs together); null: none")
    network: str = Field("none", description="Docker network mode of the container ('none': sealed)")
    read_only_root: bool = Field(True, description="whether the container's root file system is read-only")
    user: str | None = Field(None, description="user the agent runs as inside the container")


class ImageInfo(_Strict):
    id: str = Field(description="Docker image id (sha256:...) the sandbox ran")
    digest: str | None = Field(None, description="registry digest of the image if it has one; null for local builds")
    tag: str | None = Field(None, description="the image tag used, e.g. showcase-sandbox-builtin:<hash>")


class ToolVersions(_Strict):
    showcase: str = Field(description="showcase version")
    chromium: str | None = Field(description="Chromium version used by the check and the clip")
    ffmpeg: str | None = Field(description="ffmpeg version used by the clip")


class Contract(_Strict):
    """contract.json: everything that fixes a run's result; two runs compare only if these match."""

    schema_version: int = Field(SCHEMA_VERSION, description="version of this file's layout")
    task_id: str = Field(description="task id, e.g. 'voxel'")
    prompt_sha256: str = Field(description="sha256 (hex) of the exact prompt bytes sent to the agent")
    limits: ContractLimits = Field(description="time and token limits of the run")
    harness: HarnessInfo = Field(description="the agent harness that ran the model")
    model: str = Field(description="model name as sent in every request")
    upstream_url: str = Field(description="the model server's base URL, credentials removed")
    sampling: dict[str, Any] = Field(description="fields forced into every model request (see sampling.json)")
    sandbox_limits: SandboxLimits = Field(description="limits of the container the agent ran in")
    image: ImageInfo = Field(description="the sandbox image")
    versions: ToolVersions = Field(description="versions of showcase, Chromium and ffmpeg")
    checker_rubric_version: str = Field(description="version of the ten-point check's rubric")
    timezone: str = Field(description="timezone of the sandbox and the check, e.g. 'UTC'")
    seeds: dict[str, int] = Field(default_factory=dict, description="named random seeds the run fixed (e.g. 'check')")
    node: str | None = Field(None, description="the machine the run ran on (host, or host/Ray node id); null: not recorded")

    @field_validator("upstream_url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        return redact_url(url)

    @field_validator("prompt_sha256")
    @classmethod
    def _hex64(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", value):
            raise ValueError("must be 64 lower-case hex digits")
        return value


# ---------------------------------------------------------------------------------------------
# sampling.json


class SamplingFile(_Strict):
    """sampling.json: the fields forced into every model request, and where they came from."""

    schema_version: int = Field(SCHEMA_VERSION, description="version of this file's layout")
    fields: dict[str, Any] = Field(
        description="request fields the gate forces into every request, e.g. temperature, top_p, max_tokens"
    )
    source: str = Field(description="where they came from: 'file', 'task defaults' or 'command line'")
    source_path: str | None = Field(None, description="the file they were read from, as given; null if none")
    source_sha256: str | None = Field(None, description="sha256 of that file's bytes; null if none")


# ---------------------------------------------------------------------------------------------
# versions.jsonl


class VersionRecord(BaseModel):
    """One line of versions.jsonl: one distinct version of the page, or a later update of it.

    The file is append-only: the line written when a version is seen has loaded_without_errors
    null; the load check's result, or a later sighting of the same bytes, is a new line with the
    same n. A reader folds lines by n (`showcase.run.watcher.read_versions`). Unknown fields are
    ignored, so an older reader still reads the lines of a newer watcher.
    """

    n: int = Field(ge=1, description="version number, 1 for the first version seen")
    event: Literal["seen", "load_checked", "seen_again", "recovered"] = Field(
        description="what this line records: first sighting, load check result, the same bytes written "
        "again later, or rebuilt after a crash from a stored file the log lacked"
    )
    t_s: float | None = Field(
        description="seconds since the run's start when this version was first seen; "
        "null only for a recovered version when the start time was unknown"
    )
    last_seen_t_s: float | None = Field(
        None, description="seconds since the start when these exact bytes were last written (rewrites of an older version)"
    )
    sha256: str = Field(description="sha256 (hex) of the version's bytes")
    size: int = Field(ge=0, description="size in bytes")
    last_request_id: str | None = Field(
        description="id of the last gate request before this version was seen; null if none yet"
    )
    file: str = Field(description="file name under versions/, e.g. '0003-1a2b3c4d.html'")
    loaded_without_errors: bool | None = Field(
        None, description="did it load in the browser's quick check without errors; null until checked"
    )
    load_errors: list[str] = Field(
        default_factory=list, description="first lines of the load errors (empty if none or not checked)"
    )
    check_failure: str | None = Field(
        None, description="why the load check itself could not run (our fault, not the page's); null if it ran"
    )
    picture: str | None = Field(
        None, description="the load check's own screenshot of this version, relative to the run folder "
        "(versions/0003.png); null when none was kept"
    )


# ---------------------------------------------------------------------------------------------
# final-choice.json


class FinalCandidate(_Strict):
    n: int = Field(description="version number")
    sha256: str = Field(description="sha256 of the version")
    loaded_without_errors: bool | None = Field(description="load check result; null if never checked")
    is_final_file: bool = Field(description="whether these are the bytes of game.html at the hard stop / end")


FinalRule = Literal[
    "final_file_loads",
    "last_version_that_loads",
    "final_file_none_loads",
    "last_version_no_final_file",
    "no_page",
]


class FinalChoice(_Strict):
    """final-choice.json: which version of the page counts, and the rule that chose it."""

    schema_version: int = Field(SCHEMA_VERSION, description="version of this file's layout")
    n: int | None = Field(description="the chosen version's number; null when there is no page")
    sha256: str | None = Field(description="sha256 of the chosen bytes; null when there is no page")
    file: str | None = Field(description="file name under versions/ of the chosen version; null when none")
    is_final_file: bool = Field(description="whether the chosen version is the file as left at the end")
    rule: FinalRule = Field(description="which branch of the rule applied (machine-readable)")
    rule_text: str = Field(description="the rule that chose it, in words")
    versions_seen: int = Field(description="number of distinct versions seen")
    candidates: list[FinalCandidate] = Field(description="every version considered, in order of n")


# ---------------------------------------------------------------------------------------------
# run-info.json


AgentEnd = Literal["done", "exit", "killed_at_hard_stop", "crashed", "oom", "interrupted"]


class ContainerLimits(_Strict):
    memory_bytes: int | None = Field(description="memory limit in force, in bytes; null: none")
    cpus: float | None = Field(description="CPU limit in force (number of CPUs); null: none")
    pids: int | None = Field(description="process-count limit in force; null: none")
    peak_memory_bytes: int | None = Field(None, description="the most memory the container used, in bytes (the kernel's "
                                          "peak of its memory cgroup, page cache and tmpfs included); null: not readable")


class ShotFigures(BaseModel):
    """What shot.sh's endpoint did with the requests it got: run-info.json's shot_requests."""

    asked: int = Field(0, ge=0, description="shot.sh requests that reached the host")
    answered: int = Field(0, ge=0, description="answered with the check's result, or with why the file was not checked")
    busy: int = Field(0, ge=0, description=f"answered at once with 429 'busy, try again': one check ran and "
                      f"{SHOTS_WAITING} more waited already")
    dropped: int = Field(0, ge=0, description="not checked: the caller had gone before its check started "
                         "(or while it was still sending its request)")


class RunInfo(_Strict):
    """run-info.json: what happened during the run."""

    schema_version: int = Field(SCHEMA_VERSION, description="version of this file's layout")
    started_at: str = Field(description="start time, ISO 8601 with timezone")
    ended_at: str = Field(description="end time, ISO 8601 with timezone")
    minutes_run: float = Field(description="minutes from the start until the agent ended or was stopped")
    agent_end: AgentEnd = Field(
        description="how the agent ended: 'done' (said it was done), 'exit' (its process exited), "
        "'killed_at_hard_stop', 'crashed', 'oom' (killed for lack of memory), 'interrupted' (showcase itself "
        "stopped mid-run; `showcase finalize` stopped the agent)"
    )
    agent_exit_code: int | None = Field(None, description="exit code of the agent's process; null if killed or unknown")
    finish_now_after_s: float | None = Field(description="seconds from which the finish-now message was due; null: never")
    finish_now_sent: int = Field(ge=0, description="how many requests got the finish-now message")
    finish_now_first_s: float | None = Field(description="seconds since start of the first one; null if never sent")
    requests: int = Field(ge=0, description="model requests through the gate")
    not_completed: int = Field(
        0, ge=0, description="requests that never completed: body still arriving at the hard stop, client gone before the answer"
    )
    errors: int = Field(ge=0, description="requests that ended in an error")
    blocked: int = Field(ge=0, description="requests the gate refused (e.g. after the hard stop)")
    shortened: int = Field(ge=0, description="requests the gate shortened (answer limit lowered to fit)")
    prompt_tokens: int = Field(ge=0, description="prompt tokens over all requests")
    answer_tokens: int = Field(ge=0, description="answer (completion) tokens over all requests")
    versions_seen: int = Field(ge=0, description="distinct versions of the page seen")
    versions_loaded_without_errors: int = Field(ge=0, description="how many of them loaded without errors")
    container_limits: ContainerLimits = Field(description="the container's limits")
    foreign_processes: list[ForeignProcess] = Field(
        default_factory=list, description="processes outside the run that used CPU on the host meanwhile, busiest first"
    )
    host_load: list[LoadSample] = Field(default_factory=list, description="host load averages sampled during the run")
    leaks: list[str] | None = Field(
        None, description="what the leak audit found left of the run after it ended (empty: nothing); null: not audited"
    )
    outside_attempts: OutsideAttempts | None = Field(
        None, description="lookups and connection attempts beyond the gate seen during the run (zero expected); "
        "null: not recorded"
    )
    shot_requests: ShotFigures | None = Field(None, description="what became of the agent's shot.sh requests; null: not recorded")
    world_title: str | None = Field(description="the chosen page's title (<title>, else first <h1>); null if none")
    refused_entries: list[str] = Field(
        default_factory=list,
        description="agent files the host would not read (a link, a FIFO, too large ...), e.g. "
        "'game.html was a link: not kept'; the version before each still counts",
    )
    disk_full: bool = Field(False, description="disk full: the agent filled its space (writes failed with ENOSPC)")
    summary_run: str = Field(
        "", description="plain-English sentences on the agent's run: time, finish-now, requests (showcase.run.summary)"
    )
    summary_versions: str = Field(
        "", description="plain-English sentence on the versions seen and which one counts (showcase.run.summary)"
    )


# ---------------------------------------------------------------------------------------------
# events.jsonl


class RunEvent(BaseModel):
    """One line of events.jsonl: the run's own timeline."""

    t_s: float = Field(description="seconds since the run's start when logged (finalize's own events: since it began)")
    at: str = Field(description="UTC time when logged, ISO 8601")
    event: str = Field(description="what happened: run_started, agent_started, finish_now_first, hard_stop, agent_ended ...")
    detail: dict[str, Any] = Field(
        default_factory=dict, description="the event's figures; at_s, when present, is the moment itself on the run's clock"
    )


# ---------------------------------------------------------------------------------------------
# Reading a run folder: every file on the model its writer uses.

# Run files are the host's own, but a folder handed to `showcase report` may be anything.
MAX_RUN_FILE_BYTES = 256 << 20

M = TypeVar("M", bound=BaseModel)


def _why(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the file"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _too_large(path: Path, problems: list[str]) -> bool:
    size = path.stat().st_size
    if size > MAX_RUN_FILE_BYTES:
        problems.append(f"{path.name} is {size:,} bytes, over the {MAX_RUN_FILE_BYTES:,}-byte bound; shown as not recorded")
        return True
    return False


def read_json_model(path: Path, model: type[M], problems: list[str]) -> M | None:
    """The file on its model; None when it is missing or does not match (then a line in `problems`)."""
    if not path.is_file() or _too_large(path, problems):
        return None
    try:
        return model.model_validate_json(path.read_bytes())
    except OSError as exc:
        problems.append(f"{path.name} could not be read ({exc}); shown as not recorded")
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            problems.append(f"{path.name} could not be read (not whole JSON); shown as not recorded")
        else:
            problems.append(f"{path.name} does not match its model ({_why(exc)}); shown as not recorded")
    return None


def read_jsonl_models(path: Path, model: type[M], problems: list[str]) -> list[M]:
    """Every line of a JSON-lines file that matches its model; the others are counted in `problems`."""
    if not path.is_file() or _too_large(path, problems):
        return []
    try:
        rows, bad = scan_jsonl(path)
    except OSError as exc:
        problems.append(f"{path.name} could not be read ({exc})")
        return []
    out = []
    for row in rows:
        try:
            out.append(model.model_validate(row))
        except ValidationError:
            bad += 1
    if bad:
        problems.append(f"{path.name}: {bad:,} line{'' if bad == 1 else 's'} could not be read and "
                        f"{'was' if bad == 1 else 'were'} left out")
    return out


def fold_versions(lines: list[VersionRecord]) -> list[VersionRecord]:
    """versions.jsonl folded by n, in order of n: a load check or a later sighting updates its version."""
    folded: dict[int, VersionRecord] = {}
    updates = []
    for line in lines:
        if line.event in ("seen", "recovered"):
            folded.setdefault(line.n, line)
        else:
            updates.append(line)
    for update in updates:
        base = folded.get(update.n)
        if base is None:
            folded[update.n] = update
        elif update.event == "load_checked":
            folded[update.n] = base.model_copy(update={
                "loaded_without_errors": update.loaded_without_errors,
                "load_errors": update.load_errors,
                "check_failure": update.check_failure,
                "picture": update.picture or base.picture,
            })
        elif update.event == "seen_again":
            folded[update.n] = base.model_copy(update={"last_seen_t_s": update.last_seen_t_s})
    return [folded[n] for n in sorted(folded)]


@dataclass
class RunFiles:
    """What one run folder holds, each file on its model; None or empty where it is missing."""

    layout: RunLayout
    command: str | None = None
    contract: Contract | None = None
    sampling: SamplingFile | None = None
    run_info: RunInfo | None = None
    gate_stats: GateStats | None = None
    gate_lines: list[GateLogLine] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    versions: list[VersionRecord] = field(default_factory=list)
    final_choice: FinalChoice | None = None
    check: CheckReport | None = None
    clip: ClipResult | None = None
    problems: list[str] = field(default_factory=list)


def read_run(root: Path | str) -> RunFiles:
    """Read every file of a run folder. Never raises on a missing, cut or foreign file: says so in `problems`."""
    layout = RunLayout(Path(root))
    files = RunFiles(layout=layout)
    p = files.problems
    if layout.command.is_file() and not _too_large(layout.command, p):
        try:
            files.command = layout.command.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:
            p.append(f"command.txt could not be read ({exc})")
    files.contract = read_json_model(layout.contract, Contract, p)
    files.sampling = read_json_model(layout.sampling, SamplingFile, p)
    files.run_info = read_json_model(layout.run_info, RunInfo, p)
    files.gate_stats = read_json_model(layout.gate_stats, GateStats, p)
    files.final_choice = read_json_model(layout.final_choice, FinalChoice, p)
    files.check = read_json_model(layout.check, CheckReport, p)
    files.clip = read_json_model(layout.clip_info, ClipResult, p)
    files.gate_lines = read_jsonl_models(layout.gate_log, GateLogLine, p)
    files.events = sorted(read_jsonl_models(layout.events_log, RunEvent, p), key=lambda e: e.t_s)
    files.versions = fold_versions(read_jsonl_models(layout.versions_log, VersionRecord, p))
    return files
