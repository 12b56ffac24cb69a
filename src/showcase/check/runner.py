"""The browser check of one page: launch, measure every item within the time bound, score, write.

Order (rubric checks/rubric.toml): navigate -> window.ready -> screenshot of the frame after ready
(blank) -> tour window 1 -> tour window 2 (frame rate, world size) -> baseline, wheel, baseline,
drag. Whatever stops the measuring early (a frozen page, a page gone elsewhere, the time bound)
leaves the items not yet measured failed with that reason.
"""

import asyncio
import datetime as dt
import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from showcase import __version__
from showcase.browser.bounded import webgl_renderer
from showcase.browser.cdn import OfflineCdn
from showcase.browser.launch import chromium_version, launch_browser
from showcase.browser.seal import browser_pid
from showcase.check.inputs import ControlInputs, dispatch, new_seed, plan_inputs
from showcase.check.language import identifier as language_identifier
from showcase.check.measurements import Measurements
from showcase.check.models import CheckReport
from showcase.check.pixels import changed_share, off_dominant_share, text_mask, to_array
from showcase.check.rubric import Rubric, load_rubric, load_script
from showcase.check.scoring import score
from showcase.check.session import BoundedPage, StopMeasuring
from showcase.check.view import probe_rules
from showcase.check.visible import Visible, apply_visible
from showcase.check.visible_text import VisibleText, capture as capture_text, visible_text
from showcase.check.text_ink import capture as capture_ink, ink_boxes
from showcase.errors import InfraError, UserError
from showcase.host import cpu_share
from showcase.host.monitor import ForeignProcessMonitor
from showcase.io import write_bytes_atomic
from showcase.task import NpmPackage, Task, load_task


WINDOW_2 = "tour window 2"  # its closing picture is taken during the first control step
# The measuring windows in the order the probe opens them (each opens a picture of what WebGL drew).
STEP_NAMES = ("baseline before wheel", "wheel", "wheel back", "baseline before drag", "drag", "drag back")
GL_SETTLE_S = 2.0  # how long the last reading waits for the pictures still being taken


def slot_of(name: str) -> int:
    """The window whose opening picture a closing screenshot pairs with: 0 is the frame after ready
    (window 1's opening), 1 closes window 1, 2 window 2, 3-8 the control steps."""
    return 2 if name == WINDOW_2 else 3 + STEP_NAMES.index(name)


@dataclass
class Shot:
    png: bytes
    rgb: np.ndarray


class _Measure:
    def __init__(self, bp: BoundedPage, rubric: Rubric, inputs: ControlInputs):
        self.bp = bp
        self.r = rubric
        self.inputs = inputs
        self.t = rubric.timing
        self.m = Measurements()
        self.prev: Shot | None = None
        self.last_read: dict | None = None
        self.boxes: list = []
        self.frame_s: float | None = None  # seconds per drawn frame, from the last tour window
        self.picture: asyncio.Future | None = None  # a window's closing screenshot, still being taken
        self.gl: list[list | None] = []  # per window opened: what WebGL drew in it, as the probe last said
        spec = rubric.items["4"]
        self.vis = Visible(rubric.viewport, spec["seen_tolerance"], spec["tolerance"], spec["min_seen_share"])

    def mask(self) -> np.ndarray | None:
        """Pixels of the page's own text (where the browser's layout paints it), left out of the pixel measures."""
        return text_mask(self.boxes, self.r.viewport)

    async def text_boxes(self) -> list:
        """Where the page's text is painted now, ink and all (one CDP call, no page script): taken
        beside a screenshot, the mask of that screenshot."""
        what = "reading where the page's text is painted"
        snap = await self.bp.call(what, lambda: capture_ink(self.bp.cdp.send))
        if not isinstance(snap, dict):
            await self.bp.garbled(what, snap)
        return (await asyncio.to_thread(ink_boxes, snap, self.r.viewport)).boxes

    async def png(self) -> bytes:
        png = await self.bp.screenshot(self.t.screenshot_timeout_s)
        self.m.last_shot = png
        return png

    async def shot(self) -> Shot:
        png = await self.png()
        return Shot(png, to_array(png))

    async def wait_frames(self, min_s: float, min_frames: int, max_s: float, t0: float, read: str, what: str) -> dict:
        """Wait min_s, then on until min_frames new frames have shown, bounded by max_s; returns `read`'s value.

        `read` is evaluated in the page and must give {frames, ...} counted since the window opened.
        A page that showed no frame at all within max(min_s, 1 s) gets no extension: it does not
        animate with requestAnimationFrame, and waiting longer would only slow the check.
        """
        # Read once a second while waiting, so a page that leaves mid-window keeps what it showed.
        while (wait := min(t0 + min_s - time.monotonic(), self.bp.remaining() - 1)) > 0:
            await asyncio.sleep(min(wait, 1.0))
            if wait > 1.0:
                self.last_read = await self._read(read, what)
        if self.last_read is not None and self.last_read["frames"] >= min_frames:
            return self.last_read  # frames only grow: enough already, no extra frame-bound call
        while True:
            got = self.last_read = await self._read(read, what)
            frames = got["frames"]
            done = frames >= min_frames or (frames == 0 and time.monotonic() - t0 >= max(min_s, 1.0))
            if done or time.monotonic() - t0 >= max_s or self.bp.remaining() <= 1:
                return got
            await asyncio.sleep(0.1)

    async def _read(self, read: str, what: str) -> dict:
        got = await self.bp.probe(read, what)
        if not isinstance(got, dict) or not isinstance(got.get("frames"), (int, float)):
            await self.bp.garbled(what, got)
        self.note_gl(got)
        return got

    def note_gl(self, got: dict) -> None:
        """Keep the probe's latest word on what WebGL drew in each window (and take it out of the
        window's figures: the shares are set per window by apply_gl)."""
        gl = got.pop("gl", None) if isinstance(got, dict) else None
        if not isinstance(gl, dict) or not isinstance(gl.get("windows"), list):
            return
        self.m.gl_pictures = bool(gl.get("available"))
        self.vis.add_pictures(gl.get("pictures"))
        for i, shares in enumerate(gl["windows"][:16]):
            if i >= len(self.gl):
                self.gl.append(None)
            if isinstance(shares, list):
                self.gl[i] = shares

    async def settle_gl(self) -> None:
        """The probe's last word on what WebGL drew, once the pictures still being taken are done."""
        self.note_gl(await self.bp.probe(f"this.glSettled({GL_SETTLE_S * 1000:.0f})", "reading what WebGL drew",
                                         wait_s=GL_SETTLE_S))

    def gl_share(self, index: int) -> float | None:
        """Window `index`'s WebGL change as a share of the view: each canvas's changed share times
        its area on screen, over the viewport's area; None while not known."""
        shares = self.gl[index] if index < len(self.gl) else None
        if shares is None:
            return None
        vw, vh = self.r.viewport
        total = 0.0
        for row in shares:
            if not (isinstance(row, list) and len(row) == 5 and all(isinstance(v, (int, float)) for v in row)):
                continue
            share, x, y, w, h = row
            seen_w = max(0.0, min(x + w, vw) - max(x, 0.0))
            seen_h = max(0.0, min(y + h, vh) - max(y, 0.0))
            total += min(1.0, max(0.0, share)) * seen_w * seen_h
        return round(min(1.0, total / (vw * vh)), 4)

    def apply_gl(self) -> None:
        """Each window's and step's gl_share, in the order the probe opened them."""
        for i, w in enumerate(self.m.windows[:2]):
            w["gl_share"] = self.gl_share(i)
        for i, name in enumerate(STEP_NAMES):
            if name in self.m.steps:
                self.m.steps[name]["gl_share"] = self.gl_share(2 + i)

    async def window(self, index: int, t0: float, chain: bool, also: str = "", picture_later: bool = False) -> tuple[dict, dict, float]:
        """One tour window, opened at t0: camera deviation, frames, a scene snapshot, pixels changed
        since the last screenshot; with `chain` the call that closes it opens the next window;
        `also`: more fields of the closing call's answer (", key: expression"). With `picture_later`
        its screenshot is only started (self.picture, for the next window to take while it runs) and
        its pixel share is set by close_picture.

        Calls into the page are few and combined: at 1 fps each one waits for a frame.
        """
        self.last_read = None
        try:
            await self.wait_frames(self.t.window_s, self.t.window_min_frames, self.window_bound(index), t0,
                                   "this.readWindow()", "reading a measuring window")
        except StopMeasuring:
            # What the window showed before the page left or froze still counts (scoring passes
            # only a part window that already shows the tour; anything less is "not measured").
            if self.last_read is not None:
                self.m.windows.append(dict(self.last_read, index=index, pixel_share=None, gl_share=None, partial=True))
            raise
        answered: list[float] = []  # when the read came back: the next window opened then

        async def read() -> dict:
            got = await self.bp.probe(
                "({win: this.readWindow(), snap: this.snapshot(), ctx: this.contexts()"
                + also + (", next: (this.attach(), this.startWindow())" if chain else "") + "})",
                "reading a measuring window",
            )
            answered.append(time.monotonic())
            return got

        async def read_then_picture() -> dict:
            got = await read()
            self.picture = asyncio.ensure_future(self.png())
            self.picture.add_done_callback(lambda f: f.cancelled() or f.exception())  # read by controls, if they run
            return got

        if picture_later:
            (got, boxes), shot = await _all(read_then_picture(), self.text_boxes()), None
        else:
            got, shot, boxes = await _all(read(), self.shot(), self.text_boxes())
        if not isinstance(got, dict) or not isinstance(got.get("win"), dict):
            await self.bp.garbled("reading a measuring window", got)
        self.note_gl(got["win"])
        next_t0 = answered[0]
        self.m.observed_s += next_t0 - t0
        if got["win"].get("frames"):
            self.frame_s = got["win"]["seconds"] / got["win"]["frames"]
        self.m.webgl_contexts, self.m.canvas2d_contexts = got["ctx"]["webgl"], got["ctx"]["c2d"]
        self.boxes = boxes
        win = got["win"]
        win["index"] = index
        win["pixel_share"] = None
        if shot is not None:
            self.close_picture(win, shot, self.r.items["7"]["pixel_tolerance"])
            self.vis.add_screen(index, shot.rgb)
        return win, got, next_t0

    def close_picture(self, into: dict, shot: Shot, tolerance: float) -> None:
        """A window's or step's changed-pixel share, from the picture before it to `shot`, its closing one."""
        if self.prev is not None:
            into["pixel_share"] = round(changed_share(self.prev.rgb, shot.rgb, tolerance, self.mask()), 4)
        self.prev = shot

    # --- the plan: windows and steps counted in frames, bounded in seconds, the sum inside the bound ---
    STEPS = 6

    def step_need_s(self) -> float:
        """What one control step needs at the page's frame rate: its input handled, its frames, a screenshot."""
        return max(self.t.step_s, (self.t.step_min_frames + 3) * (self.frame_s or 0.5))

    def window_bound(self, index: int) -> float:
        """A tour window may be extended for frames only as far as leaves the rest its time."""
        rest = self.STEPS * self.step_need_s() + (self.t.window_s + 2 * (self.frame_s or 0.5) if index == 1 else 0) + 2
        return max(self.t.window_s, min(self.t.window_max_s, self.bp.remaining() - rest))

    async def until_pictured(self) -> None:
        """Before a step's input: wait (beside its screenshot) until the page drew its first frame in
        the step, whose WebGL picture is what the step's answer is compared with. Only a page that
        drew in tour window 2 is waited for, at most a few of its frame times."""
        if self.frame_s is None or self.m.gl_pictures is False:
            return
        wait_s = min(self.quiet_s(), max(0.0, self.bp.remaining() - 2))
        await self.bp.probe(f"this.pictured({wait_s * 1000:.0f})", "waiting for a step's first frame", wait_s=wait_s)

    def quiet_s(self) -> float:
        """How long a step without any drawn frame lasts before the page is taken for one that does not
        draw: a few of its own frame times (a page at 0.6 fps draws none in most 1 s spans), at least 1 s."""
        return max(1.0, 2.5 * (self.frame_s or 0.0))

    def step_bound(self, steps_left: int, input_s: float = 0.0) -> float:
        """How long a step may wait for its frames, from the call that waits (sent as its input begins)."""
        # a screenshot and an input each wait for a frame or two besides the step's own frames;
        # short of time a step still gets the time its input takes to send (up to 0.8 s: a
        # person's drag), that input's frame and one more, never the bare 0.7 s
        frame = self.frame_s or 0.5
        floor = min(self.t.step_max_s, max(self.t.step_s, 2.5 * frame) + input_s)
        return max(floor, min(self.t.step_max_s, (self.bp.remaining() - 1) / steps_left - 4 * frame))

    async def controls(self, window_2: dict, t0: float) -> None:
        """Six chained steps: baseline, wheel in, wheel out, baseline, drag, drag back.

        Each input is followed by its reverse: a page's own motion (a zooming or turning tour)
        moves the same way in both, an answer changes sign with the input. The baseline after the
        wheel is also the one before the drag. A step ends in the page (one awaited call that also
        opens the next window), then its screenshot is taken, then the next input is dispatched and
        the next step's call sent at once: at 1 fps each call into the page waits for a frame, so a
        step costs its frames and little else.
        The first step's window was opened by window 2's closing call, whose picture (self.picture)
        is taken while that step runs.
        """
        spec = self.r.items["10"]
        inputs = [None if name not in self.inputs.steps else (lambda name=name: self.send(name)) for name in STEP_NAMES]
        plan = list(zip(STEP_NAMES, inputs))
        shots: list[tuple[str, bytes]] = []
        try:
            await self._steps(plan, t0, shots)
        finally:
            # Pictures are decoded and compared after the steps, off the time the page is watched.
            for name, png in shots:
                shot = Shot(png, to_array(png))
                if name == WINDOW_2:
                    self.close_picture(window_2, shot, self.r.items["7"]["pixel_tolerance"])
                else:
                    self.close_picture(self.m.steps[name], shot, spec["pixel_tolerance"])
                self.vis.add_screen(slot_of(name), shot.rgb)

    async def _steps(self, plan: list, t0: float, shots: list[tuple[str, bytes]]) -> None:
        t = self.t
        # the screenshot that closes the step before (or tour window 2), taken while a baseline runs
        pending, self.picture = self.picture, None
        spent = {"inputs": 0.0, "frames": 0.0, "screenshots": 0.0}
        try:
            for i, (name, action) in enumerate(plan):
                # The input is dispatched, not awaited: its acknowledgement can take a second or
                # more (a wheel's, even on a fast page) and the step waits in the page anyway,
                # until the input's last event has reached it and a frame was drawn after.
                dispatch, expect = (None, None) if action is None else action()
                bound = self.step_bound(len(plan) - i, self.inputs.lasts_s(name))
                more = "true" if i < len(plan) - 1 else "false"
                after_input = "true" if action is not None else "false"
                what = f"reading the {name} step"
                c = time.monotonic()
                call = self.bp.probe(
                    f"this.waitFrames({int(t.step_min_frames)}, {t.step_s * 1000:.0f}, {bound * 1000:.0f}, {more}, {after_input}, "
                    f"{json.dumps(expect)}, {self.quiet_s() * 1000:.0f})", what, wait_s=bound)
                if dispatch is not None:
                    got = await _beside(call, dispatch, spent)
                elif pending is not None:
                    # The picture is kept even when the step fails: it closes what came before.
                    got, png = await asyncio.gather(call, pending, return_exceptions=True)
                    pending = None
                    if not isinstance(png, BaseException):
                        shots.append((plan[i - 1][0] if i else WINDOW_2, png))
                    for r in (got, png):
                        if isinstance(r, BaseException):
                            raise r
                else:
                    got = await call
                if not isinstance(got, dict) or not isinstance(got.get("frames"), (int, float)):
                    await self.bp.garbled(what, got)
                self.note_gl(got)
                now = time.monotonic()
                spent["frames"] += now - c
                self.m.observed_s += now - t0
                t0 = now
                self.m.steps[name] = got
                # The step is over in the page (the next window is open). Its closing screenshot
                # must come before the next input; before a baseline it is taken while that runs.
                nxt = plan[i + 1][1] if i + 1 < len(plan) else None
                before = shots[-1][1] if action is not None and shots else None
                if i + 1 < len(plan) and nxt is None:
                    pending = self._timed_shot(spent, before)
                    continue
                if i + 1 < len(plan):
                    shot, _ = await _all(self._timed_shot(spent, before), self.until_pictured())
                    shots.append((name, shot))
                    continue
                # The last step: its picture, and beside it the pictures of what WebGL drew after it.
                png, gl = await asyncio.gather(self._timed_shot(spent, before), self.settle_gl(), return_exceptions=True)
                if not isinstance(png, BaseException):
                    shots.append((name, png))
                for r in (png, gl):
                    if isinstance(r, BaseException):
                        raise r
        finally:
            if isinstance(pending, asyncio.Future):
                pending.cancel()
            elif pending is not None:
                pending.close()
            for k, v in spent.items():
                self.m.phases[f"controls: {k}"] = round(v, 2)

    async def _timed_shot(self, spent: dict, before: bytes | None = None) -> bytes:
        """A step's closing picture. One identical to `before` (the picture that opened a step with an
        input) is taken once more: on a page at about 1 fps a screencast's first frame was now and then
        the previous picture's frame again (the same bytes while the camera had moved), which would
        read as no answer."""
        c = time.monotonic()
        png = await self.bp.screenshot(self.t.screenshot_timeout_s)
        if before is not None and png == before:
            png = await self.bp.screenshot(self.t.screenshot_timeout_s)
        spent["screenshots"] += time.monotonic() - c
        self.m.last_shot = png
        return png

    async def read_text(self) -> VisibleText:
        """All the text a person sees now, from the browser's layout (one CDP call, no page script)."""
        what = "reading the visible text"
        snap = await self.bp.call(what, lambda: capture_text(self.bp.cdp.send))
        if not isinstance(snap, dict):
            await self.bp.garbled(what, snap)
        spec = self.r.items["6b"]
        return visible_text(snap, self.r.viewport, spec["min_opacity"], spec["min_text_px"], spec["max_text_blur"])

    def note_text(self, seen: VisibleText) -> None:
        m = self.m
        m.text = _join_text(m.text, seen.text)
        for k, v in seen.sources.items():
            m.text_sources[k] = max(m.text_sources.get(k, 0), v)
        m.text_dropped = max(m.text_dropped, seen.dropped)

    def send(self, step: str) -> tuple[asyncio.Future, dict]:
        """The step's events (the seeded plan: showcase.check.inputs), dispatched at their pace; and
        what the probe must see of them before the step may end."""
        events = self.inputs.steps[step]
        return asyncio.ensure_future(dispatch(self.bp, f"mouse {step}", events)), self.inputs.expect(step)

    async def run(self) -> Measurements:
        m, bp, t = self.m, self.bp, self.t
        phase_t = time.monotonic()
        phase = "navigation"

        def mark(next_phase: str) -> None:
            nonlocal phase_t, phase
            now = time.monotonic()
            m.phases[phase] = round(now - phase_t, 2)
            phase, phase_t = next_phase, now

        try:
            nav_start = bp.events.now()
            m.nav_error = await bp.goto(t.navigation_timeout_s)
            mark("ready")
            m.ready_after_s = await bp.wait_ready(nav_start, t.ready_timeout_s, t.ready_poll_ms / 1000)
            # "While loading" ends once the checker has seen ready (or gave up on it) and one call
            # has made the round trip through the page's main thread: events the page sent before
            # (an exception thrown right after setting ready) have all arrived by then.
            m.load_end_s = bp.events.now()
            mark("after ready")
            # The world and text as they are at ready, first of all: a page that freezes or leaves
            # soon after keeps what it showed.
            early, text = await _all(bp.probe("(this.attach(), {clock: this.frames(), world: this.world()})",
                                               "counting the world at ready"), self.read_text())
            if not isinstance(early, dict) or not isinstance(early.get("world"), dict) or not isinstance(early.get("clock"), dict):
                await bp.garbled("counting the world at ready", early)
            m.world = early["world"]
            self.note_text(text)
            m.load_end_s = bp.events.now()
            # The pointer rests (at the plan's point) from here on, as a viewer's would; moving it
            # there now (not just before the controls) saves a frame-bound call and a screenshot
            # later. It is moved while the frame after ready is awaited: both are over before window 1.
            rx, ry = self.inputs.rest
            move = bp.call("mouse move", lambda: bp.page.mouse.move(rx, ry))
            await _all(move, self.wait_frames(0, t.after_ready_frames, t.after_ready_max_s, time.monotonic(),
                                               _after_ready(early["world"], early["clock"]), "waiting for a frame after ready"))
            mark("tour window 1")
            # One call: the snapshot the animation item starts from and the first window opened; the
            # picture of the frame after ready is taken beside it, and where the page's text is painted.
            opened: list[float] = []

            async def open_first() -> object:
                got = await bp.probe("({open: (this.snapshot(), this.attach(), this.startWindow())})",
                                     "opening the first measuring window")
                opened.append(time.monotonic())
                return got

            _, self.prev, self.boxes = await _all(open_first(), self.shot(), self.text_boxes())
            m.blank_share = round(off_dominant_share(self.prev.rgb, self.r.items["4"]["tolerance"], self.mask()), 4)
            self.vis.add_screen(0, self.prev.rgb)
            win, got, t0 = await self.window(1, opened[0], chain=True)
            m.windows.append(win)
            # the text once the page has run a while (a HUD filled in after ready), read while window 2 runs
            self.note_text(await self.read_text())
            mark("tour window 2")
            # Window 2's closing call also counts the world, compares the snapshots and opens the
            # first control step (a baseline, no input): window 2's picture is taken while it runs.
            win, after, t0 = await self.window(2, t0, chain=True, picture_later=True,
                                              also=", world: this.world(), pairs: [this.compare(0, 1), this.compare(1, 2)]")
            m.windows.append(win)
            if not isinstance(after.get("world"), dict) or not isinstance(after.get("pairs"), list):
                await bp.garbled("counting the world and what moved in it", after)
            m.world = _larger_world(m.world, after["world"])
            m.animation = _max_counts([p for p in after["pairs"] if isinstance(p, dict)])
            mark("controls")
            await self.controls(win, t0)
            mark("done")
        except StopMeasuring as stop:
            m.stopped, m.stopped_phase = str(stop), phase
            mark("stopped")
        except InfraError:
            raise
        except Exception:
            # Leftovers of a page that left (an answer half from the next document) may trip our
            # reading; that is still the page leaving. Without a leave it is our own fault: raise.
            if not bp.left:
                raise
            m.stopped, m.stopped_phase = f"the page {bp.left}", phase
            mark("stopped")
        if self.picture is not None:  # measuring stopped between window 2 and the controls
            self.picture.cancel()
        self.apply_gl()
        if bp.canvas_max:  # the probe's pushed maxima outlive a page that froze or left
            world = m.world or {"scene": False, "parts": 0, "triangles": 0, "canvas": {}}
            canvas = dict(world.get("canvas") or {})
            for k, v in bp.canvas_max.items():
                canvas[k] = max(canvas.get(k, 0), v)
            m.world = dict(world, canvas=canvas)
        apply_visible(m, self.vis, bp.canvas_max_by_id, self.r, STEP_NAMES)
        if m.ready_after_s is None and bp.ready_at_ms is not None:
            m.ready_after_s = round(bp.ready_at_ms / 1000, 2)  # seen by the binding after the wait ended
        return m


def _after_ready(world: dict, clock: dict) -> str:
    """What waiting for the frame after ready reads: with a scene, frames the page drew once its
    camera was seen (the first window's snapshot must know the camera, or a sky that follows it
    counts as animation); without one, frames of the browser's loop."""
    if world.get("scene"):
        return f"(f => ({{frames: f.posed > 0 ? f.frames - {int(clock.get('frames') or 0)} : 0}}))(this.frames())"
    return f"({{frames: this.frames().ticks - {int(clock.get('ticks') or 0)}}})"


def _join_text(early: str | None, late: str | None) -> str | None:
    """All the text the page showed, at ready and later (the English item judges it all)."""
    if early is None or late is None or late == early:
        return late if late is not None else early
    return f"{early}\n{late}"


def _larger_world(early: dict | None, late: dict) -> dict:
    """The world at ready or later, whichever is larger (a page may tear its world down or freeze)."""
    def size(w: dict | None) -> tuple:
        if not w:
            return (-1, -1)
        c = w.get("canvas") or {}
        return (max(w.get("parts", 0), c.get("parts_per_frame", 0)), max(w.get("triangles", 0), c.get("triangles_per_frame", 0)))

    if early is None:
        return late
    # The canvas figures are maxima over the whole session so far: the later reading holds both.
    best = dict(early if size(early) > size(late) else late)
    best["canvas"] = late.get("canvas", best.get("canvas"))
    return best


async def _beside(call, dispatch: asyncio.Future, spent: dict):
    """Await a page call while an input's dispatch runs: a failed dispatch ends the call at once;
    the dispatch is over before the call's answer is returned (time waited for it after the
    answer goes to spent["inputs"])."""
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait({task, dispatch}, return_when=asyncio.FIRST_EXCEPTION)
        if dispatch.done() and dispatch.exception() is not None:
            raise dispatch.exception()
        got = await task
        c = time.monotonic()
        await dispatch
        spent["inputs"] += time.monotonic() - c
        return got
    finally:
        for f in (task, dispatch):
            if not f.done():
                f.cancel()


async def _all(*calls) -> tuple:
    """Run bounded page calls side by side; all finish before the first failure is raised."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return tuple(results)


def offline_cdn(npm_dir: Path | None, task: Task | None = None) -> OfflineCdn:
    """The offline CDN of the task's import map (None: the default task's)."""
    task = task or load_task()
    return _offline_cdn(npm_dir, tuple((p.name, p.version, p.integrity) for p in task.npm))


@lru_cache(maxsize=4)
def _offline_cdn(npm_dir: Path | None, packages: tuple) -> OfflineCdn:
    """One offline CDN per npm folder, package list and process: its tarballs are unpacked once, not per check."""
    return OfflineCdn([NpmPackage(name=n, version=v, integrity=i) for n, v, i in packages], npm_dir)


def _warm(cdn: OfflineCdn, task: Task | None = None) -> None:
    for url in (task or load_task()).import_map.values():
        if not url.endswith("/"):
            cdn.lookup(url)


@lru_cache(maxsize=1)
def cached_chromium_version() -> str:
    return chromium_version()


def _max_counts(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    keys = [k for k in rows[0] if k != "seconds"]
    return {k: max(r.get(k, 0) for r in rows) for k in keys}


async def check_page(
    html: bytes,
    *,
    npm_dir: Path | None = None,
    screenshot_path: Path | None = None,
    page_name: str = "<bytes>",
    extra_browser_args: list[str] | None = None,
    task: Task | None = None,
    seed: int | None = None,
) -> CheckReport:
    """Score one page on the ten items. The page's faults are scored; ours raise InfraError.

    task: whose import map the offline CDN answers (None: the default task's).
    seed: draws the control steps' inputs (None: a new one; check.json records it either way)."""
    rubric = load_rubric()
    inputs = plan_inputs(new_seed() if seed is None else seed, rubric)
    # The probe hands its api to us with a token no page can know (it lives only in the probe's closure).
    token = f"showcase-probe-{uuid.uuid4().hex}"
    scripts = [load_script("ready.js"), load_script("probe.js").replace("%TOKEN%", token).replace("%VIEW_RULES%", probe_rules(rubric))]
    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    cdn = offline_cdn(npm_dir, task)
    # Unpack the import-map files while the browser starts (the first time in a process takes ~1 s).
    warm = asyncio.create_task(asyncio.to_thread(_warm, cdn, task))
    chromium = asyncio.create_task(asyncio.to_thread(cached_chromium_version))
    # the language model loads (about 0.8 s, once per process) while the browser starts and the page runs
    languages = asyncio.create_task(asyncio.to_thread(language_identifier))
    marker = f"--showcase-check={uuid.uuid4().hex}"  # tags our browser process for the CPU meter
    # Entered before Playwright starts its driver and the browser: both inherit the CPU group.
    with cpu_share.raised(rubric.cpu_weight_factor) as share:
        async with launch_browser(rubric.renderer, [marker] + list(extra_browser_args or [])) as browser:
            # Two samples, no thread: nothing of ours samples while the page is timed.
            cpu = ForeignProcessMonitor(interval_s=None, run_pids=[browser_pid(marker)], own_descendants=False)
            await asyncio.to_thread(cpu.start)
            renderer = await webgl_renderer(browser)
            # The page's share of the time bound starts when its page opens: a slow launch is the machine's.
            deadline = time.monotonic() + rubric.timing.max_check_s - rubric.timing.close_reserve_s
            bp = await BoundedPage.open(
                browser, html, cdn, rubric.viewport, scripts, deadline, rubric.timing.call_timeout_s
            )
            bp.probe_token = token
            await warm
            launched_s = round(time.monotonic() - started, 2)
            measure = _Measure(bp, rubric, inputs)
            try:
                # Every call inside is bounded; this outer bound is the last line of defence.
                await asyncio.wait_for(measure.run(), max(1.0, deadline - time.monotonic() + 5))
            except asyncio.TimeoutError:
                measure.m.stopped = measure.m.stopped or "the check's time bound was reached"
            finally:
                await asyncio.to_thread(cpu.stop)
                foreign = cpu.foreign_cores()
                await bp.close()
            m = measure.m
            m.phases = {"launch": launched_s, **m.phases}
            # errors the page cancelled before the browser could report them: the probe saw them first
            bp.events.page_errors.extend(bp.cancelled_errors())
    chromium_v = await chromium
    await languages
    items, total, summary = score(m, bp.events, rubric, frozen=bp.frozen, left=bp.left)
    if screenshot_path is not None and m.last_shot is not None:
        write_bytes_atomic(Path(screenshot_path), m.last_shot)
    return CheckReport(
        page=page_name,
        page_sha256=hashlib.sha256(html).hexdigest(),
        rubric_version=rubric.version,
        showcase_version=__version__,
        chromium_version=chromium_v,
        renderer=rubric.renderer,
        webgl_renderer=renderer,
        viewport=rubric.viewport,
        started_at=started_at,
        seconds=round(time.monotonic() - started, 2),
        observed_seconds=round(m.observed_s, 2),
        items=items,
        total=total,
        max_total=rubric.max_total,
        summary=summary,
        errors=bp.events.all_errors(),
        blocked_requests=[u for _, u in bp.events.blocked_requests],
        dialogs=[d for _, d in bp.events.dialogs],
        navigated_away_to=bp.navigated_away,
        left=bp.left,
        frozen=bp.frozen,
        stopped=m.stopped,
        stopped_phase=m.stopped_phase,
        foreign_cpu_cores=foreign,
        cpu_share=share,
        webgl_pictures=m.gl_pictures,
        phases=m.phases,
        control_inputs=inputs,
    )


def read_page(path: Path) -> bytes:
    """The page's bytes; a missing, unreadable or non-HTML file is a UserError (one line, exit 2)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, not an HTML file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not looks_like_html(data):
        raise UserError(f"{path}: not an HTML file (no HTML tags in its text)")
    return data


def looks_like_html(data: bytes) -> bool:
    """Text without NUL bytes holding at least one HTML tag, in any ASCII-compatible encoding
    (UTF-8, Latin-1, ...): the browser decodes the page, so the tags are looked for byte-wise."""
    if b"\x00" in data[:4096]:
        return False
    text = data.decode("latin-1")  # never fails; tags are ASCII in every such encoding
    return re.search(r"<\s*(!doctype\s+html|html|head|body|script|canvas|div|title|meta|style)\b", text, re.I) is not None


def check_file(path: Path, out_dir: Path, npm_dir: Path | None = None, seed: int | None = None) -> CheckReport:
    """Check one file; write out_dir/check.json and out_dir/screenshot.png atomically."""
    html = read_page(path)
    out_dir = Path(out_dir)
    report = asyncio.run(
        check_page(html, npm_dir=npm_dir, screenshot_path=out_dir / "screenshot.png", page_name=str(path), seed=seed)
    )
    write_report(report, out_dir)
    return report


def write_report(report: CheckReport, out_dir: Path) -> None:
    write_bytes_atomic(Path(out_dir) / "check.json", (report.model_dump_json(indent=2) + "\n").encode())
