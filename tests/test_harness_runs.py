"""Every shipped agent CLI, sealed, against the replay model: a real container, the real gate, the real CLI.

One module so its cost is one figure: per harness a run that plays the demo's page versions
through the agent's own tools (tasks/voxel/demo/generic.json) and is checked and reported, and
a run stopped by the hard stop (those all at once, in one fixture). Image layers are cached by
content hash; the first run of a harness on a machine builds its layer (npm resolve on the host +
an offline `npm rebuild`, or hashed wheels + an offline `pip install`; mistral-vibe also builds
the Debian 13 base).
"""

import contextlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from showcase.harness import load_harness
from showcase.paths import TASKS_DIR
from showcase.replay import ReplayServer, load_script
from showcase.sandbox.image import ensure_base, ensure_image, ensure_node

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SHOWCASE = [sys.executable, "-m", "showcase.cli"]
DEMO = TASKS_DIR / "voxel" / "demo"
HARNESSES = ["opencode", "pi", "codex", "cline", "kimi-code", "qwen-code", "aider", "hermes", "mistral-vibe"]
# Agents without tools that edit from whole-file listings in the answer: each answer is a page.
WHOLE_FILE = {"aider"}
# Qwen Code peaks near 1 GB while a command runs: at the default 1.25 GB it is killed by the
# OOM killer (docs/agent.md), so it is proven with the memory it needs.
EXTRA = {"qwen-code": ["--memory", "3g"]}
# All hard-stop runs go at once (one module fixture), so the limit must cover the slowest start
# while all of them start on a loaded machine: at 90 s, at load 37, 8 of 9 had not yet asked.
STOP_LIMIT_S = 240
BUILDS_AT_ONCE = 3
# Demo runs at once: each ends in a frame-bound check, so not so many that the checks starve.
RUNS_AT_ONCE = 3


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def versions_of(run: Path) -> dict[int, dict]:
    folded: dict[int, dict] = {}
    for line in (run / "versions.jsonl").read_text().splitlines():
        row = json.loads(line)
        folded.setdefault(row["n"], {}).update({k: v for k, v in row.items() if v is not None})
    return folded


def run_showcase(harness: str, server: ReplayServer, run: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        SHOWCASE + ["run", "--harness", harness, "--upstream", server.base_url, "--model", server.script.model,
                    "--out", str(run), "--no-clip", *extra],
        capture_output=True, text=True, timeout=1200)


def stalling_script(harness_id: str) -> dict:
    """An agent that only ever waits: the hard stop is the only way it ends.

    The model is the slow one (3 s an answer), so no agent can run through the script fast; each
    call is a different command: Cline and Qwen Code end a run by themselves after identical calls.
    aider gives the model at most four answers (one task, three check rounds): each is a page,
    90 s in coming, so the four outlast the limit.
    """
    if harness_id in WHOLE_FILE:
        waits = [{"content": f"Still thinking ({n}).", "delay_s": 90, "tool_calls": [
            {"name": "@write", "arguments": {"path": "game.html", "content": f"<p>waited {n}</p>\n"}}]}
            for n in range(1, 10)]
    else:
        waits = [{"content": f"Still thinking ({n}).", "delay_s": 3,
                  "tool_calls": [{"name": "@shell", "arguments": {"command": f"echo waited {n}"}}]}
                 for n in range(1, 200)]
    return {"model": "replay-stall", "side_answer": "Windmill Isle", "turns": waits, "final": waits[-1]}


@pytest.fixture(scope="module")
def layers(docker_engine) -> None:
    """Every harness's image layer, built before the runs and several at once: on a cold machine
    most of a build is fetching packages and installing them offline, which overlaps well."""
    ensure_base()
    ensure_node()
    with ThreadPoolExecutor(max_workers=BUILDS_AT_ONCE) as pool:
        for future in [pool.submit(ensure_image, h) for h in HARNESSES]:
            future.result()


@pytest.fixture(scope="module")
def demo_runs(layers, tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, list[dict], int, Path]]:
    """Every harness plays the demo, a few runs at once (each its own replay model, gate and
    container): a run mostly waits on its agent, so together they cost far less than one by one."""
    root = tmp_path_factory.mktemp("demo")

    def play(harness_id: str):
        run = root / harness_id
        with ReplayServer(DEMO / "generic.json") as server:
            proc = run_showcase(harness_id, server, run, "--limit-s", "900", *EXTRA.get(harness_id, []))
            return proc, list(server.requests), server.replayer.index, run

    with ThreadPoolExecutor(max_workers=RUNS_AT_ONCE) as pool:
        futures = {h: pool.submit(play, h) for h in HARNESSES}
        return {h: f.result() for h, f in futures.items()}


@pytest.mark.parametrize("harness_id", HARNESSES)
def test_agent_plays_the_demo_sealed(demo_runs, harness_id):
    harness = load_harness(harness_id)
    proc, received, answered, run = demo_runs[harness_id]
    script = load_script(DEMO / "generic.json")
    log = (run / "agent.log").read_text(errors="replace")[-3000:] if (run / "agent.log").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + log
    info = read_json(run / "run-info.json")
    # How it ended comes from the agent's own structured output, not only its exit code.
    assert info["agent_end"] == "done", log
    assert answered == len(script.turns), "the agent did not play the whole conversation"
    versions = versions_of(run)
    assert len(versions) >= 2
    # v3 of the demo throws on its first frame, v4 fixes it; the final file counts.
    assert (run / "work" / "game.html").read_bytes() == (DEMO / "pages" / "v4.html").read_bytes()
    choice = read_json(run / "final-choice.json")
    # when not, the final file's own record says why (its load errors, or why it was not checked)
    final = next((versions[c["n"]] for c in choice["candidates"] if c["is_final_file"]), None)
    assert choice["is_final_file"], (choice["rule_text"], final and (final.get("load_errors"), final.get("check_failure")))
    check = read_json(run / "check.json")
    assert check["total"] >= 6, check["summary"]
    assert (run / "report.html").is_file()
    contract = read_json(run / "contract.json")
    assert contract["harness"]["id"] == harness_id and contract["harness"]["version"] == harness.version
    # Sealed: every request the model saw came through the gate (forced answer limit), and
    # nothing was looked up or connected to beyond it.
    limit_fields = ("max_tokens", "max_completion_tokens", "max_output_tokens")  # chat, newer chat, Responses
    main = [b for b in received if b.get("tools") or harness_id in WHOLE_FILE]
    assert main and all(any(b.get(f) for f in limit_fields) for b in main)
    # The agent's own shot.sh reached the host's load check (through the gate's tool route).
    shots = [json.loads(line) for line in (run / "gate.log").read_text().splitlines()]
    assert any(s["kind"] == "tool" and s["path"] == "/_showcase/shot" and s["status"] == 200 for s in shots), log
    outside = info["outside_attempts"]
    assert outside is not None and outside["observed"], outside
    assert outside["dns_queries"] == [] and outside["connects"] == [], outside


@pytest.fixture(scope="module")
def hard_stop_runs(layers, tmp_path_factory) -> dict[str, tuple[int, str, int, Path]]:
    """Every harness's run stopped by the hard stop, all at once (each its own replay model, gate
    and container): one wait of the limit instead of one per harness.

    The limit leaves the slowest start on a loaded machine time for its first request; what is
    proven does not depend on how long the run was, only on what stopped it.
    """
    root = tmp_path_factory.mktemp("hard-stop")
    procs = {}
    with contextlib.ExitStack() as stack:
        servers = {h: stack.enter_context(ReplayServer(stalling_script(h))) for h in HARNESSES}
        for h, server in servers.items():
            err = stack.enter_context(open(root / f"{h}.stderr", "w"))
            procs[h] = subprocess.Popen(
                SHOWCASE + ["run", "--harness", h, "--upstream", server.base_url, "--model", server.script.model,
                            "--out", str(root / h), "--no-clip", "--limit-s", str(STOP_LIMIT_S),
                            "--inject-after-s", str(STOP_LIMIT_S - 30), *EXTRA.get(h, [])],
                stdout=subprocess.DEVNULL, stderr=err)
        try:
            codes = {h: p.wait(timeout=1200) for h, p in procs.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return {h: (codes[h], (root / f"{h}.stderr").read_text()[-3000:], len(servers[h].requests), root / h)
                for h in HARNESSES}


@pytest.mark.parametrize("harness_id", HARNESSES)
def test_agent_is_killed_at_the_hard_stop(hard_stop_runs, harness_id):
    code, stderr, received, run = hard_stop_runs[harness_id]
    assert code == 0, stderr
    info = read_json(run / "run-info.json")
    assert info["agent_end"] == "killed_at_hard_stop"
    assert received >= 1, "the agent never asked the model: the stop proves nothing"
    assert info["outside_attempts"]["dns_queries"] == [] and info["outside_attempts"]["connects"] == []
