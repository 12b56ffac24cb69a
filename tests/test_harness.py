"""Harness folders: loading, errors a user sees, and launch placeholders."""

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from showcase.errors import UserError
from showcase.harness import (LAUNCH_FILES_ENV, LAUNCHER_IN_IMAGE, demo_script, known_harnesses, load_harness,
                              render_launch, said_done)

FILES_ONLY = """
id = "files-only"
version = "1"
description = "a harness that is only files (like builtin)"
[launch]
command = ["python3", "/opt/harness/agent.py", "--model", "{model}", "--prompt-file", "{prompt_file}"]
[launch.env]
AGENT_BASE_URL = "{base_url}"
"""


def write_harness(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "harness.toml").write_text(text)
    return folder


def test_mini_swe_agent_harness_is_known_and_complete():
    assert "mini-swe-agent" in known_harnesses()
    h = load_harness("mini-swe-agent")
    assert h.version == "2.4.6"
    assert h.install.pip_download == ["mini-swe-agent==2.4.6"]
    command, env = render_launch(h, model="m1", prompt="build it", base_url="http://127.0.0.1:8765/v1", api_key="sk-x")
    assert command[:3] == ["/opt/harness/venv/bin/mini", "-m", "openai/m1"]
    assert command[command.index("-t") + 1] == "build it"
    assert "-y" in command and "--exit-immediately" in command
    assert env["MSWEA_CONFIGURED"] == "true" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["MSWEA_COST_TRACKING"] == "ignore_errors"
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:8765/v1" and env["OPENAI_API_KEY"] == "sk-x"


def test_unknown_harness_lists_the_known_ones(tmp_path):
    write_harness(tmp_path, "files-only", FILES_ONLY)
    with pytest.raises(UserError) as exc:
        load_harness("nope", root=tmp_path)
    assert "unknown harness 'nope'" in str(exc.value) and "files-only" in str(exc.value)


def test_files_only_harness_has_empty_install(tmp_path):
    write_harness(tmp_path, "files-only", FILES_ONLY)
    h = load_harness("files-only", root=tmp_path)
    assert h.install.pip_download == [] and h.install.run == []
    command, env = render_launch(h, model="m", prompt_file="/work/prompt.txt", base_url="http://x/v1")
    assert command[-3:] == ["m", "--prompt-file", "/work/prompt.txt"]
    assert env == {"AGENT_BASE_URL": "http://x/v1"}


def test_values_are_literal_and_other_braces_survive(tmp_path):
    write_harness(tmp_path, "h", 'id = "h"\nversion = "1"\n[launch]\ncommand = ["sh", "-c", "echo {\\"a\\": 1} {prompt}"]\n')
    h = load_harness("h", root=tmp_path)
    command, _ = render_launch(h, prompt="{model} $HOME `x`")
    assert command[2] == 'echo {"a": 1} {model} $HOME `x`'


def test_missing_value_and_bad_files_are_user_errors(tmp_path):
    write_harness(tmp_path, "files-only", FILES_ONLY)
    with pytest.raises(UserError, match="gave no model"):
        render_launch(load_harness("files-only", root=tmp_path), prompt_file="p", base_url="b")
    with pytest.raises(UserError, match="unknown launch value"):
        render_launch(load_harness("files-only", root=tmp_path), modle="typo")
    write_harness(tmp_path, "broken", "id = 'broken'\nversion = \n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_harness("broken", root=tmp_path)
    write_harness(tmp_path, "nolaunch", "id = 'nolaunch'\nversion = '1'\n")
    with pytest.raises(UserError, match="launch"):
        load_harness("nolaunch", root=tmp_path)
    write_harness(tmp_path, "other", "id = 'different'\nversion = '1'\n[launch]\ncommand=['x']\n")
    with pytest.raises(UserError, match="does not match its folder"):
        load_harness("other", root=tmp_path)


SHIPPED = {"opencode": "chat", "pi": "chat", "qwen-code": "chat", "codex": "responses", "cline": "chat",
           "kimi-code": "chat"}


def test_npm_harnesses_pin_exact_versions_with_integrity():
    for harness_id, api in SHIPPED.items():
        h = load_harness(harness_id)
        assert h.launch.api == api
        assert h.install.npm and all(p.integrity.startswith("sha512-") for p in h.install.npm)
        assert h.install.npm[0].version == h.version  # the version recorded is the one installed
        assert h.launch.done_json, f"{harness_id} ends by its structured output"


def test_npm_specs_must_be_exact_and_pinned(tmp_path):
    base = 'id = "x"\nversion = "1"\n[launch]\ncommand = ["x"]\n[install]\n'
    write_harness(tmp_path, "x", base + 'npm = [{ spec = "opencode-ai@^1.0", integrity = "sha512-abc" }]\n')
    with pytest.raises(UserError, match="not name@exact-version"):
        load_harness("x", root=tmp_path)
    write_harness(tmp_path, "y", base.replace('"x"', '"y"') + 'npm = [{ spec = "@scope/pkg@1.2.3", integrity = "sha1-abc" }]\n')
    with pytest.raises(UserError, match="sha512"):
        load_harness("y", root=tmp_path)


def test_done_is_read_from_the_last_json_line():
    h = load_harness("cline")
    ended = b'noise\n{"type":"say","text":"hi"}\n{"ts":"t","type":"run_result","finishReason":"completed"}\n'
    assert said_done(h, ended)
    assert not said_done(h, ended + b'{"type":"error","message":"refused"}\n')  # only the LAST event counts
    assert not said_done(h, b'{"type":"run_result","finishReason":"error"}\n')
    assert not said_done(h, b"not json at all\n")
    opencode = load_harness("opencode")  # dotted keys reach into objects
    assert said_done(opencode, b'{"type":"step_finish","part":{"reason":"stop"}}\n')
    assert not said_done(opencode, b'{"type":"step_finish","part":{"reason":"tool-calls"}}\n')


def test_config_templates_are_filled_and_written_by_the_launcher(tmp_path):
    h = load_harness("pi")
    command, env = render_launch(h, model="m1", prompt="build it", base_url="http://127.0.0.1:9/v1", api_key="k-1")
    assert command[:3] == ["python3", LAUNCHER_IN_IMAGE, "--"] and command[3] == "/opt/harness/npm/bin/pi"
    assert env["PI_OFFLINE"] == "1"  # quiet switches are part of the environment
    # Run the real launcher with a local home: it writes the files and execs with stdin closed,
    # even while the parent keeps a pipe open on the child's stdin.
    launcher = Path(__file__).resolve().parents[1] / "harness" / "_launcher" / "launch.py"
    probe = [sys.executable, "-c", "import sys; print('stdin:', repr(sys.stdin.read()))"]
    proc = subprocess.run([sys.executable, str(launcher), "--", *probe], input="never read", capture_output=True,
                          text=True, timeout=30, env={**os.environ, "HOME": str(tmp_path), LAUNCH_FILES_ENV: env[LAUNCH_FILES_ENV]})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stdin: ''"
    models = json.loads((tmp_path / ".pi/agent/models.json").read_text())
    provider = models["providers"]["gate"]
    assert provider["baseUrl"] == "http://127.0.0.1:9/v1" and provider["apiKey"] == "k-1"
    assert provider["models"][0]["id"] == "m1"
    assert oct((tmp_path / ".pi/agent/models.json").stat().st_mode & 0o777) == "0o600"  # the key is in it


def test_demo_script_is_the_agents_own_or_the_generic_one():
    demo = Path(__file__).resolve().parents[1] / "tasks" / "voxel" / "demo"
    assert demo_script(load_harness("mini-swe-agent"), demo).name == "mini-swe-agent.json"
    assert demo_script(load_harness("opencode"), demo).name == "generic.json"


@pytest.mark.parametrize("harness_id, agent, base", [("aider", "aider-chat", "bookworm"), ("hermes", "hermes-agent", "bookworm"),
                                                     ("mistral-vibe", "mistral-vibe", "trixie")])
def test_pip_harnesses_pin_their_whole_closure_by_sha256(harness_id, agent, base):
    h = load_harness(harness_id)
    assert h.base == base
    lines = [l for l in (h.dir / h.install.pip_requirements).read_text().splitlines() if l and not l.startswith("#")]
    assert all(re.fullmatch(r"[a-z0-9.-]+==\S+ --hash=sha256:[0-9a-f]{64}", l) for l in lines)
    assert f"{agent}=={h.version} --hash" in "\n".join(lines)  # the version recorded is the one installed
    assert any("--require-hashes" in line for line in h.install.run)  # checked again in the build


def test_an_unknown_base_suite_is_a_user_error(tmp_path):
    write_harness(tmp_path, "x", 'id = "x"\nversion = "1"\nbase = "sid"\n[launch]\ncommand = ["x"]\n')
    with pytest.raises(UserError, match="base"):
        load_harness("x", root=tmp_path)
