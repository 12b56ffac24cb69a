"""All the text a person sees on the page, read in one CDP call (`DOMSnapshot.captureSnapshot`).

The browser's own layout, not the page's DOM API: a page can hide text from `body.innerText` (a
closed shadow root, CSS `::before` content, a srcdoc iframe, a form field's value) and can
redefine any property a script of ours would read. The snapshot holds every same-process
document with its layout tree: the text of each laid-out text (generated content included),
the box it occupies and the computed styles asked for, shadow trees flattened in.

Kept: laid-out text, the values (or placeholders) of visible text fields and buttons, the chosen
option of a visible select, the top document's title, the text of SVG `data:` images (an `<img>`,
a CSS background) and the alt text of images that did not load (showcase.check.image_text).
Dropped, because no person sees it: text that is not laid out (display: none), whose style says
`visibility: hidden`, whose own and ancestors' opacity (times their filters' `opacity()`)
multiply below `min_opacity`, whose filters blur it by `max_text_blur` of its font size or more,
that a transparent gradient masks out, whose box is smaller than `min_text_px`, or that lies
wholly outside what can be seen: clipped away by an ancestor with `overflow: hidden`/`clip` (as
CSS clips: not past the containing block of an absolutely or fixed positioned box), by a
`clip-path`, a `clip` or `contain: paint` (showcase.check.css_hiding), outside its iframe's box,
above or left of the page, or past the viewport of a page that does not scroll.
Not checked (open): text covered by something painted over it, text coloured like what is under
it, effects judged only where they surely hide (an SVG url() filter, clip or mask is not).
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from showcase.check.css_hiding import (clip_path_rect, clip_rect, contains_paint, filter_blur_px, filter_opacity,
                                       mask_hides)
from showcase.check.image_text import MAX_SVG_IMAGES, broken_images, css_image_urls, svg_data, svg_text

STYLES = ["opacity", "visibility", "overflow-x", "overflow-y", "position", "filter", "clip-path", "clip",
          "mask-image", "contain", "font-size", "background-image"]
(OPACITY, VISIBILITY, OVERFLOW_X, OVERFLOW_Y, POSITION, FILTER, CLIP_PATH, CLIP, MASK_IMAGE, CONTAIN, FONT_SIZE,
 BACKGROUND_IMAGE) = range(len(STYLES))
CLIPPING = ("hidden", "clip")
SCROLLING = ("auto", "scroll")
# Input types whose value is text shown in the field (a checkbox's value "on" is never shown).
TEXT_INPUTS = {"", "text", "search", "email", "url", "tel", "button", "submit", "reset"}
MAX_CHARS = 20_000
ALT_MIN_CHAR_EM = 0.25  # narrower than the average letter of any text font (an "i" is about 0.25 em)
MAX_DOCUMENTS = 50

Rect = tuple[float, float, float, float]  # left, top, right, bottom


@dataclass
class VisibleText:
    text: str
    # what the text came from, for check.json: counts of kept pieces by source, and pieces dropped
    sources: dict[str, int] = field(default_factory=dict)
    dropped: int = 0


BROKEN = "showcaseBrokenImages"  # our key in the snapshot: {document index: node indices of images that did not load}


async def capture(send) -> dict:
    """The raw snapshot, with the images whose alt text shows; `send` is a bounded CDP send (method, params)."""
    snap = await send("DOMSnapshot.captureSnapshot", {"computedStyles": STYLES})
    if isinstance(snap, dict):
        snap[BROKEN] = await broken_images(send, snap)
    return snap


def _rare(table: dict | None) -> dict[int, int]:
    """CDP's rare string data ({index: [...], value: [...]}) as node index -> string index."""
    if not table:
        return {}
    return dict(zip(table.get("index", []), table.get("value", [])))


def _intersect(a: Rect, b: Rect) -> Rect:
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def _px(value: str) -> float | None:
    try:
        return float(value[:-2]) if value.endswith("px") else None
    except ValueError:
        return None


def _empty(r: Rect) -> bool:
    return r[2] <= r[0] or r[3] <= r[1]


class _Document:
    """One document of the snapshot, placed in the top document's coordinates."""

    def __init__(self, snap: dict, doc: dict, offset: tuple[float, float], clip: Rect, opacity: float, visible: bool):
        self.s = snap["strings"]
        self.offset, self.clip, self.opacity, self.visible = offset, clip, opacity, visible
        nodes = doc["nodes"]
        self.parent = nodes.get("parentIndex", [])
        self.name = [self.string(i).upper() for i in nodes.get("nodeName", [])]
        self.value = nodes.get("nodeValue", [])
        self.attributes = nodes.get("attributes", [])
        self.input_value = _rare(nodes.get("inputValue"))
        self.text_value = _rare(nodes.get("textValue"))
        self.content_doc = _rare(nodes.get("contentDocumentIndex"))
        self.pseudo = _rare(nodes.get("pseudoType"))
        self.current_src = _rare(nodes.get("currentSourceURL"))
        self.shadow = _rare(nodes.get("shadowRootType"))  # nodes inside a shadow tree (the snapshot flattens them in)
        self.selected = set((nodes.get("optionSelected") or {}).get("index", []))
        layout = doc["layout"]
        self.l_node = layout.get("nodeIndex", [])
        self.l_styles = layout.get("styles", [])
        self.l_bounds = layout.get("bounds", [])
        self.l_text = layout.get("text", [])
        self.layout_of: dict[int, int] = {}
        for li, ni in enumerate(self.l_node):
            self.layout_of.setdefault(ni, li)

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

    def rect(self, li: int) -> Rect:
        x, y, w, h = (list(self.l_bounds[li]) + [0, 0, 0, 0])[:4]
        ox, oy = self.offset
        return (x + ox, y + oy, x + ox + w, y + oy + h)

    def seen_rect(self, ni: int, li: int, min_opacity: float, min_px: float, max_blur: float = 1.0) -> Rect | None:
        """The part of node `ni`'s box (layout entry `li`) a person can see, or None. `max_blur`: the
        blur, as a share of the font size, from which text is a smear."""
        if not self.visible or self.style(li, VISIBILITY) in ("hidden", "collapse"):
            return None
        own = self.rect(li)
        if own[3] - own[1] < min_px or own[2] <= own[0]:  # too low to read (a narrow "1" is still read)
            return None
        seen = _intersect(own, self.clip)
        opacity = self.opacity
        blur, font_px = 0.0, _px(self.style(li, FONT_SIZE)) or 16.0
        # Walk up the flat tree (a shadow root's parent is its host; a pseudo element's, its element).
        # An absolutely positioned box escapes the clips of ancestors below its containing block (the
        # nearest positioned one); a fixed one escapes them all but the document's.
        needs_positioned, fixed = False, False
        for a in self._ancestors(ni):
            la = self.layout_of.get(a)
            if la is None:
                continue  # a shadow root, a display: contents element: no box of its own
            if a == ni and self.name[ni] == "#TEXT":
                continue  # a text's styles are its element's, which comes next
            opacity *= self._opacity(la)
            position = self.style(la, POSITION)
            positioned = position not in ("", "static")
            # paint effects act on the element and all it holds, positioned or not
            blur += filter_blur_px(self.style(la, FILTER))
            if mask_hides(self.style(la, MASK_IMAGE)):
                return None
            box = self.rect(la)
            for kept in (clip_path_rect(self.style(la, CLIP_PATH), box),
                         clip_rect(self.style(la, CLIP), box) if position in ("absolute", "fixed") else None):
                if kept is not None:
                    seen = _intersect(seen, kept)
            if a != ni and contains_paint(self.style(la, CONTAIN)):
                seen = _intersect(seen, box)
            # an element's overflow clips what is inside it, not itself; the root's and body's clip the viewport (above)
            if a != ni and not fixed and (positioned or not needs_positioned) and self.name[a] not in ("HTML", "BODY"):
                box = self.rect(la)
                for axis, k in ((0, OVERFLOW_X), (1, OVERFLOW_Y)):
                    overflow = self.style(la, k)
                    if overflow in CLIPPING:
                        seen = (max(seen[0], box[0]), seen[1], min(seen[2], box[2]), seen[3]) if axis == 0 else \
                               (seen[0], max(seen[1], box[1]), seen[2], min(seen[3], box[3]))
                    elif overflow in SCROLLING and box[axis + 2] - box[axis] < min_px:
                        return None  # a scroll box too small to show anything
            if positioned:
                needs_positioned = False
            if a != ni and contains_paint(self.style(la, CONTAIN)):  # the containing block of fixed boxes too
                needs_positioned = fixed = False
            if position == "fixed":
                fixed = True
            elif position == "absolute":
                needs_positioned = True
        if opacity < min_opacity or blur >= max_blur * font_px or _empty(seen):
            return None
        return seen

    def _opacity(self, li: int) -> float:
        """The element's opacity times its filter's opacity()."""
        try:
            own = min(1.0, max(0.0, float(self.style(li, OPACITY) or 1)))
        except ValueError:
            own = 1.0
        return own * filter_opacity(self.style(li, FILTER))

    def _ancestors(self, ni: int):
        """ni itself, then its ancestors up the flat tree (bounded: a malformed snapshot cannot loop)."""
        seen = 0
        while 0 <= ni < len(self.parent) and seen < 10_000:
            yield ni
            ni = self.parent[ni]
            seen += 1

    @cached_property
    def children(self) -> dict[int, list[int]]:
        kids: dict[int, list[int]] = {}
        for c, p in enumerate(self.parent):
            kids.setdefault(p, []).append(c)
        return kids

    def descendants(self, ni: int, limit: int = 10_000) -> list[int]:
        out, stack = [], list(self.children.get(ni, []))
        while stack and len(out) < limit:
            c = stack.pop()
            out.append(c)
            stack.extend(self.children.get(c, []))
        return sorted(out)

    def node_text(self, ni: int) -> str:
        """The text of an element's text children (an option's label)."""
        return " ".join(self.string(self.value[c]).strip() for c in self.children.get(ni, [])
                        if self.name[c] == "#TEXT" and c < len(self.value)).strip()


def visible_text(snap: dict, viewport: tuple[int, int], min_opacity: float, min_px: float,
                 max_blur: float = 1.0) -> VisibleText:
    """All the text a person sees in `snap` (a DOMSnapshot.captureSnapshot answer), in layout order."""
    out = VisibleText(text="")
    docs = snap.get("documents") or []
    if not docs:
        return out
    pieces: list[str] = []

    def keep(source: str, text: str) -> None:
        text = " ".join(text.split())
        if text:
            pieces.append(text)
            out.sources[source] = out.sources.get(source, 0) + 1

    vw, vh = viewport
    top = docs[0]
    first = _Document(snap, top, (0.0, 0.0), (0.0, 0.0, float(vw), float(vh)), 1.0, True)
    keep("title", first.string(top.get("title")))
    # A page that scrolls shows all of its document; one whose root or body hides overflow, its viewport.
    root_clips = any(first.style(li, k) in CLIPPING for ni, li in first.layout_of.items()
                     if first.name[ni] in ("HTML", "BODY") for k in (OVERFLOW_X, OVERFLOW_Y))
    if not root_clips:
        first.clip = (0.0, 0.0, float(max(vw, top.get("contentWidth") or 0)), float(max(vh, top.get("contentHeight") or 0)))
    broken = snap.get(BROKEN) or {}
    svg_images = [0]

    def keep_svg(url: str, d: _Document, ni: int, li: int) -> bool:
        """Keeps the text of an SVG image drawn in node `ni`'s box; False when `url` is no SVG we read."""
        if svg_images[0] >= MAX_SVG_IMAGES or (data := svg_data(url)) is None:
            return False
        svg_images[0] += 1
        if d.seen_rect(ni, li, min_opacity, min_px, max_blur) is None:
            out.dropped += 1
        else:
            own = d.rect(li)
            keep("image", svg_text(data, own[3] - own[1], min_px))
        return True

    queue, done = [(0, first)], {0}
    while queue and len(done) <= MAX_DOCUMENTS:
        di, d = queue.pop(0)
        for li, ni in enumerate(d.l_node):
            t = d.l_text[li] if li < len(d.l_text) else -1
            name = d.name[ni] if ni < len(d.name) else ""
            if isinstance(t, int) and t >= 0 and d.string(t).strip():
                if d.seen_rect(ni, li, min_opacity, min_px, max_blur) is None:
                    out.dropped += 1
                    continue
                source = "generated" if ni in d.pseudo else ("shadow" if ni in d.shadow else "text")
                keep(source if di == 0 else "frame", d.string(t))
            elif name in ("INPUT", "TEXTAREA", "SELECT") and ni not in broken.get(di, ()):
                _form_text(d, ni, li, min_opacity, min_px, keep, out)
            if name != "#TEXT":  # a text's styles are its element's: its background is drawn once, there
                for url in css_image_urls(d.style(li, BACKGROUND_IMAGE)):
                    keep_svg(url, d, ni, li)
            if name in ("IMG", "INPUT") and not keep_svg(d.string(d.current_src.get(ni, -1)), d, ni, li) \
                    and ni in broken.get(di, ()):
                # Chromium draws the alt text inside the image's box, in the image's font, clipped to it:
                # no more is read than fits at ALT_MIN_CHAR_EM a letter and 1 em a line
                if d.seen_rect(ni, li, min_opacity, min_px, max_blur) is None:
                    out.dropped += 1
                else:
                    own, font_px = d.rect(li), _px(d.style(li, FONT_SIZE)) or 16.0
                    fits = int((own[2] - own[0]) / (ALT_MIN_CHAR_EM * font_px)) * max(1, int((own[3] - own[1]) / font_px))
                    keep("alt", (d.attr(ni, "alt") or "")[:fits])
            if ni in d.content_doc:
                child = d.content_doc[ni]
                if isinstance(child, int) and 0 <= child < len(docs) and child not in done:
                    done.add(child)
                    box = d.seen_rect(ni, li, min_opacity, 1.0)
                    origin = d.rect(li)
                    opacity = d.opacity
                    for a in d._ancestors(ni):
                        if (la := d.layout_of.get(a)) is not None:
                            opacity *= d._opacity(la)
                    queue.append((child, _Document(snap, docs[child], (origin[0], origin[1]), box or (0, 0, 0, 0),
                                                   opacity, box is not None)))
    out.text = "\n".join(pieces)[:MAX_CHARS]
    return out


def _form_text(d: _Document, ni: int, li: int, min_opacity: float, min_px: float, keep, out: VisibleText) -> None:
    """A form control's shown text: a field's value (or its placeholder while empty), a select's choice."""
    if d.seen_rect(ni, li, min_opacity, min_px) is None:
        out.dropped += 1
        return
    name = d.name[ni]
    if name == "INPUT":
        if (d.attr(ni, "type") or "").lower() not in TEXT_INPUTS:
            return
        value = d.string(d.input_value.get(ni, -1))
        keep("form", value or d.attr(ni, "placeholder") or "")
    elif name == "TEXTAREA":
        value = d.string(d.text_value.get(ni, d.input_value.get(ni, -1)))
        keep("form", value or d.attr(ni, "placeholder") or "")
    else:
        listbox = d.attr(ni, "multiple") is not None or (d.attr(ni, "size") or "1").strip() not in ("", "0", "1")
        options = [c for c in d.descendants(ni) if d.name[c] == "OPTION"]
        shown = options if listbox else ([c for c in options if c in d.selected][:1] or options[:1])
        for c in shown:
            keep("form", d.node_text(c))
