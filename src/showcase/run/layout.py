"""Where each file of a run lives (the README's "The files of a run"). One place, so run, finalize and report agree."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunLayout:
    root: Path

    # what the agent sees
    work = property(lambda self: self.root / "work")  # bind-mounted read-write at /work
    gate_dir = property(lambda self: self.root / "gate")  # holds gate.sock, bind-mounted read-only at /gate
    task_dir = property(lambda self: self.root / "task")  # the exact prompt bytes, read-only at /task
    agent_dir = property(lambda self: self.root / "agent")  # the agent's own logs (trajectory), rw at /logs
    tools_dir = property(lambda self: self.root / "tools")  # shot.sh and the relay, read-only at /opt/tools

    # what a reader compares runs by
    command = property(lambda self: self.root / "command.txt")
    contract = property(lambda self: self.root / "contract.json")
    sampling = property(lambda self: self.root / "sampling.json")
    run_info = property(lambda self: self.root / "run-info.json")
    gate_stats = property(lambda self: self.root / "gate-stats.json")
    gate_log = property(lambda self: self.root / "gate.log")
    versions_dir = property(lambda self: self.root / "versions")
    versions_log = property(lambda self: self.root / "versions.jsonl")
    final_choice = property(lambda self: self.root / "final-choice.json")
    check = property(lambda self: self.root / "check.json")
    screenshot = property(lambda self: self.root / "screenshot.png")
    clip = property(lambda self: self.root / "clip.mp4")
    clip_info = property(lambda self: self.root / "clip.json")
    report = property(lambda self: self.root / "report.html")
    agent_log = property(lambda self: self.root / "agent.log")
    events_log = property(lambda self: self.root / "events.jsonl")

    def holds_a_run(self) -> bool:
        return self.contract.exists() or self.run_info.exists() or self.versions_log.exists()

    def make(self) -> None:
        for d in (self.root, self.work, self.agent_dir, self.gate_dir, self.task_dir, self.tools_dir, self.versions_dir):
            d.mkdir(parents=True, exist_ok=True)
