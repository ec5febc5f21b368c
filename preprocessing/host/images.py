"""TensorFlow-free image functions on the host: crop, resize, flip, color, and the
train and eval transforms from bytes (decoded by decoding.py) to a network's input.

The numpy twin of `preprocessing/tfdata/images.py`, for the JAX backend on hosts without TensorFlow
(the grain pipeline). Each preset means exactly what it means there: the crop
windows come from `augment.py` (TF's sampling algorithm), the resizes reproduce
`tf.image.resize(antialias=False)` (half-pixel centers, no antialiasing), and the
color distortion reproduces TF's AdjustSaturation / AdjustHue kernels. OpenCV
resizes (bilinear) when installed: 6x faster than the numpy fallback, same values to
0.005 of a level, imported lazily: importing this module costs only numpy.
"""

from __future__ import annotations

import functools

import numpy as np

from preprocessing import augment
from preprocessing.host.decoding import (  # noqa: F401 (read as images' too)
    UndecodableImage,
    decode,
    decodes_file,
    image_format,
    pillow,
    read_image_file,
)


@functools.lru_cache(maxsize=1024)
def _taps(in_size: int, out_size: int, method: str):
    """(indices [out, k], weights [out, k]) of TF's half-pixel resize kernels."""
    f32 = np.float32
    scale = f32(in_size) / f32(out_size)
    loc = (np.arange(out_size, dtype=f32) + f32(0.5)) * scale - f32(0.5)
    floor = np.floor(loc)
    base = floor.astype(np.int64)
    if method == "bilinear":  # resize_bilinear: clamp both taps, lerp = loc - floor
        taps = np.stack([base, base + 1], 1).clip(0, in_size - 1)
        return taps, (loc - floor)[:, None]
    # resize_bicubic, half-pixel: Keys a=-0.5 from a 1024-entry table; taps outside
    # the image get weight 0 and the rest are renormalized to sum to 1.
    a, table_size = -0.5, 1024
    x = (np.arange(table_size + 1) / table_size).astype(f32).astype(np.float64)
    near = (((a + 2) * x - (a + 3)) * x * x + 1).astype(f32)
    x1 = (x.astype(f32) + 1.0).astype(f32).astype(np.float64)
    far = (((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a).astype(f32)
    offset = np.rint((loc - floor) * f32(table_size)).astype(np.int64)
    weights = np.stack([far[offset], near[offset], near[table_size - offset],
                        far[table_size - offset]], 1)
    taps = base[:, None] + np.arange(-1, 3)[None, :]
    weights = np.where((taps >= 0) & (taps < in_size), weights, f32(0))
    weights = weights * (f32(1) / weights.sum(1, dtype=f32))[:, None]
    return taps.clip(0, in_size - 1), weights


def _resample(image: np.ndarray, size: int, axis: int, method: str) -> np.ndarray:
    """Resizes one axis (0: rows, 1: columns) with TF's arithmetic, tap by tap."""
    taps, weights = _taps(image.shape[axis], size, method)
    shape = (-1, 1, 1) if axis == 0 else (1, -1, 1)
    if method == "bilinear":  # TF's lerp form: a + (b - a) * t
        low, high = np.take(image, taps[:, 0], axis), np.take(image, taps[:, 1], axis)
        return low + (high - low) * weights.reshape(shape)
    out = np.take(image, taps[:, 0], axis) * weights[:, 0].reshape(shape)
    for k in range(1, 4):
        out += np.take(image, taps[:, k], axis) * weights[:, k].reshape(shape)
    return out


def resize(image: np.ndarray, size: int, method: str = "bilinear") -> np.ndarray:
    """Resizes to size x size like tf.image.resize(antialias=False), then clips.

    Returns:
        float32 [size, size, 3] in [0, 255].
    """
    if method not in ("bilinear", "bicubic"):
        raise ValueError(f"unknown resize method {method!r}; accepted: bilinear, bicubic")
    image = np.asarray(image, np.float32)  # float input: no uint8 rounding in OpenCV
    if image.shape[:2] == (size, size):  # both kernels are the identity at the same size
        return np.clip(image, 0.0, 255.0, dtype=np.float32)
    if method == "bilinear" and _cv2() is not None:
        # OpenCV's INTER_LINEAR is TF's half-pixel bilinear (no antialiasing).
        out = _cv2().resize(image, (size, size), interpolation=_cv2().INTER_LINEAR)
    elif method == "bilinear":  # TF interpolates along x first, then y
        out = _resample(_resample(image, size, 1, method), size, 0, method)
    else:  # and the bicubic kernel along y first, then x
        out = _resample(_resample(image, size, 0, method), size, 1, method)
    return np.clip(out, 0.0, 255.0, dtype=np.float32)


@functools.cache
def _cv2():
    try:
        import cv2
    except ImportError:
        return None
    cv2.setNumThreads(1)  # parallelism comes from the pipeline's worker processes
    return cv2


def _by_sector(sector: np.ndarray, high, middle, low) -> np.ndarray:
    """RGB from the hue sector: sector 0 is (high, middle, low), 1 (middle, high, low),
    2 (low, high, middle), 3 (low, middle, high), 4 (middle, low, high), 5 (high, low,
    middle), as both TF kernels' switches; a sector of 6 gives (low, low, low)."""
    def channel(high_sectors: int, middle_sectors: int):  # bit masks of sectors
        return np.where((high_sectors >> sector) & 1, high,
                        np.where((middle_sectors >> sector) & 1, middle, low))
    return np.stack([channel(0b100001, 0b010010), channel(0b000110, 0b001001),
                     channel(0b011000, 0b100100)])


def _min_mid_max(planes: np.ndarray):
    r, g, b = planes
    low, high = np.minimum(r, g), np.maximum(r, g)
    return np.minimum(low, b), np.maximum(low, np.minimum(high, b)), np.maximum(high, b)


def _adjust_saturation(planes: np.ndarray, factor: np.float32) -> np.ndarray:
    """TF's AdjustSaturation kernel (RGB -> HSV, scale S, clip, back) on [3, ...]."""
    r, g, b = planes
    v_min, _, v = _min_mid_max(planes)
    span = v - v_min
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, span / v, np.float32(0))
        norm = np.float32(1) / (np.float32(6) * span)
        # The kernel adds the double 2.0 / 6.0 to a float, then stores a float.
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, (norm * (b - r)).astype(np.float64) + 2.0 / 6.0,
                              (norm * (r - g)).astype(np.float64) + 4.0 / 6.0))
    h = np.where(span <= 0, np.float32(0), h)
    h = np.where(h < 0, h + np.float32(1), h).astype(np.float32)
    s = np.clip(s * factor, 0, 1).astype(np.float32)
    c = s * v
    dh = h * np.float32(6)
    x = c * (1 - np.abs(np.mod(dh, np.float32(2)) - 1))
    # h == 1.0 (sector 6) is the kernel's default case: black, plus m below.
    rgb = _by_sector(dh.astype(np.int32), c, x, np.float32(0))
    return rgb + (v - c)


def _adjust_hue(planes: np.ndarray, delta: np.float32) -> np.ndarray:
    """TF's AdjustHue kernel (rotate hue, keep the value range) on [3, ...]."""
    r, g, b = planes
    # The kernel's branches always sort the three values; its sector decides ties.
    v_min, v_mid, v_max = _min_mid_max(planes)
    lt = r < g
    sector = np.select([lt & (b < r), lt & (b > g), lt, b < g, b > r], [1, 3, 2, 0, 4], 5)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (v_mid - v_min) / (v_max - v_min)
    h = sector + np.where(sector % 2 == 0, ratio, 1 - ratio)
    h = np.where(v_max == v_min, np.float32(0), h).astype(np.float32)
    h = h + delta * np.float32(6)
    h = np.where(h < 0, h + np.float32(6), h)
    h = np.where(h >= 6, h - np.float32(6), h).astype(np.float32)
    sector = h.astype(np.int32)
    ratio = h - sector.astype(np.float32)  # stay in float32, as the kernel does
    ratio = np.where(sector % 2 == 0, ratio, 1 - ratio)
    return _by_sector(sector, v_max, v_min + ratio * (v_max - v_min), v_min)


def color_distort(image: np.ndarray, params) -> np.ndarray:
    """tfdata/images.py's color_distort on a float [0, 255] image, given augment's draws.

    Brightness, saturation, hue, contrast in that order on [0, 1], with no clipping
    between steps (as in TF), then clip and back to [0, 255].
    """
    brightness, saturation, hue, contrast = (np.float32(p) for p in params)
    # Channel planes [3, H, W]: contiguous, so the elementwise work is 5x faster.
    planes = np.ascontiguousarray(np.moveaxis(image, -1, 0), np.float32)
    planes = planes / np.float32(255) + brightness
    planes = _adjust_saturation(planes, saturation)
    planes = _adjust_hue(planes, hue)
    mean = planes.mean(axis=(1, 2), dtype=np.float32, keepdims=True)
    planes = (planes - mean) * contrast + mean
    return np.ascontiguousarray(np.moveaxis(np.clip(planes, 0, 1) * np.float32(255), 0, -1))


def normalize(image: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """(image - MEAN_RGB) / STDDEV_RGB per channel, cast to dtype (bfloat16 allowed)."""
    height, width = image.shape[:2]
    mean, std = _row_stats(width)
    # Rows of width * 3 values against tiled statistics: the same float32 math,
    # 8x faster than numpy broadcasting over a last axis of 3.
    rows = np.ascontiguousarray(image, np.float32).reshape(height, width * 3) - mean
    rows /= std
    return rows.reshape(height, width, 3).astype(numpy_dtype(dtype), copy=False)


@functools.lru_cache(maxsize=64)
def _row_stats(width: int):
    return (np.tile(np.asarray(augment.MEAN_RGB, np.float32), width),
            np.tile(np.asarray(augment.STDDEV_RGB, np.float32), width))


def shift(image: np.ndarray, pad: int, dy: int, dx: int) -> np.ndarray:
    """image padded by `pad` zeros on each side, then cut back to its size at (dy, dx)
    (the small preset's shift), written straight into the output: np.pad of a 28x28
    image took 97 us, ten times the rest of the shift."""
    height, width = image.shape[:2]
    out = np.zeros_like(image)
    rows, cols = dy - pad, dx - pad  # where the window starts in the image
    out[max(0, -rows):height - max(0, rows), max(0, -cols):width - max(0, cols)] = \
        image[max(0, rows):height + min(0, rows), max(0, cols):width + min(0, cols)]
    return out


def flip_left_right(image: np.ndarray) -> np.ndarray:
    """A mirrored copy (np.take: 3x faster than copying a reversed view)."""
    return np.take(image, np.arange(image.shape[1] - 1, -1, -1), axis=1)


def numpy_dtype(dtype: str):
    """The numpy dtype for a name; "bfloat16" comes from ml_dtypes (no TensorFlow)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def _check(preset: str) -> None:
    if preset not in augment.PRESETS:
        raise ValueError(f"unknown preset {preset!r}; accepted: {', '.join(augment.PRESETS)}")


def rgb(pixels: np.ndarray) -> np.ndarray:
    """uint8 [H, W(, 1 or 3)] pixels as [H, W, 3] (a gray image's channel repeated)."""
    pixels = np.asarray(pixels)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    return np.repeat(pixels, 3, axis=2) if pixels.shape[2] == 1 else pixels


def train_transform(preset: str, size: int, dtype: str = "float32", from_pixels: bool = False):
    """Returns fn(data: bytes, rng: numpy Generator) -> normalized size x size image.

    The same steps as the tf.data pipeline's train_transform, preset by preset.
    from_pixels: `data` is decoded uint8 pixels, not encoded bytes.
    """
    _check(preset)

    def transform(data: bytes, rng: np.random.Generator) -> np.ndarray:
        image = rgb(data) if from_pixels else decode(data)
        if preset == "small":
            pad, dy, dx = augment.random_shift_offsets(size, rng)
            return normalize(shift(resize(image, size), pad, dy, dx), dtype)
        y, x, h, w = augment.random_crop_window(image.shape[0], image.shape[1], rng)
        image = resize(image[y:y + h, x:x + w], size,
                       "bicubic" if preset == "heavy" else "bilinear")
        if augment.flip_draw(rng):
            image = flip_left_right(image)
        if preset == "heavy":
            image = color_distort(image, augment.color_distort_params(rng))
        return normalize(image, dtype)

    return transform


def eval_transform(preset: str, size: int, dtype: str = "float32", from_pixels: bool = False):
    """Returns fn(data: bytes) -> normalized size x size evaluation image.

    The same steps as tfdata/images.py's eval_transform: center 87.5% crop then bilinear
    resize (small: a plain resize).
    """
    _check(preset)

    def transform(data: bytes) -> np.ndarray:
        image = rgb(data) if from_pixels else decode(data)
        if preset != "small":
            y, x, h, w = augment.center_crop_window(image.shape[0], image.shape[1])
            image = image[y:y + h, x:x + w]
        return normalize(resize(image, size), dtype)

    return transform
