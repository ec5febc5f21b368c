"""The augmentation presets as one compiled function over a batch held on the device.

The decoded dataset lives in device memory as one packed uint8 buffer: image i's
pixels are rows `heights[i]` x `widths[i]` starting at pixel `offsets[i]` of `flat`
([total pixels, channels]). `make_augment` returns the jitted function that, for a
batch of indices and a PRNG key, draws each image's randomness on the device, cuts
and resizes every image and normalizes the batch, with the meaning each preset has
in the other pipelines (preprocessing/augment.py is the definition):
- small: bilinear resize to size x size, then a random shift of up to size/8 (pad
  with zeros, cut back); evaluation: the resize alone;
- standard: an Inception crop window drawn by TensorFlow's algorithm
  (`random_crop_windows` is augment.random_crop_window vectorized, float32 and
  round-half-to-even as there), bilinear resize, a flip with probability 1/2;
  evaluation: the center 87.5% crop, then the resize.
Resizes are tf.image.resize's bilinear (half-pixel centers, antialias=False, x then
y), so pixels equal TensorFlow's to float rounding. Same distributions as the host
pipelines, not the same draws (JAX's threefry, not numpy's PCG64).

Only JAX: the device pipeline never imports TensorFlow.
"""

from __future__ import annotations

import functools

from preprocessing import augment

def _lrint(jnp, value):
    """C's lrintf: float32 rounded to the nearest integer, ties to even."""
    return jnp.rint(value.astype(jnp.float32)).astype(jnp.int32)


def random_crop_windows(jax, key, heights, widths):
    """augment.random_crop_window for a batch: int32 [B, 4] windows (y, x, h, w).

    Each of augment.MAX_ATTEMPTS attempts is drawn for every image at once; an image
    takes its first attempt that satisfies the constraints, else the whole image,
    exactly as the host's loop does (it draws only what an attempt reaches; these are
    independent draws, so the distribution is the same).
    """
    jnp = jax.numpy
    f32 = jnp.float32
    height, width = heights.astype(jnp.int32), widths.astype(jnp.int32)
    h_f, w_f = height.astype(f32), width.astype(f32)
    lo, hi = f32(augment.ASPECT_RANGE[0]), f32(augment.ASPECT_RANGE[1])
    min_rel, max_rel = f32(augment.AREA_RANGE[0]), f32(augment.AREA_RANGE[1])
    min_area = (min_rel * w_f) * h_f
    max_area = (max_rel * w_f) * h_f
    image_area = w_f * h_f
    chosen = jnp.stack([jnp.zeros_like(height), jnp.zeros_like(height), height, width], 1)
    found = jnp.zeros(height.shape, bool)
    for attempt_key in jax.random.split(key, augment.MAX_ATTEMPTS):
        k_aspect, k_height, k_y, k_x = jax.random.split(attempt_key, 4)
        aspect = jax.random.uniform(k_aspect, height.shape, f32) * (hi - lo) + lo
        crop_h = _lrint(jnp, jnp.sqrt(min_area / aspect))
        max_h = _lrint(jnp, jnp.sqrt(max_area / aspect))
        # (width + 0.5 - eps) / aspect, truncated: the kernel's double arithmetic, here
        # in float32 (a quotient within float32 rounding of an integer may differ).
        narrowed = ((w_f + f32(0.5)) / aspect).astype(jnp.int32)
        narrowed = jnp.where(_lrint(jnp, narrowed.astype(f32) * aspect) > width,
                             narrowed - 1, narrowed)
        max_h = jnp.where(_lrint(jnp, max_h.astype(f32) * aspect) > width, narrowed, max_h)
        max_h = jnp.minimum(max_h, height)
        crop_h = jnp.minimum(crop_h, max_h)
        extra = jax.random.randint(k_height, height.shape, 0, jnp.maximum(max_h - crop_h + 1, 1))
        crop_h = jnp.where(crop_h < max_h, crop_h + extra, crop_h)
        crop_w = _lrint(jnp, crop_h.astype(f32) * aspect)
        area = (crop_w * crop_h).astype(f32)
        grow = area < min_area  # the kernel's rounding fixes, in its order
        crop_h = jnp.where(grow, crop_h + 1, crop_h)
        crop_w = jnp.where(grow, _lrint(jnp, crop_h.astype(f32) * aspect), crop_w)
        area = (crop_w * crop_h).astype(f32)
        shrink = area > max_area
        crop_h = jnp.where(shrink, crop_h - 1, crop_h)
        crop_w = jnp.where(shrink, _lrint(jnp, crop_h.astype(f32) * aspect), crop_w)
        area = (crop_w * crop_h).astype(f32)
        valid = ~((area < min_area) | (area > max_area) | (crop_w > width) | (crop_h > height)
                  | (crop_w <= 0) | (crop_h <= 0))
        valid &= (area >= 1) & (image_area >= 1) & (
            area / image_area >= f32(augment.MIN_OBJECT_COVERED))
        # Uniform(H - h) never reaches H - h (augment.py notes the trap): [0, H - h).
        y = jnp.where(crop_h < height, jax.random.randint(
            k_y, height.shape, 0, jnp.maximum(height - crop_h, 1)), 0)
        x = jnp.where(crop_w < width, jax.random.randint(
            k_x, height.shape, 0, jnp.maximum(width - crop_w, 1)), 0)
        take = valid & ~found
        chosen = jnp.where(take[:, None], jnp.stack([y, x, crop_h, crop_w], 1), chosen)
        found |= valid
    return chosen


def center_crop_windows(jnp, heights, widths):
    """augment.center_crop_window for a batch: int32 [B, 4] (y, x, side, side)."""
    side = jnp.maximum(1, (jnp.float32(augment.CROP_FRACTION) * jnp.minimum(
        heights, widths).astype(jnp.float32)).astype(jnp.int32))
    return jnp.stack([(heights - side + 1) // 2, (widths - side + 1) // 2, side, side], 1)


def _shift(jnp, lax, image, size: int, dy, dx):
    """augment.random_shift_offsets applied: pad by size/8 with zeros, cut at (dy, dx)."""
    pad = max(1, size // 8)
    padded = jnp.pad(image, ((pad, pad), (pad, pad), (0, 0)))
    return lax.dynamic_slice(padded, (dy, dx, 0), (size, size, image.shape[-1]))


@functools.lru_cache(maxsize=None)
def make_augment(preset: str, size: int, train: bool, dtype: str, channels: int,
                 same_size: tuple | None, batch: int):
    """The jitted augment(flat, offsets, heights, widths, labels, order, start, seed,
    epoch, salt) of one device's batch of `batch` images.

    Training takes images order[start:start + batch] (order: the epoch's permutation);
    evaluation images start, start + 1, ..., and past the last one padding: zero
    images of weight 0. The randomness comes from (seed, epoch, salt), all traced, so
    one program serves every batch. Returns (images [batch, size, size, 3] of `dtype`,
    labels int32 [batch], weights float32 [batch]). `same_size` is (H, W) when every
    image has that size (then H == W == size skips the resize, which would be exact).
    """
    import jax
    import jax.numpy as jnp

    if preset not in ("small", "standard"):
        raise ValueError(f"the device pipeline implements the small and standard presets, "
                         f"not {preset!r}")
    import numpy as np

    # numpy constants, folded into the compiled function: a jnp.asarray here was a
    # program of its own (0.35 s of an H200's cold start, before the first batch).
    mean = np.asarray(augment.MEAN_RGB, np.float32)
    std = np.asarray(augment.STDDEV_RGB, np.float32)
    identity = same_size == (size, size) and preset == "small"
    pad = max(1, size // 8)

    def one(flat, offset, width, window, flip, shift):
        if identity:
            rows = offset + jnp.arange(size)[:, None] * width + jnp.arange(size)[None, :]
            image = flat[rows].astype(jnp.float32)
        else:
            image = augment.bilinear_window(jnp, flat, width, window, size,
                                            flip if preset == "standard" and train else None,
                                            base=offset)
        if preset == "small" and train:
            image = _shift(jnp, jax.lax, image, size, shift[0], shift[1])
        return jnp.broadcast_to(image, (size, size, 3)) if channels == 1 else image

    @jax.jit
    def apply(flat, offsets, heights, widths, labels, order, start, seed, epoch, salt):
        if train:
            indices = jax.lax.dynamic_slice_in_dim(order, start, batch)
            valid = jnp.ones((batch,), bool)
        else:
            indices = start + jnp.arange(batch, dtype=jnp.int32)
            valid = indices < labels.shape[0]
            indices = jnp.where(valid, indices, 0)
        offset, height, width = offsets[indices], heights[indices], widths[indices]
        key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(
            jax.random.key(seed), 0), epoch), salt)  # 0: the augmentation's draws
        k_window, k_flip, k_shift = jax.random.split(key, 3)
        if preset == "standard":
            windows = (random_crop_windows(jax, k_window, height, width) if train
                       else center_crop_windows(jnp, height, width))
        else:
            windows = jnp.stack([jnp.zeros_like(height), jnp.zeros_like(height), height,
                                 width], 1)
        flips = jax.random.uniform(k_flip, (batch,)) < 0.5
        shifts = jax.random.randint(k_shift, (batch, 2), 0, 2 * pad + 1)
        images = jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0))(flat, offset, width, windows,
                                                             flips, shifts)
        images = jnp.where(valid[:, None, None, None], (images - mean) / std, 0.0)
        return (images.astype(dtype), jnp.where(valid, labels[indices], 0).astype(jnp.int32),
                valid.astype(jnp.float32))

    return apply


@functools.lru_cache(maxsize=None)
def make_permute():
    """jitted permute(seed, epoch, device, count_array) -> int32 permutation of the
    images one device holds (count from the labels' static shape)."""
    import jax

    @jax.jit
    def permute(seed, epoch, device, labels):
        key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(
            jax.random.key(seed), 1), epoch), device)  # 1: the orders' draws
        return jax.random.permutation(key, labels.shape[0]).astype(jax.numpy.int32)

    return permute
