"""The image functions, run eagerly and inside tf.data: shapes, ranges, crop statistics,
and decoding of the awkward files ImageNet has (CMYK JPEGs, a PNG named .JPEG)."""

import numpy as np
import pytest
import tensorflow as tf
from image_files import class_image, encode

from preprocessing.tfdata import images as tf_images

SEEDS = [tf.constant([i, 7], tf.int64) for i in range(200)]


@pytest.fixture(scope="module")
def photo():
    """A 300x200 RGB JPEG with a bright left half."""
    pixels = np.zeros((200, 300, 3), "uint8")
    pixels[:, :150] = [220, 200, 40]
    pixels[:, 150:] = [20, 40, 160]
    return pixels, encode(pixels)


def test_decode_handles_cmyk_jpeg_and_png_named_jpeg():
    pixels = class_image("n01739381", 0)
    for data in (encode(pixels, mode="CMYK"), encode(pixels, fmt="PNG"), encode(pixels)):
        decoded = tf_images.decode(tf.constant(data)).numpy()
        assert decoded.shape == (40, 40, 3) and decoded.dtype == np.uint8
        # Colors as saved (an inverted or dropped CMYK channel would be off by ~100).
        assert np.abs(decoded.mean((0, 1)) - pixels.mean((0, 1))).max() < 4
        assert np.abs(decoded.astype(int) - pixels).mean() < 12  # JPEG loss only


def test_inception_crop_windows_have_the_documented_area_and_aspect():
    shape = tf.constant([200, 300, 3])
    windows = np.array([tf_images.random_crop_window(shape, s).numpy() for s in SEEDS])
    areas = windows[:, 2] * windows[:, 3] / (200 * 300)
    aspects = windows[:, 3] / windows[:, 2]
    assert areas.min() >= 0.08 - 1e-3 and areas.max() <= 1.0
    assert 0.25 < areas.mean() < 0.75  # spread over the range, not stuck at one end
    assert aspects.min() >= 3 / 4 - 0.02 and aspects.max() <= 4 / 3 + 0.02
    assert (windows[:, 0] >= 0).all() and (windows[:, 0] + windows[:, 2] <= 200).all()
    assert len({tuple(w) for w in windows}) > 150  # different windows per seed


def test_center_crop_keeps_the_central_87_5_percent():
    y, x, h, w = tf_images.center_crop_window(tf.constant([200, 300, 3]), 224).numpy()
    assert h == w == 175 and y == 13 and x == 63


def test_fused_and_plain_random_crop_agree_on_jpeg_and_png(photo):
    pixels, jpeg = photo
    png = encode(pixels, fmt="PNG")
    for seed in SEEDS[:5]:
        a = tf_images.decode_and_random_crop(tf.constant(jpeg), seed).numpy()
        b = tf_images.decode_and_random_crop(tf.constant(png), seed).numpy()
        assert a.shape == b.shape and np.abs(a.astype(int) - b).mean() < 6


@pytest.mark.parametrize("preset", tf_images.PRESETS)
def test_transforms_give_normalized_images_of_the_size_asked_eagerly_and_in_tf_data(
        photo, preset):
    _, jpeg = photo
    train = tf_images.train_transform(preset, 64)
    evaluate = tf_images.eval_transform(preset, 64, "bfloat16")
    eager = train(tf.constant(jpeg), SEEDS[0])
    assert eager.shape == (64, 64, 3) and eager.dtype == tf.float32
    assert -2.2 < float(tf.reduce_min(eager)) and float(tf.reduce_max(eager)) < 2.7
    assert evaluate(tf.constant(jpeg)).dtype == tf.bfloat16
    dataset = tf.data.Dataset.from_tensors(jpeg).repeat(4).enumerate().map(
        lambda i, e: train(e, tf.stack([i, tf.constant(1, tf.int64)])))
    batch = np.stack(list(dataset.as_numpy_iterator()))
    assert batch.shape == (4, 64, 64, 3)


def test_flip_happens_about_half_the_time(photo):
    pixels, _ = photo
    image = tf.constant(pixels)
    flipped = [bool(tf_images.random_flip(image, s).numpy()[0, 0, 2] > 100) for s in SEEDS]
    assert 0.35 < np.mean(flipped) < 0.65  # the right half (blue) came left


def test_normalize_uses_imagenet_statistics():
    mean = tf.constant([[[0.485 * 255, 0.456 * 255, 0.406 * 255]]])
    np.testing.assert_allclose(tf_images.normalize(mean).numpy(), 0.0, atol=1e-5)


def test_heavy_preset_changes_colors_and_small_preset_only_shifts(photo):
    _, jpeg = photo
    standard = tf_images.train_transform("standard", 64)(tf.constant(jpeg), SEEDS[3])
    heavy = tf_images.train_transform("heavy", 64)(tf.constant(jpeg), SEEDS[3])
    assert float(tf.reduce_mean(tf.abs(standard - heavy))) > 0.05
    small = tf_images.train_transform("small", 32)(tf.constant(jpeg), SEEDS[3])
    assert small.shape == (32, 32, 3)
    with pytest.raises(ValueError, match="unknown preset 'fancy'"):
        tf_images.train_transform("fancy", 32)
