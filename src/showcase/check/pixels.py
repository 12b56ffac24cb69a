"""Pixel measures on screenshots (PNG bytes): flatness and change between two frames."""

import io

import numpy as np
from PIL import Image


def to_array(png: bytes) -> np.ndarray:
    """RGB as int16 (so differences do not wrap)."""
    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.int16)


def off_dominant_share(rgb: np.ndarray, tolerance: int) -> float:
    """Share of pixels differing by more than `tolerance` in some channel from the most frequent colour.

    A flat colour (even with a small HUD on it) is near 0; any real scene is far above.
    """
    packed = (rgb[..., 0].astype(np.int32) << 16) | (rgb[..., 1].astype(np.int32) << 8) | rgb[..., 2].astype(np.int32)
    values, counts = np.unique(packed.ravel(), return_counts=True)
    dom = int(values[np.argmax(counts)])
    dominant = np.array([(dom >> 16) & 255, (dom >> 8) & 255, dom & 255], dtype=np.int16)
    return float((np.abs(rgb - dominant).max(axis=-1) > tolerance).mean())


def changed_share(a: np.ndarray, b: np.ndarray, tolerance: int) -> float:
    """Share of pixels whose colour changed by more than `tolerance` in some channel."""
    if a.shape != b.shape:
        return 1.0
    return float((np.abs(a - b).max(axis=-1) > tolerance).mean())
