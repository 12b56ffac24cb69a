"""Text a person sees that is not a text node: the words in an SVG image, the alt text of a broken image.

An `<img>` or a CSS background whose image is an SVG `data:` URL shows the SVG's `<text>` (and its
`<foreignObject>` HTML) as pixels: the layout has no text for it, so the SVG is parsed here
(bounded in bytes and in characters). Chromium shows an image's `alt` text in place of an image
that did not load; whether it loaded is asked in an isolated world of the page's frame, whose
`complete`/`naturalWidth` the page's scripts cannot redefine.
"""

import base64
import re
from urllib.parse import unquote_to_bytes
from xml.etree import ElementTree

MAX_SVG_BYTES = 256_000  # a HUD's SVG is a few KB; a bigger one is not read (pyexpat also bounds entity expansion)
MAX_SVG_CHARS = 2_000  # of text read from one image
MAX_SVG_IMAGES = 32  # SVG images read per snapshot
MAX_ALT_IMAGES = 32  # images with alt text asked whether they loaded, per snapshot
WORLD = "showcase-visible-text"

# SVG elements whose content is never drawn where it stands (drawn only through a reference, or not at all)
_NOT_DRAWN = {"defs", "symbol", "clipPath", "mask", "pattern", "marker", "title", "desc", "metadata", "style",
              "script", "linearGradient", "radialGradient", "filter"}
_URL = re.compile(r'url\("((?:[^"\\]|\\.)*)"\)')


def svg_data(url: str) -> bytes | None:
    """The bytes of an SVG `data:` URL (bounded), or None."""
    head, comma, body = (url or "").partition(",")
    if not comma or not head.lower().startswith("data:image/svg+xml"):
        return None
    if len(body) > 3 * MAX_SVG_BYTES:
        return None
    try:
        data = base64.b64decode(body) if head.lower().endswith(";base64") else unquote_to_bytes(body)
    except ValueError:
        return None
    return data if len(data) <= MAX_SVG_BYTES else None


def css_image_urls(value: str) -> list[str]:
    """The URLs of a computed `background-image` (Chromium writes each as url("...") with \\-escapes)."""
    return [re.sub(r"\\(.)", r"\1", u) for u in _URL.findall(value or "")]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _hidden(el: ElementTree.Element) -> bool:
    style = {k.strip(): v.strip() for k, _, v in (p.partition(":") for p in (el.get("style") or "").split(";"))}
    for prop in ("display", "visibility", "opacity", "fill-opacity"):
        v = (style.get(prop) or el.get(prop) or "").strip().lower()
        if prop == "display" and v == "none" or prop == "visibility" and v in ("hidden", "collapse"):
            return True
        if prop in ("opacity", "fill-opacity") and v:
            try:
                if (float(v[:-1]) / 100 if v.endswith("%") else float(v)) <= 0.0:
                    return True
            except ValueError:
                pass
    return False


def _number(value: str | None) -> float | None:
    m = re.match(r"\s*(-?[\d.]+(?:e-?\d+)?)(px)?\s*$", value or "")
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def _font_px(el: ElementTree.Element, inherited: float) -> float:
    style = dict(p.split(":", 1) for p in (el.get("style") or "").split(";") if ":" in p)
    v = _number(style.get("font-size") or el.get("font-size"))
    return v if v is not None else inherited


def _viewport(root: ElementTree.Element) -> tuple[float, float] | None:
    """The SVG's own drawing area in user units (its viewBox, else its width and height), or None."""
    box = [_number(v) for v in re.split(r"[\s,]+", (root.get("viewBox") or "").strip()) if v]
    if len(box) == 4 and None not in box and box[0] == 0 and box[1] == 0:
        return box[2], box[3]
    w, h = _number(root.get("width")), _number(root.get("height"))
    return (w, h) if w and h and not root.get("viewBox") else None


def svg_text(data: bytes, drawn_height: float | None = None, min_px: float = 0.0) -> str:
    """The text an SVG image draws: its <text> (tspans, textPaths, <use> of a text) and
    <foreignObject> content, outside what is never drawn in place and what is hidden. Where the
    SVG's drawing area is known, a <text> placed wholly outside it, or drawn (scaled to
    `drawn_height` px) under `min_px`, is not read."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, ValueError):
        return ""
    area = _viewport(root)
    scale = drawn_height / area[1] if area and drawn_height else 1.0
    by_id = {el.get("id"): el for el in root.iter() if el.get("id")}
    pieces: list[str] = []
    budget = [MAX_SVG_CHARS]

    def add(text: str | None) -> None:
        if text and text.strip() and budget[0] > 0:
            pieces.append(text.strip()[: budget[0]])
            budget[0] -= len(pieces[-1])

    def outside(el: ElementTree.Element, font: float, placed: bool) -> bool:
        """A <text> too small to read once drawn, or (not moved by a transform) past the drawing area."""
        if font * scale < min_px:
            return True
        if not placed or area is None:
            return False
        x, y = _number((el.get("x") or "0").split()[0] if el.get("x") else "0"), \
            _number((el.get("y") or "0").split()[0] if el.get("y") else "0")
        if x is None or y is None:
            return False
        length = len("".join(el.itertext())) * font  # wider than any glyph run of that many letters
        return x >= area[0] or x + length <= 0 or y <= 0 or y - font >= area[1]

    def walk(el: ElementTree.Element, in_text: bool, depth: int, font: float = 16.0, placed: bool = True) -> None:
        name = _local(el.tag)
        if depth > 64 or name in _NOT_DRAWN or _hidden(el) or budget[0] <= 0:
            return
        font = _font_px(el, font)
        placed = placed and not el.get("transform") and name not in ("svg", "use") or el is root
        if name == "text" and not in_text and outside(el, font, placed):
            return
        inside = in_text or name in ("text", "foreignObject")
        if inside:
            add(el.text)
        if name == "use" and depth < 32:
            ref = el.get("href") or el.get("{http://www.w3.org/1999/xlink}href") or ""
            target = by_id.get(ref[1:]) if ref.startswith("#") else None
            if target is not None and target is not el:
                for child in ([target] if _local(target.tag) != "symbol" else list(target)):
                    walk(child, False, depth + 16, font, False)  # a bounded depth: a <use> cycle ends
        for child in el:
            walk(child, inside, depth + 1, font, placed)
            if inside:
                add(child.tail)

    walk(root, False, 0)
    return " ".join(pieces)


async def broken_images(send, snap: dict) -> dict[int, set[int]]:
    """Per document of `snap`, the nodes of images with alt text that did not load (Chromium shows
    their alt text). Asked in an isolated world: the page cannot redefine what it answers."""
    s = snap.get("strings") or []
    out: dict[int, set[int]] = {}
    asked = 0
    for di, doc in enumerate(snap.get("documents") or []):
        nodes = doc.get("nodes") or {}
        names, attrs, backend = nodes.get("nodeName", []), nodes.get("attributes", []), nodes.get("backendNodeId", [])
        wanted = []
        for ni, n in enumerate(names):
            if asked + len(wanted) >= MAX_ALT_IMAGES:
                break
            name = s[n].upper() if isinstance(n, int) and 0 <= n < len(s) else ""
            if name not in ("IMG", "INPUT") or ni >= len(backend):
                continue
            row = attrs[ni] if ni < len(attrs) else []
            pairs = {s[row[k]].lower(): s[row[k + 1]] for k in range(0, len(row) - 1, 2)}
            if (pairs.get("alt") or "").strip() and (name == "IMG" or pairs.get("type", "").lower() == "image"):
                wanted.append(ni)
        frame = doc.get("frameId")
        if not wanted or not isinstance(frame, int) or not 0 <= frame < len(s):
            continue
        asked += len(wanted)
        try:
            world = await send("Page.createIsolatedWorld", {"frameId": s[frame], "worldName": WORLD})
            context = world["executionContextId"]
        except Exception:
            continue  # a frame in another process: its images are not in this snapshot's reach either
        for ni in wanted:
            try:
                obj = await send("DOM.resolveNode", {"backendNodeId": backend[ni], "executionContextId": context,
                                                     "objectGroup": WORLD})
                answer = await send("Runtime.callFunctionOn", {
                    "objectId": obj["object"]["objectId"], "returnByValue": True,
                    "functionDeclaration": "function () { return this.complete && this.naturalWidth === 0; }"})
            except Exception:
                continue
            if (answer.get("result") or {}).get("value") is True:
                out.setdefault(di, set()).add(ni)
        try:
            await send("Runtime.releaseObjectGroup", {"objectGroup": WORLD})
        except Exception:
            pass
    return out
