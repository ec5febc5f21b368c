"""The augmentation's definition, framework-free: constants, random windows, the resize.

One source of truth for what the presets mean, shared by the tf.data path
(`tfdata/images.py`), the TensorFlow-free host path (`host/images.py` on grain), the
gpu path and the device path. Only numpy; randomness comes from an explicit
`numpy.random.Generator`; `bilinear_window` is array-generic (numpy or jax.numpy).

`random_crop_window` reproduces TensorFlow's `sample_distorted_bounding_box` kernel
(tensorflow/core/kernels/image/sample_distorted_bounding_box_op.cc,
`GenerateRandomCrop` and `SatisfiesOverlapConstraints`) step by step, float32
arithmetic and round-half-to-even (`lrintf`) included, so the crops have the same
distribution (not the same draws: TF uses Philox, we use the Generator given).
"""

from __future__ import annotations

import numpy as np

PRESETS = ("standard", "heavy", "small")
MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)
CROP_FRACTION = 0.875  # evaluation: the center 87.5% (224 of 256)
AREA_RANGE = (0.08, 1.0)
ASPECT_RANGE = (3 / 4, 4 / 3)
MIN_OBJECT_COVERED = 0.1  # with the whole image as the "object": crops below 10% are
MAX_ATTEMPTS = 10  # rejected, so AREA_RANGE's 8% is effectively 10%; then whole image
# --preprocessing=auto: images whose shorter side is at most this many pixels get
# `small` (the crop above keeps a few pixels of a 32-pixel digit), larger ones `standard`.
SMALL_IMAGE_SIDE = 64

# Color distortion (heavy), applied in this order on [0, 1] images.
BRIGHTNESS_DELTA = 32.0 / 255.0
SATURATION_RANGE = (0.5, 1.5)
HUE_DELTA = 0.2
CONTRAST_RANGE = (0.5, 1.5)

_F = np.float32


def _lrintf(value) -> int:
    """C's lrintf under the default rounding mode: nearest, ties to even."""
    return int(np.rint(_F(value)))


def _generate_random_crop(width: int, height: int, min_rel: np.float32, max_rel: np.float32,
                          aspect: np.float32, rng: np.random.Generator):
    """TF's GenerateRandomCrop: (x, y, w, h) or None when the constraints fail."""
    if max_rel <= 0 or aspect <= 0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return None
    # float * int * int in C++ is float32 arithmetic, left to right.
    min_area = _F(_F(min_rel * _F(width)) * _F(height))
    max_area = _F(_F(max_rel * _F(width)) * _F(height))
    crop_h = _lrintf(np.sqrt(_F(min_area / aspect), dtype=_F))
    max_h = _lrintf(np.sqrt(_F(max_area / aspect), dtype=_F))
    if _lrintf(_F(max_h) * aspect) > width:
        # (width + 0.5 - kEps) / aspect is double arithmetic, truncated to int.
        max_h = int((width + 0.5 - float(_F(1e-7))) / float(aspect))
        if _lrintf(_F(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    crop_h = min(crop_h, max_h)
    if crop_h < max_h:
        # random->Uniform(n) is in [0, n - 1]: heights in [crop_h, max_h] inclusive.
        crop_h += int(rng.integers(0, max_h - crop_h + 1))
    crop_w = _lrintf(_F(crop_h) * aspect)
    area = _F(crop_w * crop_h)
    if area < min_area:  # rounding fixes, as the kernel does them
        crop_h += 1
        crop_w = _lrintf(_F(crop_h) * aspect)
        area = _F(crop_w * crop_h)
    if area > max_area:
        crop_h -= 1
        crop_w = _lrintf(_F(crop_h) * aspect)
        area = _F(crop_w * crop_h)
    if (area < min_area or area > max_area or crop_w > width or crop_h > height
            or crop_w <= 0 or crop_h <= 0):
        return None
    # Trap: Uniform(H - h) never reaches H - h, so a crop never touches the bottom
    # or right edge unless it spans the whole height or width. Kept for fidelity.
    y = int(rng.integers(0, height - crop_h)) if crop_h < height else 0
    x = int(rng.integers(0, width - crop_w)) if crop_w < width else 0
    return x, y, crop_w, crop_h


def random_crop_window(height: int, width: int, rng: np.random.Generator,
                       area_range=AREA_RANGE, aspect_range=ASPECT_RANGE):
    """An Inception-style crop window of a height x width image.

    Same distribution as `tf.image.stateless_sample_distorted_bounding_box` with the
    whole image as the only box, min_object_covered=0.1, max_attempts=10 and
    use_image_if_no_bounding_boxes=True (see tfdata/images.py, random_crop_window).

    Args:
        height: image height in pixels.
        width: image width in pixels.
        rng: the source of randomness.
        area_range: (min, max) fraction of the image area.
        aspect_range: (min, max) of width / height.

    Returns:
        (y, x, h, w) as Python ints; the whole image when no attempt succeeded.
    """
    height, width = int(height), int(width)
    lo_aspect, hi_aspect = _F(aspect_range[0]), _F(aspect_range[1])
    min_rel, max_rel = _F(area_range[0]), _F(area_range[1])
    image_area = _F(width * height)
    for _ in range(MAX_ATTEMPTS):
        # RandFloat() is in [0, 1), like Generator.random(float32).
        aspect = _F(_F(rng.random(dtype=_F) * _F(hi_aspect - lo_aspect)) + lo_aspect)
        crop = _generate_random_crop(width, height, min_rel, max_rel, aspect, rng)
        if crop is None:
            continue
        x, y, w, h = crop
        area = _F(w * h)
        # SatisfiesOverlapConstraints against the whole image (the crop is inside it).
        if area >= 1 and image_area >= 1 and _F(area / image_area) >= _F(MIN_OBJECT_COVERED):
            return y, x, h, w
    return 0, 0, height, width


def center_crop_window(height: int, width: int, fraction: float = CROP_FRACTION):
    """The centered square (y, x, side, side) kept for evaluation.

    Equal to tfdata/images.py's center_crop_window: side = int(float32(fraction) * min side),
    at least 1, and the odd pixel left over goes to the top/left margin.
    """
    side = max(1, int(_F(fraction) * _F(min(height, width))))
    return (height - side + 1) // 2, (width - side + 1) // 2, side, side


def random_shift_offsets(size: int, rng: np.random.Generator):
    """(pad, dy, dx) of the "small" preset's random shift.

    The image is padded by `pad` = max(1, size // 8) zeros on each side and a
    size x size window is cut at (dy, dx), each uniform in [0, 2 * pad] inclusive,
    as tf.image.stateless_random_crop does.
    """
    pad = max(1, size // 8)
    dy, dx = rng.integers(0, 2 * pad + 1, size=2)
    return pad, int(dy), int(dx)


def flip_draw(rng: np.random.Generator) -> bool:
    """True with probability 1/2: mirror left-right."""
    return bool(rng.random() < 0.5)


def color_distort_params(rng: np.random.Generator):
    """(brightness delta, saturation factor, hue delta, contrast factor), each uniform
    in its half-open range, as tfdata/images.py's color_distort draws them."""
    return (float(rng.uniform(-BRIGHTNESS_DELTA, BRIGHTNESS_DELTA)),
            float(rng.uniform(*SATURATION_RANGE)),
            float(rng.uniform(-HUE_DELTA, HUE_DELTA)),
            float(rng.uniform(*CONTRAST_RANGE)))


# ---- the bilinear resize, TensorFlow's arithmetic, for numpy and jax.numpy alike

def _axis_weights(xp, start, length, size: int):
    """(lower index, upper index, lerp) along one axis of the box, as TF computes them.

    TF (resize_bilinear_op.cc, HalfPixelScaler): in = (out + 0.5) * scale - 0.5 in
    float32 with scale = in_size / out_size; lower = max(floor(in), 0);
    upper = min(ceil(in), in_size - 1); lerp = in - floor(in). Using floor + 1
    for ceil gives the same pixel values (when in is whole, lerp is 0).
    """
    f32 = xp.float32
    scale = xp.asarray(length, f32) / f32(size)
    where = (xp.arange(size, dtype=f32) + f32(0.5)) * scale - f32(0.5)
    floor = xp.floor(where)
    lerp = where - floor
    floor = floor.astype(xp.int32)
    last = xp.asarray(length, xp.int32) - 1
    lower = xp.clip(floor, 0, last) + start
    upper = xp.clip(floor + 1, 0, last) + start
    return lower, upper, lerp


def bilinear_window(xp, flat, width, box, size: int, flip, base=0):
    """tf.image.resize(bilinear, antialias=False) of the window `box` (y, x, h, w) of an
    image held as `flat` ([pixels, C]; pixel (y, x) at base + y * width + x), mirrored
    where `flip` (None: never): float32 [size, size, C] in [0, 255]. Array-generic
    (`xp` is numpy or jax.numpy), so the host, the gpu canvas step and the device
    pipeline run the same arithmetic: half-pixel centers, float32, x then y."""
    ylo, yhi, ly = _axis_weights(xp, box[0], box[2], size)
    xlo, xhi, lx = _axis_weights(xp, box[1], box[3], size)
    if flip is not None:  # mirroring the output = reading the columns right to left
        xlo = xp.where(flip, xlo[::-1], xlo)
        xhi = xp.where(flip, xhi[::-1], xhi)
        lx = xp.where(flip, lx[::-1], lx)

    def take(rows, cols):
        return flat[base + rows[:, None] * width + cols[None, :]].astype(xp.float32)

    lx3, ly3 = lx[None, :, None], ly[:, None, None]
    top_left, top_right = take(ylo, xlo), take(ylo, xhi)
    bottom_left, bottom_right = take(yhi, xlo), take(yhi, xhi)
    top = top_left + (top_right - top_left) * lx3
    bottom = bottom_left + (bottom_right - bottom_left) * lx3
    return xp.clip(top + (bottom - top) * ly3, 0.0, 255.0)
