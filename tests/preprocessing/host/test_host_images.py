"""host/images.py and augment.py against tfdata/images.py: the TF-free path must mean the same thing.

Tolerances, and why:
- crop windows: TF draws with Philox, we with numpy, so only distributions can
  agree: 20,000 draws each; the largest gap between the two empirical CDFs of
  area fraction and of aspect ratio stays under 0.025 (a two-sample KS test at
  p ~ 1e-4 allows 0.027), and the whole-image fallback rate within 0.01.
- decoding: simplejpeg with TF's settings (fast integer DCT, fancy upsampling)
  gives TF's pixels; we allow 1 level for other libjpeg-turbo builds.
- resizes: float arithmetic in another order: 0.01 of a level on [0, 255].
- eval transform, after normalization (1 level = 0.017): max 0.035, mean 0.002.
"""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from preprocessing import augment
from preprocessing.host import images as host_images
from preprocessing.tfdata import images as tf_images
from tests.image_files import class_image, encode

DRAWS = 20_000


def _tf_windows(height, width, n):
    shape = tf.constant([height, width, 3])
    seeds = tf.data.Dataset.random(seed=1).batch(2, drop_remainder=True).take(n)
    windows = seeds.map(lambda s: tf_images.random_crop_window(shape, s)).batch(n)
    return next(iter(windows)).numpy()


def _cdf_gap(a, b):
    grid = np.union1d(a, b)
    return np.abs(np.searchsorted(np.sort(a), grid, side="right") / len(a)
                  - np.searchsorted(np.sort(b), grid, side="right") / len(b)).max()


@pytest.mark.parametrize("height,width", [(375, 500), (64, 640), (9, 7)])
def test_random_crop_window_has_tfs_distribution(height, width):
    rng = np.random.default_rng(0)
    ours = np.array([augment.random_crop_window(height, width, rng) for _ in range(DRAWS)])
    theirs = _tf_windows(height, width, DRAWS)
    for windows in (ours, theirs):  # every window inside the image, never empty
        y, x, h, w = windows.T
        assert (y >= 0).all() and (x >= 0).all() and (h >= 1).all() and (w >= 1).all()
        assert (y + h <= height).all() and (x + w <= width).all()
    stats = {}
    for name, (y, x, h, w) in (("ours", ours.T), ("tf", theirs.T)):
        stats[name] = {"area": h * w / (height * width), "aspect": w / h,
                       "full": np.mean((h == height) & (w == width))}
    assert _cdf_gap(stats["ours"]["area"], stats["tf"]["area"]) < 0.025
    assert _cdf_gap(stats["ours"]["aspect"], stats["tf"]["aspect"]) < 0.025
    assert abs(stats["ours"]["full"] - stats["tf"]["full"]) < 0.01
    assert abs(stats["ours"]["area"].mean() - stats["tf"]["area"].mean()) < 0.01
    # min_object_covered=0.1 rejects crops under 10% of the image (not AREA_RANGE's 8%).
    assert stats["ours"]["area"].min() >= 0.1 - 1e-6


def test_random_crop_window_never_touches_far_edge_unless_full():
    # TF's kernel draws y in [0, H - h - 1]: a quirk we reproduce, not a bug of ours.
    rng = np.random.default_rng(1)
    windows = np.array([augment.random_crop_window(40, 50, rng) for _ in range(3000)])
    y, _, h, _ = windows.T
    assert not ((y + h == 40) & (h < 40)).any()


@pytest.mark.parametrize("shape", [(375, 500), (500, 375), (7, 9), (1, 1), (224, 256),
                                   (33, 1000)])
def test_center_crop_window_equals_tf(shape):
    theirs = tf_images.center_crop_window(tf.constant([*shape, 3]), 224).numpy()
    assert augment.center_crop_window(*shape) == tuple(theirs)


def test_random_shift_offsets_cover_the_padding():
    rng = np.random.default_rng(0)
    draws = np.array([augment.random_shift_offsets(32, rng) for _ in range(2000)])
    assert (draws[:, 0] == 4).all()
    assert set(draws[:, 1]) == set(draws[:, 2]) == set(range(9))  # [0, 2 * pad]
    assert augment.random_shift_offsets(4, rng)[0] == 1  # at least 1


def _photo(height=90, width=120, seed=0):
    """A smooth, asymmetric, noisy image (like a photo, unlike pure noise)."""
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 / width, y * 255 / height, (x + y) * 128 / (height + width)], -1)
    image += np.random.default_rng(seed).normal(0, 12, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _tf_decode(data):
    return tf.io.decode_image(data, channels=3, expand_animations=False).numpy()


def _files():
    photo = _photo()
    palette = Image.fromarray(photo).convert("P", palette=Image.Palette.ADAPTIVE)
    palette.info["transparency"] = 0
    rgba = io.BytesIO()
    Image.fromarray(np.dstack([photo, photo[..., :1]])).save(rgba, format="PNG")
    pal = io.BytesIO()
    palette.save(pal, format="PNG", transparency=0)
    gray16 = io.BytesIO()
    Image.fromarray((photo[..., 0].astype(np.uint16) * 257)).save(gray16, format="PNG")
    bmp = io.BytesIO()
    Image.fromarray(photo).save(bmp, format="BMP")
    jpeg = encode(photo)
    return {
        "jpeg": jpeg, "jpeg_444": _jpeg(photo, subsampling=0), "png": encode(photo, "PNG"),
        "cmyk_jpeg": encode(photo, mode="CMYK"), "gray_jpeg": encode(photo, mode="L"),
        "gray_png": encode(photo, "PNG", mode="L"), "rgba_png": rgba.getvalue(),
        "palette_png": pal.getvalue(), "gray16_png": gray16.getvalue(),
        "bmp": bmp.getvalue(),
        # libjpeg warns "extraneous bytes before marker"; TF decodes it anyway.
        "jpeg_junk_before_eoi": jpeg[:-2] + b"\x00\x00" + jpeg[-2:],
        "jpeg_trailing_garbage": jpeg + b"garbage" * 10,
    }


def _jpeg(pixels, **options):
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90, **options)
    return buffer.getvalue()


@pytest.mark.parametrize("kind", sorted(_files()))
def test_decode_equals_tf(kind):
    data = _files()[kind]
    ours, theirs = host_images.decode(data), _tf_decode(data)
    assert ours.dtype == np.uint8 and ours.shape == theirs.shape
    tolerance = 1 if "jpeg" in kind else 0
    assert np.abs(ours.astype(int) - theirs).max() <= tolerance


def test_decode_reads_the_format_from_the_bytes_not_the_name(tmp_path):
    path = tmp_path / "n02105855_2933.JPEG"  # ImageNet's PNG named .JPEG
    path.write_bytes(encode(class_image("n02105855", 0), fmt="PNG"))
    assert host_images.image_format(path.read_bytes()) == "png"
    np.testing.assert_array_equal(host_images.decode(path.read_bytes()),
                                  _tf_decode(path.read_bytes()))


def test_decode_gif_first_frame():
    frames = [Image.fromarray(np.full((20, 30, 3), v, np.uint8)) for v in (40, 200)]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:])
    ours = host_images.decode(buffer.getvalue())
    assert ours.shape == (20, 30, 3)
    np.testing.assert_array_equal(ours, _tf_decode(buffer.getvalue()))


@pytest.mark.parametrize("data", [
    b"", b"\x00" * 100, np.random.default_rng(0).bytes(5000),
    b"\xff\xd8\xff\xe0 this is not really a JPEG",
    encode(_photo())[:600],  # truncated JPEG: TF refuses it too
    encode(_photo(), "PNG")[:300],  # truncated PNG
    encode(_photo())[:len(encode(_photo())) // 2],
    encode(_photo())[:-2],  # only the end marker missing: TF refuses it too
], ids=["empty", "zeros", "random", "fake_jpeg", "jpeg_header_only", "png_truncated",
        "jpeg_half", "jpeg_no_eoi"])
def test_decode_rejects_bad_data_with_one_exception(data):
    with pytest.raises(host_images.UndecodableImage):
        host_images.decode(data)
    with pytest.raises(tf.errors.InvalidArgumentError):  # and TF skips them too
        _tf_decode(data)


def test_decode_huge_jpeg():
    y, x = np.mgrid[0:6000, 0:6000]
    pixels = np.stack([x % 256, y % 256, (x // 24) % 256], -1).astype(np.uint8)
    data = _jpeg(pixels)
    ours = host_images.decode(data)
    assert ours.shape == (6000, 6000, 3)
    assert np.abs(ours[::97, ::89].astype(int) - _tf_decode(data)[::97, ::89]).max() <= 1


@pytest.mark.parametrize("method", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape", [(375, 500), (100, 37), (448, 448), (7, 300), (1, 1)])
@pytest.mark.parametrize("size", [224, 32])
def test_resize_equals_tf(method, shape, size, monkeypatch):
    image = _photo(*shape)
    theirs = tf_images.resize(tf.constant(image), size, method).numpy()
    assert np.abs(host_images.resize(image, size, method) - theirs).max() < 0.01
    monkeypatch.setattr(host_images, "_cv2", lambda: None)  # the numpy fallback too
    assert np.abs(host_images.resize(image, size, method) - theirs).max() < 0.01


@pytest.mark.parametrize("params", [(0.1, 1.3, -0.15, 0.7), (-0.12, 0.55, 0.19, 1.45),
                                    (0.0, 1.0, 0.0, 1.0)])
def test_color_distort_equals_tf_ops(params):
    image = host_images.resize(_photo(), 64)
    x = tf.constant(image) / 255.0
    x = tf.image.adjust_brightness(x, params[0])
    x = tf.image.adjust_saturation(x, params[1])
    x = tf.image.adjust_hue(x, params[2])
    x = tf.image.adjust_contrast(x, params[3])
    theirs = (tf.clip_by_value(x, 0.0, 1.0) * 255.0).numpy()
    assert np.abs(host_images.color_distort(image, params) - theirs).max() < 2e-3


@pytest.mark.parametrize("preset", ["standard", "small"])
@pytest.mark.parametrize("kind", ["jpeg", "png", "cmyk_jpeg", "gray_png"])
def test_eval_transform_equals_image_ops(preset, kind):
    data = _files()[kind]
    theirs = tf_images.eval_transform(preset, 32)(tf.constant(data)).numpy()
    ours = host_images.eval_transform(preset, 32)(data)
    assert ours.shape == theirs.shape == (32, 32, 3) and ours.dtype == np.float32
    diff = np.abs(ours - theirs)
    assert diff.max() < 0.035 and diff.mean() < 0.002


def test_bfloat16_output_without_tensorflow_dtypes():
    image = host_images.eval_transform("standard", 16, "bfloat16")(_files()["jpeg"])
    assert str(image.dtype) == "bfloat16" and image.shape == (16, 16, 3)


def _train_draws(preset, data, n, size=24):
    ours_fn = host_images.train_transform(preset, size)
    rng = np.random.default_rng(0)
    ours = np.stack([ours_fn(data, rng) for _ in range(n)])
    tf_fn = tf_images.train_transform(preset, size)
    seeds = tf.data.Dataset.random(seed=2).batch(2, drop_remainder=True).take(n)
    theirs = next(iter(seeds.map(lambda s: tf_fn(tf.constant(data), s)).batch(n))).numpy()
    return ours, theirs


@pytest.mark.parametrize("preset", ["standard", "heavy", "small"])
def test_train_transform_equals_tf_ops_given_the_same_draws(preset):
    data, size, seed = _files()["jpeg"], 32, 7
    ours = host_images.train_transform(preset, size)(data, np.random.default_rng(seed))
    rng = np.random.default_rng(seed)  # replay the draws, in the transform's order
    image = tf.io.decode_image(data, channels=3, expand_animations=False)
    if preset == "small":
        pad, dy, dx = augment.random_shift_offsets(size, rng)
        image = tf.pad(tf_images.resize(image, size), [[pad, pad], [pad, pad], [0, 0]])
        image = image[dy:dy + size, dx:dx + size]
    else:
        y, x, h, w = augment.random_crop_window(*image.shape[:2], rng)
        image = tf_images.resize(image[y:y + h, x:x + w], size,
                                 "bicubic" if preset == "heavy" else "bilinear")
        if augment.flip_draw(rng):
            image = image[:, ::-1]
        if preset == "heavy":
            b, s, h, c = augment.color_distort_params(rng)
            image = tf.image.adjust_hue(tf.image.adjust_saturation(
                tf.image.adjust_brightness(image / 255.0, b), s), h)
            image = tf.clip_by_value(tf.image.adjust_contrast(image, c), 0.0, 1.0) * 255.0
    assert np.abs(ours - tf_images.normalize(image).numpy()).max() < 0.035


@pytest.mark.parametrize("preset", ["standard", "heavy", "small"])
def test_train_transform_statistics_match_tf(preset):
    n = 2000
    ours, theirs = _train_draws(preset, _files()["png"], n)
    assert ours.shape == theirs.shape
    # Per-image channel means are independent draws: their averages agree within
    # 4 standard errors, their spreads within 10%. (Pixel-wise tests are no good:
    # one crop or color draw moves every pixel of an image together.)
    means = [b.mean((1, 2)) for b in (ours, theirs)]
    z = (means[0].mean(0) - means[1].mean(0)) / np.sqrt(
        (means[0].var(0) + means[1].var(0)) / n)
    assert (np.abs(z) < 4).all()
    assert (np.abs(means[0].std(0) / means[1].std(0) - 1) < 0.1).all()
    assert abs(ours.std() / theirs.std() - 1) < 0.03
    if preset == "standard":
        # The photo's red channel grows left to right, so the sign of its slope
        # shows whether an output was flipped: both flip half the time (SE 0.011).
        slope = lambda b: np.sign(b[:, :, -4:, 0].mean((1, 2)) - b[:, :, :4, 0].mean((1, 2)))
        assert abs(np.mean(slope(ours) < 0) - 0.5) < 0.05
        assert abs(np.mean(slope(ours) < 0) - np.mean(slope(theirs) < 0)) < 0.05


def test_unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown preset 'fancy'"):
        host_images.train_transform("fancy", 32)
    with pytest.raises(ValueError, match="unknown preset"):
        host_images.eval_transform("fancy", 32)
