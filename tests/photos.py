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
           progressive: bool = False, subsampling: int | None = None) -> bytes:
    """subsampling (JPEG): PIL's 0 (4:4:4), 1 (4:2:2), 2 (4:2:0); None: PIL's default."""
    buffer = io.BytesIO()
    extra = {} if subsampling is None else {"subsampling": subsampling}
    Image.fromarray(pixels).convert(mode).save(buffer, format=fmt, quality=90,
                                               progressive=progressive, **extra)
    return buffer.getvalue()


def assorted_jpegs(folder) -> list:
    """24 JPEGs of assorted sizes in `folder` (the 4th gray, the 6th progressive), as
    (path, label) records with labels 0-5."""
    rng = np.random.default_rng(0)
    records = []
    for i in range(24):
        height, width = (int(v) for v in rng.integers(40, 160, 2))
        data = encode(photo(height, width, i), mode="L" if i == 3 else "RGB",
                      progressive=(i == 5))
        path = folder / f"{i:02d}.JPEG"
        path.write_bytes(data)
        records.append((str(path), i % 6))
    return records
