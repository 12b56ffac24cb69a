"""A harness is a folder under harness/: harness.toml (offline install, launch command, env) + files.

The folder is copied into the sandbox image at /opt/harness/ (wheels fetched on the host land in
/opt/harness/wheels/, npm packages, resolved on the host, in /opt/harness/npm/).
The run fills the launch placeholders with `render_launch`; config templates are filled the same
way and written into the container's home by /opt/showcase/launch.py just before the agent starts.
"""

import base64
import json
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from showcase.errors import UserError
from showcase.paths import HARNESS_DIR

# The values a run can put into a launch command or env; anything else in braces stays literal
# (so JSON or shell braces in a command survive).
PLACEHOLDERS = ("model", "prompt", "prompt_file", "base_url", "api_key")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


class HarnessInstall(BaseModel):
    """How the harness's layer of the sandbox image is built (offline, as root)."""

    pip_download: list[str] = Field(
        default_factory=list,
        description="pip requirement specs fetched ON THE HOST with `pip download` (cp311 wheels, "
        "cached by content hash) and copied into the image at /opt/harness/wheels",
    )
    pip_requirements: str | None = Field(
        None,
        description="a requirements file in the harness folder pinning the whole closure, every line "
        "`name==version --hash=sha256:...`: fetched ON THE HOST with `pip download --require-hashes --no-deps` "
        "(a wheel whose sha256 is not the pinned one is refused) into /opt/harness/wheels, beside pip_download's",
    )
    npm: list["NpmPackage"] = Field(
        default_factory=list,
        description="npm packages resolved and unpacked ON THE HOST with install scripts off, copied into the "
        "image at /opt/harness/npm, where `npm rebuild` runs their install scripts with no network "
        "(bins: /opt/harness/npm/bin)",
    )
    npm_scripts: bool = Field(
        True, description="run the npm packages' install scripts in the image build (off for a package whose "
        "script would compile native code or download, when the agent works without it)",
    )
    run: list[str] = Field(
        default_factory=list,
        description="shell lines run as root during the image build, with no network (after the npm install)",
    )


_EXACT_SPEC = re.compile(r"^(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*@\d+\.\d+\.\d+[\w.+-]*$")


class NpmPackage(BaseModel):
    """One npm package at an exact version, with the integrity the registry publishes for it."""

    spec: str = Field(description="name@exact-version, e.g. opencode-ai@1.18.33")
    integrity: str = Field(description="the registry's dist.integrity (sha512-...), checked against what was fetched")

    @field_validator("spec")
    @classmethod
    def _exact(cls, value: str) -> str:
        if not _EXACT_SPEC.match(value):
            raise ValueError(f"{value!r} is not name@exact-version")
        return value

    @field_validator("integrity")
    @classmethod
    def _sha512(cls, value: str) -> str:
        if not value.startswith("sha512-"):
            raise ValueError("integrity must be the registry's sha512-... value")
        return value

    @property
    def name(self) -> str:
        return self.spec.rsplit("@", 1)[0]

    @property
    def version(self) -> str:
        return self.spec.rsplit("@", 1)[1]


class HarnessFile(BaseModel):
    """A config file the agent reads, filled from a template in the harness folder at launch."""

    template: str = Field(description="file in the harness folder; placeholders as in the launch command")
    dest: str = Field(description="where it goes in the container; ~ is the agent's home")


HarnessInstall.model_rebuild()


class HarnessLaunch(BaseModel):
    """How the run starts the agent inside the sandbox."""

    command: list[str] = Field(description="argv; placeholders {model} {prompt} {prompt_file} {base_url} {api_key}")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment, same placeholders")
    done_pattern: str = Field(
        r"\bDONE\b",
        description="regular expression that, found in the agent's output (agent.log) or in a file it left in "
        "/logs (the run's agent/ folder, e.g. its trajectory), means the agent ended by saying it was done",
    )
    done_json: dict[str, str | int | bool] | None = Field(
        None,
        description="for agents with JSON-lines output: the agent said it was done when the LAST JSON object "
        "line of its output has these fields with these values (dotted keys reach into objects); "
        "replaces done_pattern",
    )
    quiet_env: dict[str, str] = Field(
        default_factory=dict,
        description="environment that keeps the agent from looking anything up outside (updates, telemetry, "
        "model lists); merged into env, kept apart so what seals it is visible",
    )
    files: list[HarnessFile] = Field(default_factory=list, description="config files written before the agent starts")
    api: Literal["chat", "responses"] = Field("chat", description="which OpenAI API the agent speaks")


class Harness(BaseModel):
    """A harness as loaded from harness/<id>/harness.toml."""

    id: str = Field(description="folder name under harness/")
    version: str = Field(description="version of the agent it installs (recorded in results)")
    description: str = Field("", description="one line for humans")
    dir: Path = Field(description="the harness folder on the host (copied to /opt/harness/)")
    base: Literal["bookworm", "trixie"] = Field(
        "bookworm", description="the Debian suite of the sandbox's base image (trixie: Python 3.13, for agents "
        "that need Python >= 3.12); its wheels are fetched for that suite's python3",
    )
    install: HarnessInstall = Field(default_factory=HarnessInstall)
    launch: HarnessLaunch
    replay_script: str | None = Field(
        None, description="the demo conversation for this agent (tasks/<task>/demo/<name>.json); default: the "
        "agent's own if one exists, else generic.json, which adapts to whatever tools the agent offers",
    )


def known_harnesses(root: Path | None = None) -> list[str]:
    """Ids of the harness folders (those with a harness.toml)."""
    root = root or HARNESS_DIR
    return sorted(p.parent.name for p in root.glob("*/harness.toml"))


def load_harness(harness_id: str, root: Path | None = None) -> Harness:
    """Load harness/<id>/harness.toml; an unknown id or a bad file is a UserError."""
    root = root or HARNESS_DIR
    path = root / harness_id / "harness.toml"
    if not harness_id or "/" in harness_id or not path.is_file():
        known = ", ".join(known_harnesses(root)) or "none"
        raise UserError(f"unknown harness {harness_id!r}; known: {known}")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    if data.get("id", harness_id) != harness_id:
        raise UserError(f"{path}: id {data.get('id')!r} does not match its folder {harness_id!r}")
    data.setdefault("id", harness_id)
    try:
        return Harness(dir=path.parent, **data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"{path}: {where}: {first['msg']}") from None


def _fill(text: str, values: dict[str, str], where: str) -> str:
    def sub(match: re.Match) -> str:
        name = match.group(1)
        if values.get(name) is None:
            raise UserError(f"harness launch {where} uses {{{name}}} but the run gave no {name}")
        return str(values[name])

    return _PLACEHOLDER.sub(sub, text)


def render_launch(harness: Harness, **values: str) -> tuple[list[str], dict[str, str]]:
    """The launch argv and env with {model} {prompt} {prompt_file} {base_url} {api_key} filled in.

    Values are substituted literally (no shell, no format mini-language); a placeholder the
    harness uses without a value is a UserError.
    """
    unknown = set(values) - set(PLACEHOLDERS)
    if unknown:
        raise UserError(f"unknown launch value(s) {sorted(unknown)}; known: {', '.join(PLACEHOLDERS)}")
    command = [_fill(arg, values, "command") for arg in harness.launch.command]
    merged = {**harness.launch.quiet_env, **harness.launch.env}
    env = {key: _fill(val, values, f"env {key}") for key, val in merged.items()}
    if harness.launch.files:
        files = {}
        for item in harness.launch.files:
            source = harness.dir / item.template
            if not source.is_file():
                raise UserError(f"harness {harness.id}: template {item.template} is missing from {harness.dir}")
            files[item.dest] = _fill(source.read_text(), values, f"template {item.template}")
        payload = json.dumps(files).encode()
        env[LAUNCH_FILES_ENV] = base64.b64encode(payload).decode()
        # The in-image launcher writes the files, closes stdin and execs the agent.
        command = ["python3", LAUNCHER_IN_IMAGE, "--", *command]
    return command, env


LAUNCHER_IN_IMAGE = "/opt/showcase/launch.py"
LAUNCH_FILES_ENV = "SHOWCASE_LAUNCH_FILES"


def _dig(obj, dotted: str):
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


_MISSING = object()


def last_json_line(output: bytes) -> dict | None:
    """The last line of an agent's output that is a JSON object (its final structured event)."""
    for raw in reversed(output.splitlines()):
        raw = raw.strip()
        if not raw.startswith(b"{"):
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def said_done(harness: Harness, output: bytes, other_files: list[bytes] = ()) -> bool:
    """Did the agent end by saying it was done? From its structured output where it has one."""
    want = harness.launch.done_json
    if want is not None:
        last = last_json_line(output)
        return last is not None and all(_dig(last, key) == value for key, value in want.items())
    regex = re.compile(harness.launch.done_pattern.encode())
    return any(regex.search(blob) for blob in [output, *other_files])


def demo_script(harness: Harness, demo_dir: Path) -> Path:
    """The recorded conversation a demo plays through this harness: its own, else the generic one."""
    name = harness.replay_script or (f"{harness.id}.json" if (demo_dir / f"{harness.id}.json").is_file()
                                      else "generic.json")
    path = demo_dir / name
    if not path.is_file() or path.parent != demo_dir:
        raise UserError(f"harness {harness.id}: no recorded conversation {name} in {demo_dir}")
    return path
