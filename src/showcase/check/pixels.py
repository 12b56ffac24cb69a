"""Pixel measures on screenshots (PNG bytes): flatness and change between two frames."""

import io

import numpy as np
from PIL import Image


def to_array(png: bytes) -> np.ndarray:
    """RGB as int16 (so differences do not wrap)."""
    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.int16)


def text_mask(boxes: list, size: tuple[int, int]) -> np.ndarray | None:
    """True on the pixels inside any of the boxes [left, top, right, bottom] (the page's own text)."""
    if not boxes:
        return None
    w, h = int(size[0]), int(size[1])
    mask = np.zeros((h, w), dtype=bool)
    for box in boxes[:2000]:
        try:
            x0, y0, x1, y1 = (int(v) for v in box)
        except (TypeError, ValueError):
            continue
        mask[max(0, y0):max(0, min(h, y1)), max(0, x0):max(0, min(w, x1))] = True
    return mask


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
