"""Pure image functions (TensorFlow ops): decode, crop, resize, flip, color, normalize.

Each function takes and returns tensors, works eagerly and inside tf.data, and
takes its randomness as an explicit stateless `seed` (a [2] int tensor), so a
seeded run is reproducible even with parallel map.

Presets (`--preprocessing`):
- standard: ImageNet training as in the ResNet papers and MLPerf: Inception-style
  random crop (8-100% of the area, aspect 3/4-4/3) decoded in one fused step for
  JPEGs, resize, random horizontal flip; evaluation: center crop of 87.5%, resize.
- heavy: standard plus Inception's color distortion (brightness, saturation, hue,
  contrast) and bicubic resizing: CPU-expensive, in the spirit of the 2018 TPU
  reference that the study credits with +0.7 points of top-1.
- small: for tiny images (digits): resize, then a random shift of up to 1/8 of the
  size (pad and crop); no flip, which would turn some digits into others.

Every decode first reads the image's size from its header (`header_pixels`) and
refuses, with an error tf.data's ignore_errors drops and the pipeline counts, an image
of more than files.MAX_PIXELS pixels: it is never decoded.
"""

from __future__ import annotations

import contextlib
import os
import sys

import tensorflow as tf

from preprocessing.files import MAX_PIXELS, unreadable_why

# The presets' constants live in augment.py, shared with the TensorFlow-free paths.
from preprocessing.augment import (  # noqa: F401
    AREA_RANGE,
    ASPECT_RANGE,
    CROP_FRACTION,
    MAX_ATTEMPTS,
    MEAN_RGB,
    MIN_OBJECT_COVERED,
    PRESETS,
    STDDEV_RGB,
)


HEADER_BYTES = 32  # what header_pixels reads of an image


def _field(header: tf.Tensor, offset: int, size: int, big_endian: bool) -> tf.Tensor:
    """The unsigned integer of `size` bytes at `offset` of `header`, as int64."""
    raw = tf.cast(tf.io.decode_raw(tf.strings.substr(header, offset, size), tf.uint8),
                  tf.int64)
    weights = tf.constant([256 ** (size - 1 - i if big_endian else i) for i in range(size)],
                          tf.int64)
    return tf.reduce_sum(raw * weights)


def header_pixels(encoded: tf.Tensor) -> tf.Tensor:
    """The pixels (int64) an image's header declares, read without decoding: JPEG
    (its frame header), PNG (IHDR), GIF (the screen), BMP; 0 for other bytes and
    headers cut short (the decoder refuses them)."""
    # Trap: a substr past the end of the bytes raises an error whose message holds the
    # bytes, and eager TensorFlow then fails on it with a UnicodeDecodeError. The
    # header's first bytes, padded with zeros, are always long enough.
    header = tf.strings.join([tf.strings.substr(encoded, 0, HEADER_BYTES),
                              tf.constant(bytes(HEADER_BYTES))])

    def sized(offset, size, big_endian, signed=False):
        def pixels():
            width, height = (_field(header, offset + i * size, size, big_endian)
                             for i in range(2))
            if signed:  # BMP: int32; a negative height means top-down rows
                width, height = (tf.abs(tf.where(v >= 2**31, v - 2**32, v))
                                 for v in (width, height))
            return width * height
        return pixels

    magic = tf.strings.substr(header, 0, 8)
    return tf.case([
        (tf.io.is_jpeg(encoded), lambda: tf.reduce_prod(tf.cast(
            tf.image.extract_jpeg_shape(encoded)[:2], tf.int64))),
        (tf.equal(magic, b"\x89PNG\r\n\x1a\n"), sized(16, 4, True)),
        (tf.equal(tf.strings.substr(magic, 0, 4), b"GIF8"), sized(6, 2, False)),
        (tf.equal(tf.strings.substr(magic, 0, 2), b"BM"), sized(18, 4, False, signed=True)),
    ], default=lambda: tf.constant(0, tf.int64), exclusive=False)


def bounded(encoded: tf.Tensor) -> tf.Tensor:
    """`encoded`, once its header says at most MAX_PIXELS pixels (else an error, which
    the pipeline's ignore_errors turns into a skipped, counted image)."""
    check = tf.debugging.assert_less_equal(
        header_pixels(encoded), tf.constant(MAX_PIXELS, tf.int64),
        message=f"image over the {MAX_PIXELS:,}-pixel bound, not decoded")
    with tf.control_dependencies([check]):
        return tf.identity(encoded)


def decode(encoded: tf.Tensor) -> tf.Tensor:
    """Decodes JPEG (RGB, grayscale or CMYK), PNG, GIF or BMP bytes to uint8 RGB.

    The format is read from the bytes, not the file name, so a PNG saved as
    .JPEG (ImageNet has one) decodes correctly. Images over MAX_PIXELS are refused.
    """
    image = tf.io.decode_image(bounded(encoded), channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


@contextlib.contextmanager
def _libjpeg_quiet():
    """File descriptor 2 pointed at /dev/null for a moment. Trap: TensorFlow's libjpeg
    writes its errors ("Input file read error", "Premature end of JPEG file") straight
    to the process's stderr, in C, with no file name; the eager re-decodes here (the
    check before training, the count after it) would repeat each one. The pipeline's
    own decode cannot be silenced this way; the skipped files are named at the end."""
    sys.stderr.flush()
    try:
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no stderr to silence (closed)
        yield
        return
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def decodes_file(path: str) -> bool:
    """Whether the file at `path` can be read and decoded by `decode` (eagerly). Only a
    regular file of bounded size is read (a FIFO would block, /dev/zero never end)."""
    if unreadable_why(path):
        return False
    try:
        with _libjpeg_quiet():
            decode(tf.io.read_file(path))
    except (tf.errors.OpError, UnicodeDecodeError):  # (an error message of raw bytes)
        return False
    return True


def random_crop_window(shape: tf.Tensor, seed: tf.Tensor, area_range=AREA_RANGE,
                       aspect_range=ASPECT_RANGE) -> tf.Tensor:
    """An Inception-style crop window [y, x, height, width] of an image of `shape`."""
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]), seed=seed,
        min_object_covered=MIN_OBJECT_COVERED, aspect_ratio_range=aspect_range,
        area_range=area_range, max_attempts=MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True)
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def decode_and_random_crop(encoded: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Random Inception crop of an encoded image; JPEGs decode only the window."""

    def jpeg():
        window = random_crop_window(tf.image.extract_jpeg_shape(encoded), seed)
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def other():
        image = decode(encoded)
        y, x, h, w = tf.unstack(random_crop_window(tf.shape(image), seed))
        return image[y:y + h, x:x + w]

    encoded = bounded(encoded)
    image = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image.set_shape([None, None, 3])
    return image


def center_crop_window(shape: tf.Tensor, size: int,
                       crop_fraction: float = CROP_FRACTION) -> tf.Tensor:
    """The centered square window [y, x, side, side] kept for evaluation."""
    height, width = shape[0], shape[1]
    side = tf.cast(crop_fraction * tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    side = tf.maximum(side, 1)
    return tf.stack([(height - side + 1) // 2, (width - side + 1) // 2, side, side])


def decode_and_center_crop(encoded: tf.Tensor, size: int,
                           crop_fraction: float = CROP_FRACTION) -> tf.Tensor:
    """Center crop of an encoded image; JPEGs decode only the window."""

    def jpeg():
        window = center_crop_window(tf.image.extract_jpeg_shape(encoded), size, crop_fraction)
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def other():
        image = decode(encoded)
        y, x, h, w = tf.unstack(center_crop_window(tf.shape(image), size, crop_fraction))
        return image[y:y + h, x:x + w]

    encoded = bounded(encoded)
    image = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image.set_shape([None, None, 3])
    return image


def resize(image: tf.Tensor, size: int, method: str = "bilinear") -> tf.Tensor:
    """Resizes to size x size; returns float32 in [0, 255]."""
    image = tf.image.resize(image, [size, size], method=method, antialias=False)
    return tf.clip_by_value(image, 0.0, 255.0)


def random_flip(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Mirrors left-right with probability 1/2."""
    return tf.image.stateless_random_flip_left_right(image, seed)


def color_distort(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Inception's color distortion on a float [0, 255] image."""
    seeds = tf.random.experimental.stateless_split(seed, 4)
    image = image / 255.0
    image = tf.image.stateless_random_brightness(image, 32.0 / 255.0, seeds[0])
    image = tf.image.stateless_random_saturation(image, 0.5, 1.5, seeds[1])
    image = tf.image.stateless_random_hue(image, 0.2, seeds[2])
    image = tf.image.stateless_random_contrast(image, 0.5, 1.5, seeds[3])
    return tf.clip_by_value(image, 0.0, 1.0) * 255.0


def random_shift(image: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """Pads by size/8 on each side and crops size x size back at a random place."""
    pad = max(1, size // 8)
    padded = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
    return tf.image.stateless_random_crop(padded, [size, size, 3], seed)


def normalize(image: tf.Tensor, dtype: str = "float32") -> tf.Tensor:
    """Subtracts ImageNet's mean and divides by its standard deviation, per channel."""
    image = (tf.cast(image, tf.float32) - MEAN_RGB) / STDDEV_RGB
    return tf.cast(image, dtype)


def rgb(pixels: tf.Tensor) -> tf.Tensor:
    """uint8 [H, W, 1 or 3] pixels as [H, W, 3] (a gray image's channel repeated)."""
    pixels = tf.convert_to_tensor(pixels)
    if pixels.shape.rank == 2:
        pixels = pixels[..., None]
    image = tf.cond(tf.shape(pixels)[-1] == 1, lambda: tf.tile(pixels, [1, 1, 3]),
                    lambda: pixels)
    image.set_shape([None, None, 3])
    return image


def _random_crop(pixels: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    y, x, h, w = tf.unstack(random_crop_window(tf.shape(pixels), seed))
    return pixels[y:y + h, x:x + w]


def train_transform(preset: str, size: int, dtype: str = "float32", from_pixels: bool = False):
    """Returns fn(encoded, seed) -> normalized training image of size x size.

    from_pixels: the function takes decoded uint8 pixels instead of encoded bytes (the
    `device` pipeline's decoded cache); the crop window is drawn the same way.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; accepted: {', '.join(PRESETS)}")

    def transform(encoded, seed):
        seeds = tf.random.experimental.stateless_split(seed, 3)
        if preset == "small":
            image = rgb(encoded) if from_pixels else decode(encoded)
            image = random_shift(resize(image, size), size, seeds[0])
        else:
            image = (_random_crop(rgb(encoded), seeds[0]) if from_pixels
                     else decode_and_random_crop(encoded, seeds[0]))
            image = resize(image, size, "bicubic" if preset == "heavy" else "bilinear")
            image = random_flip(image, seeds[1])
            if preset == "heavy":
                image = color_distort(image, seeds[2])
        return normalize(image, dtype)

    return transform


def eval_transform(preset: str, size: int, dtype: str = "float32", from_pixels: bool = False):
    """Returns fn(encoded) -> normalized evaluation image of size x size (from_pixels:
    of decoded uint8 pixels, as train_transform)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; accepted: {', '.join(PRESETS)}")

    def transform(encoded):
        if preset == "small":
            image = resize(rgb(encoded) if from_pixels else decode(encoded), size)
        elif from_pixels:
            image = rgb(encoded)
            y, x, h, w = tf.unstack(center_crop_window(tf.shape(image), size))
            image = resize(image[y:y + h, x:x + w], size)
        else:
            image = resize(decode_and_center_crop(encoded, size), size)
        return normalize(image, dtype)

    return transform
