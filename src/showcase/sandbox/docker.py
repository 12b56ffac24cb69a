"""The Docker backend (Docker SDK): one container per run, the relay as its main process.

The container's command is the relay, as its own init (PID 1, which ends the container at the
spec's lifetime even if the host side is gone: see relay.py); the agent and every other
command are `exec`s, each started as `sh -c 'echo $$ > PIDFILE; CMD'` so that we know its
process-group/session id and can kill its whole tree from inside (a timeout that really kills,
on any engine, local or remote). An out-of-memory kill is read from the engine's event stream
(`oom` events of this container) and confirmed by the container's State.OOMKilled at the end.
"""

import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.types import Mount as DockerMount

from showcase.errors import InfraError, UserError
from showcase.sandbox.base import (
    DEADLINE_LABEL,
    EngineUnanswered,
    GATE_IN_CONTAINER,
    OWNER_LABEL,
    RELAY_IN_CONTAINER,
    RELAY_ON_HOST,
    WORK_IN_CONTAINER,
    ExecResult,
    ExitInfo,
    ProcessHandle,
    RUN_LABEL,
    Sandbox,
    SandboxSpec,
    parse_size,
)
from showcase.sandbox import space as run_space

LABEL = "showcase.sandbox"  # value: this sandbox's id; the leak audit looks for it
OUTPUT_CAP = 8 << 20  # bytes kept per stream of one exec (the rest is dropped, and said so)
LOG_CAP = 64 << 20  # bytes a long-running process may append to its host log (agent.log); the rest is counted
PID_DIR = "/tmp"  # tmpfs; where each exec writes its process-group id


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _parse_engine_time(text: str | None) -> datetime | None:
    if not text or text.startswith("0001-"):
        return None
    try:
        return datetime.fromisoformat(text[:26].rstrip("Z") + "+00:00")
    except ValueError:
        return None


class _Stream:
    """Reads one exec's output in a thread (the SDK's reads block) and keeps or appends it."""

    def __init__(self, gen, log_path: Path | None = None, demux: bool = True):
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.truncated = False
        self.dropped = 0  # bytes of a logged stream beyond LOG_CAP
        self.error: BaseException | None = None
        self._log_path = log_path
        self._gen = gen
        self._demux = demux
        self.thread = threading.Thread(target=self._run, daemon=True, name="showcase-exec-output")
        self.thread.start()

    def _keep(self, buf: bytearray, data: bytes | None) -> None:
        if data:
            room = OUTPUT_CAP - len(buf)
            if len(data) > room:
                self.truncated = True
            buf.extend(data[: max(room, 0)])

    def _log(self, sink, data: bytes) -> None:
        """Append to the host log up to LOG_CAP bytes; past it one marker line, then only a count."""
        kept = data[:max(0, LOG_CAP - self._logged)]
        sink.write(kept)
        self._logged += len(kept)
        rest = len(data) - len(kept)
        if rest and not self.dropped:
            sink.write(f"\n[showcase: output beyond {LOG_CAP >> 20} MiB dropped from here on]\n".encode())
        self.dropped += rest
        sink.flush()

    def _run(self) -> None:
        sink = open(self._log_path, "ab") if self._log_path else None
        self._logged = sink.tell() if sink else 0
        try:
            for item in self._gen:
                if sink:
                    self._log(sink, b"".join(part or b"" for part in item) if self._demux else item)
                elif self._demux:
                    self._keep(self.stdout, item[0])
                    self._keep(self.stderr, item[1])
                else:
                    self._keep(self.stdout, item)
        except BaseException as exc:  # a broken engine connection must not kill the thread silently
            self.error = exc
        finally:
            if sink:
                try:
                    if self.dropped:
                        sink.write(f"[showcase: {self.dropped} bytes of output dropped]\n".encode())
                finally:
                    sink.close()


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.spec: SandboxSpec | None = None
        self.container = None
        self.container_id: str | None = None
        self._processes: list[ProcessHandle] = []
        self._started_at: datetime | None = None
        self.space: run_space.RunSpace | None = None  # the disk this backend made itself (see _bound_disk)
        self.space_timings: dict[str, float] = {}
        self.space_report: run_space.CloseReport | None = None
        self._peak_file: Path | None = None  # the kernel's peak of the container's memory cgroup
        self._peak: int | None = None
        try:
            self.client = docker.from_env(timeout=120)
            # Output streams wait as long as the command runs: no read timeout there.
            self.stream_client = docker.from_env(timeout=None)
        except docker.errors.DockerException as exc:
            raise InfraError(f"no Docker engine answers ({exc})") from None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            docker.from_env(timeout=10).ping()
            return None
        except docker.errors.DockerException as exc:
            return f"no Docker engine answers ({exc})"

    # --- start -----------------------------------------------------------------------------------

    def start(self, spec: SandboxSpec) -> None:
        if self.container is not None:
            raise UserError("this sandbox was already started; make a new one")
        self.spec = spec
        try:
            self.client.images.get(spec.image)
        except docker.errors.ImageNotFound:
            raise UserError(f"no image {spec.image!r} on this machine; build it with `showcase image build`") from None
        if not spec.gate_dir_host.is_dir():
            raise UserError(f"gate folder {spec.gate_dir_host} does not exist")
        spec.workdir_host.mkdir(parents=True, exist_ok=True)
        self._bound_disk(spec)
        try:
            self._create_and_start(spec)
        except BaseException:
            self._close_space()
            raise

    def _bound_disk(self, spec: SandboxSpec) -> None:
        """Make sure /work and every read-write mount together hold at most spec.disk bytes.

        Folders already on one filesystem no larger than the cap (a run's own space) are used as
        they are; otherwise the backend makes a space of that size over them, closed by remove().
        """
        cap = spec.disk_bytes
        if cap is None:
            return
        folders = [Path(spec.workdir_host), *(Path(m.host) for m in spec.extra_mounts if not m.read_only)]
        devices = {os.stat(f).st_dev for f in folders}
        sizes = [os.statvfs(f).f_blocks * os.statvfs(f).f_frsize for f in folders]
        if len(devices) == 1 and max(sizes) <= cap:
            return
        parents = {f.resolve().parent for f in folders}
        if len(parents) != 1:
            raise UserError("a disk cap needs /work's folder and every read-write mount side by side in one folder")
        self.space = run_space.RunSpace(parents.pop(), [f.resolve().name for f in folders])
        self.space_timings = self.space.open(cap, spec.uid, spec.gid, sweep_label=spec.sweep_label)

    def _close_space(self) -> run_space.CloseReport | None:
        space, self.space = self.space, None
        return space.close() if space is not None else None

    def _create_and_start(self, spec: SandboxSpec) -> None:
        if spec.chown_workdir and os.geteuid() == 0:
            _chown_tree(spec.workdir_host, spec.uid, spec.gid)
        mounts = [
            DockerMount(WORK_IN_CONTAINER, str(spec.workdir_host.resolve()), type="bind", read_only=False),
            DockerMount(GATE_IN_CONTAINER, str(spec.gate_dir_host.resolve()), type="bind", read_only=True),
            DockerMount(RELAY_IN_CONTAINER, str(RELAY_ON_HOST), type="bind", read_only=True),
        ]
        for extra in spec.extra_mounts:
            if not extra.host.exists():
                raise UserError(f"mount source {extra.host} does not exist")
            mounts.append(DockerMount(extra.container, str(extra.host.resolve()), type="bind", read_only=extra.read_only))
        memory = parse_size(spec.memory)
        swap = memory if spec.memory_swap is None else (-1 if spec.memory_swap == "-1" else parse_size(spec.memory_swap))
        tmpfs_opts = "rw,nosuid,nodev"
        labels = {"showcase": "1", LABEL: self.id, **spec.labels,
                  OWNER_LABEL: run_space.Owner.me().label(), DEADLINE_LABEL: f"{time.time() + spec.lifetime_s:.0f}"}
        # The relay is PID 1 and its own init: the container ends at lifetime_s whatever the host does.
        command = ["python3", RELAY_IN_CONTAINER, "--lifetime-s", f"{spec.lifetime_s:.3f}",
                   "--listen", f"127.0.0.1:{spec.relay_port}", "--socket", f"{GATE_IN_CONTAINER}/{spec.gate_socket}"]
        self._started_at = _now()
        try:
            self.container = self.client.containers.create(
                spec.image, command=command,
                name=spec.name or f"showcase-{self.id}", hostname="sandbox", labels=labels,
                user=spec.user, environment=spec.agent_env(), working_dir=WORK_IN_CONTAINER,
                network_mode=spec.network, mem_limit=memory, memswap_limit=swap,
                nano_cpus=int(spec.cpu_limit * 1e9), pids_limit=spec.pids_limit,
                read_only=spec.read_only_root,
                tmpfs={
                    "/tmp": f"{tmpfs_opts},size={parse_size(spec.tmpfs_tmp)},mode=1777",
                    spec.home: f"{tmpfs_opts},size={parse_size(spec.tmpfs_home)},uid={spec.uid},gid={spec.gid},mode=0755",
                },
                cap_drop=["ALL"] if spec.drop_capabilities else None,
                security_opt=["no-new-privileges"] if spec.no_new_privileges else None,
                init=False, mounts=mounts, stdin_open=False, tty=False,
            )
        except docker.errors.ImageNotFound:
            raise UserError(f"no image {spec.image!r}") from None
        except docker.errors.APIError as exc:
            raise InfraError(f"the engine refused to create the sandbox: {exc.explanation or exc}") from None
        self.container_id = self.container.id
        # A sandbox that did not come up is removed here: the caller gets an error, never a half-started container.
        try:
            try:
                self.container.start()
            except docker.errors.APIError as exc:
                raise InfraError(f"the engine refused to start the sandbox: {exc.explanation or exc}") from None
            self._wait_for_relay(spec)
            self._peak_file = memory_peak_file(self.host_pid())
        except BaseException:
            try:
                self.client.api.remove_container(self.container_id, v=True, force=True)
            except docker.errors.APIError:
                pass
            raise

    def _wait_for_relay(self, spec: SandboxSpec) -> None:
        """Bounded: the relay prints 'relay ready' once listening; then one real connection from inside."""
        deadline = time.monotonic() + spec.relay_ready_s
        while True:
            self.container.reload()
            logs = self.container.logs().decode(errors="replace")
            if "relay ready" in logs:
                break
            if self.container.status not in ("created", "running"):
                raise InfraError(f"sandbox exited before its relay was ready (does the image have python3?): {logs.strip()[-300:]}")
            if time.monotonic() > deadline:
                raise InfraError(f"the sandbox relay did not start within {spec.relay_ready_s:.0f} s: {logs.strip()[-300:]}")
            time.sleep(0.05)
        probe = ("import socket,sys; s=socket.create_connection(('127.0.0.1', %d), 5); s.close()" % spec.relay_port)
        result = self.exec(["python3", "-c", probe], timeout_s=max(5.0, deadline - time.monotonic()))
        if result.exit_code != 0:
            raise InfraError(f"the sandbox relay does not answer on 127.0.0.1:{spec.relay_port}: {result.stderr.strip()[-300:]}")

    # --- exec ------------------------------------------------------------------------------------

    def _need_container(self):
        if self.container is None:
            raise UserError("the sandbox is not started")
        return self.container

    def _create_exec(self, cmd: list[str], env: dict[str, str] | None, workdir: str) -> tuple[str, str]:
        self._need_container()
        if not cmd:
            raise UserError("empty command")
        pid_file = f"{PID_DIR}/.showcase-exec-{uuid.uuid4().hex[:12]}.pid"
        # The shell leads the exec's own session/process group (the engine starts each exec in a new
        # session); its id in pid_file lets us kill the group. It removes the file when done.
        wrapped = ["sh", "-c", f'echo $$ > {pid_file}; "$@"; rc=$?; rm -f {pid_file}; exit $rc', "sh", *cmd]
        try:
            exec_id = self.client.api.exec_create(
                self.container_id, wrapped, stdout=True, stderr=True, stdin=False, tty=False,
                environment=env or None, workdir=workdir, user=self.spec.user,
            )["Id"]
        except docker.errors.APIError as exc:
            raise InfraError(f"exec failed: {exc.explanation or exc}") from None
        return exec_id, pid_file

    def _kill_group(self, pid_file: str) -> None:
        """Kill the process group and session the exec started (its whole tree, unless it escaped with setsid)."""
        script = (f'p=$(cat {pid_file} 2>/dev/null) || exit 0; kill -KILL -- -"$p" 2>/dev/null; '
                  f'kill -KILL "$p" 2>/dev/null; command -v pkill >/dev/null && pkill -KILL -s "$p"; rm -f {pid_file}; exit 0')
        try:
            exec_id = self.client.api.exec_create(self.container_id, ["sh", "-c", script], user=self.spec.user)["Id"]
            self.client.api.exec_start(exec_id)
        except docker.errors.APIError:
            pass  # the container is gone: so is the group

    def exec(self, cmd: list[str], timeout_s: float, env: dict[str, str] | None = None,
             workdir: str = WORK_IN_CONTAINER, detach: bool = False) -> ExecResult:
        started = time.monotonic()
        exec_id, pid_file = self._create_exec(cmd, env, workdir)
        if detach:
            self.client.api.exec_start(exec_id, detach=True)
            return ExecResult(exit_code=None, seconds=time.monotonic() - started)
        gen = self.stream_client.api.exec_start(exec_id, stream=True, demux=True)
        stream = _Stream(gen)
        stream.thread.join(timeout_s)
        timed_out = stream.thread.is_alive()
        if timed_out:
            self._kill_group(pid_file)
            stream.thread.join(10)
        info = self.client.api.exec_inspect(exec_id)
        stderr = stream.stderr.decode(errors="replace")
        if stream.truncated:
            stderr += f"\n[showcase: output beyond {OUTPUT_CAP >> 20} MB per stream dropped]"
        return ExecResult(
            exit_code=None if info.get("Running") else info.get("ExitCode"),
            stdout=stream.stdout.decode(errors="replace"), stderr=stderr,
            timed_out=timed_out, seconds=time.monotonic() - started,
        )

    # --- long-running process ------------------------------------------------------------------------

    def start_process(self, cmd: list[str], env: dict[str, str] | None = None, log_path: Path | None = None,
                      workdir: str = WORK_IN_CONTAINER) -> ProcessHandle:
        exec_id, pid_file = self._create_exec(cmd, env, workdir)
        if log_path:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        started_at = _now()
        gen = self.stream_client.api.exec_start(exec_id, stream=True, demux=False)
        stream = _Stream(gen, log_path=Path(log_path) if log_path else None, demux=False)
        handle = ProcessHandle(id=exec_id, cmd=list(cmd), log_path=log_path, started_at=started_at,
                               backend_state={"stream": stream, "pid_file": pid_file})
        self._processes.append(handle)
        return handle

    def _handle(self, handle: ProcessHandle | None) -> ProcessHandle | None:
        return handle or (self._processes[-1] if self._processes else None)

    def wait(self, timeout_s: float, handle: ProcessHandle | None = None) -> ExitInfo:
        try:
            return self._wait(timeout_s, handle)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
            raise EngineUnanswered(f"the Docker engine did not answer: {exc}") from exc

    def _wait(self, timeout_s: float, handle: ProcessHandle | None) -> ExitInfo:
        # The run polls wait(): the peak is kept up to date while the cgroup lives (an OOM kill
        # of the whole container takes the cgroup, and its peak, with it).
        self._note_peak()
        handle = self._handle(handle)
        if handle is None:
            return self._wait_container(timeout_s)
        deadline = time.monotonic() + timeout_s
        stream: _Stream = handle.backend_state["stream"]
        stream.thread.join(timeout_s)
        # The output stream can end a moment before the engine records the exit code.
        while True:
            info = self.exit_info(handle)
            if info.how != "running" or time.monotonic() >= deadline:
                return info
            time.sleep(0.05)

    def _wait_container(self, timeout_s: float) -> ExitInfo:
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.sandbox_exit_info()
            if info.how != "running" or time.monotonic() >= deadline:
                return info
            time.sleep(0.2)

    def _oom_seen(self, since: datetime) -> bool:
        """Did the engine report an out-of-memory kill in this container since `since`?"""
        try:
            events = self.client.api.events(
                since=int(since.timestamp()), until=int(time.time()) + 1,
                filters={"container": self.container_id, "event": "oom"}, decode=True)
            return any(True for _ in events)
        except docker.errors.APIError:
            return False

    def exit_info(self, handle: ProcessHandle | None = None) -> ExitInfo:
        self._need_container()
        handle = self._handle(handle)
        if handle is None:
            return self.sandbox_exit_info()
        try:
            info = self.client.api.exec_inspect(handle.id)
        except docker.errors.NotFound:  # the container is gone, and the process with it
            return ExitInfo(how="oom" if self._safe_oom(handle) else "killed", oom_killed=self._safe_oom(handle),
                            finished_at=handle.backend_state.get("ended_at"))
        if info.get("Running"):
            # The engine can leave an exec marked running after its container died: trust the container.
            if self.sandbox_exit_info().how == "running":
                return ExitInfo(how="running")
            oom = self._safe_oom(handle)
            handle.backend_state.setdefault("ended_at", _now())
            return ExitInfo(how="oom" if oom else "killed", oom_killed=oom, finished_at=handle.backend_state["ended_at"])
        handle.backend_state.setdefault("ended_at", _now())
        code = info.get("ExitCode")
        killed_by_signal = code is not None and code >= 128
        oom = killed_by_signal and self._oom_seen(handle.started_at)
        if oom:
            how = "oom"
        elif handle.killed or code == 137:
            how = "killed"
        else:
            how = "exited"
        return ExitInfo(how=how, exit_code=code, oom_killed=oom, finished_at=handle.backend_state["ended_at"])

    def sandbox_exit_info(self) -> ExitInfo:
        """How the container itself ended (State.OOMKilled: an OOM kill happened in it at any time)."""
        self._need_container()
        try:
            state = self.client.api.inspect_container(self.container_id)["State"]
        except docker.errors.NotFound:
            return ExitInfo(how="killed", exit_code=None)
        if state.get("Running"):
            return ExitInfo(how="running")
        oom = bool(state.get("OOMKilled"))
        code = state.get("ExitCode")
        how = "oom" if oom else ("killed" if code in (137, 143) else "exited")
        return ExitInfo(how=how, exit_code=code, oom_killed=oom, finished_at=_parse_engine_time(state.get("FinishedAt")))

    def _safe_oom(self, handle: ProcessHandle) -> bool:
        try:
            return self._oom_seen(handle.started_at)
        except Exception:
            return False

    def kill_process(self, handle: ProcessHandle | None = None) -> None:
        handle = self._handle(handle)
        if handle is None:
            return
        handle.killed = True
        self._kill_group(handle.backend_state["pid_file"])

    # --- copy, stop, kill, remove, audit ---------------------------------------------------------

    def copy_out(self, container_path: str, host_path: Path, timeout_s: float = 600) -> None:
        """Through `tar` run inside (the engine's archive API cannot see tmpfs mounts such as the home)."""
        self._need_container()
        host_path = Path(host_path)
        path = container_path.rstrip("/") or "/"
        parent, name = os.path.split(path)
        host_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".copy-", dir=host_path.parent) as tmp:
            archive = Path(tmp) / "out.tar"
            exec_id = self.client.api.exec_create(self.container_id, ["tar", "-C", parent or "/", "-cf", "-", name],
                                                  user=self.spec.user)["Id"]
            gen = self.stream_client.api.exec_start(exec_id, stream=True, demux=True)
            errors = bytearray()
            with open(archive, "wb") as sink:
                def pump():
                    for out, err in gen:
                        if out:
                            sink.write(out)
                        if err:
                            errors.extend(err[:4096])
                reader = threading.Thread(target=pump, daemon=True)
                reader.start()
                reader.join(timeout_s)
                if reader.is_alive():
                    raise InfraError(f"copying {container_path} out took over {timeout_s:.0f} s")
            code = self.client.api.exec_inspect(exec_id).get("ExitCode")
            if code != 0:
                message = errors.decode(errors="replace").strip()
                if "No such file" in message or "Cannot stat" in message:
                    raise UserError(f"nothing at {container_path} in the sandbox")
                raise InfraError(f"copying {container_path} out failed (tar exit {code}): {message[:200]}")
            with tarfile.open(archive) as tar:
                tar.extractall(Path(tmp) / "x", filter="data")
            extracted = Path(tmp) / "x" / name
            if host_path.is_dir() and not extracted.is_dir():
                host_path = host_path / name
            if host_path.is_dir():
                shutil.rmtree(host_path)
            os.replace(extracted, host_path)

    def stop(self, grace_s: float = 10) -> None:
        if self.container is None:
            return
        self._note_peak(ask_engine=True)  # the cgroup goes with the container
        for handle in self._processes:
            handle.killed = True
        try:
            # Docker sends SIGTERM to PID 1 (the init forwards it), then SIGKILL after grace_s.
            docker.from_env(timeout=int(grace_s) + 60).api.stop(self.container_id, timeout=int(max(grace_s, 0)))
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            raise InfraError(f"stopping the sandbox failed: {exc.explanation or exc}") from None

    def kill(self) -> None:
        if self.container is None:
            return
        self._note_peak(ask_engine=True)  # the cgroup goes with the container
        for handle in self._processes:
            handle.killed = True
        try:
            self.client.api.kill(self.container_id)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if "is not running" not in str(exc):
                raise InfraError(f"killing the sandbox failed: {exc.explanation or exc}") from None
        # The engine answers before the process is reaped: wait (bounded) until it is not running.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.sandbox_exit_info().how == "running":
            time.sleep(0.05)

    def remove(self) -> None:
        try:
            if self.container_id is not None:
                try:
                    self.client.api.remove_container(self.container_id, v=True, force=True)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    if "already in progress" not in str(exc):
                        raise InfraError(f"removing the sandbox failed: {exc.explanation or exc}") from None
                for handle in self._processes:
                    handle.backend_state["stream"].thread.join(5)
        finally:
            # Nothing writes into the space any more: leave its folders plain and unmount it.
            report = self._close_space()
            if report is not None:
                self.space_report = report

    def processes(self) -> list[int]:
        if self.container is None:
            return []
        try:
            top = self.container.top(ps_args="-eo pid")
            return [int(row[0]) for row in top.get("Processes") or []]
        except (docker.errors.DockerException, ValueError, IndexError, TypeError):
            return []

    def peak_memory_bytes(self) -> int | None:
        self._note_peak(ask_engine=True)
        return self._peak

    def _note_peak(self, ask_engine: bool = False) -> None:
        """Keep the highest peak read: from the cgroup's own file on this host, else (a remote engine,
        or a file this kernel lacks) from the engine's stats, which report it on cgroup v1."""
        if self.container_id is None:
            return
        peak = _read_int(self._peak_file) if self._peak_file is not None else None
        if peak is None and ask_engine:
            try:
                stats = self.client.api.stats(self.container_id, stream=False, one_shot=True)
                peak = int(stats["memory_stats"]["max_usage"]) or None
            except (docker.errors.DockerException, KeyError, TypeError, ValueError):
                peak = None
        if peak is not None:
            self._peak = max(peak, self._peak or 0)

    def host_pid(self) -> int | None:
        if self.container_id is None:
            return None
        try:
            return int(self.client.api.inspect_container(self.container_id)["State"]["Pid"]) or None
        except (docker.errors.DockerException, KeyError, ValueError, TypeError):
            return None

    @classmethod
    def remove_run(cls, run_dir: Path) -> list[str]:
        return cls._remove_where(f"{RUN_LABEL}={Path(run_dir).resolve()}", lambda labels: True,
                                 "removed the run's leftover container {name}")

    @staticmethod
    def _remove_where(label_filter: str, take, text: str) -> list[str]:
        """Remove the containers matching label_filter for which take(labels) holds; what was done.

        One listing call, no inspect per container: a container that goes meanwhile (another
        process's sweep, a run ending) must not turn the whole sweep into nothing."""
        try:
            client = docker.from_env(timeout=30)
            found = client.api.containers(all=True, filters={"label": label_filter})
        except docker.errors.DockerException:
            return []
        done = []
        for c in found:
            labels = c.get("Labels") or {}
            name = (c.get("Names") or [c["Id"][:12]])[0].lstrip("/")
            if not take(labels):
                continue
            try:
                client.api.remove_container(c["Id"], v=True, force=True)
                done.append(text.format(name=name, **{"run": labels.get(label_filter.split("=")[0], "")}))
            except docker.errors.NotFound:
                pass  # gone already: someone else's sweep took it
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    done.append(f"could not remove the leftover container {name}: {exc.explanation or exc}")
        return done

    @classmethod
    def remove_leftovers(cls, label: str = RUN_LABEL) -> list[str]:
        """Containers labelled `label` whose owner process is gone (or, unowned, past their deadline)."""

        def dead(labels: dict) -> bool:
            owner = run_space.Owner.from_label(labels.get(OWNER_LABEL, ""))
            if owner is not None:
                return not owner.alive()
            try:
                return time.time() > float(labels[DEADLINE_LABEL])
            except (KeyError, ValueError):
                return False

        return cls._remove_where(label, dead, "removed the leftover container {name} of a dead run in {run}")

    def leak_audit(self) -> list[str]:
        leaks = []
        for c in self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.id}"}):
            leaks.append(f"container {c.name} ({c.status})")
        if self.container_id:
            leaks += [f"process {pid} ({comm}) in the sandbox's cgroup" for pid, comm in _procs_in_cgroup(self.container_id)]
        for handle in self._processes:
            if handle.backend_state["stream"].thread.is_alive():
                leaks.append(f"output reader of {handle.cmd[:1]} still running")
        if self.space is not None:
            leaks.append(f"disk image still mounted at {self.space.mnt}")
        return leaks


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give the work folder to the sandbox user so it can write there; the host (root) still can."""
    for path in [root, *root.rglob("*")]:
        try:
            st = path.lstat()
            if st.st_uid != uid or st.st_gid != gid:
                os.lchown(path, uid, gid)
        except OSError:
            pass


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def memory_peak_file(pid: int | None) -> Path | None:
    """Where this host's kernel keeps the peak memory use of pid's memory cgroup: memory.peak
    (cgroup v2) or memory.max_usage_in_bytes (v1), under this machine's cgroup mounts (their
    /proc/self/mountinfo roots, so a nested cgroup namespace is placed right). None if not here."""
    if pid is None:
        return None
    try:
        groups = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in groups:
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and not controllers:
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        fields, tail = fields.split(), tail.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point = fields[3], re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        for path, here, name in ((v1, tail[0] == "cgroup" and "memory" in tail[2].split(","), "memory.max_usage_in_bytes"),
                                 (v2, tail[0] == "cgroup2", "memory.peak")):
            if path is None or not here:
                continue
            inside = posixpath.relpath(path, root)
            if inside.startswith(".."):
                continue
            candidate = Path(point) / inside / name
            if _read_int(candidate) is not None:
                return candidate
    return None


def _procs_in_cgroup(container_id: str) -> list[tuple[int, str]]:
    """Host processes whose cgroup names the container (only visible when the engine is local)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if container_id in (entry / "cgroup").read_text():
                found.append((int(entry.name), (entry / "comm").read_text().strip()))
        except OSError:
            continue
    return found
