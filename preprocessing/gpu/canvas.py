"""Crop, resize, flip and normalize a whole batch on the device in one compiled step.

The GPU pipeline decodes a batch's images into one fixed-shape uint8 canvas
[B, Hc, Wc, 3] (image i in slot i, from its top-left corner); `make_canvas_step`
returns the jitted function that cuts each image's box out of its slot and
resizes it to size x size. The canvas comes in a few bucketed shapes, so XLA
compiles a handful of programs in all, never one per batch.

The resize is augment.bilinear_window, tf.image.resize's bilinear, antialias=False:
half-pixel centers, float32 arithmetic, the same clamping at the edges and the same
order of interpolation (along x, then y), so pixels match TensorFlow's to float
rounding. `resize_bilinear_host` is the same arithmetic in numpy, for images too
large for the canvas and for the tests.
"""

from __future__ import annotations

import functools

import numpy as np

from preprocessing.augment import MEAN_RGB, STDDEV_RGB, bilinear_window


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
            image = bilinear_window(jnp, flat, width, box, image_size, flip)
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
    return bilinear_window(np, flat, width, box, size, np.bool_(True) if flip else None)


def normalize_host(image: np.ndarray) -> np.ndarray:
    """(image - MEAN_RGB) / STDDEV_RGB in float32, as the device step does."""
    return ((image.astype(np.float32) - np.asarray(MEAN_RGB, np.float32))
            / np.asarray(STDDEV_RGB, np.float32))
