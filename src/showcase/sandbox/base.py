"""The Sandbox protocol: one abstract class, its spec and results, and the registry of backends.

A backend is one file (docker.py today; podman or Kubernetes tomorrow) with a subclass of
`Sandbox`, named in BUILTIN_BACKENDS or published under the `showcase.sandbox_backends` entry-point
group. Every backend must pass the conformance suite (conformance.py, `showcase sandbox self-check`).
"""

import importlib
import os
import re
from abc import ABC, abstractmethod
from datetime import datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from showcase.errors import InfraError, UserError

RELAY_IN_CONTAINER = "/opt/showcase/relay.py"
RELAY_ON_HOST = Path(__file__).with_name("relay.py")
WORK_IN_CONTAINER = "/work"
GATE_IN_CONTAINER = "/gate"
RUN_LABEL = "showcase.run"  # label naming a run's folder: what the leftover sweep looks for, and nothing else
OWNER_LABEL = "showcase.owner"  # boot id, pid and start time of the process that started the sandbox
DEADLINE_LABEL = "showcase.deadline"  # epoch second by which the sandbox has ended itself


def parse_size(text: str) -> int:
    """'1.25g' / '512m' / '300k' / '1048576' -> bytes (binary units, as Docker reads them)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*", str(text).lower())
    if not match:
        raise UserError(f"not a size: {text!r} (use e.g. 512m, 1.25g)")
    number, unit = match.groups()
    return int(float(number) * {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit])


class Mount(BaseModel):
    """One extra bind mount from the host into the sandbox."""

    host: Path = Field(description="path on the host (must exist)")
    container: str = Field(description="absolute path inside the sandbox")
    read_only: bool = Field(True, description="mount read-only (the default; the agent's only rw folder is /work)")


class SandboxSpec(BaseModel):
    """Everything a backend needs to start one sandbox. Defaults are the published run conditions."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(description="image tag or id (see `showcase image build`); never pulled")
    workdir_host: Path = Field(description="host folder mounted read-write at /work (the agent's only writable disk)")
    disk: str | None = Field("4g", description="hard cap of the writable disk (/work and every read-write mount "
                             "together), enforced by the kernel; None = the host folders as they are, unbounded")
    lifetime_s: float = Field(3 * 3600, gt=0, allow_inf_nan=False,
                              description="the sandbox ends itself this long after it starts, whatever the host does")
    gate_dir_host: Path = Field(description="host folder holding the gate's Unix socket, mounted read-only at /gate")
    gate_socket: str = Field("gate.sock", description="file name of the gate's socket inside gate_dir_host")
    extra_mounts: list[Mount] = Field(default_factory=list, description="more bind mounts (read-only unless said)")
    env: dict[str, str] = Field(default_factory=dict, description="environment of every process in the sandbox")
    api_key: str | None = Field(None, description="per-run key given to the agent as OPENAI_API_KEY")
    user: str = Field("1000:1000", description="uid:gid processes run as (non-root; owns /work and the home)")
    home: str = Field("/home/agent", description="HOME inside the sandbox (a tmpfs)")
    memory: str = Field("1.25g", description="memory limit (Docker size syntax)")
    memory_swap: str | None = Field(None, description="memory+swap limit; None = equal to memory (no swap at all)")
    cpus: float | None = Field(None, description="CPU limit in cores; None = min(4, host cores)")
    pids_limit: int = Field(512, description="most processes/threads at once (stops fork bombs)")
    tmpfs_tmp: str = Field("512m", description="size of the /tmp tmpfs (counts against memory)")
    tmpfs_home: str = Field("256m", description="size of the home tmpfs (counts against memory)")
    read_only_root: bool = Field(True, description="root file system read-only")
    drop_capabilities: bool = Field(True, description="drop all Linux capabilities")
    no_new_privileges: bool = Field(True, description="setuid binaries cannot raise privileges")
    init: bool = Field(True, description="kept for old specs: PID 1 is always the relay's own init (reaps zombies, "
                       "forwards signals, ends the sandbox at lifetime_s)")
    network: str = Field("none", description="container network; 'none' = no interface but loopback")
    relay_port: int = Field(8765, ge=1, le=65535, description="loopback port of the in-sandbox relay to the gate")
    relay_ready_s: float = Field(30, gt=0, description="how long start() waits for the relay to answer")
    chown_workdir: bool = Field(True, description="give /work's host folder to the sandbox user (when run as root)")
    labels: dict[str, str] = Field(default_factory=dict, description="extra labels on the container")
    sweep_label: str = Field(RUN_LABEL, description="the leftover sweep that may remove this sandbox (and the disk "
                             "space the backend made for it) once its owner is gone: `remove_leftovers(label)`; "
                             "labels should name the run's folder under this key")
    name: str | None = Field(None, description="container name (default: showcase-<random>)")

    @field_validator("memory", "tmpfs_tmp", "tmpfs_home")
    @classmethod
    def _size(cls, value: str) -> str:
        try:
            parse_size(value)
        except UserError as exc:  # pydantic reports ValueErrors with the field's name
            raise ValueError(str(exc)) from None
        return value

    @field_validator("disk")
    @classmethod
    def _disk(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                size = parse_size(value)
            except UserError as exc:
                raise ValueError(str(exc)) from None
            if size < 16 << 20:
                raise ValueError(f"disk {value!r} is too small: at least 16m")
        return value

    @property
    def disk_bytes(self) -> int | None:
        return parse_size(self.disk) if self.disk is not None else None

    @field_validator("memory_swap")
    @classmethod
    def _swap(cls, value: str | None) -> str | None:
        if value is not None and value != "-1":
            try:
                parse_size(value)
            except UserError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def cpu_limit(self) -> float:
        return self.cpus if self.cpus is not None else float(min(4, os.cpu_count() or 1))

    @property
    def relay_url(self) -> str:
        """The model endpoint as the agent sees it."""
        return f"http://127.0.0.1:{self.relay_port}/v1"

    @property
    def uid(self) -> int:
        return int(self.user.split(":")[0])

    @property
    def gid(self) -> int:
        parts = self.user.split(":")
        return int(parts[1]) if len(parts) > 1 else self.uid

    def agent_env(self) -> dict[str, str]:
        """Environment of every process: HOME, the relay as the OpenAI endpoint, the key, then `env`."""
        env = {"HOME": self.home, "OPENAI_BASE_URL": self.relay_url, "OPENAI_API_BASE": self.relay_url}
        if self.api_key:
            env["OPENAI_API_KEY"] = self.api_key
        env.update(self.env)
        return env


# Fields a user may set from the command line (`--sandbox KEY=VALUE`, repeatable); the rest
# (image, folders, key, labels) belong to the run.
OVERRIDABLE = ("memory", "memory_swap", "disk", "lifetime_s", "cpus", "pids_limit", "tmpfs_tmp", "tmpfs_home", "read_only_root",
               "drop_capabilities", "no_new_privileges", "init", "network", "relay_port", "user")


def spec_overrides(pairs: list[str]) -> dict[str, Any]:
    """['memory=2g', 'cpus=2'] -> {'memory': '2g', 'cpus': 2.0}, checked against SandboxSpec's fields.

    For the run's CLI: one repeatable flag maps every limit without a flag per field.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in OVERRIDABLE:
            raise UserError(f"bad sandbox option {pair!r}: use KEY=VALUE with KEY one of {', '.join(OVERRIDABLE)}")
        out[key] = value.strip()
    probe = {"image": "x", "workdir_host": Path("."), "gate_dir_host": Path("."), **out}
    try:
        checked = SandboxSpec.model_validate(probe)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"bad sandbox option {first['loc'][0]}={out.get(first['loc'][0])!r}: {first['msg']}") from None
    return {key: getattr(checked, key) for key in out}


class ExecResult(BaseModel):
    """What one command run in the sandbox gave."""

    exit_code: int | None = Field(description="exit status (None when detached or killed before the engine knew)")
    stdout: str = Field("", description="standard output (UTF-8, undecodable bytes replaced)")
    stderr: str = Field("", description="standard error")
    timed_out: bool = Field(False, description="the timeout ran out and the command's process group was killed")
    seconds: float = Field(description="wall time of the call")


class EngineUnanswered(InfraError):
    """The engine did not answer a question about the sandbox within its client's timeout (a machine
    so busy that the engine stalls). What was asked is unknown, not failed: the caller may ask again."""


class ExitInfo(BaseModel):
    """How a sandboxed process (or the sandbox itself) ended."""

    how: Literal["exited", "killed", "oom", "running"] = Field(
        description="exited by itself / killed (timeout, stop, kill) / killed by the out-of-memory killer / still running")
    exit_code: int | None = Field(None, description="exit status as the engine reports it (137 = SIGKILL)")
    oom_killed: bool = Field(False, description="the engine reported an out-of-memory kill in the sandbox")
    finished_at: datetime | None = Field(None, description="when it ended (UTC), if it did")


class ProcessHandle(BaseModel):
    """A long-running process started with `start_process` (the agent)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = Field(description="backend's id of the process (Docker: the exec id)")
    cmd: list[str]
    log_path: Path | None = Field(None, description="host file its stdout+stderr are appended to")
    started_at: datetime
    killed: bool = Field(False, description="we killed it (timeout, kill, stop)")
    backend_state: Any = Field(None, exclude=True, description="backend-private (threads, files)")


class Sandbox(ABC):
    """One sealed environment. Use as a context manager to be sure it is killed and removed."""

    backend: ClassVar[str]

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this machine can run this backend, else why not (one line)."""
        return None

    @abstractmethod
    def start(self, spec: SandboxSpec) -> None:
        """Start the sandbox and its relay; return once the relay answers (bounded by spec.relay_ready_s)."""

    @abstractmethod
    def exec(self, cmd: list[str], timeout_s: float, env: dict[str, str] | None = None,
             workdir: str = WORK_IN_CONTAINER, detach: bool = False) -> ExecResult:
        """Run a command; at timeout_s its whole process group is killed (timed_out=True)."""

    @abstractmethod
    def start_process(self, cmd: list[str], env: dict[str, str] | None = None, log_path: Path | None = None,
                      workdir: str = WORK_IN_CONTAINER) -> ProcessHandle:
        """Start a long-running process (the agent); its output is appended to log_path on the host."""

    @abstractmethod
    def wait(self, timeout_s: float, handle: ProcessHandle | None = None) -> ExitInfo:
        """Wait (at most timeout_s) for a started process (default: the last one) to end.

        Raises EngineUnanswered when the engine did not answer in time: the process may still run."""

    @abstractmethod
    def exit_info(self, handle: ProcessHandle | None = None) -> ExitInfo:
        """How a started process (default: the last one; none started: the sandbox) ended, or 'running'."""

    @abstractmethod
    def sandbox_exit_info(self) -> ExitInfo:
        """How the sandbox itself (its main process) ended, or 'running'; oom if an OOM kill happened in it."""

    @abstractmethod
    def kill_process(self, handle: ProcessHandle | None = None) -> None:
        """Kill a started process and its process group now."""

    @abstractmethod
    def copy_out(self, container_path: str, host_path: Path) -> None:
        """Copy a file or folder out of the sandbox (lands atomically at host_path)."""

    @abstractmethod
    def stop(self, grace_s: float = 10) -> None:
        """Ask everything to end (SIGTERM); kill what is left after grace_s."""

    @abstractmethod
    def kill(self) -> None:
        """Kill everything in the sandbox now."""

    @abstractmethod
    def remove(self) -> None:
        """Remove the stopped sandbox (and anything the backend made for it)."""

    @abstractmethod
    def leak_audit(self) -> list[str]:
        """What of this sandbox is still left (containers, processes, threads); empty = clean."""

    @abstractmethod
    def processes(self) -> list[int]:
        """Host pids of every process in the sandbox now (the foreign-CPU monitor leaves them out);
        empty when it is not running."""

    def peak_memory_bytes(self) -> int | None:
        """The most memory the sandbox has used so far, in bytes: the kernel's own peak of its
        memory cgroup, read while it lives (after `kill` or `stop`, the last value read before).
        None when this backend or machine cannot tell."""
        return None

    @abstractmethod
    def host_pid(self) -> int | None:
        """Host pid of the sandbox's first process: its network namespace is the sandbox's
        (host/egress.py watches it there). None when it is not running or has none on this host."""

    @classmethod
    def remove_leftovers(cls, label: str = RUN_LABEL) -> list[str]:
        """Remove what dead runs left (sandboxes labelled `label` whose owner is gone); what was removed.

        Never a sandbox without that label, never one whose owner still runs. Every run sweeps
        with RUN_LABEL; the conformance suite sweeps a label of its own, so that no other
        process's sweep takes its dead run first.
        """
        return []

    @classmethod
    def remove_run(cls, run_dir: Path) -> list[str]:
        """Remove every sandbox of the run in run_dir (RUN_LABEL names it), owner alive or not: for
        `showcase finalize` of an interrupted run, whose owner it has found gone. What was removed."""
        return []

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.kill()
        finally:
            self.remove()


# name -> module holding exactly one Sandbox subclass with that `backend` name.
BUILTIN_BACKENDS = {"docker": "showcase.sandbox.docker"}
ENTRY_POINT_GROUP = "showcase.sandbox_backends"


def _backend_modules() -> dict[str, str]:
    modules = dict(BUILTIN_BACKENDS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        modules.setdefault(ep.name, ep.value.split(":")[0])
    return modules


def known_backends() -> list[str]:
    return sorted(_backend_modules())


def get_backend(name: str = "docker") -> type[Sandbox]:
    """The Sandbox class of a backend; an unknown name is a UserError listing the known ones."""
    modules = _backend_modules()
    if name not in modules:
        raise UserError(f"unknown sandbox backend {name!r}; known: {', '.join(sorted(modules))}")
    module = importlib.import_module(modules[name])
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Sandbox) and getattr(value, "backend", None) == name:
            return value
    raise UserError(f"module {modules[name]} defines no Sandbox with backend = {name!r}")
