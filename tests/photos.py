"""Test images made with numpy and PIL only (no TensorFlow: the GPU machine imports
this too): photo-like pixels and their encoded bytes."""

import io

import numpy as np
from PIL import Image


def photo(height: int, width: int, seed: int) -> np.ndarray:
    """Smooth content with some noise, like a photo (JPEG keeps it well)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    a, b, phase = rng.uniform(0.01, 0.08, 2).tolist() + [rng.uniform(0, 6)]
    base = (np.sin(xx * a + phase) + np.cos(yy * b)) * 60 + 128
    image = np.stack([base, np.roll(base, 7, 1), 255 - base], -1) + rng.normal(0, 4, (height, width, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def encode(pixels: np.ndarray, fmt: str = "JPEG", mode: str = "RGB",
           progressive: bool = False) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, format=fmt, quality=90,
                                               progressive=progressive)
    return buffer.getvalue()
