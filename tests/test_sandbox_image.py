"""Images: cached by content hash (a change rebuilds only what it touches), harness layers built
offline, and a real agent (mini-swe-agent) running sealed against a scripted model through the relay."""

import json
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import docker
import pytest

from showcase.errors import InfraError, UserError
from showcase.harness import load_harness, render_launch
from showcase.sandbox.base import Mount, SandboxSpec
from showcase.sandbox.docker import DockerSandbox
from showcase.sandbox.image import ensure_base, ensure_image, image_digest, list_images

pytestmark = pytest.mark.docker

AGENT_PY = "print('hello from a files-only harness')\n"
FILES_ONLY_TOML = """id = "files-only"
version = "1"
[launch]
command = ["python3", "/opt/harness/agent.py"]
"""


def make_harness(root: Path, name: str, toml: str, files: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "harness.toml").write_text(toml)
    for rel, text in files.items():
        (folder / rel).write_text(text)
    return folder


@pytest.fixture
def own_images(docker_engine):
    """Tags a test builds for itself, removed after."""
    tags: list[str] = []
    yield tags
    client = docker.from_env()
    for tag in tags:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def run_in(image: str, tmp: Path, cmd: list[str], **spec) -> tuple[int | None, str, str]:
    tmp.chmod(0o755)
    (tmp / "gate").mkdir(exist_ok=True)
    with DockerSandbox() as box:
        box.start(SandboxSpec(image=image, workdir_host=tmp / "work", gate_dir_host=tmp / "gate", **spec))
        result = box.exec(cmd, timeout_s=120)
    return result.exit_code, result.stdout, result.stderr


def test_images_are_cached_by_content(docker_engine):
    first = ensure_image(None)
    before = {i["id"] for i in list_images()}
    assert ensure_image(None) == first
    assert {i["id"] for i in list_images()} == before  # nothing was built again
    kinds = {i["kind"] for i in list_images()}
    assert {"base", "layer"} <= kinds


def test_files_only_harness_layer_and_rebuild_on_change(tmp_path, own_images):
    base_id = image_digest(ensure_base())
    folder = make_harness(tmp_path / "harness", "files-only", FILES_ONLY_TOML, {"agent.py": AGENT_PY})
    harness = load_harness("files-only", root=tmp_path / "harness")
    tag = ensure_image(harness)
    own_images.append(tag)
    assert ensure_image(load_harness("files-only", root=tmp_path / "harness")) == tag  # unchanged: same image
    code, out, err = run_in(tag, tmp_path, ["sh", "-c", "python3 /opt/harness/agent.py && ls /opt/harness"])
    assert code == 0, err
    assert out == "hello from a files-only harness\nagent.py\nharness.toml\n"
    # One byte changed in the harness folder: a new layer, on the same base (not rebuilt).
    (folder / "agent.py").write_text(AGENT_PY.replace("hello", "hullo"))
    changed = ensure_image(load_harness("files-only", root=tmp_path / "harness"))
    own_images.append(changed)
    assert changed != tag
    assert image_digest(ensure_base()) == base_id
    # A named base is used as-is: naming our own base gives the very same layer (hash of content, not name).
    assert ensure_image(load_harness("files-only", root=tmp_path / "harness"), base=base_id) == changed


def test_build_is_offline_and_a_failing_run_line_is_reported(tmp_path, own_images):
    toml = FILES_ONLY_TOML.replace('version = "1"', 'version = "1"\n[install]\nrun = ["curl -sS -m 5 -o /dev/null https://pypi.org/simple/ 2>&1"]')
    make_harness(tmp_path / "harness", "files-only", toml, {"agent.py": AGENT_PY})
    with pytest.raises(InfraError, match="building showcase-sandbox:files-only-.* failed.*see .*log") as exc:
        ensure_image(load_harness("files-only", root=tmp_path / "harness"))
    log = Path(str(exc.value).rsplit("see ", 1)[1])
    assert "Could not resolve host" in log.read_text()


def test_missing_named_base_is_a_user_error(docker_engine):
    with pytest.raises(UserError, match="not on this machine"):
        ensure_image(None, base="showcase-no-such-base:1")


# --- a real agent, sealed, against a scripted model --------------------------------------------------

SCRIPT = [
    "cd /work && printf '<!doctype html><title>sealed</title>' > game.html && ls -l game.html",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
]


class _ScriptedModel(BaseHTTPRequestHandler):
    """OpenAI chat completions that replay SCRIPT as bash tool calls (stands in for the model)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        seen = self.server.seen
        seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        step = min(len(seen), len(SCRIPT)) - 1
        reply = {
            "id": f"chatcmpl-{len(seen)}", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": f"step {step}",
                "tool_calls": [{"id": f"call_{len(seen)}", "type": "function",
                                "function": {"name": "bash", "arguments": json.dumps({"command": SCRIPT[step]})}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def test_mini_swe_agent_runs_sealed_through_the_relay(tmp_path, docker_engine):
    image = ensure_image("mini-swe-agent")
    tmp_path.chmod(0o755)
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    server = _UnixServer(str(gate_dir / "gate.sock"), _ScriptedModel)
    server.seen = []
    (gate_dir / "gate.sock").chmod(0o666)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    harness = load_harness("mini-swe-agent")
    try:
        with DockerSandbox() as box:
            logs = tmp_path / "logs"  # the harness writes its trajectory to /logs (the run's agent/ folder)
            logs.mkdir()
            logs.chmod(0o777)
            spec = SandboxSpec(image=image, workdir_host=tmp_path / "work", gate_dir_host=gate_dir, api_key="sk-mini",
                               extra_mounts=[Mount(host=logs, container="/logs", read_only=False)])
            box.start(spec)
            help_ = box.exec(["/opt/harness/venv/bin/mini", "--help"], timeout_s=120)
            assert help_.exit_code == 0 and "Usage: mini" in help_.stdout, help_.stderr
            command, env = render_launch(harness, model="scripted", prompt="Make game.html.",
                                         base_url=spec.relay_url, api_key="sk-mini")
            log = tmp_path / "agent.log"
            box.start_process(command, env=env, log_path=log)
            info = box.wait(180)
            assert (info.how, info.exit_code) == ("exited", 0), log.read_text()[-2000:]
            box.copy_out("/logs/traj.json", tmp_path / "traj.json")
    finally:
        server.shutdown()
        server.server_close()
    assert (tmp_path / "work" / "game.html").read_text() == "<!doctype html><title>sealed</title>"
    seen = server.seen
    assert len(seen) == 2 and all(s["path"] == "/v1/chat/completions" for s in seen)
    assert all(s["auth"] == "Bearer sk-mini" and s["body"]["model"] == "scripted" for s in seen)
    tool_results = [m for m in seen[1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_results and "game.html" in json.dumps(tool_results[0]["content"])
    traj = json.loads((tmp_path / "traj.json").read_text())
    assert traj["info"]["exit_status"] == "Submitted"
