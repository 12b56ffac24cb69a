"""Pixel measures on screenshots (PNG bytes): flatness and change between two frames."""

import io

import numpy as np
from PIL import Image


def to_array(png: bytes) -> np.ndarray:
    """RGB as int16 (so differences do not wrap)."""
    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.int16)


def text_mask(boxes: list, size: tuple[int, int]) -> np.ndarray | None:
    """True on the pixels inside any of the boxes [left, top, right, bottom] (the page's own text).

    Painted at once whatever their number: +1 and -1 at each box's corners, summed along both axes."""
    w, h = int(size[0]), int(size[1])
    corners = np.array([b for b in boxes if len(b) == 4], dtype=np.float64).reshape(-1, 4)
    if not len(corners):
        return None
    x0, y0, x1, y1 = (np.clip(np.floor(corners[:, i]) if i < 2 else np.ceil(corners[:, i]), 0, lim).astype(np.intp)
                      for i, lim in enumerate((w, h, w, h)))
    keep = (x1 > x0) & (y1 > y0)
    x0, y0, x1, y1 = x0[keep], y0[keep], x1[keep], y1[keep]
    edges = np.zeros((h + 1, w + 1), dtype=np.int32)
    for ys, xs, sign in ((y0, x0, 1), (y0, x1, -1), (y1, x0, -1), (y1, x1, 1)):
        np.add.at(edges, (ys, xs), sign)
    return edges.cumsum(axis=0).cumsum(axis=1)[:h, :w] > 0


def off_dominant_share(rgb: np.ndarray, tolerance: int, mask: np.ndarray | None = None) -> float:
    """Share of all pixels, outside the masked ones, differing by more than `tolerance` in some
    channel from the most frequent colour.

    A flat colour with the page's text masked is 0; a few small lit objects are well above. The
    share is of the whole frame, so a mask can only lower it.
    """
    packed = (rgb[..., 0].astype(np.int32) << 16) | (rgb[..., 1].astype(np.int32) << 8) | rgb[..., 2].astype(np.int32)
    values, counts = np.unique(packed.ravel(), return_counts=True)
    dom = int(values[np.argmax(counts)])
    dominant = np.array([(dom >> 16) & 255, (dom >> 8) & 255, dom & 255], dtype=np.int16)
    off = np.abs(rgb - dominant).max(axis=-1) > tolerance
    if mask is not None and mask.shape == off.shape:
        off &= ~mask
    return float(off.mean())


def changed_share(a: np.ndarray, b: np.ndarray, tolerance: int, mask: np.ndarray | None = None) -> float:
    """Share of all pixels, outside the masked ones, whose colour changed by more than `tolerance`."""
    if a.shape != b.shape:
        return 1.0
    changed = np.abs(a - b).max(axis=-1) > tolerance
    if mask is not None and mask.shape == changed.shape:
        changed &= ~mask
    return float(changed.mean())
