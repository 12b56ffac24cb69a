"""A harness is a folder under harness/: harness.toml (offline install, launch command, env) + files.

The folder is copied into the sandbox image at /opt/harness/ (wheels fetched on the host land in
/opt/harness/wheels/). The run fills the launch placeholders with `render_launch`.
"""

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

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
    run: list[str] = Field(
        default_factory=list,
        description="shell lines run as root during the image build, with no network",
    )


class HarnessLaunch(BaseModel):
    """How the run starts the agent inside the sandbox."""

    command: list[str] = Field(description="argv; placeholders {model} {prompt} {prompt_file} {base_url} {api_key}")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment, same placeholders")
    done_pattern: str = Field(
        r"\bDONE\b",
        description="regular expression that, found in the agent's output (agent.log) or in a file it left in "
        "/logs (the run's agent/ folder, e.g. its trajectory), means the agent ended by saying it was done",
    )


class Harness(BaseModel):
    """A harness as loaded from harness/<id>/harness.toml."""

    id: str = Field(description="folder name under harness/")
    version: str = Field(description="version of the agent it installs (recorded in results)")
    description: str = Field("", description="one line for humans")
    dir: Path = Field(description="the harness folder on the host (copied to /opt/harness/)")
    install: HarnessInstall = Field(default_factory=HarnessInstall)
    launch: HarnessLaunch


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
    env = {key: _fill(val, values, f"env {key}") for key, val in harness.launch.env.items()}
    return command, env
