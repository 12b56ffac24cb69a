"""Harness folders: loading, errors a user sees, and launch placeholders."""

from pathlib import Path

import pytest

from showcase.errors import UserError
from showcase.harness import known_harnesses, load_harness, render_launch

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
