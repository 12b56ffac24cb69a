"""SandboxSpec: the published defaults, sizes, and command-line overrides."""

import os
from pathlib import Path

import pytest

from showcase.errors import UserError
from showcase.sandbox.base import SandboxSpec, parse_size, spec_overrides


def spec(**kw) -> SandboxSpec:
    return SandboxSpec(image="i", workdir_host=Path("/w"), gate_dir_host=Path("/g"), **kw)


def test_defaults_are_the_published_conditions():
    s = spec(api_key="sk-1", env={"X": "1"})
    assert (s.memory, s.memory_swap, s.network, s.read_only_root, s.pids_limit) == ("1.25g", None, "none", True, 512)
    assert s.cpu_limit == min(4, os.cpu_count())
    assert s.agent_env() == {"HOME": "/home/agent", "OPENAI_BASE_URL": "http://127.0.0.1:8765/v1",
                             "OPENAI_API_BASE": "http://127.0.0.1:8765/v1", "OPENAI_API_KEY": "sk-1", "X": "1"}
    assert (s.uid, s.gid) == (1000, 1000)


def test_sizes():
    assert parse_size("1.25g") == 1342177280 and parse_size("512m") == 512 << 20 and parse_size("1024") == 1024
    with pytest.raises(UserError):
        parse_size("big")
    with pytest.raises(ValueError):
        spec(tmpfs_tmp="12x")


def test_overrides_from_the_command_line():
    got = spec_overrides(["memory=2g", "cpus=1.5", "pids-limit=100", "read_only_root=false", "network=bridge"])
    assert got == {"memory": "2g", "cpus": 1.5, "pids_limit": 100, "read_only_root": False, "network": "bridge"}
    assert spec(**got).cpu_limit == 1.5
    with pytest.raises(UserError, match="KEY one of"):
        spec_overrides(["image=evil"])
    with pytest.raises(UserError, match="KEY one of"):
        spec_overrides(["memory"])
    with pytest.raises(UserError, match="bad sandbox option pids_limit='many'"):
        spec_overrides(["pids_limit=many"])
    with pytest.raises(UserError, match="memory"):
        spec_overrides(["memory=lots"])
