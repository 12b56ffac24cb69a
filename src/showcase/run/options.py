"""What one run is asked to do: the command line of `showcase run`, as a pydantic model."""

from pathlib import Path

from pydantic import BaseModel, Field

from showcase.task import DEFAULT_TASK


class RunOptions(BaseModel):
    """Everything `showcase run` takes; the contract records what of it fixes the result."""

    task: str = Field(DEFAULT_TASK, description="task id: a folder under tasks/")
    harness: str = Field("builtin", description="agent harness id: a folder under harness/")
    upstream: str = Field(description="OpenAI-compatible base URL of the model, e.g. http://HOST:PORT/v1")
    model: str = Field(description="model name forced into every request")
    upstream_key: str | None = Field(None, description="API key for the upstream (never written to disk)")
    out: Path = Field(description="run folder; must not already hold a run")
    sampling_file: Path | None = Field(None, description="JSON object of fields forced into every request")
    limit_s: float | None = Field(None, description="hard stop in seconds (default: the task's)")
    inject_after_s: float | None = Field(None, description="finish-now from this second on (default: the task's)")
    answer_limit: int | None = Field(None, description="answer token limit (default: the task's)")
    ctx: int | None = Field(None, description="context size of the served model, recorded in the contract")
    disk: str = Field("4g", description="hard cap of what the agent writes (/work and /logs together)")
    memory: str = Field("1.25g", description="container memory limit (swap equal: no extra swap)")
    cpus: float | None = Field(None, description="container CPUs (default min(4, host))")
    pids_limit: int | None = Field(None, description="container pids limit (default: the backend's)")
    backend: str = Field("docker", description="sandbox backend")
    base_image: str | None = Field(None, description="base image to build on instead of a debootstrapped one")
    npm_dir: Path | None = Field(None, description="folder of the import map's npm tarballs")
    clip: bool = Field(True, description="record clip.mp4 of the chosen version")
    clip_seconds: float = Field(15, description="length of the clip")
    command_line: list[str] = Field(default_factory=list, description="argv as typed, for command.txt")
