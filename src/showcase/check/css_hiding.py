"""What an element's paint effects leave of its box, from computed styles (DOMSnapshot's strings).

`filter`, `clip-path`, `clip` and `mask-image` hide a box without moving it: the layout still
places its text, so the text reader asks these. Each answer is what the effect surely does; a
form it cannot judge (an SVG `url(#...)` filter, clip path or mask image, a `path()` clip) leaves
the box as it is, so the reader never drops text it cannot show to be hidden (dropping it would
let a page hide its own text from the check by wrapping it in such an effect).
"""

import re

Rect = tuple[float, float, float, float]  # left, top, right, bottom

_FUNCTION = re.compile(r"([a-z-]+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
_NUMBER = re.compile(r"^(-?[\d.]+(?:e-?\d+)?)(px|%)?$")
_ALPHA = re.compile(r"rgba\([^,]+,[^,]+,[^,]+,\s*([\d.]+)\s*\)")


def _amount(token: str) -> float | None:
    """A filter amount: a number, or a percentage of 1."""
    m = _NUMBER.match(token.strip())
    if not m:
        return None
    v = float(m.group(1))
    return v / 100 if m.group(2) == "%" else v


def _length(token: str, of: float) -> float | None:
    """A length in px, or a percentage of `of`."""
    m = _NUMBER.match(token.strip())
    if not m:
        return None
    v = float(m.group(1))
    return v * of / 100 if m.group(2) == "%" else v


def filter_opacity(value: str) -> float:
    """The factor a `filter` list multiplies the alpha of what it paints by (opacity() functions)."""
    out = 1.0
    for name, args in _FUNCTION.findall(value or ""):
        if name == "opacity" and (a := _amount(args)) is not None:
            out *= min(1.0, max(0.0, a))
    return out


def filter_blur_px(value: str) -> float:
    """The standard deviation, in px, of the blur a `filter` list applies (blur() functions add up)."""
    total = 0.0
    for name, args in _FUNCTION.findall(value or ""):
        if name == "blur" and (a := _length(args, 0.0)) is not None:
            total += max(0.0, a)
    return total


def _inset(args: str, box: Rect) -> Rect | None:
    parts = args.split(" round ")[0].split()[:4]
    if not parts:
        return None
    # CSS's 1-4 value shorthand: top, right, bottom, left
    top, right, bottom, left = {1: (0, 0, 0, 0), 2: (0, 1, 0, 1), 3: (0, 1, 2, 1), 4: (0, 1, 2, 3)}[len(parts)]
    w, h = box[2] - box[0], box[3] - box[1]
    t, r, b, l = _length(parts[top], h), _length(parts[right], w), _length(parts[bottom], h), _length(parts[left], w)
    if None in (t, r, b, l):
        return None
    return (box[0] + l, box[1] + t, box[2] - r, box[3] - b)


def _polygon(args: str, box: Rect) -> Rect | None:
    w, h = box[2] - box[0], box[3] - box[1]
    points = []
    for pair in args.split(","):
        xy = pair.split()
        if xy and xy[0] in ("nonzero", "evenodd"):
            xy = xy[1:]
        if len(xy) != 2:
            continue
        x, y = _length(xy[0], w), _length(xy[1], h)
        if x is None or y is None:
            return None
        points.append((box[0] + x, box[1] + y))
    if len(points) < 3:
        return (box[0], box[1], box[0], box[1])
    area = abs(sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(points, points[1:] + points[:1]))) / 2
    if area < 1.0:  # collinear points enclose nothing
        return (box[0], box[1], box[0], box[1])
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def clip_path_rect(value: str, box: Rect) -> Rect | None:
    """An outer bound of what a `clip-path` leaves of `box` (the border box, as the layout gives it), or
    None when it clips nothing we can judge. Against another reference box only what surely holds
    is used: an inset from the padding, content or fill box is inside the same inset from the
    border box; a polygon enclosing nothing or a zero radius encloses nothing against any box."""
    value = (value or "").strip()
    if not value or value == "none" or value.startswith("url("):
        return None
    reference = next((w for w in value.split() if w.endswith("-box")), "border-box")
    nothing = (box[0], box[1], box[0], box[1])
    for name, args in _FUNCTION.findall(value):
        if name == "inset":
            return _inset(args, box) if reference in ("border-box", "padding-box", "content-box", "fill-box") else None
        if name == "polygon":
            kept = _polygon(args, box)
            return kept if reference == "border-box" or kept == nothing else None
        if name in ("circle", "ellipse"):
            # a circle may reach past the box (text overflowing it shows): only a zero radius is judged
            radii = args.split(" at ")[0].split()[:2]
            return nothing if any((v := _length(r, 1.0)) is not None and v <= 0 for r in radii) else None
    return None


def clip_rect(value: str, box: Rect) -> Rect | None:
    """What the legacy `clip: rect(top, right, bottom, left)` of an absolutely positioned box leaves
    of it (`auto` keeps that side), or None."""
    m = re.match(r"rect\(([^()]*)\)", (value or "").strip())
    if not m:
        return None
    parts = [p.strip() for p in m.group(1).replace(",", " ").split()]
    if len(parts) != 4:
        return None
    top, right, bottom, left = (None if p == "auto" else _length(p, 0.0) for p in parts)
    return (box[0] + (left or 0.0), box[1] + (top or 0.0),
            box[2] if right is None else box[0] + right, box[3] if bottom is None else box[1] + bottom)


def mask_hides(value: str) -> bool:
    """A `mask-image` every layer of which is a gradient of only transparent colours masks out all."""
    value = (value or "").strip()
    if not value or value == "none":
        return False
    layers = _FUNCTION.findall(value)
    if not layers or any(not name.endswith("gradient") for name, _ in layers):
        return False  # an image or url() mask: not judged
    for _, args in layers:
        colors = re.findall(r"rgba?\([^()]*\)|transparent", args)
        if not colors:
            return False
        for c in colors:
            if c == "transparent":
                continue
            a = _ALPHA.match(c)
            if not a or float(a.group(1)) > 0.0:
                return False
    return True


def contains_paint(value: str) -> bool:
    """`contain: paint` (or strict, content) clips the box's contents to it, positioned ones too."""
    words = (value or "").split()
    return any(w in ("paint", "strict", "content") for w in words)
