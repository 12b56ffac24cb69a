"""From measurements to the ten items, the total and the one plain-English summary."""

from showcase.browser.page import PageEvents
from showcase.check import view
from showcase.check.language import judge_english
from showcase.check.measurements import Measurements
from showcase.check.models import ItemResult
from showcase.check.rubric import ITEM_ORDER, Rubric

ANIMATION_KINDS = [  # (figure, label for one, label for many)
    ("nodes", "animated node", "animated nodes"),
    ("instances", "moving instance", "moving instances"),
    ("particles", "moving particle", "moving particles"),
    ("geometries", "animated geometry", "animated geometries"),
    ("uniform_materials", "animated shader material", "animated shader materials"),
    ("morph_meshes", "morphing mesh", "morphing meshes"),
]


def _rounded(value):
    """Figures as a reader wants them: floats to 4 decimals, everywhere in nested dicts and lists."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _n(x: float) -> str:
    """1 -> '1', 0.5 -> '0.5', 12345 -> '12,345'."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.2g}" if abs(x) < 1 else f"{x:.1f}"


class _Scorer:
    def __init__(self, m: Measurements, events: PageEvents, rubric: Rubric):
        self.m, self.ev, self.r = m, events, rubric
        self.not_measured = f"not measured: {m.stopped}" if m.stopped else "not measured"
        self.good: dict[str, str] = {}  # item id -> phrase for the summary when it passed

    def item(self, id_: str, points: float, figures: dict, reason: str, good: str | None = None) -> ItemResult:
        spec = self.r.items[id_]
        if good and points >= spec.points:
            self.good[id_] = good
        return ItemResult(
            id=id_, name=spec.name, points=points, max_points=spec.points, passed=points >= spec.points,
            figures=_rounded(figures), reason=reason,
        )

    # --- 1 .. 3: the page's own record ---
    def loads(self) -> ItemResult:
        during = [msg for t, msg in self.ev.page_errors if t <= self.m.load_end_s]
        figs = {"navigation": self.m.nav_error or "completed", "page_errors_while_loading": during[:10]}
        if self.m.nav_error:
            return self.item("1", 0, figs, f"navigation did not complete: {self.m.nav_error}")
        if during:
            return self.item("1", 0, figs, f"uncaught exception while loading: {during[0]}")
        return self.item("1", 1, figs, "navigation completed without an uncaught exception", "loads without a page error")

    def ready(self) -> ItemResult:
        limit = self.r.items["2"]["ready_within_s"]
        s = self.m.ready_after_s
        figs = {"ready_after_s": s, "limit_s": limit}
        if s is None or s > limit:
            why = self.m.stopped if self.m.stopped and self.m.stopped_phase in ("navigation", "ready") else f"not within {limit} s"
            return self.item("2", 0, figs, f"window.ready never became true ({why})")
        phrase = "is ready at once" if s <= 1.0 else f"is ready after {s:.1f} s"
        return self.item("2", 1, figs, f"window.ready === true after {s:.1f} s", phrase)

    def console(self) -> ItemResult:
        ev = self.ev
        errors = ev.all_errors()
        figs = {
            "console_errors": len(ev.console_errors), "page_errors": len(ev.page_errors),
            "failed_requests": len(ev.failed_requests), "blocked_requests": [u for _, u in ev.blocked_requests][:10],
            "first_lines": errors[:10], "dialogs": [d for _, d in ev.dialogs][:10],
        }
        if errors:
            return self.item("3", 0, figs, f"{len(errors)} error(s) in the session, first: {errors[0]}")
        if self.m.nav_error:
            return self.item("3", 0, figs, "the page never finished loading, so there was no session to watch")
        return self.item("3", 1, figs, "no console error, page error or failed request in the session", "has no console errors")

    # --- 4: blank ---
    def blank(self) -> ItemResult:
        spec = self.r.items["4"]
        share = self.m.blank_share
        figs = {"off_dominant_share": share, "tolerance": spec["tolerance"], "min_share": spec["min_share"]}
        screen, drawn = self.m.blank_screen_share, self.m.blank_webgl_share
        if drawn is not None:  # 3.0: also what WebGL drew, where a person sees it (showcase/check/visible.py)
            figs.update(screen_share=screen, webgl_seen_share=drawn)
        if share is None:
            return self.item("4", 0, figs, self.not_measured)
        if drawn is not None and share < spec["min_share"] and screen >= spec["min_share"]:
            return self.item("4", 0, figs, f"no drawn WebGL world is seen: {screen:.2%} of pixels, outside the page's text, differ "
                                           f"from the dominant colour, but only {drawn:.2%} of the view shows what WebGL drew apart "
                                           "from one flat colour")
        if share < spec["min_share"]:
            return self.item("4", 0, figs, f"one flat colour: only {share:.2%} of pixels, outside the page's text, differ from the dominant colour")
        return self.item("4", 1, figs, f"{share:.1%} of pixels, outside the page's text, differ from the dominant colour", "is not blank")

    # --- 5: frame rate over tour window 2 ---
    def fps(self) -> ItemResult:
        spec = self.r.items["5"]
        if len(self.m.windows) < 2 or self.m.windows[1].get("partial"):
            return self.item("5", 0, {}, self.not_measured)
        w = self.m.windows[1]
        # 3.0: frames that drew the world where it is seen (runner: visible.world_frames); the raw
        # count of frames with any WebGL draw is kept beside it
        frames = w.get("world_frames", w["frames"])
        fps = frames / w["seconds"] if w["seconds"] > 0 else 0.0
        figs = {"fps": round(fps, 2), "frames": frames, "drawn_frames": w["frames"], "seconds": round(w["seconds"], 2),
                "renderer": self.r.renderer}
        rule = f"{_n(spec['half_fps'])} give half a point and {_n(spec['full_fps'])} the full point"
        what = f"{fps:.1f} frames per second in software rendering without a GPU"
        if fps >= spec["full_fps"]:
            return self.item("5", spec.points, figs, what, f"runs at {fps:.0f} frames per second")
        if fps >= spec["half_fps"]:
            return self.item("5", spec["half_points"], figs, f"{what}; {rule}")
        return self.item("5", 0, figs, f"{what}; {rule}")

    # --- 6a, 6b: the world and its text ---
    def world(self) -> ItemResult:
        spec = self.r.items["6a"]
        w = self.m.world
        if w is None:
            return self.item("6a", 0, {}, self.not_measured)
        c = w["canvas"]
        need = f"needs {spec['min_parts']} parts or {_n(spec['min_triangles'])} triangles"
        big = lambda p, t: p >= spec["min_parts"] or t >= spec["min_triangles"]  # noqa: E731
        agree = spec["canvas_agreement"]
        # The scene graph is the page's own object and only claims; the WebGL draws we counted
        # ourselves must back the claim, and the picture must show something.
        backed = c["parts_per_frame"] >= agree * spec["min_parts"] or c["triangles_per_frame"] >= agree * spec["min_triangles"]
        if w["scene"] and backed:
            # Culling hides part of a world, not most of it: the scene graph may claim up to
            # 1 / canvas_agreement times what was drawn in one frame, no more.
            parts = min(w["parts"], int(max(c["parts_per_frame"], 1) / agree))
            tris = min(w["triangles"], int(max(c["triangles_per_frame"], 1) / agree))
            how = "scene graph (window.scene)" if (parts, tris) == (w["parts"], w["triangles"]) else (
                "scene graph (window.scene), capped by the WebGL draws counted in one frame")
        elif w["scene"] and big(w["parts"], w["triangles"]):
            parts, tris, how = c["parts_per_frame"], c["triangles_per_frame"], (
                "WebGL draw calls in one frame: the scene graph's larger figures are not backed by what was drawn")
        else:
            parts, tris, how = c["parts_per_frame"], c["triangles_per_frame"], "canvas fallback (WebGL draw calls in one frame)"
        figs = {"parts": parts, "triangles": tris, "counted_by": how, "canvas": c,
                "scene_parts": w.get("parts", 0), "scene_triangles": w.get("triangles", 0),
                "instanced_meshes": w.get("instanced_meshes", 0)}
        if "canvas_drawn" in w:  # 3.0: `canvas` counts canvases seen on screen only; this, every live one
            figs.update(canvas_drawn=w["canvas_drawn"], canvases=self.m.visible_canvases)
        self.world_phrase = f"{_n(parts)} parts, {_n(tris)} triangles"
        if big(parts, tris) and self.m.blank_share is not None and not self.picture():
            return self.item("6a", 0, figs, f"{self.world_phrase} counted by {how}, but the frame after ready is blank")
        if big(parts, tris):
            return self.item("6a", spec.points, figs, f"{self.world_phrase} counted by {how}", self.world_phrase)
        return self.item("6a", 0, figs, f"only {self.world_phrase} counted by {how}; {need}")

    def picture(self) -> bool:
        """The frame after ready shows something besides one flat colour and the page's text."""
        share = self.m.blank_share
        return share is not None and share >= self.r.items["4"]["min_share"]

    def visible(self, id_: str, share: float | None) -> bool:
        """The picture (outside the page's text) changed at least the item's min_visible_share."""
        return share is not None and share >= self.r.items[id_]["min_visible_share"]

    def drawn(self, id_: str, gl_share: float | None) -> bool:
        """What WebGL itself drew changed in at least the item's min_visible_share of the view
        (pictures of its canvases, not of the page: CSS or a 2D canvas cannot stand in for it).
        Where the browser could not take those pictures, check.json says so and this holds."""
        if self.m.gl_pictures is False:
            return True
        return gl_share is not None and gl_share >= self.r.items[id_]["min_visible_share"]

    def english(self) -> ItemResult:
        spec = self.r.items["6b"]
        text = self.m.text
        if text is None:
            return self.item("6b", 0, {}, self.not_measured)
        ok, figs = judge_english(text, spec["max_foreign_letter_share"], spec["min_words_for_language"], spec["min_odds"])
        figs["text_sample"] = text[:300]
        figs["text_sources"] = dict(self.m.text_sources)
        figs["text_hidden"] = self.m.text_dropped
        if not text.strip():
            return self.item("6b", spec.points, figs, "no visible text", "no text")
        if ok:
            return self.item("6b", spec.points, figs, "the visible text is English", "English text")
        why = (f"{figs['foreign_letter_share']:.0%} of its letters are not Latin" if figs["foreign_letter_share"] > spec["max_foreign_letter_share"]
               else f"language '{figs['likeliest_other']}' is {figs['other_to_english']:,.0f} times as likely as English")
        return self.item("6b", 0, figs, f"the visible text is not English: {why} ({text[:60]!r})")

    # --- 7, 8: the tour ---
    def tour(self, index: int) -> ItemResult:
        id_ = "7" if index == 1 else "8"
        spec = self.r.items["7"]
        if len(self.m.windows) < index:
            return self.item(id_, 0, {}, self.not_measured)
        w = self.m.windows[index - 1]
        figs = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in w.items()}
        # 3.0: the camera object counts only where what WebGL drew moved with it
        drawn_with = view.camera_drawn(w, self.r) if w["camera"] else None
        figs["camera_drawn"] = drawn_with
        if w["camera"] and drawn_with is not False:
            figs["measured_by"] = "camera pose"
            if w["renders"] < 1:
                return self.item(id_, 0, figs, f"no frame was rendered in window {index}")
            moved = w["max_degrees"] >= spec["min_degrees"] or w["max_move"] >= spec["min_move"]
            what = f"camera turned {w['max_degrees']:.1f} degrees and moved {w['max_move']:.1%} of its distance in {w['seconds']:.1f} s"
            if w.get("partial"):
                what += " (before measuring stopped)"
                return self.item(id_, 0, figs, f"{self.not_measured} ({what}; no closing screenshot to confirm it)")
            if moved and not self.visible("7", w.get("pixel_share")):
                share = w.get("pixel_share") or 0.0
                return self.item(id_, 0, figs, f"{what}, but the picture did not change ({share:.2%} of pixels outside the page's text)")
            if moved and not self.drawn("7", w.get("gl_share")):
                return self.item(id_, 0, figs, f"{what}, but what WebGL drew did not change ({_gl(w.get('gl_share'))})")
            if moved:
                return self.item(id_, 1, figs, what, "tour")
            return self.item(id_, 0, figs, f"{what}; needs {spec['min_degrees']} degrees or {spec['min_move']:.1%}")
        if not self.m.webgl_contexts:
            figs["measured_by"] = "none (no WebGL context)"
            return self.item(id_, 0, figs, "no WebGL view: a changing 2D canvas or page is not a camera tour")
        unconfirmed = ""
        if w["camera"]:
            figs["measured_by"] = "pixels (the camera of window.scene is not the one WebGL drew with)"
            unconfirmed = (f"the camera of window.scene turned {w['max_degrees']:.1f} degrees and moved {w['max_move']:.1%} of its "
                           "distance, but what WebGL drew did not move with it (a camera nobody renders with); ")
        else:
            figs["measured_by"] = "pixels (no camera found through window.scene)"
        share = w.get("pixel_share")
        if share is None:
            return self.item(id_, 0, figs, unconfirmed + self.not_measured)  # a part window has no closing screenshot
        if view.drawn_flat(self.m.windows):
            return self.item(id_, 0, figs, unconfirmed + "WebGL drew only flat pictures (no draw with a perspective or depth): "
                                           "a flat picture that changes is not a camera tour")
        if share >= spec["min_pixel_share"] and view.view_still(w, self.r):
            kept = view.record(w).kept
            return self.item(id_, 0, figs, unconfirmed + f"{share:.0%} of pixels changed, but the view did not move: {kept:.0%} of "
                                           "what WebGL drew at the window's start was drawn again with the same transforms "
                                           "(a picture that changes in place is animation, not a tour)")
        if share >= spec["min_pixel_share"] and not self.drawn("7", w.get("gl_share")):
            return self.item(id_, 0, figs, unconfirmed + f"{share:.0%} of pixels changed without input, but what WebGL drew did not "
                                                         f"({_gl(w.get('gl_share'))})")
        if share >= spec["min_pixel_share"]:
            return self.item(id_, 1, figs, unconfirmed + f"{share:.0%} of pixels changed without input", "tour")
        return self.item(id_, 0, figs, unconfirmed + f"only {share:.1%} of pixels changed without input; a tour needs "
                                                     f"{spec['min_pixel_share']:.0%}")

    # --- 9: animation ---
    def animation(self) -> ItemResult:
        spec = self.r.items["9"]
        w = self.m.world
        tours = self.m.windows[:2]
        flat = view.drawn_flat(tours)
        if w is not None and w["scene"] and self.m.animation is not None:
            a = dict(self.m.animation)
            figs = dict(a, measured_by="scene graph snapshots")
            # 3.0: nodes that moved in the scene graph show only if something WebGL drew moved
            # beyond the view's own motion (a node drawn nowhere, or only as the camera moves, does not)
            beyond = [view.moved_beyond_view(x) for x in tours]
            figs["drawn_beyond_view"] = beyond
            if a.get("nodes") and beyond and all(b == 0 for b in beyond):
                figs["nodes_not_drawn_moving"] = a["nodes"]
                a["nodes"] = 0
            counted = [(a[k], one if a[k] == 1 else many) for k, one, many in ANIMATION_KINDS if a.get(k, 0)]
            total = sum(n for n, _ in counted)
            shares = [x["pixel_share"] for x in self.m.windows if x.get("pixel_share") is not None]
            figs["pixel_share"] = max(shares) if shares else None
            figs["gl_share"] = self._gl_max()
            if total >= spec["min_animated"] and flat:
                return self.item("9", 0, figs, f"the scene graph says {total} thing(s) move, but WebGL drew only flat pictures "
                                               "(no draw with a perspective or depth): a flat picture that changes is not a world that moves")
            if total >= spec["min_animated"] and not self.visible("9", figs["pixel_share"]):
                return self.item("9", 0, figs, f"the scene graph says {total} thing(s) move, but the picture did not change")
            if total >= spec["min_animated"] and not self.drawn("9", figs["gl_share"]):
                return self.item("9", 0, figs, f"the scene graph says {total} thing(s) move, but what WebGL drew did not "
                                               f"change ({_gl(figs['gl_share'])})")
            if total >= spec["min_animated"]:
                phrase = ", ".join(f"{_n(n)} {label}" for n, label in counted)
                return self.item("9", 1, figs, phrase, f"animates ({phrase})")
            return self.item("9", 0, figs, "nothing in the world moves besides the camera"
                             + (f" ({a['followers_excluded']} node(s) only follow the camera)" if a.get("followers_excluded") else ""))
        shares = [x["pixel_share"] for x in self.m.windows if x.get("pixel_share") is not None]
        if not shares:
            return self.item("9", 0, {}, self.not_measured)
        # 3.0: a window's change counts unless what WebGL drew says it is the view's alone (the
        # view moved, and nothing drawn moved beyond it); unknown counts, as before
        beyond = [view.moved_beyond_view(x) for x in tours]
        stills = [view.view_still(x, self.r) for x in tours]
        counting = [x["pixel_share"] for x, b, st in zip(tours, beyond, stills)
                    if x.get("pixel_share") is not None and (st is not False or b != 0)]
        share = max(shares)
        figs = {"pixel_share": share, "gl_share": self._gl_max(), "drawn_beyond_view": beyond, "view_still": stills,
                "measured_by": "pixels (no window.scene: world and camera told apart by what WebGL drew with, where it can)"}
        if not self.m.webgl_contexts:
            figs["measured_by"] = "none (no WebGL context)"
            return self.item("9", 0, figs, "no WebGL view: a changing 2D canvas or page is not a world that moves")
        if flat:
            return self.item("9", 0, figs, "WebGL drew only flat pictures (no draw with a perspective or depth): "
                                           "a flat picture that changes is not a world that moves")
        if share >= spec["fallback_min_pixel_share"] and (not counting or max(counting) < spec["fallback_min_pixel_share"]):
            return self.item("9", 0, figs, f"{share:.1%} of pixels changed without input, but only as the view moved: nothing "
                                           "WebGL drew moved beyond the view's own motion (pixel fallback, no window.scene)")
        if share >= spec["fallback_min_pixel_share"] and not self.drawn("9", figs["gl_share"]):
            return self.item("9", 0, figs, f"{share:.1%} of pixels changed without input, but what WebGL drew did not "
                                           f"({_gl(figs['gl_share'])})")
        if share >= spec["fallback_min_pixel_share"]:
            return self.item("9", 1, figs, f"{share:.1%} of pixels changed without input (pixel fallback, no window.scene)",
                             "animates (by its pixels; no window.scene)")
        return self.item("9", 0, figs, f"only {share:.2%} of pixels changed without input (pixel fallback, no window.scene)")

    def _gl_max(self) -> float | None:
        known = [x["gl_share"] for x in self.m.windows if x.get("gl_share") is not None]
        return max(known) if known else None

    # --- 10: controls ---
    def _pixels_answer(self, step: dict, bases: list[dict]) -> bool:
        """The step's changed pixels beat every baseline's (scaled up to the step's duration)."""
        spec = self.r.items["10"]
        need = 0.0
        for base in bases:
            scale = max(1.0, step["seconds"] / base["seconds"]) if base["seconds"] > 0 else 1.0
            need = max(need, base["pixel_share"] * scale)
        return step["pixel_share"] >= need * spec["ratio"] + spec["margin_pixel_share"]

    def _answers(self, kind: str, fwd: dict, back: dict, bases: list[dict], camera: bool) -> tuple[bool, dict]:
        """Does the input and its reverse answer beyond what the page does on its own?

        With a camera the answer is a reversal: counted from the last frame before each input
        reached the page, the wheel in must zoom in and the wheel out zoom out (each by margin_zoom,
        the two by twice that), the drag must turn the view one way and the drag back the other
        (the two by twice margin_degrees). A page's own motion that keeps its direction (a tour
        that zooms or turns, at any speed) moves both steps the same way and can pass at most one
        of them, so it is not subtracted: a tour that pauses on input is not charged for motion it
        did not make. Only when the page's own zoom turned round between the baseline right before
        the wheel and the one right after (their last and first frames) could it pass for a
        reversal: then its rate, taken as changing linearly between them, is subtracted from each
        step and how far that guess can be off is added to the margin. Without a camera: each
        step's changed pixels beat the baselines'. Either way both steps' pictures must change
        (min_visible_share outside the page's text).
        """
        spec = self.r.items["10"]
        base = bases[0]
        seen = min(fwd["pixel_share"], back["pixel_share"]) >= spec["min_visible_share"]
        # Both steps' WebGL change where known; the last step's is unknown when the page draws no
        # frame after it (a page that renders only on input), and one known step then decides.
        known = [s.get("gl_share") for s in (fwd, back) if s.get("gl_share") is not None]
        drawn = self.m.gl_pictures is False or (bool(known) and all(self.drawn("10", g) for g in known))
        figs = {
            "seconds": round(fwd["seconds"] + back["seconds"], 2), "baseline_seconds": round(base["seconds"], 2),
            "pixel_share": fwd["pixel_share"], "back_pixel_share": back["pixel_share"],
            "baseline_pixel_share": max(b["pixel_share"] for b in bases),
            "gl_share": fwd.get("gl_share"), "back_gl_share": back.get("gl_share"), "webgl_changed": drawn,
        }
        ok = self._pixels_answer(fwd, bases) and self._pixels_answer(back, bases)
        f, b = _response(fwd, "zoom" if kind == "wheel" else "yaw"), _response(back, "zoom" if kind == "wheel" else "yaw")
        if camera and kind == "wheel":  # in (< 0), then out (> 0)
            before, after = _rate(bases[0], 1, end=True), _rate(bases[1], 1, end=False) if len(bases) > 1 else None
            turned = before is not None and after is not None and before[1] * after[1] < 0 and \
                min(abs(before[1]), abs(after[1])) > 0.1 * max(abs(before[1]), abs(after[1]))
            (own_f, unc_f), (own_b, unc_b) = ((_own(fwd, before, after), _own(back, before, after)) if turned
                                              else ((0.0, 0.0), (0.0, 0.0)))
            zin, zout = f - own_f, b - own_b
            m = spec["margin_zoom"]
            need = 2 * m + (unc_f + unc_b) / 4
            figs.update(zoom_in=round(f, 4), zoom_out=round(b, 4), baseline_zoom=round(base.get("signed_zoom", 0.0), 4),
                        own_zoom_turned=turned, own_zoom_in=round(own_f, 4), own_zoom_out=round(own_b, 4),
                        zoom_response=round(zout - zin, 4), zoom_needed=round(need, 4))
            ok = ok or (zin <= -m and zout >= m and zout - zin >= need)
        elif camera:  # one way, then back: either way round
            d = b - f
            figs.update(yaw=round(f, 2), yaw_back=round(b, 2), baseline_yaw=round(base.get("signed_yaw", 0.0), 2),
                        yaw_response=round(abs(d), 2) if f * b < 0 else 0.0)
            ok = ok or (f * b < 0 and abs(d) >= 2 * spec["margin_degrees"])
        # a camera that moves over a picture that does not change answers nothing, nor does a
        # picture that changes while what WebGL draws stays the same
        ok = ok and seen and drawn
        figs["answered"] = ok
        return ok, figs

    def controls(self) -> ItemResult:
        s = self.m.steps
        names = ("baseline before wheel", "wheel", "wheel back", "baseline before drag", "drag", "drag back")
        # a step whose screenshot never came (measuring stopped after its frames) is not measured
        if any(s.get(n, {}).get("pixel_share") is None for n in names):
            return self.item("10", 0, {k: v for k, v in s.items()}, self.not_measured)
        camera = bool(s["wheel"]["camera"] and s["wheel"]["renders"] and s["drag"]["renders"])
        # 3.0: the camera's zoom and yaw count only if the picture was drawn with it
        trusted, confirmed, refuted = view.camera_trusted(self.m.windows[:2] + [s[n] for n in names], self.r)
        camera = camera and trusted
        # The baseline after the wheel is the one before the drag; the drag has none after it (a
        # damped drag keeps turning the view well after the reverse, which is no motion of the page's own).
        wheel_ok, wheel = self._answers("wheel", s["wheel"], s["wheel back"], [s["baseline before wheel"], s["baseline before drag"]], camera)
        drag_ok, drag = self._answers("drag", s["drag"], s["drag back"], [s["baseline before drag"]], camera)
        figs = {"wheel": wheel, "drag": drag, "measured_by": "camera pose and pixels" if camera else "pixels",
                "camera_drawn": {"confirmed": confirmed, "refuted": refuted}}
        if wheel_ok and drag_ok:
            return self.item("10", 1, figs, "the drag and the wheel each change the picture beyond the baseline",
                             "answers the mouse drag and wheel")
        failed = [(n, f) for n, f, ok in (("drag", drag, drag_ok), ("wheel", wheel, wheel_ok)) if not ok]
        unseen = " and ".join(n for n, f in failed if not f["webgl_changed"])
        beaten = " and ".join(n for n, f in failed if f["webgl_changed"])
        why = ([f"the {unseen} did not change what WebGL drew (only the page around it may have changed)"] if unseen else []) + \
              ([f"the {beaten} did not change the picture beyond the no-input baseline"] if beaten else [])
        return self.item("10", 0, figs, "; ".join(why))


def _gl(share: float | None) -> str:
    return "not measured" if share is None else f"{share:.2%} of the view"


def _response(step: dict, key: str) -> float:
    """The step's signed zoom or yaw from the last frame before its input reached the page."""
    v = step.get(f"input_{key}")
    return float(v) if isinstance(v, (int, float)) else float(step.get(f"signed_{key}", 0.0))


def _rate(base: dict, col: int, end: bool) -> tuple[float, float] | None:
    """The page's own rate of change (per second of page time) of trace column `col` (1 zoom,
    2 yaw) over a baseline's first (or last) frames: at least two frame intervals and at least
    half a second where it has them. Returns (page time of the middle, rate); None without frames."""
    rows = [r for r in base.get("tail" if end else "head") or [] if isinstance(r, list) and len(r) == 3]
    if len(rows) < 2:
        return None
    rows = rows[::-1] if end else rows
    k = 2
    while k < len(rows) - 1 and abs(rows[k][0] - rows[0][0]) < 0.5:
        k += 1
    a, z = rows[0], rows[min(k, len(rows) - 1)]
    if z[0] == a[0]:
        return None
    return (a[0] + z[0]) / 2, (z[col] - a[col]) / (z[0] - a[0])


def _own(step: dict, before: tuple[float, float], after: tuple[float, float]) -> tuple[float, float]:
    """The page's own zoom over the part of `step` after its input (its rate changing linearly
    from `before` to `after`), and how far that guess may be off (the change of rate times that time)."""
    t0, t1 = step.get("input_t0"), step.get("pose_t1")
    if not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)) or t1 <= t0:
        return 0.0, 0.0
    (ta, ra), (tb, rb) = before, after
    mid, dur = (t0 + t1) / 2, t1 - t0
    k = min(1.0, max(0.0, (mid - ta) / (tb - ta))) if tb > ta else 0.5
    return (ra + (rb - ra) * k) * dur, abs(rb - ra) * dur


def score(m: Measurements, events: PageEvents, rubric: Rubric, frozen: str | None = None,
          left: str | None = None) -> tuple[list[ItemResult], float, str]:
    sc = _Scorer(m, events, rubric)
    items = [sc.loads(), sc.ready(), sc.console(), sc.blank(), sc.fps(), sc.world(), sc.english(),
             sc.tour(1), sc.tour(2), sc.animation(), sc.controls()]
    assert [i.id for i in items] == ITEM_ORDER
    total = round(sum(i.points for i in items), 2)
    return items, total, summary(items, total, rubric.max_total, sc.good, m, frozen, left)


def summary(items: list[ItemResult], total: float, max_total: float, good: dict[str, str], m: Measurements,
            frozen: str | None, left: str | None) -> str:
    """One plain-English account: what works, then what the lost points are."""
    phrases: list[str] = []
    for id_ in ("1", "2", "3", "4", "5"):
        if id_ in good:
            phrases.append(good[id_])
    world = [good[i] for i in ("6a", "6b") if i in good]
    if "6a" in good:
        phrases.append(f"shows a world ({', '.join(world)})")
    elif "6b" in good:
        phrases.append("has English text" if good["6b"] != "no text" else "has no text to judge")
    tours = [i for i in ("7", "8") if i in good]
    if len(tours) == 2:
        phrases.append("flies the automatic camera tour in both windows")
    elif tours:
        phrases.append(f"flies the automatic camera tour in window {1 if tours == ['7'] else 2} only")
    if "9" in good:
        phrases.append(good["9"])
    if "10" in good:
        phrases.append(good["10"])
    head = f"Browser check {total:.1f} out of {_n(max_total)}: "
    if phrases:
        head += "the page " + _join(phrases) + "."
    else:
        head += "nothing passed."
    lost = [i for i in items if i.points < i.max_points]
    if not lost:
        return head
    lost_points = round(sum(i.max_points - i.points for i in lost), 2)
    groups: dict[str, list[str]] = {}  # reason -> items lost for it (a frozen page loses many for one reason)
    for i in lost:
        groups.setdefault(i.reason, []).append(f"the {_item_label(i)}")
    parts = [f"{_join(names)} ({reason})" for reason, names in groups.items()]
    verb = "is" if len(lost) == 1 else "are"
    noun = "point" if lost_points <= 1 else "points"
    tail = f" The {_n(lost_points)} lost {noun} {verb} {_join(parts)}."
    if frozen:
        tail += " The page froze: its main thread stopped answering."
    elif left and not any(left in i.reason for i in lost):
        tail += f" The page {left}."
    return head + tail


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _item_label(item: ItemResult) -> str:
    return {
        "1": "loading", "2": "ready signal", "3": "console", "4": "blank check", "5": "frame rate",
        "6a": "world size", "6b": "English text", "7": "tour in window 1", "8": "tour in window 2",
        "9": "animation", "10": "controls",
    }[item.id]
