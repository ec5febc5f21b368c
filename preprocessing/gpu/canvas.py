"""Crop, resize, flip and normalize a whole batch on the device in one compiled step.

The GPU pipeline decodes a batch's images into one fixed-shape uint8 canvas
[B, Hc, Wc, 3] (image i in slot i, from its top-left corner); `make_canvas_step`
returns the jitted function that cuts each image's box out of its slot and
resizes it to size x size. The canvas comes in a few bucketed shapes, so XLA
compiles a handful of programs in all, never one per batch.

The resize is tf.image.resize's bilinear, antialias=False (the `standard` preset):
half-pixel centers, float32 arithmetic, the same clamping at the edges and the same
order of interpolation (along x, then y), so pixels match TensorFlow's to float
rounding. `resize_bilinear_host` is the same arithmetic in numpy, for images too
large for the canvas and for the tests.
"""

from __future__ import annotations

import functools

import numpy as np

from preprocessing.augment import MEAN_RGB, STDDEV_RGB


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


def _bilinear(xp, flat, width: int, box, size: int, flip):
    """Bilinear samples (float32 [size, size, C]) of the box (y, x, h, w) of an image
    given as `flat` ([H * W, C], rows of `width` pixels), mirrored where `flip`."""
    ylo, yhi, ly = _axis_weights(xp, box[0], box[2], size)
    xlo, xhi, lx = _axis_weights(xp, box[1], box[3], size)
    if flip is not None:  # mirroring the output = reading the columns right to left
        xlo = xp.where(flip, xlo[::-1], xlo)
        xhi = xp.where(flip, xhi[::-1], xhi)
        lx = xp.where(flip, lx[::-1], lx)

    def take(rows, cols):
        return flat[rows[:, None] * width + cols[None, :]].astype(xp.float32)

    lx3, ly3 = lx[None, :, None], ly[:, None, None]
    top_left, top_right = take(ylo, xlo), take(ylo, xhi)
    bottom_left, bottom_right = take(yhi, xlo), take(yhi, xhi)
    top = top_left + (top_right - top_left) * lx3
    bottom = bottom_left + (bottom_right - bottom_left) * lx3
    return xp.clip(top + (bottom - top) * ly3, 0.0, 255.0)


def make_canvas_step(image_size: int, dtype: str = "float32"):
    """Returns step(canvas, sources, boxes, flips, valid) -> (images, done).

    images: [B, size, size, 3] of `dtype`. done: a scalar from the same program,
    ready once the program has run (so once the canvas may be written again),
    whatever becomes of `images`.

    Args (of step):
        canvas: uint8 [B, Hc, Wc, 3], image i in slot i from its top-left corner.
        sources: int32 [B], the slot each output image is cut from (normally i;
            another slot to stand in for an image that could not be decoded).
        boxes: int32 [B, 4], (y, x, h, w) of each window inside its slot.
        flips: bool [B], mirror left-right.
        valid: bool [B]; False images come out as zeros (eval padding).
    """
    import jax
    import jax.numpy as jnp

    mean = jnp.asarray(MEAN_RGB, jnp.float32)
    std = jnp.asarray(STDDEV_RGB, jnp.float32)

    @jax.jit
    def step(canvas, sources, boxes, flips, valid):
        slots, height, width, _ = canvas.shape
        flat = canvas.reshape(slots * height * width, 3)

        def one(source, box, flip, ok):
            # Row `source * height + y` of the flattened canvas is row y of the slot.
            box = box.at[0].add(source * height)
            image = _bilinear(jnp, flat, width, box, image_size, flip)
            return jnp.where(ok, (image - mean) / std, 0.0).astype(dtype)

        return jax.vmap(one)(sources, boxes, flips, valid), sources[0]

    return step


@functools.lru_cache(maxsize=None)
def canvas_step(image_size: int, dtype: str):
    """One jitted step per (size, dtype) for the whole process (shared compile cache)."""
    return make_canvas_step(image_size, dtype)


def resize_bilinear_host(image: np.ndarray, size: int, flip: bool = False) -> np.ndarray:
    """tf.image.resize(image, [size, size], "bilinear", antialias=False) in numpy,
    then mirrored if `flip`. Returns float32 [size, size, C] in [0, 255]."""
    height, width = image.shape[:2]
    flat = np.ascontiguousarray(image).reshape(height * width, -1)
    box = (0, 0, height, width)
    return _bilinear(np, flat, width, box, size, np.bool_(True) if flip else None)


def normalize_host(image: np.ndarray) -> np.ndarray:
    """(image - MEAN_RGB) / STDDEV_RGB in float32, as the device step does."""
    return ((image.astype(np.float32) - np.asarray(MEAN_RGB, np.float32))
            / np.asarray(STDDEV_RGB, np.float32))
