"""What a check writes: check.json (CheckReport) and what the quick load check returns."""

from typing import Any

from pydantic import BaseModel, Field

from showcase.check.inputs import ControlInputs


class ItemResult(BaseModel):
    """One of the ten items, scored."""

    id: str = Field(description="item id as in the method: '1'..'10', '6a', '6b'")
    name: str = Field(description="short name, e.g. 'frame rate'")
    points: float = Field(description="points given")
    max_points: float = Field(description="points the item is worth")
    passed: bool = Field(description="true when the item got all its points")
    figures: dict[str, Any] = Field(default_factory=dict, description="what was measured for this item")
    reason: str = Field(description="one plain-English line: why these points")


class CheckReport(BaseModel):
    """check.json: the ten-point browser check of one page."""

    page: str = Field(description="the page checked (file name as given, or '<bytes>')")
    page_sha256: str = Field(description="sha256 of the page's bytes")
    rubric_version: str = Field(description="version of checks/rubric.toml used")
    showcase_version: str
    chromium_version: str
    renderer: str = Field(description="renderer the rubric pins, e.g. 'swiftshader'")
    webgl_renderer: str | None = Field(None, description="the WebGL renderer string the browser reported")
    viewport: tuple[int, int]
    started_at: str = Field(description="UTC ISO time the check started")
    seconds: float = Field(description="wall time of the whole check")
    observed_seconds: float = Field(0.0, description="time spent in the tour windows and control steps")
    items: list["ItemResult"]
    total: float = Field(description="points out of max_total")
    max_total: float = 10.0
    summary: str = Field(description="one plain-English summary of the result")
    errors: list[str] = Field(default_factory=list, description="first lines of every error of the session")
    blocked_requests: list[str] = Field(default_factory=list, description="outside requests that were aborted")
    dialogs: list[str] = Field(default_factory=list, description="alert/confirm/prompt dialogs (dismissed)")
    navigated_away_to: str | None = Field(None, description="where the page navigated itself, if it did")
    left: str | None = Field(
        None, description="how and when the page left, if it did: navigated away (reloads included), closed itself, lost its renderer"
    )
    frozen: str | None = Field(None, description="what timed out when the page's main thread blocked, if it did")
    stopped: str | None = Field(None, description="why measuring stopped before the last control step, if it did")
    stopped_phase: str | None = Field(None, description="the phase measuring stopped in, if it stopped early")
    foreign_cpu_cores: float | None = Field(
        None, description="mean CPU use of processes other than this check's browser and Python, in cores"
    )
    cpu_share: str | None = Field(
        None, description="the CPU weight the check ran with (its cgroup and weight), or why it kept the machine's default"
    )
    webgl_pictures: bool | None = Field(
        None, description="whether the probe took pictures of what WebGL drew (tour, animation and controls need them to "
        "change); false: this browser cannot, and those items were judged without them; null: no window was read (or rubric < 2.7)"
    )
    phases: dict[str, float] = Field(default_factory=dict, description="seconds spent in each phase")
    control_inputs: ControlInputs | None = Field(
        None, description="the seed of the control steps' inputs and every event sent (rubric 3.0; null before): "
        "`showcase check --seed N` sends the same events again"
    )


class LoadCheck(BaseModel):
    """The quick load check: does the page load cleanly and set ready."""

    loads: bool = Field(description="navigation completed; no uncaught exception, console error or failed request up to ready + settle")
    ready: bool = Field(description="window.ready === true within the ready timeout")
    ready_after_s: float | None = Field(None, description="seconds from navigation start to ready")
    errors: list[str] = Field(default_factory=list, description="first lines of the errors seen")
    screenshot: str | None = Field(None, description="path of the screenshot written, if any")
    seconds: float = Field(description="wall time of the quick check")
