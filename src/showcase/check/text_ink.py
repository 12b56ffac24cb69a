"""Where the page's own text is painted, from the browser's layout: the boxes the pixel measures leave out.

One CDP call (`DOMSnapshot.captureSnapshot`), no page script: a page can redefine every DOM API a
script of ours would call (`Range.prototype.getClientRects`, `document.createTreeWalker`), not
the browser's own record. The snapshot gives each laid-out text's boxes where they are painted,
transforms applied (scaled, rotated and 3D-projected text included), in every same-process
document, generated content and shadow trees included, and the computed styles asked for.

A text's ink reaches past its box; each box is inflated by what its styles say it can reach:
- its glyphs' own overhang (italics, accents): half its font size, and half again for each
  combining mark stacked beyond the second (a run of marks piles up above and below the line);
- `text-shadow` (offset, and 3 times the blur: a Gaussian's reach), `-webkit-text-stroke`, the
  SVG `stroke-width`, an underline's offset and thickness;
- the `filter` of the text's element and every ancestor (`blur()` times 3, `drop-shadow()`'s
  offset and 3 times its blur), each times the scale its element is drawn at (transforms, `zoom`);
- `-webkit-box-reflect`: a mirrored copy of the box beside the reflecting ancestor.
A text whose painting the styles cannot bound (an SVG `url()` filter, text drawn by reference as
an SVG pattern, marker, mask or clip path) leaves the whole view masked; so do more documents,
boxes or layout entries than the bounds below. `<use>` clones of text are masked where the use
is drawn; a form field's box (its value and placeholder are drawn inside, in the browser's own
shadow tree, which the snapshot does not hold) is masked whole.

The mask may cover more than the ink (it only lowers a page's own share); it must not leave
painted text out. Open: ink a web font draws outside its glyphs' box, styles given only to
`::first-line`, `::selection` or highlights, the text of images (an SVG image's `<text>`, a
broken image's alt text).
"""

import math
import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from showcase.check.css_hiding import filter_blur_px

STYLES = ["font-size", "filter", "transform", "scale", "rotate", "perspective", "zoom", "-webkit-box-reflect",
          "text-shadow", "-webkit-text-stroke-width", "stroke-width", "text-decoration-thickness",
          "text-underline-offset", "border-left-width", "border-top-width", "border-right-width",
          "border-bottom-width", "padding-left", "padding-top", "padding-right", "padding-bottom"]
(FONT_SIZE, FILTER, TRANSFORM, SCALE, ROTATE, PERSPECTIVE, ZOOM, BOX_REFLECT, TEXT_SHADOW, TEXT_STROKE, STROKE_WIDTH,
 DECORATION_THICKNESS, UNDERLINE_OFFSET, BORDER_LEFT, BORDER_TOP, BORDER_RIGHT, BORDER_BOTTOM, PADDING_LEFT,
 PADDING_TOP, PADDING_RIGHT, PADDING_BOTTOM) = range(len(STYLES))

MAX_DOCUMENTS = 50
MAX_LAYOUT = 100_000   # layout entries over all documents: past that the page is taken for all text
MAX_BOXES = 50_000     # text boxes masked one by one; past that likewise
MAX_REFLECTIONS = 3    # nested -webkit-box-reflect ancestors followed (each doubles the copies)
GAUSSIAN_REACH = 3.0   # a blur's standard deviations that still paint
OVERHANG_EM = 0.5      # glyph ink past the box (italic overhang, accents, emphasis marks), in em
MARK_EM = 0.5          # each stacked combining mark past the second, in em
DOCUMENT_NODE = "#document"
FORM_FIELDS = ("INPUT", "TEXTAREA", "SELECT")
BY_REFERENCE = ("pattern", "marker", "mask", "clipPath")  # SVG resources painted wherever they are used

Rect = tuple[float, float, float, float]  # left, top, right, bottom

_PX = re.compile(r"(-?[\d.]+(?:e[-+]?\d+)?)px")
_COLOR = re.compile(r"[a-z-]+\([^()]*\)")
_FUNCTION = re.compile(r"([a-z-]+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


async def capture(send) -> dict:
    """The raw snapshot; `send` is a bounded CDP send (method, params)."""
    return await send("DOMSnapshot.captureSnapshot", {"computedStyles": STYLES})


@lru_cache(maxsize=1)
def _marks() -> re.Pattern:
    """Runs of combining marks (Unicode Mn, Me); planes 0, 1 and 14 hold them all."""
    points = [c for plane in (range(0x20000), range(0xE0000, 0xE1000)) for c in plane
              if unicodedata.category(chr(c)) in ("Mn", "Me")]
    ranges, start = [], points[0]
    for a, b in zip(points, points[1:] + [-1]):
        if b != a + 1:
            ranges.append(f"\\U{start:08x}-\\U{a:08x}")
            start = b
    return re.compile(f"[{''.join(ranges)}]+")


def _longest_marks(text: str) -> int:
    return 0 if text.isascii() else max(map(len, _marks().findall(text)), default=0)


def _px_values(value: str) -> list[float]:
    return [float(v) for v in _PX.findall(value or "")]


def _px(value: str, default: float = 0.0) -> float:
    v = _px_values(value)
    return v[0] if v else default


def _shadow_reach(value: str) -> float:
    """How far a shadow list (`text-shadow`, one `drop-shadow()`) paints past what casts it."""
    reach = 0.0
    for shadow in re.split(r",(?![^()]*\))", value or ""):
        lengths = _px_values(_COLOR.sub("", shadow))
        if lengths:
            x, y, blur = (lengths + [0.0, 0.0, 0.0])[:3]
            reach = max(reach, max(abs(x), abs(y)) + GAUSSIAN_REACH * max(0.0, blur))
    return reach


def filter_reach(value: str) -> float | None:
    """How far a `filter` list moves ink past the element it paints, or None when it cannot be told."""
    value = (value or "").strip()
    if not value or value == "none":
        return 0.0
    if "url(" in value:
        return None
    reach = GAUSSIAN_REACH * filter_blur_px(value)
    for name, args in _FUNCTION.findall(value):
        if name == "drop-shadow":
            reach += _shadow_reach(args)  # a shadow of a shadow reaches on: the chain adds up
    return reach


def transform_scale(value: str) -> float | None:
    """The most a computed `transform` stretches any length (its largest singular value), or None
    under a perspective (the stretch then depends on where the point lies)."""
    value = (value or "").strip()
    if not value or value == "none":
        return 1.0
    try:
        numbers = [float(v) for v in value[value.index("(") + 1:value.rindex(")")].split(",")]
    except ValueError:
        return None
    if value.startswith("matrix(") and len(numbers) == 6:
        a, b, c, d = numbers[:4]
        s, det = a * a + b * b + c * c + d * d, a * d - b * c
        return math.sqrt((s + math.sqrt(max(0.0, s * s - 4 * det * det))) / 2)
    if value.startswith("matrix3d(") and len(numbers) == 16:
        m = numbers  # column-major: m[3], m[7], m[11] are the perspective row
        if m[3] or m[7] or m[11] or m[15] != 1:
            return None
        # what lands on the screen's x and y from local x, y and z: a bound of its largest stretch
        return math.sqrt(sum(v * v for v in (m[0], m[4], m[8], m[1], m[5], m[9])))
    return None


def _scale_property(value: str) -> float:
    """The CSS `scale` property's largest factor (numbers or percentages)."""
    factors = []
    for token in (value or "").split():
        try:
            factors.append(abs(float(token[:-1]) / 100 if token.endswith("%") else float(token)))
        except ValueError:
            continue
    return max(factors, default=1.0)


def _number(value: str, default: float = 1.0) -> float:
    try:
        return float(value)
    except ValueError:
        return default


@dataclass(frozen=True)
class Chain:
    """What an element and its ancestors do to the ink of the text inside."""

    reach: float = 0.0             # screen px their filters move ink
    scale: float = 1.0             # the most their transforms and zoom stretch a length
    exact: bool = True             # no perspective: `scale` bounds the stretch
    transformed: bool = False      # some transform or zoom at all (a frame's own coordinates no longer hold)
    reflections: tuple = ()        # (side, edge, gap) of each reflecting ancestor, outermost first
    everywhere: bool = False       # its painting cannot be bounded: the whole view is masked
    perspective: bool = False      # a perspective above: 3D transforms below project
    svg: bool = False              # inside an <svg>, whose viewBox scales what it holds (no style says how much)
    decoration: float = 0.0        # screen px of the thickest text decoration an ancestor draws


@dataclass
class InkBoxes:
    boxes: list[tuple[int, int, int, int]]
    everywhere: bool = False


class _Document:
    """One document of the snapshot: its text boxes in the top document's view, each inflated by its reach."""

    def __init__(self, snap: dict, doc: dict, origin: tuple[float, float], outer: Chain, frame: Rect | None):
        self.s = snap["strings"]
        self.origin, self.outer, self.frame = origin, outer, frame
        nodes = doc["nodes"]
        self.parent = nodes.get("parentIndex", [])
        self.name = [self.string(i) for i in nodes.get("nodeName", [])]
        self.attributes = nodes.get("attributes", [])
        content = nodes.get("contentDocumentIndex") or {}
        self.content_doc = dict(zip(content.get("index", []), content.get("value", [])))
        layout = doc["layout"]
        self.l_node = layout.get("nodeIndex", [])
        self.l_styles = layout.get("styles", [])
        self.l_bounds = layout.get("bounds", [])
        self.l_text = layout.get("text", [])
        self.layout_of: dict[int, int] = {}
        for li, ni in enumerate(self.l_node):
            self.layout_of.setdefault(ni, li)
        boxes = doc.get("textBoxes") or {}
        self.fragments: dict[int, list] = {}
        for li, bounds in zip(boxes.get("layoutIndex", []), boxes.get("bounds", [])):
            self.fragments.setdefault(li, []).append(bounds)
        self.scroll = (doc.get("scrollOffsetX") or 0.0, doc.get("scrollOffsetY") or 0.0)
        self.chains: dict[int, Chain] = {}

    def string(self, i: Any) -> str:
        return self.s[i] if isinstance(i, int) and 0 <= i < len(self.s) else ""

    def style(self, li: int, k: int) -> str:
        row = self.l_styles[li] if li < len(self.l_styles) else []
        return self.string(row[k]) if k < len(row) else ""

    def attr(self, ni: int, name: str) -> str | None:
        row = self.attributes[ni] if ni < len(self.attributes) else []
        for k in range(0, len(row) - 1, 2):
            if self.string(row[k]).lower() == name:
                return self.string(row[k + 1])
        return None

    def rect(self, bounds: list) -> Rect:
        """Layout bounds (x, y, w, h in the document) in the top view's coordinates."""
        x, y, w, h = (list(bounds) + [0, 0, 0, 0])[:4]
        if self.frame is not None and self.outer.transformed:
            return self.frame  # a transformed frame's own coordinates say nothing of the view's
        x += self.origin[0] - self.scroll[0]
        y += self.origin[1] - self.scroll[1]
        return (x, y, x + w, y + h)

    def chain(self, ni: int) -> Chain:
        """Node ni's chain, from its ancestors' (computed once per node, up the flat tree)."""
        path = []
        while ni not in self.chains and 0 <= ni < len(self.parent) and len(path) <= len(self.parent):
            path.append(ni)
            ni = self.parent[ni]
        chain = self.chains.get(ni, self.outer)
        for node in reversed(path):
            chain = self.chains[node] = self._own(node, chain)
        return chain

    def _own(self, ni: int, parent: Chain) -> Chain:
        li = self.layout_of.get(ni)
        name = self.name[ni] if ni < len(self.name) else ""
        if name in BY_REFERENCE:
            return replace(parent, everywhere=True)
        if li is None or name in ("#text", DOCUMENT_NODE):
            return parent  # a text's styles are its element's; a shadow root has no box of its own
        matrix = transform_scale(self.style(li, TRANSFORM))
        zoom = abs(_number(self.style(li, ZOOM)))
        own = (matrix or 1.0) * _scale_property(self.style(li, SCALE)) * zoom
        scale = parent.scale * own
        reach = filter_reach(self.style(li, FILTER))
        transformed = (parent.transformed or own != 1.0
                       or any(self.style(li, k) not in ("", "none") for k in (TRANSFORM, ROTATE)))
        chain = Chain(reach=parent.reach + (reach or 0.0) * scale, scale=scale,
                      exact=parent.exact and matrix is not None and not parent.perspective,
                      transformed=transformed, reflections=parent.reflections,
                      everywhere=parent.everywhere or reach is None,
                      perspective=parent.perspective or self.style(li, PERSPECTIVE) not in ("", "none"),
                      svg=parent.svg or name == "svg",
                      decoration=max(parent.decoration, _px(self.style(li, DECORATION_THICKNESS)) * scale))
        reflect = self.style(li, BOX_REFLECT).split()
        if reflect and reflect[0] in ("below", "above", "left", "right"):
            if len(chain.reflections) >= MAX_REFLECTIONS:
                return replace(chain, everywhere=True)
            box = self.rect(self.l_bounds[li])
            size = box[3] - box[1] if reflect[0] in ("below", "above") else box[2] - box[0]
            gap = reflect[1] if len(reflect) > 1 else "0px"
            gap_px = size * _number(gap[:-1], 0.0) / 100 if gap.endswith("%") else _px(gap) * scale
            edge = {"below": box[3], "above": box[1], "left": box[0], "right": box[2]}[reflect[0]]
            chain = replace(chain, reflections=chain.reflections + ((reflect[0], edge, gap_px),))
        return chain

    def text_reach(self, li: int, font_px: float) -> float:
        """What the text's own styles paint past its glyphs, in its local px."""
        stroke = max(_px(self.style(li, TEXT_STROKE)), _px(self.style(li, STROKE_WIDTH)))
        offset = self.style(li, UNDERLINE_OFFSET)
        underline = abs(_number(offset[:-1], 0.0) * font_px / 100 if offset.endswith("%") else _px(offset))
        return _shadow_reach(self.style(li, TEXT_SHADOW)) + stroke + underline

    def inked(self, li: int, bounds: list, chain: Chain, marks: int, extra: float = 0.0) -> list[Rect]:
        """One box of text, inflated by its ink's reach, and its mirrored copies."""
        font_px = max(1.0, _px(self.style(li, FONT_SIZE), 16.0))
        box = self.rect(bounds)
        # Where the transforms do not bound the scale text is drawn at (an SVG viewBox, a
        # perspective), its box does: a line box is about 1.2 em high, so the short side over the
        # font size (under a perspective the long side, more than enough).
        w, h = box[2] - box[0], box[3] - box[1]
        drawn = max(1.0, (max(w, h) if not chain.exact else min(w, h) if chain.svg else 0.0) / font_px)
        scale = max(chain.scale, drawn)
        local = font_px * (OVERHANG_EM + MARK_EM * max(0, marks - 2)) + self.text_reach(li, font_px) + extra
        unseen = scale / chain.scale if chain.scale > 0 else 1.0  # the scale the transforms did not tell
        reach = 2.0 + local * scale + (chain.reach + chain.decoration) * max(1.0, unseen)
        rects = [(box[0] - reach, box[1] - reach, box[2] + reach, box[3] + reach)]
        for side, edge, gap in reversed(chain.reflections):  # the innermost reflects first
            rects += [_mirror(r, side, edge, gap) for r in rects]
        return rects


def _mirror(r: Rect, side: str, edge: float, gap: float) -> Rect:
    """`r` reflected as -webkit-box-reflect draws it: mirrored across the line `gap`/2 past the box's edge."""
    if side == "below":
        m = 2 * edge + gap
        return (r[0], m - r[3], r[2], m - r[1])
    if side == "above":
        m = 2 * edge - gap
        return (r[0], m - r[3], r[2], m - r[1])
    m = 2 * edge + gap if side == "right" else 2 * edge - gap
    return (m - r[2], r[1], m - r[0], r[3])


def ink_boxes(snap: dict, viewport: tuple[int, int]) -> InkBoxes:
    """Every box where `snap` (a DOMSnapshot.captureSnapshot answer with STYLES) paints text, in the
    view's pixels [left, top, right, bottom]; the whole view when that cannot be bounded."""
    vw, vh = int(viewport[0]), int(viewport[1])
    whole = InkBoxes([(0, 0, vw, vh)], everywhere=True)
    docs = snap.get("documents") if isinstance(snap, dict) else None
    if not docs or not isinstance(snap.get("strings"), list):
        return InkBoxes([])
    if len(docs) > MAX_DOCUMENTS or sum(len(d.get("layout", {}).get("nodeIndex", [])) for d in docs) > MAX_LAYOUT:
        return whole
    rects: list[Rect] = []
    queue, done = [(0, _Document(snap, docs[0], (0.0, 0.0), Chain(), None))], {0}
    while queue:
        _, d = queue.pop(0)
        if not _document_ink(d, rects) or len(rects) > MAX_BOXES:
            return whole
        for ni, child in d.content_doc.items():
            li = d.layout_of.get(ni)
            if li is None or not isinstance(child, int) or not 0 <= child < len(docs) or child in done:
                continue
            done.add(child)
            queue.append((child, _frame(snap, docs[child], d, ni, li)))
    out = {}
    for r in rects:
        x0, y0, x1, y1 = max(0, math.floor(r[0])), max(0, math.floor(r[1])), min(vw, math.ceil(r[2])), min(vh, math.ceil(r[3]))
        if x1 > x0 and y1 > y0:
            out[(x0, y0, x1, y1)] = None
    return InkBoxes(list(out))


def _frame(snap: dict, doc: dict, d: _Document, ni: int, li: int) -> _Document:
    """The document of frame element `ni`, placed at its content box. Where that box is not the
    frame's own viewport as it stands (a transform the styles did not name: a rotation, a motion
    path), its text is taken to be anywhere in the frame's box."""
    box = d.rect(d.l_bounds[li])
    left, top, right, bottom = (_px(d.style(li, a)) + _px(d.style(li, b)) for a, b in (
        (BORDER_LEFT, PADDING_LEFT), (BORDER_TOP, PADDING_TOP), (BORDER_RIGHT, PADDING_RIGHT), (BORDER_BOTTOM, PADDING_BOTTOM)))
    outer = d.chain(ni)
    viewport = next((b for b, n in zip(doc["layout"].get("bounds", []), doc["layout"].get("nodeIndex", []))
                     if n == 0), None)
    content = (box[2] - box[0] - left - right, box[3] - box[1] - top - bottom)
    if viewport is None or abs(viewport[2] - content[0]) > 1 or abs(viewport[3] - content[1]) > 1:
        outer = replace(outer, transformed=True)
    return _Document(snap, doc, (box[0] + left, box[1] + top), outer, box)


def _document_ink(d: _Document, rects: list[Rect]) -> bool:
    """Adds the document's inked text boxes to `rects`; False when its text cannot be bounded."""
    uses, most_reach = [], 0.0
    for li, ni in enumerate(d.l_node):
        name = d.name[ni] if 0 <= ni < len(d.name) else ""
        t = d.l_text[li] if li < len(d.l_text) else -1
        text = d.string(t) if isinstance(t, int) and t >= 0 else ""
        field = name in FORM_FIELDS and (d.attr(ni, "type") or "").lower() not in ("image", "hidden")
        if name == "use":
            uses.append((li, ni))
        if not (text or field):
            continue
        chain = d.chain(ni)
        if chain.everywhere:
            return False
        marks = _longest_marks(text)
        # an SVG text's line boxes come scaled once more than drawn (Chromium 156): its layout box holds them
        for bounds in (None if chain.svg else d.fragments.get(li)) or [d.l_bounds[li]]:
            rects.extend(d.inked(li, bounds, chain, marks))
        if len(rects) > MAX_BOXES:
            return True
        most_reach = max(most_reach, d.text_reach(li, _px(d.style(li, FONT_SIZE), 16.0)))
    if uses:
        _use_ink(d, uses, most_reach, rects)
    return True


def _use_ink(d: _Document, uses: list[tuple[int, int]], reach: float, rects: list[Rect]) -> None:
    """A `<use>` draws a clone of what it names where the use is: its box is masked when what it
    names holds text or another use (or lies in another document); `reach`: the most any text of
    the document reaches on its own."""
    holds: set[int] = set()
    for li, ni in enumerate(d.l_node):
        t = d.l_text[li] if li < len(d.l_text) else -1
        if isinstance(t, int) and t >= 0:
            _mark_up(d, ni, holds)
    for _, ni in uses:
        _mark_up(d, ni, holds)
    ids = {}
    for ni in range(len(d.attributes)):
        if (id_ := d.attr(ni, "id")) is not None:
            ids.setdefault(id_, ni)
    for li, ni in uses:
        href = (d.attr(ni, "href") or d.attr(ni, "xlink:href") or "").strip()
        if href and (not href.startswith("#") or ids.get(href[1:]) in holds):
            rects.extend(d.inked(li, d.l_bounds[li], d.chain(ni), 0, reach))


def _mark_up(d: _Document, ni: int, marked: set[int]) -> None:
    """Marks ni and its ancestors, up to the first marked already (each node is walked once)."""
    for a in _ancestors(d, ni):
        if a in marked:
            return
        marked.add(a)


def _ancestors(d: _Document, ni: int):
    """ni and its ancestors (bounded: a malformed snapshot cannot loop)."""
    for _ in range(len(d.parent) + 1):
        if not 0 <= ni < len(d.parent):
            return
        yield ni
        ni = d.parent[ni]
