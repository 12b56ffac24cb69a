"""A second task runs end to end: the run, the check, the clip and the report follow the Task.

tests/tasks/scene has another page name (scene.html), its own prompt and an import map of one
package. One `showcase run` of it, with a scripted model, through the builtin agent in a real
sealed container, the real check in Chromium, a real clip and the report.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from showcase.paths import CHECKS_DIR, HARNESS_DIR
from showcase.replay import ReplayServer

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SCENE_TASK = Path(__file__).resolve().parent / "tasks" / "scene"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Noise Hills</title>
<script type="importmap">
{ "imports": { IMPORTS } }
</script></head>
<body style="margin:0"><canvas id="c" width="640" height="360"></canvas>
<script type="module">
EXTRA
import { createNoise2D } from 'simplex-noise';
const noise = createNoise2D(() => 0.5);
const ctx = document.getElementById('c').getContext('2d');
for (let x = 0; x < 640; x += 4) {
  const h = 180 + 80 * noise(x / 120, 0);
  ctx.fillStyle = `hsl(${100 + x / 8}, 50%, 40%)`;
  ctx.fillRect(x, h, 4, 360 - h);
}
window.ready = true;
</script></body></html>
"""
NOISE = '"simplex-noise": "https://cdn.jsdelivr.net/npm/simplex-noise@4.0.3/dist/esm/simplex-noise.js"'
THREE = '"three": "https://cdn.jsdelivr.net/npm/three@0.170.0/build/three.module.js"'
# Version 1 uses the task's one package. Version 2 also imports three: the voxel task offers it,
# this one does not, so under this task's import map version 2 does not load and version 1 counts.
V1 = PAGE.replace("IMPORTS", NOISE).replace("EXTRA", "")
V2 = PAGE.replace("IMPORTS", NOISE + ", " + THREE).replace("EXTRA", "import * as THREE from 'three';")


def write(page: str) -> dict:
    return {"name": "write_file", "arguments": {"path": "scene.html", "content": page}}


SCRIPT = {
    "model": "replay-scene",
    "turns": [
        {"content": "Hills first.", "tool_calls": [write(V1)]},
        # shot.sh without a file: the run's shot.sh checks the task's page, scene.html.
        {"content": "Does it load?", "tool_calls": [{"name": "shell", "arguments": {"command": "shot.sh"}}]},
        {"content": "Now with three.js.", "tool_calls": [write(V2)]},
    ],
    "final": {"content": "DONE /work/scene.html"},
}


def test_a_second_task_runs_end_to_end(docker_engine, tmp_path):
    # SHOWCASE_HOME: a data root whose tasks/ holds the scene task, beside the project's harnesses and rubric.
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    (home / "tasks" / "scene").symlink_to(SCENE_TASK)
    (home / "harness").symlink_to(HARNESS_DIR)
    (home / "checks").symlink_to(CHECKS_DIR)
    script = tmp_path / "scene.json"
    script.write_text(json.dumps(SCRIPT))
    run = tmp_path / "run"
    with ReplayServer(script) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "showcase.cli", "run", "--task", "scene", "--upstream", server.base_url,
             "--model", "replay-scene", "--out", str(run), "--clip-seconds", "2"],
            capture_output=True, text=True, timeout=1200, env={**os.environ, "SHOWCASE_HOME": str(home)},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    contract = json.loads((run / "contract.json").read_text())
    assert contract["task_id"] == "scene"
    assert (run / "task" / "prompt.txt").read_bytes() == (SCENE_TASK / "prompt.txt").read_bytes()
    # The watcher kept the task's page, not game.html.
    assert (run / "work" / "scene.html").read_text() == V2 and not (run / "work" / "game.html").exists()
    rows = [json.loads(line) for line in (run / "versions.jsonl").read_text().splitlines()]
    loaded = {}
    for row in rows:
        if row.get("loaded_without_errors") is not None:
            loaded[row["n"]] = row["loaded_without_errors"]
    assert loaded == {1: True, 2: False}, rows
    choice = json.loads((run / "final-choice.json").read_text())
    assert choice["n"] == 1 and not choice["is_final_file"], choice
    # shot.sh, called without a file, checked scene.html: its screenshot is in /work/shots.
    assert list((run / "work" / "shots").glob("shot-*.png"))
    # The check scored version 1, its one import answered from the task's offline CDN.
    check = json.loads((run / "check.json").read_text())
    assert check["page_sha256"] == choice["sha256"] and not check["errors"] and not check["blocked_requests"], check
    assert (run / "screenshot.png").stat().st_size > 0
    clip = json.loads((run / "clip.json").read_text())
    assert (run / "clip.mp4").stat().st_size > 0 and clip["frames"] > 0, clip
    report = (run / "report.html").read_text()
    assert "scene" in report
    info = json.loads((run / "run-info.json").read_text())
    assert info["agent_end"] == "done"
