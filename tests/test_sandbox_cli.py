"""The commands as a user types them: `showcase image ...`, `showcase sandbox self-check`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SHOWCASE = [str(Path(sys.executable).with_name("showcase"))]


def showcase(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*SHOWCASE, *args], capture_output=True, text=True, timeout=timeout)


def test_bad_input_is_one_line_and_exit_2():
    r = showcase("image", "build", "--harness", "nope")
    assert r.returncode == 2
    assert r.stderr.strip() == "error: unknown harness 'nope'; known: " + r.stderr.split("known: ")[1].strip()
    assert "mini-swe-agent" in r.stderr and "Traceback" not in r.stderr
    r = showcase("sandbox", "self-check", "--only", "teleport")
    assert r.returncode == 2 and "unknown check(s) ['teleport']" in r.stderr


def test_spec_schema_is_published():
    r = showcase("schema", "sandbox-spec")
    assert r.returncode == 0
    props = json.loads(r.stdout)["properties"]
    assert props["memory"]["default"] == "1.25g" and props["network"]["default"] == "none"
    assert all(p.get("description") for p in props.values())


@pytest.mark.docker
def test_self_check_json_and_image_list(docker_engine):
    r = showcase("sandbox", "self-check", "--only", "outside_network", "--only", "gate_reachable", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    results = report["backends"]["docker"]
    assert [c["name"] for c in results] == ["outside_network", "gate_reachable"]
    assert all(c["passed"] for c in results) and report["failed"] == 0
    listed = json.loads(showcase("image", "list", "--json").stdout)
    assert report["image"] in [t for i in listed for t in i["tags"]]
    assert {"base", "layer"} <= {i["kind"] for i in listed}
