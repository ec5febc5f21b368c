"""--input_pipeline=device (preprocessing/device/): a dataset decoded once, held where the
model trains, shuffled and augmented there with the meaning the other pipelines give
each preset; `auto`'s memory rule; resuming mid-epoch in the same order."""

import glob
import json
import os
import re

import numpy as np
import pytest

from conftest import ROOT, error_lines, run_cli
from photos import assorted_jpegs, photo

NO_TF = {"PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow")}


def _digit_split(digits_dir, split="validation"):
    from preprocessing.device.decode import decode_records

    paths = sorted(glob.glob(os.path.join(digits_dir, "digits", split, "*", "*.png")))
    records = [(p, int(os.path.basename(os.path.dirname(p)))) for p in paths]
    return records, decode_records(records)


def _stream(split, batch, size, preset, train, seed=5, **kw):
    from preprocessing.device.stream import DeviceStream
    from preprocessing.spec import BatchShape

    return DeviceStream(split, BatchShape(batch), size, preset, seed, train=train, **kw)


def test_the_batch_functions_are_compiled_before_the_first_batch_is_asked_for(digits_dir):
    """A stream compiles its gather-and-augment programs in a thread from the start (while
    the model is built): once it is done, the first batch compiles nothing, and it is
    the batch an uncompiled stream gives."""
    from jax._src import monitoring

    _, split = _digit_split(digits_dir)
    compiles = []

    def listener(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    for train in (True, False):
        stream = _stream(split, 64, 12, "small", train=train, seed=11)
        stream._compiling.join()
        monitoring.register_event_duration_secs_listener(listener)
        try:
            first = next(iter(stream))
        finally:
            monitoring.unregister_event_duration_listener(listener)
        assert compiles == [], f"train={train}: {len(compiles)} compiled on the first batch"
        again = next(iter(_stream(split, 64, 12, "small", train=train, seed=11)))
        for a, b in zip(first, again):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_gray_images_are_held_with_one_channel_and_decode_like_the_host(digits_dir):
    from preprocessing.host import images as host_images

    records, split = _digit_split(digits_dir)
    assert split.channels == 1 and len(split) == 360 and split.skipped == 0
    assert split.same_size == (8, 8) and split.nbytes < 360 * 8 * 8 * 2
    for index in (0, 123, 359):
        with open(records[index][0], "rb") as f:
            expected = host_images.decode(f.read())[..., 0]
        offset = split.offsets[index]
        assert np.array_equal(split.flat[offset:offset + 64, 0].reshape(8, 8), expected)


def test_evaluation_images_equal_the_host_pipelines(digits_dir, tmp_path):
    """small (digits, resized 8 -> 16) and standard (odd-sized photos, center crop and
    resize): the device's evaluation batches equal host/images.py's, image by image,
    in file order, and the padding of the last batch has weight 0."""
    from preprocessing.device.decode import decode_records
    from preprocessing.host import images as host_images

    records, split = _digit_split(digits_dir)
    expected = host_images.eval_transform("small", 16)
    batches = list(_stream(split, 64, 16, "small", train=False))
    images = np.concatenate([np.asarray(b[0]) for b in batches])
    weights = np.concatenate([np.asarray(b[2]) for b in batches])
    labels = np.concatenate([np.asarray(b[1]) for b in batches])
    assert len(batches) == 6 and weights.sum() == 360 and (weights[360:] == 0).all()
    assert (labels[:360] == [label for _, label in records]).all()
    for index in range(0, 360, 37):
        with open(records[index][0], "rb") as f:
            np.testing.assert_allclose(images[index], expected(f.read()), atol=2e-5)

    photos = assorted_jpegs(tmp_path)
    split = decode_records(photos)
    assert split.same_size is None and split.channels == 3
    expected = host_images.eval_transform("standard", 32)
    kept = [p for p, _ in photos if host_images.decodes_file(p)]
    batch = next(iter(_stream(split, len(kept), 32, "standard", train=False)))
    for index, path in enumerate(kept):
        with open(path, "rb") as f:
            np.testing.assert_allclose(np.asarray(batch[0][index]), expected(f.read()), atol=1e-3)


def test_small_training_images_are_the_hosts_for_some_shift_and_shifts_are_uniform(digits_dir):
    from preprocessing.host import images as host_images

    records, split = _digit_split(digits_dir)
    size, pad = 16, 2
    resized = []
    for path, _ in records[:64]:
        with open(path, "rb") as f:
            resized.append(np.pad(host_images.resize(host_images.decode(f.read()), size),
                                  ((pad, pad), (pad, pad), (0, 0))))
    # The order is shuffled: find each output image among the candidates of its label.
    stream = _stream(split.shard(0, 1), 64, size, "small", train=True)
    seen = {}
    for _ in range(4):
        images, labels = (np.asarray(a) for a in next(stream))
        for image in images[:16]:
            matches = [(i, dy, dx) for i, padded in enumerate(resized)
                       for dy in range(2 * pad + 1) for dx in range(2 * pad + 1)
                       if np.allclose(host_images.normalize(padded[dy:dy + size, dx:dx + size]),
                                      image, atol=2e-5)]
            if matches:  # an image of the first 64 files
                _, dy, dx = matches[0]
                seen[(dy, dx)] = seen.get((dy, dx), 0) + 1
    assert sum(seen.values()) >= 8  # the check ran on real matches
    assert len(seen) >= 4  # and the shifts differ from image to image


def test_crop_windows_follow_tensorflows_distribution():
    """The vectorized window draw against augment.random_crop_window (the host's, TF's
    algorithm step by step): area and aspect distributions agree, every window fits."""
    import jax

    from preprocessing import augment
    from preprocessing.device.ops import random_crop_windows

    count, height, width = 20000, 375, 500
    windows = np.asarray(random_crop_windows(
        jax, jax.random.key(7), jax.numpy.full(count, height), jax.numpy.full(count, width)))
    rng = np.random.default_rng(7)
    host = np.array([augment.random_crop_window(height, width, rng) for _ in range(count)])
    for drawn in (windows, host):
        y, x, h, w = drawn.T
        assert (y >= 0).all() and (x >= 0).all() and (y + h <= height).all() and (x + w <= width).all()
        assert (h * w >= 0.1 * height * width - 1).all()
    area = lambda d: d[:, 2] * d[:, 3] / (height * width)  # noqa: E731
    aspect = lambda d: d[:, 3] / d[:, 2]  # noqa: E731
    for stat in (area, aspect):
        assert abs(stat(windows).mean() - stat(host).mean()) < 0.01
        assert abs(np.median(stat(windows)) - np.median(stat(host))) < 0.015
        assert abs(stat(windows).std() - stat(host).std()) < 0.01
    whole = lambda d: np.mean((d[:, 2] == height) & (d[:, 3] == width))  # noqa: E731
    assert abs(whole(windows) - whole(host)) < 0.01


def test_a_standard_window_is_resized_and_flipped_as_the_host_does():
    import jax.numpy as jnp

    from preprocessing.augment import bilinear_window
    from preprocessing.host import images as host_images

    image = photo(37, 53, seed=4)
    flat = jnp.asarray(image.reshape(-1, 3))
    y, x, h, w = 5, 9, 21, 30
    for flip in (False, True):
        got = np.asarray(bilinear_window(jnp, flat, 53, jnp.array([y, x, h, w]), 24,
                                         jnp.bool_(flip)))
        expected = host_images.resize(image[y:y + h, x:x + w], 24)
        if flip:
            expected = host_images.flip_left_right(expected)
        np.testing.assert_allclose(got, expected, atol=1e-3)


def test_every_epoch_is_a_permutation_and_a_state_resumes_the_same_batches(digits_dir):
    _, split = _digit_split(digits_dir, "train")
    first = _stream(split, 64, 8, "small", train=True)
    per_epoch = first.steps_per_epoch
    assert per_epoch == len(split) // 64
    labels = [np.asarray(next(first)[1]) for _ in range(per_epoch)]
    counts = np.bincount(np.concatenate(labels), minlength=10)
    assert counts.sum() == per_epoch * 64
    expected = np.bincount(split.labels, minlength=10)
    assert (counts <= expected).all() and (expected - counts).sum() == len(split) - per_epoch * 64
    batches = [next(first) for _ in range(5)]  # epoch 2 begins: another order
    assert not np.array_equal(np.asarray(batches[0][1]), labels[0])
    again = _stream(split, 64, 8, "small", train=True, seed=99)
    again.set_state({"epoch": 1, "batch": 2, "seed": 5})  # the seed of `first` is adopted
    for got, want in zip([next(again) for _ in range(3)], batches[2:]):
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, want))
    with pytest.raises(ValueError, match="outside this stream"):
        again.set_state({"epoch": 0, "batch": per_epoch, "seed": 5})


def test_auto_falls_back_in_one_line_when_the_dataset_exceeds_its_share(digits_dir, monkeypatch):
    from preprocessing import streams
    from preprocessing.spec import BatchShape, DataError, InputSpec

    records, _ = _digit_split(digits_dir)
    spec = InputSpec(data_dir="", image_size=8, batch=BatchShape(8), backend="jax")
    assert streams.pick(spec, "small", records, None) == ("device", None)
    monkeypatch.setattr(streams, "DEVICE_MEMORY_SHARE", 1e-12)
    choice, note = streams.pick(spec, "small", records, None)
    assert choice == "grain" and "\n" not in note
    assert note.startswith("note: the decoded dataset") and "input_pipeline=grain" in note
    tf_spec = InputSpec(data_dir="", image_size=8, batch=BatchShape(8))
    assert streams.pick(tf_spec, "small", records, None)[0] == "tf.data"
    with pytest.raises(DataError, match=r"--input_pipeline=device: the decoded dataset .* exceeds"):
        streams.pick(InputSpec(data_dir="", image_size=8, batch=BatchShape(8), backend="jax",
                               input_pipeline="device"), "small", records, None)
    with pytest.raises(DataError, match="implements the small and standard presets"):
        streams.pick(InputSpec(data_dir="", image_size=8, batch=BatchShape(8), backend="jax",
                               input_pipeline="device"), "heavy", records, None)


def test_tf_datas_decoded_cache_gives_the_encoded_paths_images(digits_dir):
    """The device pipeline on TensorFlow augments from decoded pixels: the same images
    as from the encoded bytes (evaluation is deterministic)."""
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    records, _ = _digit_split(digits_dir)
    for preset, size in (("small", 16), ("standard", 8)):
        encoded = tf_images.eval_transform(preset, size)
        decoded = tf_images.eval_transform(preset, size, from_pixels=True)
        for path, _ in records[:5]:
            data = tf.io.read_file(path)
            np.testing.assert_allclose(decoded(tf_images.decode(data)[..., :1]).numpy(),
                                       encoded(data).numpy(), atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_digits_learn_through_the_device_pipeline(backend, digits_dir, tmp_path):
    """The default job with --input_pipeline=device, on TensorFlow (tf.data's decoded
    cache) and on JAX with TensorFlow unimportable (device memory)."""
    done = run_cli(f"--backend={backend}", "--input_pipeline=device", f"--data_dir={digits_dir}",
                   f"--logdir={tmp_path / 'run'}", "--verbose=0", "--seed=1",
                   env=NO_TF if backend == "jax" else None)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["input_pipeline"] == "device" and summary["best_val_top1"] >= 0.97
    assert summary["validation_examples"] == 360
    if backend == "jax":
        assert "tensorflow" not in summary["versions"]
        assert "images decoded once" in done.stdout
        # The time to hold the data, apart: within the run's own first epoch (by the
        # ledger's start and the metrics file's clock), decoding a part of it, as printed.
        facts = summary["input"]
        first_epoch = json.loads((tmp_path / "run" / "metrics.jsonl").read_text()
                                 .splitlines()[0])["time"] - summary["attempts"][0]["started_at"]
        assert 0 < facts["decode_seconds"] <= facts["cache_seconds"] < first_epoch
        printed = re.search(r"decoded once in ([\d.]+) s \(([\d.]+) s decoding", done.stdout)
        assert printed and float(printed.group(1)) == pytest.approx(facts["cache_seconds"], abs=0.051)
        assert float(printed.group(2)) == pytest.approx(facts["decode_seconds"], abs=0.051)
        # auto: several steps per host call, a divisor of the epoch (none dropped)
        spe, steps = summary["steps_per_execution"], summary["steps_per_epoch"]
        assert 1 < spe <= 16 and steps % spe == 0 and steps // spe >= 8
        assert summary["train_examples"] // summary["global_batch_size"] == steps
        assert f"steps_per_execution={spe} " in done.stdout
    else:
        assert summary["steps_per_execution"] == 1
    assert error_lines(done.stderr) == []
