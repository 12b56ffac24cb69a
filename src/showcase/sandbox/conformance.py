"""The conformance suite every sandbox backend must pass: real attempts from inside, results printed.

Used by `showcase sandbox self-check` and tests/test_sandbox_conformance.py. A stand-in gate (a tiny
HTTP server on a Unix socket, as the real gate listens) answers through the relay; everything
else is an attempt to get out or to hurt the host, made from inside the sandbox.
"""

import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from pydantic import BaseModel, Field

from showcase.sandbox.base import RUN_LABEL, Sandbox, SandboxSpec, get_backend, parse_size
from showcase.sandbox.space import RunSpace, is_mounted, sweep_mounts

STREAM_ACK_WAIT_S = 15  # how long the stand-in gate holds a stream open waiting for the client's ack
CONFORMANCE_DISK = "256m"  # the suite's disk cap: small, so filling it is quick (the run's default is 4g)
LIFETIME_S = 8  # lifetime of the short-lived sandboxes the deadline and leftover checks start
LIFETIME_GRACE_S = 20  # how long after its lifetime a sandbox may take to be gone


class CheckResult(BaseModel):
    """One conformance check: what was attempted and what happened."""

    name: str = Field(description="check id")
    passed: bool
    detail: str = Field(description="what was attempted and what happened, one line")
    seconds: float = 0.0


# --- the stand-in gate ----------------------------------------------------------------------------


class _GateHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_UnixHTTPServer"

    def log_message(self, *args) -> None:  # the client address of a Unix socket is ''
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        gate = self.server.gate
        gate.requests.append(self.path)
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "stand-in"}],
                             "authorization": self.headers.get("Authorization", "")})
        elif self.path == "/ack":
            gate.ack.set()
            self._send(200, {"ack": True})
        elif self.path == "/stream":
            # SSE: the second event is sent only after the client has acknowledged the first
            # (over a second connection): a relay that buffers makes this wait run out.
            gate.ack.clear()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"data: one\n\n")
            self.wfile.flush()
            acked = gate.ack.wait(STREAM_ACK_WAIT_S)
            self.wfile.write(b"data: two\n\n" if acked else b"data: no-ack\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(404, {"error": "no such path"})


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 5  # small on purpose: the relay must wait for the backlog, not drop connections
    gate: "StandInGate"


class StandInGate:
    """A tiny HTTP server on gate_dir/gate.sock, standing in for the real gate."""

    def __init__(self, gate_dir: Path, socket_name: str = "gate.sock"):
        self.dir = gate_dir
        self.path = gate_dir / socket_name
        self.requests: list[str] = []
        self.ack = threading.Event()
        self._server: _UnixHTTPServer | None = None

    def __enter__(self) -> "StandInGate":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self._server = _UnixHTTPServer(str(self.path), _GateHandler)
        self._server.gate = self
        # The sandbox user (uid 1000) connects: the socket must be writable by others.
        self.path.chmod(0o666)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="stand-in-gate").start()
        return self

    def __exit__(self, *exc) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        self.path.unlink(missing_ok=True)


@contextmanager
def host_listener() -> Iterator[int]:
    """A TCP port on all host addresses that accepts connections (a target that must stay unreachable)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def host_addresses() -> list[str]:
    """The host's IPv4 addresses (loopback, interfaces, the Docker bridge gateway)."""
    addrs = {"127.0.0.1", "172.17.0.1"}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addrs.add(info[4][0])
    except OSError:
        pass
    try:  # the address used for the default route
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("192.0.2.1", 9))  # UDP connect sends nothing
        addrs.add(probe.getsockname()[0])
        probe.close()
    except OSError:
        pass
    return sorted(addrs)


# --- the run a suite works on ---------------------------------------------------------------------


@dataclass
class Conformance:
    """One sandbox started the published way, with a stand-in gate, for the checks to work on."""

    backend: str
    sandbox: Sandbox
    spec: SandboxSpec
    gate: StandInGate
    tmp: Path
    notes: dict = field(default_factory=dict)

    def run_python(self, code: str, timeout_s: float = 60) -> tuple[int | None, str, str]:
        result = self.sandbox.exec(["python3", "-c", code], timeout_s=timeout_s)
        return result.exit_code, result.stdout, result.stderr

    def probe_json(self, code: str, timeout_s: float = 60) -> dict:
        code_, out, err = self.run_python(code, timeout_s)
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            raise RuntimeError(f"probe gave no JSON (exit {code_}): {(out + err).strip()[-300:]}") from None


@contextmanager
def open_conformance(backend: str, image: str, **spec_overrides) -> Iterator[Conformance]:
    """Start a sandbox of `backend` on `image` with the default spec (plus overrides) and a stand-in gate."""
    tmp = Path(tempfile.mkdtemp(prefix="showcase-conformance-"))
    tmp.chmod(0o755)
    gate_dir = tmp / "gate"
    work = tmp / "work"
    work.mkdir()
    sandbox = get_backend(backend)()
    try:
        with StandInGate(gate_dir) as gate:
            spec = SandboxSpec(image=image, workdir_host=work, gate_dir_host=gate_dir, api_key="sk-conformance",
                               labels={"showcase.purpose": "conformance"},
                               **{"disk": CONFORMANCE_DISK, **spec_overrides})
            sandbox.start(spec)
            try:
                yield Conformance(backend=backend, sandbox=sandbox, spec=spec, gate=gate, tmp=tmp)
            finally:
                sandbox.kill()
                sandbox.remove()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the checks ---------------------------------------------------------------------------------------

_OUTSIDE = r"""
import json, socket, subprocess
res = {}
for host, port in [("1.1.1.1", 443), ("8.8.8.8", 53), ("151.101.2.132", 80)]:
    try:
        socket.create_connection((host, port), 3).close(); res[f"tcp {host}:{port}"] = "CONNECTED"
    except OSError as e:
        res[f"tcp {host}:{port}"] = e.strerror or type(e).__name__
try:
    res["dns deb.debian.org"] = "RESOLVED " + socket.gethostbyname("deb.debian.org")
except OSError as e:
    res["dns deb.debian.org"] = str(e)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03deb\x06debian\x03org\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    s.recv(512); res["udp dns 8.8.8.8"] = "ANSWERED"
except OSError as e:
    res["udp dns 8.8.8.8"] = e.strerror or type(e).__name__
try:
    r = subprocess.run(["curl", "-sS", "-m", "5", "-o", "/dev/null", "https://deb.debian.org/"], capture_output=True, text=True, timeout=20)
    res["curl https://deb.debian.org"] = "CONNECTED" if r.returncode == 0 else (r.stderr.strip() or f"exit {r.returncode}")[:80]
except (OSError, subprocess.SubprocessError) as e:
    res["curl https://deb.debian.org"] = type(e).__name__
print(json.dumps(res))
"""


def check_outside_network(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_OUTSIDE)
    got_out = [k for k, v in res.items() if v.startswith(("CONNECTED", "RESOLVED", "ANSWERED"))]
    detail = "; ".join(f"{k}: {v}" for k, v in res.items())
    return not got_out, ("reached: " + ", ".join(got_out) + " | " if got_out else "") + detail


def check_host_loopback(run: Conformance) -> tuple[bool, str]:
    with host_listener() as port:
        # The target is real: the host itself can connect to it.
        socket.create_connection(("127.0.0.1", port), 3).close()
        targets = host_addresses()
        code = (
            "import json, socket\nres = {}\n"
            f"for host in {targets!r}:\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), 3).close(); res[host] = 'CONNECTED'\n"
            "    except OSError as e:\n"
            "        res[host] = e.strerror or type(e).__name__\n"
            "print(json.dumps(res))\n"
        )
        res = run.probe_json(code)
    reached = [h for h, v in res.items() if v == "CONNECTED"]
    detail = f"host port {port} (listening on all host addresses): " + "; ".join(f"{h}: {v}" for h, v in res.items())
    return not reached, detail


_GATE = r"""
import json, sys, urllib.request, concurrent.futures
base = "http://127.0.0.1:%d"
def models(_=None):
    req = urllib.request.Request(base + "/v1/models", headers={"Authorization": "Bearer sk-conformance"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read())
status, body = models()
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    many = [s for s, _ in pool.map(models, range(16))]
print(json.dumps({"status": status, "model": body["data"][0]["id"], "auth": body["authorization"], "concurrent": many}))
"""


def check_gate_reachable(run: Conformance) -> tuple[bool, str]:
    before = len(run.gate.requests)
    res = run.probe_json(_GATE % run.spec.relay_port)
    seen = len(run.gate.requests) - before
    ok = (res["status"] == 200 and res["model"] == "stand-in" and res["auth"] == "Bearer sk-conformance"
          and res["concurrent"] == [200] * 16 and seen == 17)
    return ok, (f"GET {run.spec.relay_url}/models -> {res['status']} from the stand-in gate "
                f"(auth header passed: {res['auth'] == 'Bearer sk-conformance'}); 16 concurrent: "
                f"{sum(1 for s in res['concurrent'] if s == 200)}/16 ok; gate saw {seen} requests")


_STREAM = r"""
import http.client, json
c = http.client.HTTPConnection("127.0.0.1", %d, timeout=30)
c.request("GET", "/stream")
r = c.getresponse()
first = r.fp.readline().decode().strip()
a = http.client.HTTPConnection("127.0.0.1", %d, timeout=10)
a.request("GET", "/ack"); ack = a.getresponse().status
rest = r.read().decode()
print(json.dumps({"first": first, "ack": ack, "rest": rest}))
"""


def check_relay_streams(run: Conformance) -> tuple[bool, str]:
    port = run.spec.relay_port
    res = run.probe_json(_STREAM % (port, port), timeout_s=STREAM_ACK_WAIT_S + 30)
    ok = res["first"] == "data: one" and res["ack"] == 200 and "data: two" in res["rest"]
    return ok, (f"first SSE event read before the gate sent the second: {res['first']!r}; ack over a second "
                f"connection -> {res['ack']}; then {res['rest'].split()[:4]}")


_DOCKER_SOCKET = r"""
import json, os, socket
paths = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/podman/podman.sock"]
res = {}
for p in paths:
    if not os.path.exists(p):
        res[p] = "absent"; continue
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(p); s.close(); res[p] = "CONNECTED"
    except OSError as e:
        res[p] = "present: " + (e.strerror or type(e).__name__)
mounts = open("/proc/self/mounts").read()
res["mounts naming docker.sock"] = "FOUND" if "docker.sock" in mounts else "none"
res["DOCKER_HOST"] = os.environ.get("DOCKER_HOST", "unset")
print(json.dumps(res))
"""


def check_no_docker_socket(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_DOCKER_SOCKET)
    ok = all(v == "absent" for k, v in res.items() if k.startswith("/")) and res["mounts naming docker.sock"] == "none" \
        and res["DOCKER_HOST"] == "unset"
    return ok, "; ".join(f"{k}: {v}" for k, v in res.items())


_PRIVILEGES = r"""
import json, os
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
res = {"uid": os.getuid(), "euid": os.geteuid(), **{k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")}}
for name, attempt in [("setuid(0)", lambda: os.setuid(0)), ("chown /work to root", lambda: os.chown("/work", 0, 0)),
                      ("mknod", lambda: os.mknod("/tmp/probe-null", 0o600 | 0o020000, os.makedev(1, 3)))]:
    try:
        attempt(); res[name] = "SUCCEEDED"
    except OSError as e:
        res[name] = e.strerror
print(json.dumps(res))
"""


def check_non_root_no_caps(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_PRIVILEGES)
    caps_zero = all(int(res[k], 16) == 0 for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb"))
    attempts_failed = all(res[k] != "SUCCEEDED" for k in ("setuid(0)", "chown /work to root", "mknod"))
    ok = res["uid"] != 0 and res["euid"] != 0 and caps_zero and res["NoNewPrivs"] == "1" and attempts_failed
    return ok, "; ".join(f"{k}: {v}" for k, v in res.items())


_READ_ONLY = r"""
import json, os
res = {}
for path in ["/probe", "/etc/probe", "/usr/bin/probe", "/var/probe", "/opt/harness/probe", "/work/probe", "/tmp/probe", os.environ["HOME"] + "/probe"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        os.unlink(path); res[path] = "WRITTEN"
    except OSError as e:
        res[path] = e.strerror
print(json.dumps(res))
"""


def check_read_only_root(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_READ_ONLY)
    writable = {"/work/probe", "/tmp/probe", f"{run.spec.home}/probe"}
    ok = all((v == "WRITTEN") == (k in writable) for k, v in res.items())
    return ok, "; ".join(f"{k}: {v}" for k, v in res.items())


_HOG = r"""
import sys
blocks = []
while len(blocks) < 256:  # up to 16 GB, far above any limit we set
    blocks.append(bytearray(64 << 20))  # zero-filled, so every page is touched
    print(f"{len(blocks) * 64} MB", flush=True)
print("SURVIVED", flush=True)
"""


def check_memory_hog(run: Conformance) -> tuple[bool, str]:
    log = run.tmp / "hog.log"
    handle = run.sandbox.start_process(["python3", "-c", _HOG], log_path=log)
    info = run.sandbox.wait(180, handle)
    if info.how == "running":
        run.sandbox.kill_process(handle)
    lines = log.read_text(errors="replace").split() if log.exists() else []
    reached = next((f"{lines[i - 1]} MB" for i in range(len(lines) - 1, 0, -1) if lines[i] == "MB"), "0 MB")
    # The run survives: the sandbox still answers and its relay still reaches the gate.
    after = run.sandbox.exec(["python3", "-c", _GATE % run.spec.relay_port], timeout_s=30)
    alive = after.exit_code == 0
    # The backend's peak (what run-info records) saw the hog reach the limit.
    peak, limit = run.sandbox.peak_memory_bytes(), parse_size(run.spec.memory)
    peak_seen = peak is not None and peak >= 0.75 * limit
    ok = info.how == "oom" and info.oom_killed and "SURVIVED" not in lines and alive and peak_seen
    return ok, (f"allocated up to {reached} under a {run.spec.memory} limit; ended: {info.how} "
                f"(exit {info.exit_code}, engine OOM report: {info.oom_killed}); sandbox and relay still answer: {alive}; "
                f"memory peak recorded: {'none' if peak is None else f'{peak >> 20} MiB'}")


_FORK = r"""
import errno, json, os, signal, time
children, error = [], None
while len(children) < 100000:
    try:
        pid = os.fork()
    except OSError as e:
        error = errno.errorcode.get(e.errno, str(e.errno)); break
    if pid == 0:
        time.sleep(120); os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({"forked": len(children), "error": error}))
"""


def check_fork_bomb(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_FORK, timeout_s=120)
    after = run.sandbox.exec(["echo", "still here"], timeout_s=30)
    ok = res["error"] == "EAGAIN" and res["forked"] < run.spec.pids_limit and after.stdout.strip() == "still here"
    return ok, (f"forked {res['forked']} processes, then fork failed with {res['error']} "
                f"(pids limit {run.spec.pids_limit}); sandbox answers after: {after.stdout.strip() == 'still here'}")


_FILL = r"""
import errno, json, os, sys
res = {}
for name, path in [("tmp", "/tmp/fill"), ("home", os.environ["HOME"] + "/fill")]:
    written, error = 0, None
    block = b"\0" * (1 << 20)
    try:
        with open(path, "wb") as f:
            while written < (64 << 30):
                f.write(block); f.flush(); written += len(block)
    except OSError as e:
        error = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        try: os.unlink(path)
        except OSError: pass
    res[name] = {"mb": written >> 20, "error": error}
print(json.dumps(res))
"""


def check_disk_fill(run: Conformance) -> tuple[bool, str]:
    res = run.probe_json(_FILL, timeout_s=180)
    limits = {"tmp": parse_size(run.spec.tmpfs_tmp) >> 20, "home": parse_size(run.spec.tmpfs_home) >> 20}
    ok = all(res[k]["error"] == "ENOSPC" and res[k]["mb"] <= limits[k] for k in limits)
    return ok, ("; ".join(f"{k}: stopped at {res[k]['mb']} MB with {res[k]['error']} (size {limits[k]} MB)" for k in limits)
                + "; root file system read-only (see read_only_root); /work: see disk_cap")

_FILL_WORK = r"""
import errno, json, os
written, error = 0, None
block = b"\1" * (1 << 20)
try:
    with open("/work/fill", "wb") as f:
        while written < %d:
            f.write(block); f.flush(); os.fsync(f.fileno()); written += len(block)
except OSError as e:
    error = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"mb": written >> 20, "error": error}))
"""


def _host_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def check_disk_cap(run: Conformance) -> tuple[bool, str]:
    cap = run.spec.disk_bytes or parse_size(CONFORMANCE_DISK)  # no cap set: judge against the suite's
    attempt = 4 * cap  # far past the cap: without one the host gives it all
    before = _host_free(run.tmp)
    try:
        res = run.probe_json(_FILL_WORK % attempt, timeout_s=300)
        dropped = before - _host_free(run.tmp)
    finally:
        run.sandbox.exec(["rm", "-f", "/work/fill"], timeout_s=60)
    after = run.sandbox.exec(["sh", "-c", "echo ok > /work/after && cat /work/after && rm /work/after"], timeout_s=30)
    # Others share this disk: allow a quarter of the cap for their writes meanwhile.
    ok = (run.spec.disk_bytes is not None and res["error"] == "ENOSPC" and res["mb"] << 20 <= cap and dropped <= cap * 1.25
          and after.stdout.strip() == "ok")
    return ok, (f"wrote {res['mb']} MB into /work before {res['error']} (cap {cap >> 20} MB, tried {attempt >> 20} MB); "
                f"host free space dropped by {dropped >> 20} MB; writable again after deleting: {after.stdout.strip() == 'ok'}")


_BEAT = "while :; do date +%s%N > /work/beat; sleep 0.2; done"


def _short_spec(run: Conformance, work: Path, **labels) -> SandboxSpec:
    work.mkdir(parents=True, exist_ok=True)
    return run.spec.model_copy(update={"workdir_host": work, "lifetime_s": LIFETIME_S, "name": None,
                                       "labels": {**run.spec.labels, **labels}})


def _beating(work: Path, within_s: float = 2.0) -> bool:
    """Does /work/beat (rewritten every 0.2 s by a live sandbox) change within `within_s`?

    Returns at the first change: a long bound makes "it still writes" hold on a busy machine at no
    cost, while "it writes no more" always waits the whole bound."""
    beat = work / "beat"

    def stamp():
        try:
            return beat.stat().st_mtime_ns
        except OSError:
            return None

    first = stamp()
    deadline = time.monotonic() + within_s
    while True:
        now = stamp()
        if now is not None and now != first:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


BEATING_S = 15  # bound of a "still writes" look: a live sandbox beats every 0.2 s, a starved one may stall


def check_deadline(run: Conformance) -> tuple[bool, str]:
    """A sandbox nobody looks after ends itself at its lifetime; what ran inside stops writing."""
    work = run.tmp / "deadline" / "work"
    sandbox = get_backend(run.backend)()
    started = time.monotonic()
    sandbox.start(_short_spec(run, work))
    try:
        sandbox.start_process(["sh", "-c", _BEAT], log_path=run.tmp / "beat.log")
        sandbox.exec(["sh", "-c", f"setsid sh -c '{_BEAT.replace('beat', 'beat2')}' >/dev/null 2>&1 &"], timeout_s=30)
        beating_before = _beating(work, BEATING_S)
        # From here on the host does nothing to it: only looks.
        info = sandbox.wait(LIFETIME_S + LIFETIME_GRACE_S)
        ended_s = time.monotonic() - started
        still = _beating(work) if info.how != "running" else True
    finally:
        sandbox.kill()
        sandbox.remove()
    ok = beating_before and info.how != "running" and ended_s <= LIFETIME_S + LIFETIME_GRACE_S and not still
    return ok, (f"lifetime {LIFETIME_S} s, nothing done from the host: sandbox {info.how} after {ended_s:.1f} s "
                f"(bound {LIFETIME_S + LIFETIME_GRACE_S} s); inside wrote before: {beating_before}, after: {still}")


_DEAD_OWNER = r"""
import sys, time
from showcase.sandbox.base import SandboxSpec, get_backend
spec = SandboxSpec.model_validate_json(sys.stdin.read())
sandbox = get_backend(sys.argv[1])()
sandbox.start(spec)
sandbox.start_process(["sh", "-c", sys.argv[2]], log_path=None)
print("started", flush=True)
time.sleep(3600)
"""


def check_leftover_cleanup(run: Conformance) -> tuple[bool, str]:
    """The sweep removes the sandbox (and mounted space) of a killed owner, never a live one's;
    remove_run removes a named run's sandbox even while its owner lives.

    Every run on the machine sweeps at its start, and any sweep may take a dead owner's sandbox:
    the sandboxes here are for a sweep label of their own (SandboxSpec.sweep_label), so that only
    this check's sweep sees them and what it reports is what it did.
    """
    label = f"{RUN_LABEL}.conformance-{os.getpid()}-{time.monotonic_ns()}"
    base = run.tmp / "leftover"
    dead_work, live_work = base / "dead" / "work", base / "live" / "work"
    dead_spec = _short_spec(run, dead_work, **{label: str(dead_work.parent)}).model_copy(
        update={"lifetime_s": 600, "sweep_label": label})
    live_spec = _short_spec(run, live_work, **{label: str(live_work.parent), RUN_LABEL: str(live_work.parent)}
                            ).model_copy(update={"lifetime_s": 600, "sweep_label": label})
    # The dead run's owner is a real process, killed with SIGKILL as a crashed showcase would be.
    owner = subprocess.Popen([sys.executable, "-c", _DEAD_OWNER, run.backend, _BEAT], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    live = get_backend(run.backend)()
    removed: list[str] = []
    try:
        owner.stdin.write(dead_spec.model_dump_json())
        owner.stdin.close()
        line = owner.stdout.readline()
        if line.strip() != "started":
            return False, f"the owner process did not start its sandbox: {owner.stderr.read()[-300:]}"
        # The live run first: from the owner's kill to the sweep, as little time as can be.
        live.start(live_spec)
        live.start_process(["sh", "-c", _BEAT], log_path=base / "live-beat.log")
        dead_space = RunSpace(dead_work.parent)
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(30)
        dead_beating = _beating(dead_work, BEATING_S)
        removed = type(live).remove_leftovers(label)
        unmounted = sweep_mounts(under=[base], label=label)
        dead_after = _beating(dead_space.mnt / "work") if is_mounted(dead_space.mnt) else _beating(dead_work)
        live_after = _beating(live_work, BEATING_S) and live.exit_info().how == "running"
        dead_mount_gone = not is_mounted(dead_space.mnt) and not is_mounted(dead_work)
        report = dead_space.close()  # what the dead run wrote is still there to keep
        kept = (dead_work / "beat").is_file()
        # finalize's hook: the named run's sandbox goes, its owner alive or not.
        taken = type(live).remove_run(live_work.parent)
        live_gone = not _beating(live_work)
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
        live.kill()
        live.remove()
        type(live).remove_leftovers(label)
        sweep_mounts(under=[base], label=label)
        RunSpace(dead_work.parent).close()
    ours = [line for line in removed if str(dead_work.parent) in line]
    wrong = [line for line in removed if str(live_work.parent) in line]
    ok = (dead_beating and not dead_after and live_after and dead_mount_gone and kept and len(ours) == 1 and not wrong
          and len(taken) == 1 and live_gone)
    return ok, (f"owner killed -9; dead run's sandbox wrote before the sweep: {dead_beating}, after: {dead_after}; "
                f"sweep: {removed + unmounted or 'nothing'}; its space unmounted: {dead_mount_gone}, its files kept: "
                f"{kept} ({report.copied_files} files); a live run's sandbox still runs and writes: {live_after}; "
                f"remove_run of the live run: {taken or 'nothing'}, it writes no more: {live_gone}")


def check_processes(run: Conformance) -> tuple[bool, str]:
    """processes() names the sandbox's processes as the host sees them; host_pid() is in a network
    namespace of its own (the egress watch enters it there)."""
    run.sandbox.exec(["sh", "-c", "setsid sleep 1004 >/dev/null 2>&1 &"], timeout_s=30)
    found, pids = False, []
    deadline = time.monotonic() + 15
    while not found and time.monotonic() < deadline:
        pids = run.sandbox.processes()
        found = any(_cmdline(pid) == ["sleep", "1004"] for pid in pids)
        time.sleep(0 if found else 0.2)
    pid = run.sandbox.host_pid()
    try:
        own_net = pid is not None and os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError as exc:
        own_net = False
        pid = f"{pid} (unreadable: {exc.strerror})"
    run.sandbox.exec(["sh", "-c", "pkill -f '^sleep 1004$'; true"], timeout_s=30)
    ok = found and isinstance(pid, int) and pid in pids and own_net
    return ok, (f"processes(): {len(pids)} pids, the sleeper started inside among them: {found}; host_pid(): {pid}, "
                f"among them: {pid in pids}, in a network namespace not the host's: {own_net}")


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(4096).decode(errors="replace").rstrip("\0").split("\0")
    except OSError:
        return []


def check_exec_timeout(run: Conformance) -> tuple[bool, str]:
    # A command that leaves a background child: the timeout must take the whole group.
    result = run.sandbox.exec(["sh", "-c", "sleep 311 & sleep 312; echo never"], timeout_s=1.5)
    ps = run.sandbox.exec(["ps", "-eo", "args"], timeout_s=30)
    left = [line for line in ps.stdout.splitlines() if line.startswith("sleep 31")]
    ok = result.timed_out and "never" not in result.stdout and not left
    return ok, f"timed out: {result.timed_out} after {result.seconds:.1f} s (limit 1.5 s); processes left: {left or 'none'}"


def check_kill_leaves_nothing(run: Conformance) -> tuple[bool, str]:
    sandbox = run.sandbox
    handle = sandbox.start_process(["sh", "-c", "sleep 1000 & exec sleep 1001"], log_path=run.tmp / "sleeper.log")
    sandbox.exec(["sh", "-c", "setsid sleep 1002 >/dev/null 2>&1 &"], timeout_s=30)
    ps = sandbox.exec(["ps", "-eo", "args"], timeout_s=30).stdout
    before = sum(1 for line in ps.splitlines() if line.startswith("sleep 100"))
    sandbox.kill()
    info = sandbox.exit_info(handle)
    sandbox.remove()
    leaks = sandbox.leak_audit()
    ok = before == 3 and not leaks and info.how == "killed"
    return ok, f"{before} sleepers running before kill; agent process: {info.how}; leak audit after kill+remove: {leaks or 'clean'}"


@dataclass(frozen=True)
class Check:
    name: str
    what: str
    run: Callable[[Conformance], tuple[bool, str]]


# In order: the last one destroys the sandbox.
CHECKS = [
    Check("outside_network", "outside addresses and DNS unreachable", check_outside_network),
    Check("host_loopback", "host ports (loopback and interfaces) unreachable", check_host_loopback),
    Check("gate_reachable", "the gate answers through the relay, concurrently", check_gate_reachable),
    Check("relay_streams", "the relay passes a stream through unbuffered", check_relay_streams),
    Check("no_docker_socket", "no engine socket inside", check_no_docker_socket),
    Check("non_root_no_caps", "non-root, no capabilities, no new privileges", check_non_root_no_caps),
    Check("read_only_root", "root file system read-only; /work, /tmp, home writable", check_read_only_root),
    Check("processes", "the host sees the sandbox's processes and its network namespace", check_processes),
    Check("exec_timeout", "an exec timeout kills the command's whole group", check_exec_timeout),
    Check("memory_hog", "a memory hog is OOM-killed and labelled; the run survives", check_memory_hog),
    Check("fork_bomb", "a fork bomb stops at the pids limit", check_fork_bomb),
    Check("disk_fill", "filling the writable disks is bounded", check_disk_fill),
    Check("disk_cap", "/work stops at the disk cap with ENOSPC; the host's disk gives no more", check_disk_cap),
    Check("deadline", "a sandbox ends itself at its lifetime, with the host doing nothing", check_deadline),
    Check("leftover_cleanup", "the sweep removes a dead owner's sandbox and space, not a live one's; remove_run a named run's",
          check_leftover_cleanup),
    Check("kill_leaves_nothing", "after kill nothing of the run is left", check_kill_leaves_nothing),
]
CHECK_NAMES = [c.name for c in CHECKS]


def run_check(run: Conformance, check: Check) -> CheckResult:
    started = time.monotonic()
    try:
        passed, detail = check.run(run)
    except Exception as exc:  # an attempt that errors is a failed check, with the reason shown
        passed, detail = False, f"error: {exc.__class__.__name__}: {exc}"
    return CheckResult(name=check.name, passed=passed, detail=detail, seconds=round(time.monotonic() - started, 2))


def run_conformance(backend: str, image: str, only: list[str] | None = None,
                    on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run the suite (or the named checks, in suite order) on a fresh sandbox of `backend`."""
    results = []
    with open_conformance(backend, image) as run:
        for check in CHECKS:
            if only and check.name not in only:
                continue
            result = run_check(run, check)
            results.append(result)
            if on_result:
                on_result(result)
    return results
