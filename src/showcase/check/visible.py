"""What a person sees of each WebGL canvas: the probe's pictures of what WebGL drew, laid over the
screenshots of the page.

The probe takes a small picture (128 x 72) of each WebGL canvas right after the page drew a frame:
at the opening of every measuring window and at a canvas's first drawn frame. Each screenshot of
the check is paired with the pictures of the window it opens (its "slot": 0 is the frame after
ready, 1 the close of tour window 1, 2 of tour window 2, 3-8 of the six control steps). Over a
canvas's box on screen a grid of 32 x 18 cells compares the two: a cell is seen when the screenshot
there shows what WebGL drew (mean colour within a tolerance, allowing the page a frame of motion
between the two). A canvas at opacity 0, covered, off-screen or hidden has no seen cell, whatever
it draws; a canvas's "seen share" is the share of its drawn cells (those that differ from its
dominant colour) that are seen.

From that: what WebGL drew changed in a window only where it was seen (`gl_share`), the frame after
ready is a picture only where a drawn world is seen, and only canvases seen on screen count toward
the world's size and the frame rate.
"""

import base64
import binascii
from dataclasses import dataclass, field

import numpy as np

PIC_W, PIC_H = 128, 72          # the probe's pictures (checks/probe.js)
GRID_W, GRID_H = 32, 18         # cells over a canvas's box on screen
CELL = PIC_W // GRID_W          # picture pixels per cell side (4)
MAX_RECORDS = 64                # pictures kept per check (a page may make canvases without end)
MAX_CANVASES_PER_RECORD = 16
OPAQUE = 250                    # alpha from which a picture's pixel hides what is behind its canvas


@dataclass
class CanvasPicture:
    """One canvas as WebGL drew it: its probe id, its box on screen (CSS px) and RGBA (72, 128, 4)."""

    cid: int
    rect: tuple[float, float, float, float]
    rgba: np.ndarray
    seq: int


@dataclass
class Seen:
    """One canvas at one slot: which cells of its grid show what WebGL drew."""

    cells: np.ndarray        # bool (18, 32): seen
    drawn: np.ndarray        # bool (18, 32): the cell holds something besides the canvas's dominant colour
    area: np.ndarray         # float (18, 32): the cell's area on the viewport, px

    @property
    def share(self) -> float | None:
        """Share of the drawn cells on the viewport that are seen; None when nothing is drawn there."""
        drawn = self.drawn & (self.area > 0)
        n = int(drawn.sum())
        return None if n == 0 else float((self.cells & drawn).sum() / n)


@dataclass
class Visible:
    """The pictures and screenshots of one check, and what they say about each canvas."""

    viewport: tuple[int, int]
    tolerance: float              # mean colour difference within which a cell agrees
    pixel_tolerance: int = 10     # a picture's pixel differs from another (or from the dominant colour)
    min_seen_share: float = 0.5   # a canvas is seen when this share of its drawn cells is
    records: dict[tuple[int, int, int], list[CanvasPicture]] = field(default_factory=dict)
    screens: dict[int, np.ndarray] = field(default_factory=dict)   # slot -> RGB uint8 screenshot
    _seen: dict[tuple[int, int], Seen | None] = field(default_factory=dict)

    # --- what the check collects ---
    def add_pictures(self, raw: object) -> None:
        """Pictures as the probe sends them: [index or -1, windows opened before, order, rows]."""
        if not isinstance(raw, list):
            return
        for rec in raw[:MAX_RECORDS]:
            if len(self.records) >= MAX_RECORDS:
                return
            if not (isinstance(rec, list) and len(rec) == 4 and all(isinstance(v, int) for v in rec[:3])
                    and isinstance(rec[3], list)):
                continue
            index, first, seq, rows = rec
            pics = [p for p in (_picture(row, seq) for row in rows[:MAX_CANVASES_PER_RECORD]) if p is not None]
            self.records[(index, first, seq)] = pics
            self._seen.clear()

    def add_screen(self, slot: int, rgb: np.ndarray) -> None:
        self.screens[slot] = rgb.astype(np.uint8)
        self._seen.clear()

    # --- pictures by slot ---
    def pictures_at(self, slot: int) -> dict[int, CanvasPicture]:
        """Each canvas's latest picture taken by the window `slot` opens: the window pictures up to
        it and the first-frame pictures taken before it opened."""
        best: dict[int, CanvasPicture] = {}
        for (index, first, _seq), pics in self.records.items():
            if (0 <= index <= slot) or (index < 0 and first <= slot):
                for p in pics:
                    if p.cid not in best or p.seq > best[p.cid].seq:
                        best[p.cid] = p
        return best

    def seen(self, slot: int, pic: CanvasPicture) -> Seen | None:
        """Which cells of `pic` the screenshot of `slot` shows; None without that screenshot."""
        key = (slot, id(pic))
        if key not in self._seen:
            screen = self.screens.get(slot)
            self._seen[key] = None if screen is None else seen_cells(pic, screen, self.viewport, self.tolerance,
                                                                      self.pixel_tolerance)
        return self._seen[key]

    def seen_share(self, slot: int, cid: int) -> float | None:
        pic = self.pictures_at(slot).get(cid)
        s = self.seen(slot, pic) if pic is not None else None
        return s.share if s is not None else None

    def canvas_seen(self, cid: int, slots) -> bool:
        """The canvas showed its drawing on screen (at least min_seen_share of its drawn cells seen) at one of `slots`."""
        return any((s := self.seen_share(k, cid)) is not None and s >= self.min_seen_share for k in slots)

    def canvases(self) -> set[int]:
        return {p.cid for pics in self.records.values() for p in pics}

    # --- the figures ---
    def change_share(self, slot: int) -> float | None:
        """What WebGL drew changed from slot to slot + 1, where it was seen both times, as a share of
        the view: per canvas and cell, the share of its pixels that changed (in the pictures and on
        screen alike), times the cell's area on the viewport, over the viewport's area. A canvas
        without an earlier picture counts none. None when a screenshot of either slot is missing."""
        if slot not in self.screens or slot + 1 not in self.screens:
            return None
        before, after = self.pictures_at(slot), self.pictures_at(slot + 1)
        total = 0.0
        for cid, b in after.items():
            a = before.get(cid)
            if a is None or a is b:
                continue
            sa, sb = self.seen(slot, a), self.seen(slot + 1, b)
            if sa is None or sb is None:
                continue
            changed = changed_cells(a.rgba, b.rgba, self.pixel_tolerance)
            # the screen must have changed there too: a still layer that happens to match a
            # canvas it covers (a sky of the same blue) does not show the canvas's motion
            screen_a, _ = sample_screen(self.screens[slot], a.rect)
            screen_b, on_b = sample_screen(self.screens[slot + 1], b.rect)
            moved = (np.abs(screen_a - screen_b).max(axis=-1) > self.pixel_tolerance) & on_b
            shown = np.minimum(changed, moved.reshape(GRID_H, CELL, GRID_W, CELL).mean(axis=(1, 3)))
            total += float((shown * (sa.cells & sb.cells) * sb.area).sum())
        vw, vh = self.viewport
        return round(min(1.0, total / (vw * vh)), 4)

    def picture_share(self, slot: int) -> float:
        """Share of the view where a seen cell of a seen canvas shows a pixel WebGL drew apart from
        its canvas's dominant colour (item 4's measure on what WebGL drew): a flat canvas, or one
        nobody sees (a few cells of a covered canvas may match the layer over it by chance), is 0."""
        vw, vh = self.viewport
        total = 0.0
        for pic in self.pictures_at(slot).values():
            s = self.seen(slot, pic)
            if s is None or s.share is None or s.share < self.min_seen_share:
                continue
            off = off_dominant(pic.rgba, self.pixel_tolerance) & (pic.rgba[..., 3] >= OPAQUE)
            per_cell = off.reshape(GRID_H, CELL, GRID_W, CELL).mean(axis=(1, 3))
            total += float((per_cell * s.cells * s.area).sum())
        return round(min(1.0, total / (vw * vh)), 4)

    def canvas_figures(self) -> dict[int, dict]:
        """Per canvas pictured: its seen share at each slot with a screenshot (for check.json)."""
        out: dict[int, dict] = {}
        for cid in sorted(self.canvases()):
            shares = {k: self.seen_share(k, cid) for k in sorted(self.screens)}
            out[cid] = {"seen_share": {str(k): (None if v is None else round(v, 3)) for k, v in shares.items()}}
        return out


def _picture(row: object, seq: int) -> CanvasPicture | None:
    if not (isinstance(row, list) and len(row) == 7 and isinstance(row[0], int)
            and all(isinstance(v, (int, float)) for v in row[1:5]) and isinstance(row[6], str)):
        return None
    cid, x, y, w, h, fmt, data = row
    if not all(np.isfinite(v) for v in (x, y, w, h)) or w <= 0 or h <= 0:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != PIC_W * PIC_H * 4:
        return None
    rgba = np.frombuffer(raw, dtype=np.uint8).reshape(PIC_H, PIC_W, 4)
    if isinstance(fmt, str) and fmt.upper().startswith("BGR"):
        rgba = rgba[..., [2, 1, 0, 3]]
    if isinstance(fmt, str) and fmt.upper().endswith("X"):  # no alpha channel: opaque
        rgba = rgba.copy()
        rgba[..., 3] = 255
    return CanvasPicture(cid, (float(x), float(y), float(w), float(h)), rgba, seq)


def off_dominant(rgba: np.ndarray, tolerance: int) -> np.ndarray:
    """bool (72, 128): pixels differing by more than `tolerance` in some channel from the picture's
    most frequent RGBA value."""
    packed = rgba.astype(np.uint32)
    packed = (packed[..., 0] << 24) | (packed[..., 1] << 16) | (packed[..., 2] << 8) | packed[..., 3]
    values, counts = np.unique(packed.ravel(), return_counts=True)
    d = int(values[np.argmax(counts)])
    dominant = np.array([(d >> 24) & 255, (d >> 16) & 255, (d >> 8) & 255, d & 255], dtype=np.int16)
    return np.abs(rgba.astype(np.int16) - dominant).max(axis=-1) > tolerance


def changed_cells(a: np.ndarray, b: np.ndarray, tolerance: int) -> np.ndarray:
    """float (18, 32): per cell, the share of its picture pixels that changed by more than `tolerance`."""
    changed = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=-1) > tolerance
    return changed.reshape(GRID_H, CELL, GRID_W, CELL).mean(axis=(1, 3))


def cell_areas(rect: tuple[float, float, float, float], viewport: tuple[int, int]) -> np.ndarray:
    """float (18, 32): each cell's area on the viewport, in px (0 off it)."""
    x, y, w, h = rect
    xs = x + np.arange(GRID_W + 1) * (w / GRID_W)
    ys = y + np.arange(GRID_H + 1) * (h / GRID_H)
    cw = np.clip(xs[1:], 0, viewport[0]) - np.clip(xs[:-1], 0, viewport[0])
    ch = np.clip(ys[1:], 0, viewport[1]) - np.clip(ys[:-1], 0, viewport[1])
    return np.outer(ch, cw)


def sample_screen(screen: np.ndarray, rect: tuple[float, float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """The screenshot at the centre of each picture pixel's place on screen: RGB (72, 128, 3) int16
    and a bool mask of the samples that fall on the viewport."""
    vh, vw = screen.shape[:2]
    x, y, w, h = rect
    px = np.floor(x + (np.arange(PIC_W) + 0.5) * (w / PIC_W)).astype(np.int64)
    py = np.floor(y + (np.arange(PIC_H) + 0.5) * (h / PIC_H)).astype(np.int64)
    ok = ((py >= 0) & (py < vh))[:, None] & ((px >= 0) & (px < vw))[None, :]
    sampled = screen[np.clip(py, 0, vh - 1)][:, np.clip(px, 0, vw - 1)].astype(np.int16)
    return sampled, ok


def _cell_mean(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per cell, the mean of `values` (72, 128, C) over the pixels where weight (72, 128) is true."""
    c = values.shape[-1]
    v = (values * weight[..., None]).reshape(GRID_H, CELL, GRID_W, CELL, c).sum(axis=(1, 3))
    n = weight.reshape(GRID_H, CELL, GRID_W, CELL).sum(axis=(1, 3))
    return v / np.maximum(n, 1)[..., None]


def seen_cells(pic: CanvasPicture, screen: np.ndarray, viewport: tuple[int, int], tolerance: float,
               pixel_tolerance: int) -> Seen:
    """Which cells of the canvas's grid the screenshot shows as WebGL drew them.

    A cell is judged on its opaque picture pixels that fall on the viewport (at least half of
    them): their mean colour against the screenshot's at the same places. The page may have drawn
    a frame between the picture and the screenshot, so a cell also agrees when the screenshot's
    mean over the same cell shifted by one cell in any direction matches (motion of up to a cell).
    """
    sampled, on_view = sample_screen(screen, pic.rect)
    opaque = pic.rgba[..., 3] >= OPAQUE
    use = opaque & on_view
    n = use.reshape(GRID_H, CELL, GRID_W, CELL).sum(axis=(1, 3))
    usable = n >= (CELL * CELL) // 2
    pic_mean = _cell_mean(pic.rgba[..., :3].astype(np.float32), use)
    # the screenshot's cell means at every sample on the viewport (its own colour behind a
    # transparent picture pixel is what a person sees there too)
    screen_mean = _cell_mean(sampled.astype(np.float32), on_view)
    diff = np.full((GRID_H, GRID_W), np.inf, dtype=np.float32)
    padded = np.pad(screen_mean, ((1, 1), (1, 1), (0, 0)), mode="edge")
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            shifted = padded[1 + dy:1 + dy + GRID_H, 1 + dx:1 + dx + GRID_W]
            diff = np.minimum(diff, np.abs(pic_mean - shifted).max(axis=-1))
    cells = usable & (diff <= tolerance)
    off = off_dominant(pic.rgba, pixel_tolerance) & opaque
    drawn = off.reshape(GRID_H, CELL, GRID_W, CELL).sum(axis=(1, 3)) >= 2
    return Seen(cells=cells, drawn=drawn & usable, area=cell_areas(pic.rect, viewport))


FRAME_KEYS = ("draws_per_frame", "parts_per_frame", "triangles_per_frame")


def apply_visible(m, vis: Visible, canvas_max_by_id: dict[int, dict], rubric, step_names: tuple[str, ...]) -> None:
    """Weigh the session's figures (measurements.Measurements `m`) by what was seen, in place.

    - each window's and step's `gl_share`: what WebGL drew changed where it was seen (the probe's
      figure, which counts a canvas nobody sees, is kept as `gl_drawn_share`);
    - `blank_share`: the lower of the screenshot's share and that of a seen, drawn WebGL picture
      (on a page with a WebGL context);
    - tour window 2's `world_frames`: frames in which the canvases seen drew at least
      `world_frame_share` of their largest frame of the window (the raw count stays `frames`);
    - the world's canvas figures: only canvases seen on screen (all of them: `canvas_drawn`).
    Without the pictures (a browser that cannot take them) everything stays as measured.
    """
    rows = [w.pop("drawn", None) for w in m.windows] + [s.pop("drawn", None) for s in m.steps.values()]
    if not m.gl_pictures:
        return
    for i, w in enumerate(m.windows[:2]):
        _reweigh(w, vis, i)
    for i, name in enumerate(step_names):
        if name in m.steps:
            _reweigh(m.steps[name], vis, 2 + i)
    # A page without any WebGL context has no WebGL picture to weigh: its screenshot alone is judged
    if m.blank_share is not None and m.webgl_contexts:
        m.blank_screen_share = m.blank_share
        m.blank_webgl_share = vis.picture_share(0) if 0 in vis.screens else 0.0
        m.blank_share = min(m.blank_screen_share, m.blank_webgl_share)
    if len(m.windows) >= 2 and isinstance(rows[1], list):
        seen = {cid for cid in vis.canvases() if vis.canvas_seen(cid, (1, 2))}
        m.windows[1]["world_frames"] = world_frames(rows[1], seen, m.windows[1].get("frames") or 0,
                                                    rubric.items["5"]["world_frame_share"])
    seen_any = {cid for cid in vis.canvases() if vis.canvas_seen(cid, sorted(vis.screens))}
    figures = vis.canvas_figures()
    for cid, f in figures.items():
        f["seen"] = cid in seen_any
        f.update(canvas_max_by_id.get(cid, {}))
    m.visible_canvases = figures
    if m.world is not None:
        m.world["canvas_drawn"] = m.world.get("canvas") or {}
        m.world["canvas"] = {k: sum(int(canvas_max_by_id.get(c, {}).get(k, 0)) for c in seen_any) for k in FRAME_KEYS}


def _reweigh(window: dict, vis: Visible, slot: int) -> None:
    drawn = window.get("gl_share")
    window["gl_drawn_share"] = drawn
    # unknown stays unknown (the page drew no frame after the window: a page that draws only on input)
    window["gl_share"] = None if drawn is None else vis.change_share(slot)


# The probe's mark on a frame it asked whether WebGL refused any of its draws (checks/probe.js):
# [-1, mark]; 1 or 2 asked at random (clean or refused), 3 or 4 asked for a cause.
_ASKED_ID = -1
_CLEAN_AT_RANDOM, _REFUSED_AT_RANDOM, _CLEAN_FOR_CAUSE, _REFUSED_FOR_CAUSE = 1, 2, 3, 4


def world_frames(rows: list, seen: set[int], frames: int, share: float) -> int:
    """Frames in which the seen canvases drew at least `share` of the vertices of their largest
    frame of the window, without a draw WebGL refused. `rows` are the probe's per frame [canvas id,
    vertices, ...] (at most its cap: the count is scaled up to `frames` when the page drew more
    frames than were kept). A frame the probe asked is counted as asked; the frames not asked are
    weighed by the share of those asked at random that WebGL drew without an error (draws only the
    GPU process refuses, between real frames, do not pass for frames of the world)."""
    sums, marks = [], []
    for row in rows:
        if not isinstance(row, list):
            continue
        pairs = list(zip(row[0::2], row[1::2]))
        sums.append(sum(v for c, v in pairs if c in seen and isinstance(v, (int, float))))
        marks.append(next((v for c, v in pairs if c == _ASKED_ID), 0))
    refused = (_REFUSED_AT_RANDOM, _REFUSED_FOR_CAUSE)
    peak = max((s for s, k in zip(sums, marks) if k not in refused), default=0)
    if peak <= 0:
        return 0
    full = [k for s, k in zip(sums, marks) if s >= share * peak]
    clean_at_random, refused_at_random = full.count(_CLEAN_AT_RANDOM), full.count(_REFUSED_AT_RANDOM)
    unasked = full.count(0)
    if clean_at_random + refused_at_random:
        unasked *= clean_at_random / (clean_at_random + refused_at_random)
    counted = clean_at_random + full.count(_CLEAN_FOR_CAUSE) + unasked
    return round(counted * frames / len(sums)) if len(sums) < frames else round(counted)
