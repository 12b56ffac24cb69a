"""The control steps' inputs: a person's wheel and drag, drawn from a seed within the rubric's ranges.

Until 3.0 every check sent the same events (two notches of 120 px at the centre pixel, a drag from
the centre released at exactly centre + (240, 60)), and a page that answered only that signature
earned the controls while a person's wheel or drag did nothing. Now where the pointer rests, where
the wheel turns, with a mouse or a trackpad and by how much, where a drag starts, its length,
direction, moves and pace, and the pauses between events all vary from check to check within
documented ranges (checks/rubric.toml, [items.10]). The ranges are what people send (a mouse's
notches of 53, 100 or 120 px or a trackpad's stream of small deltas; a drag of many moves a frame
or less apart), so a page answering only the check's inputs answers people (3.0's 90-150 px
notches and 3-6 move drags let a page answer those and refuse a person's). The plan is a pure
function of the seed and the rubric: `showcase check --seed N` sends the same events again;
check.json records the seed and every event sent (`control_inputs`).
"""

import asyncio
import math
import random
import secrets
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from showcase.check.rubric import Rubric

if TYPE_CHECKING:
    from showcase.check.session import BoundedPage

INPUT_STEPS = ("wheel", "wheel back", "drag", "drag back")


def new_seed() -> int:
    return secrets.randbelow(2**31)


class MouseEvent(BaseModel):
    """One event, as sent with CDP's Input.dispatchMouseEvent (view pixels)."""

    model_config = ConfigDict(extra="forbid")
    after_ms: int = Field(description="sent this long after the previous event of its step (the first: after the step began)")
    type: Literal["mouseWheel", "mousePressed", "mouseMoved", "mouseReleased"]
    x: int
    y: int
    button: Literal["none", "left"] = "none"
    buttons: int = Field(0, description="buttons held: 1 the left one")
    click_count: int = 0
    delta_x: int = 0
    delta_y: int = Field(0, description="a wheel's deltaY in pixels: negative turns it away from the user (zoom in)")

    def cdp(self) -> dict:
        params = {"type": self.type, "x": self.x, "y": self.y, "button": self.button, "buttons": self.buttons}
        if self.type in ("mousePressed", "mouseReleased"):
            params["clickCount"] = self.click_count
        if self.type == "mouseWheel":
            params.update(deltaX=self.delta_x, deltaY=self.delta_y)
        return params


class ControlInputs(BaseModel):
    """The inputs of one check's control steps (check.json `control_inputs`)."""

    model_config = ConfigDict(extra="forbid")
    seed: int = Field(description="`showcase check --seed N` with the same rubric sends exactly these events again")
    rest: tuple[int, int] = Field(description="where the pointer rests from ready on (one move there, no button)")
    wheel: Literal["notches", "trackpad"] = Field(description="the wheel turned: a mouse's notches or a trackpad's swipe")
    steps: dict[str, list[MouseEvent]] = Field(description="the events of each control step with an input, in order")

    def lasts_s(self, step: str) -> float:
        """How long sending a step's events takes, at their pace."""
        return sum(e.after_ms for e in self.steps.get(step, [])) / 1000

    def expect(self, step: str) -> dict:
        """What the probe must see of a step's input before the step may end: the wheel's pixels,
        or for a drag the move without buttons after its release."""
        if step.startswith("wheel"):
            return {"wheel": sum(abs(e.delta_y) for e in self.steps[step] if e.type == "mouseWheel")}
        return {"drag": True}


def plan_inputs(seed: int, rubric: Rubric) -> ControlInputs:
    """The control steps' events for `seed`: the same seed and rubric give the same events."""
    spec = rubric.items["10"]
    rng = random.Random(seed)
    vw, vh = rubric.viewport
    margin = spec["edge_margin"]
    lo_x, hi_x, lo_y, hi_y = vw * margin, vw * (1 - margin), vh * margin, vh * (1 - margin)

    def clamp(x: float, y: float) -> tuple[int, int]:
        return round(min(hi_x, max(lo_x, x))), round(min(hi_y, max(lo_y, y)))

    def inner() -> tuple[int, int]:
        """A point in the middle `input_region` share of the view (on the world, clear of corner HUDs)."""
        half = spec["input_region"] / 2
        return round(rng.uniform(0.5 - half, 0.5 + half) * vw), round(rng.uniform(0.5 - half, 0.5 + half) * vh)

    def span(key: str) -> float:
        a, b = spec[key]
        return rng.uniform(a, b)

    def approach(pointer: tuple[int, int], to: tuple[int, int]) -> list[MouseEvent]:
        """The pointer moves (no button) to where the input begins, as a hand would."""
        if pointer == to:
            return []
        return [MouseEvent(after_ms=round(span("lead_ms")), type="mouseMoved", x=to[0], y=to[1])]

    def wheel(pointer: tuple[int, int], at: tuple[int, int], sign: int, kind: str) -> list[MouseEvent]:
        events = approach(pointer, at)
        for delta in notches() if kind == "notches" else swipe():
            gap = span("wheel_gap_ms" if kind == "notches" else "wheel_pad_gap_ms") if events else span("lead_ms")
            events.append(MouseEvent(after_ms=round(gap), type="mouseWheel", x=at[0], y=at[1], delta_y=sign * delta))
        return events

    def notches() -> list[int]:
        """A mouse wheel: whole notches of one size, as many as reach wheel_min_px."""
        size = rng.choice(spec["wheel_notch_px"])
        least = math.ceil(spec["wheel_min_px"] / size)
        lo, hi = spec["wheel_notches"]
        return [size] * rng.randint(max(int(lo), least), max(int(hi), least))

    def swipe() -> list[int]:
        """A trackpad's two-finger swipe: small deltas rising and falling, summing to the swipe."""
        total = span("wheel_pad_total_px")
        small, big = spec["wheel_pad_px"]
        lo, hi = spec["wheel_pad_events"]
        # a sine's mean is 2/pi of its peak: enough events that the peak stays under `big`
        n = rng.randint(max(int(lo), math.ceil(total * math.pi / 2 / (big * 0.85))), max(int(hi), int(lo)))
        shape = [math.sin(math.pi * (k + 0.5) / n) * rng.uniform(0.85, 1.15) for k in range(n)]
        scale = total / sum(shape)
        deltas = [min(big, max(small, round(scale * s))) for s in shape]
        while sum(deltas) < spec["wheel_min_px"]:  # what clamping took, back as the swipe's slow tail
            deltas.append(small)
        return deltas

    def drag(pointer: tuple[int, int], start: tuple[int, int], direction: int) -> tuple[list[MouseEvent], tuple[int, int]]:
        """Press at `start`, move `direction` (+1 right, -1 left) and a little up or down, release,
        then rest nearby (the move without buttons that tells the probe the drag is over)."""
        length, angle = span("drag_px"), math.radians(rng.uniform(-spec["drag_max_angle"], spec["drag_max_angle"]))
        end = clamp(start[0] + direction * length * math.cos(angle), start[1] + length * math.sin(angle))
        lasts = span("drag_ms")
        (lo, hi), (short, long) = spec["drag_moves"], spec["drag_gap_ms"]
        moves = rng.randint(max(int(lo), math.ceil(lasts / long)), max(int(lo), min(int(hi), math.floor(lasts / short))))
        pace = lasts / moves

        def gap() -> int:
            return round(min(long, max(short, pace * rng.uniform(0.8, 1.2))))

        jitter = spec["drag_jitter_px"]
        ux, uy = end[0] - start[0], end[1] - start[1]
        norm = math.hypot(ux, uy) or 1.0
        across = (-uy / norm, ux / norm)
        held = {"button": "left", "buttons": 1}
        events = approach(pointer, start)
        events.append(MouseEvent(after_ms=round(span("drag_gap_ms") if events else span("lead_ms")), type="mousePressed",
                                 x=start[0], y=start[1], click_count=1, **held))
        for k in range(1, moves + 1):
            t = k / moves
            # a hand speeds up and slows down (half even pace, half minimum-jerk: no move stands still)
            f = 0.5 * t + 0.5 * t ** 3 * (10 - 15 * t + 6 * t * t)
            x, y = start[0] + ux * f, start[1] + uy * f
            if k < moves:  # a hand strays from the straight line; the last move lands where it is released
                off = rng.uniform(-jitter, jitter)
                x, y = x + across[0] * off, y + across[1] * off
            events.append(MouseEvent(after_ms=gap(), type="mouseMoved", x=round(x), y=round(y), **held))
        events.append(MouseEvent(after_ms=gap(), type="mouseReleased", x=end[0], y=end[1],
                                 button="left", buttons=0, click_count=1))
        drift = spec["drag_jitter_px"] * 3
        rest = clamp(end[0] + rng.uniform(-drift, drift), end[1] + rng.uniform(-drift, drift))
        events.append(MouseEvent(after_ms=round(span("drag_gap_ms")), type="mouseMoved", x=rest[0], y=rest[1]))
        return events, rest

    rest = inner()
    kind = rng.choice(spec["wheel_kinds"])  # one hand, one device: the wheel back is turned the same way
    at = inner()
    drift = spec["wheel_drift_px"]
    back_at = clamp(at[0] + rng.uniform(-drift, drift), at[1] + rng.uniform(-drift, drift))
    direction = rng.choice((-1, 1))
    first, rested = drag(back_at, inner(), direction)
    back, _ = drag(rested, rested, -direction)
    steps = {"wheel": wheel(rest, at, -1, kind), "wheel back": wheel(at, back_at, 1, kind), "drag": first, "drag back": back}
    return ControlInputs(seed=seed, rest=rest, wheel=kind, steps=steps)


async def dispatch(bp: "BoundedPage", what: str, events: list[MouseEvent]) -> None:
    """Send a step's events at their pace, each bounded, none awaited before the next is sent:
    Chromium queues them in order, and a slow page handles them in its next frame instead of one
    frame per acknowledged event."""
    sends = []
    try:
        for e in events:
            if e.after_ms > 0:
                await asyncio.sleep(e.after_ms / 1000)
            params = e.cdp()
            sends.append(asyncio.ensure_future(bp.call(what, lambda p=params: bp.cdp.send("Input.dispatchMouseEvent", p))))
        got = await asyncio.gather(*sends, return_exceptions=True)
    finally:
        for s in sends:
            if not s.done():
                s.cancel()
    for r in got:
        if isinstance(r, BaseException):
            raise r
