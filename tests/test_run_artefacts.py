"""The run's files: published schemas through the real CLI, redaction, atomic writes, JSON lines."""

import json
import multiprocessing
import shlex
import subprocess
import sys
import threading

import pytest
from pydantic import ValidationError

from showcase.runfolder.artefacts import (
    CommandLine,
    Contract,
    ContractLimits,
    HarnessInfo,
    ImageInfo,
    SandboxLimits,
    SamplingFile,
    ToolVersions,
    VersionRecord,
)
from showcase.io import append_jsonl, read_jsonl, write_json_atomic

SCHEMA_NAMES = ["contract", "run-info", "versions", "final-choice", "sampling", "events"]


def showcase(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "showcase.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def cli_results() -> dict[str, tuple[int, str, str]]:
    """`showcase schema NAME` for every name (and one unknown), run side by side as real processes."""
    procs = {name: showcase("schema", name) for name in [*SCHEMA_NAMES, "nope"]}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        results[name] = (proc.returncode, out, err)
    return results


def _undescribed(schema: dict) -> list[str]:
    """Every property, in the model and its sub-models, that has no description."""
    missing = []
    for owner in [schema, *schema.get("$defs", {}).values()]:
        for name, prop in owner.get("properties", {}).items():
            if not prop.get("description"):
                missing.append(f"{owner.get('title')}.{name}")
    return missing


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_printed_by_the_cli_describes_every_field(name, cli_results):
    returncode, out, err = cli_results[name]
    assert returncode == 0, err
    schema = json.loads(out)
    assert schema["type"] == "object" and schema["properties"]
    assert _undescribed(schema) == []


def test_unknown_schema_is_a_one_line_error(cli_results):
    returncode, out, err = cli_results["nope"]
    assert returncode == 2
    assert out == ""
    assert "unknown schema 'nope'" in err and "contract" in err
    assert "Traceback" not in err


def contract(**changes) -> Contract:
    fields = dict(
        task_id="voxel", prompt_sha256="26f98fd96f94b1b1c152eec15d2becfc807e7c7f2d478ae456e1d6e6a2bbdbb6",
        limits=ContractLimits(hard_stop_s=7200, finish_now_after_s=5400, answer_limit=262144, context_size=None),
        harness=HarnessInfo(id="builtin", version="1"), model="m",
        upstream_url="https://alice:pw@models.example:8443/v1?api_key=SECRET&region=eu",
        sampling={"temperature": 0.6}, sandbox_limits=SandboxLimits(memory_bytes=1 << 33, cpus=2, pids=512),
        image=ImageInfo(id="sha256:" + "0" * 64), versions=ToolVersions(showcase="0.1.0", chromium="131", ffmpeg="7.1"),
        checker_rubric_version="1", timezone="UTC", seeds={"check": 1},
    )
    fields.update(changes)
    return Contract(**fields)


def test_contract_never_keeps_upstream_credentials(tmp_path):
    path = tmp_path / "contract.json"
    write_json_atomic(path, contract())
    text = path.read_text()
    assert "alice" not in text and "pw@" not in text and "SECRET" not in text
    loaded = Contract.model_validate_json(text)
    assert loaded.upstream_url == "https://models.example:8443/v1?api_key=REDACTED&region=eu"


def test_contract_refuses_a_bad_prompt_hash_and_unknown_fields():
    with pytest.raises(ValidationError):
        contract(prompt_sha256="abc")
    with pytest.raises(ValidationError):
        contract(modle="typo")


def test_command_txt_redacts_every_secret_and_stays_pasteable(tmp_path):
    argv = [
        "OPENAI_API_KEY=sk-live-0123456789abcdef", "showcase", "run", "--task", "voxel",
        "--upstream", "http://bob:hunter2@127.0.0.1:8000/v1?token=t0k&x=1",
        "--key", "plainsecret", "--api-key=othersecret", "--model", "my model",
        "--header", "Authorization: Bearer abc.def.ghi", "--note", "uses sk-proj-ABCDEFGHIJKL today",
    ]
    path = tmp_path / "command.txt"
    CommandLine.from_argv(argv).write(path)
    text = path.read_text()
    for secret in ("sk-live", "hunter2", "bob", "t0k", "plainsecret", "othersecret", "abc.def.ghi", "sk-proj"):
        assert secret not in text, secret
    assert shlex.split(text) == [
        "OPENAI_API_KEY=REDACTED", "showcase", "run", "--task", "voxel",
        "--upstream", "http://127.0.0.1:8000/v1?token=REDACTED&x=1",
        "--key", "REDACTED", "--api-key=REDACTED", "--model", "my model",
        "--header", "Authorization: REDACTED", "--note", "uses REDACTED today",
    ]
    assert text.endswith("\n") and text.count("\n") == 1


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    path = tmp_path / "sampling.json"
    write_json_atomic(path, SamplingFile(fields={"temperature": 1.0}, source="file", source_path="s.json"))
    before = path.read_bytes()
    with pytest.raises(TypeError):
        write_json_atomic(path, {"not json": object()})
    assert path.read_bytes() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sampling.json"]  # no temp left behind
    write_json_atomic(path, SamplingFile(fields={"temperature": 0.2}, source="command line"))
    assert SamplingFile.model_validate_json(path.read_text()).fields == {"temperature": 0.2}


def _append_many(path: str, who: str, count: int) -> None:
    for i in range(count):
        append_jsonl(path, {"who": who, "i": i, "pad": "x" * 3000})


def test_appends_from_threads_and_processes_never_interleave(tmp_path):
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), f"p{k}", 60)) for k in range(2)]
    threads = [threading.Thread(target=_append_many, args=(str(path), f"t{k}", 60)) for k in range(2)]
    for worker in [*procs, *threads]:
        worker.start()
    for worker in threads:
        worker.join(60)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    rows = [json.loads(line) for line in lines[:-1]]  # every line whole
    assert len(rows) == 240
    for who in ("p0", "p1", "t0", "t1"):
        assert [r["i"] for r in rows if r["who"] == who] == list(range(60))


def test_a_torn_last_line_is_skipped_not_fatal(tmp_path):
    path = tmp_path / "versions.jsonl"
    record = VersionRecord(n=1, event="seen", t_s=1.5, sha256="a" * 64, size=3, last_request_id=None, file="0001-aaaaaaaa.html")
    append_jsonl(path, record)
    with open(path, "ab") as handle:
        handle.write(b'{"n": 2, "eve')
    assert [VersionRecord.model_validate(r) for r in read_jsonl(path)] == [record]


def test_gate_log_of_a_killed_gate_reads_without_its_torn_line(tmp_path):
    """finalize reads gate.log exactly when the gate died: a half-written last line must cost that line only."""
    from showcase.gate.log import GateLogLine, read_log

    path = tmp_path / "gate.log"
    lines = [GateLogLine(time="2026-11-30T08:00:00Z", t_s=float(i), id=f"r{i:04d}", kind="api", method="POST",
                         path="/v1/chat/completions", status=200, latency_ms=5.0) for i in (1, 2)]
    for line in lines:
        append_jsonl(path, line)
    with open(path, "ab") as handle:
        handle.write(lines[0].model_dump_json().encode()[:40])
    assert read_log(path) == lines


def test_a_run_folder_written_by_the_writers_reads_back_whole(tmp_path):
    """Every file the test run folder holds matches the model its reader uses: nothing is left out."""
    from runfolder import make_run
    from showcase.runfolder.artefacts import read_run

    files = read_run(make_run(tmp_path, "r", clip_source=None, n_versions=3, agent_shots=1))
    assert files.problems == []
    assert None not in (files.command, files.contract, files.sampling, files.run_info, files.gate_stats,
                        files.final_choice, files.check)
    assert [v.n for v in files.versions] == [1, 2, 3] and all(v.loaded_without_errors is not None for v in files.versions)
    assert files.run_info.summary_run.startswith("The agent ran 92.3 minutes")
    assert files.events[0].event == "run_started" and len(files.gate_lines) == 12
