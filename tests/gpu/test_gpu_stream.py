"""The GPU JPEG stream (preprocessing/gpu/stream.py), run on the CPU with the CPU
decoder: the same planning, canvas and compiled crop/resize step as on the GPU, with
host_images.decode instead of nvJPEG.

Compared with the tf.data path (preprocessing/tfdata/images.py) on the same files:
evaluation images within JPEG tolerance, training crops with the same distribution.
"""

import json
import os

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, run_python
from gpu_helpers import (COLORS, MAX_TOLERANCE, MEAN_TOLERANCE, STD,  # noqa: F401 - fixtures
                         assert_odd_files_handled, batches, cpu, jpegs, odd_files, pixels_of)
from preprocessing.gpu.canvas import resize_bilinear_host
from preprocessing.gpu.options import GpuOptions
from preprocessing.gpu.stream import GpuJpegStream
from preprocessing.spec import BatchShape

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")


def planned(stream, position):
    """The slots the stream plans for one batch (of its one device)."""
    records, future, block = stream._submit(position)
    try:
        return stream._finish(position, records, future.result(), block)[1][0]
    finally:
        stream._release(block)


# ---- against the tf.data path ----------------------------------------------------------


def test_eval_images_equal_the_tf_data_eval_transform(jpegs):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    transform = tf_images.eval_transform("standard", 48)
    stream = GpuJpegStream(jpegs, BatchShape(16), 48, seed=0, train=False, options=cpu())
    got = [b for b in stream]
    images = np.concatenate([np.asarray(b[0]) for b in got])[:len(jpegs)]
    labels = np.concatenate([np.asarray(b[1]) for b in got])[:len(jpegs)]
    assert labels.tolist() == [label for _, label in jpegs]
    for image, (path, _) in zip(images, jpegs):
        expected = transform(tf.constant(open(path, "rb").read())).numpy()
        diff = np.abs((image - expected) * STD)  # in gray levels
        assert diff.mean() < MEAN_TOLERANCE and diff.max() < MAX_TOLERANCE, (path, diff.max())


def test_train_batches_use_the_planned_windows_and_flips(jpegs):
    """The images are the planned crops, resized and flipped (host reference)."""
    stream = GpuJpegStream(jpegs, BatchShape(8), 32, seed=5, train=True, options=cpu(prefetch=1))
    plan = planned(stream, (0, 0))
    images, labels = (np.asarray(a) for a in next(stream))
    from preprocessing.host import images as host_images

    for image, label, slot in zip(images, labels, plan):
        assert label == stream.records[slot.record][1]
        y, x, h, w = slot.window
        pixels = host_images.decode(open(stream.records[slot.record][0], "rb").read())
        expected = resize_bilinear_host(pixels[y:y + h, x:x + w], 32, flip=slot.flip)
        np.testing.assert_allclose(pixels_of(image), expected, atol=0.05)
    stream.close()


def test_windows_too_large_for_any_canvas_are_resized_on_the_host(jpegs):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    transform = tf_images.eval_transform("standard", 32)
    big = [(p, l) for p, l in jpegs if min(Image.open(p).size) * 0.875 > 64][:6]
    stream = GpuJpegStream(big, BatchShape(6), 32, seed=0, train=False, options=cpu(canvas_sides=(32, 64)))
    images = np.asarray(next(iter(stream))[0])
    for image, (path, _) in zip(images, big):
        expected = transform(tf.constant(open(path, "rb").read())).numpy()
        diff = np.abs((image - expected) * STD)
        assert diff.mean() < MEAN_TOLERANCE + 0.5 and diff.max() < MAX_TOLERANCE  # + rounding


# ---- the stream's contract ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shapes_dtypes_and_eval_padding(jpegs, dtype):
    train = GpuJpegStream(jpegs, BatchShape(10), 32, seed=1, train=True, dtype=dtype, options=cpu())
    images, labels = next(train)
    assert images.shape == (10, 32, 32, 3) and str(images.dtype) == dtype
    assert labels.shape == (10,) and str(labels.dtype) == "int32"
    assert train.steps_per_epoch == 2
    train.close()
    evaluation = GpuJpegStream(jpegs, BatchShape(10), 32, seed=1, train=False, dtype=dtype, options=cpu())
    assert evaluation.num_batches == 3
    for _ in range(2):  # every evaluation reads everything again
        got = list(evaluation)
        assert len(got) == 3
        weights = np.concatenate([np.asarray(w) for _, _, w in got])
        assert weights.tolist() == [1.0] * 24 + [0.0] * 6
        assert not np.asarray(got[-1][0], np.float32)[4:].any()  # padding is zeros
        assert np.asarray(got[-1][1])[4:].tolist() == [0] * 6


def test_odd_files_are_decoded_on_the_cpu_or_skipped_and_counted(odd_files):
    records = [(path, label) for path, label, _ in odd_files]
    assert_odd_files_handled(GpuJpegStream(records, BatchShape(4), 16, seed=0, train=False, options=cpu()),
                             odd_files)

    train = GpuJpegStream(records * 3, BatchShape(6), 16, seed=0, train=True, options=cpu())
    for _ in range(9):  # 3 epochs: each bad file met 9 times, counted once
        images, labels = (np.asarray(a) for a in next(train))
        assert images.shape[0] == 6
        for image, label in zip(images, labels):
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert train.skipped_images() == 2
    train.close()


def test_a_seed_decides_everything_and_state_resumes_the_same_sequence(jpegs):
    def stream(seed):
        return GpuJpegStream(jpegs, BatchShape(7), 24, seed=seed, train=True, options=cpu())

    first, again, other = stream(11), stream(11), stream(12)
    a, b, c = batches(first, 5), batches(again, 5), batches(other, 5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    assert any(not np.array_equal(x[0], z[0]) for x, z in zip(a, c))
    state = first.get_state()  # 5 batches of 3 per epoch: epoch 1, batch 2
    assert (state["epoch"], state["batch"]) == (1, 2)
    json.dumps(state)
    following = batches(first, 4)
    resumed = stream(11)
    resumed.set_state(state)
    for x, y in zip(following, batches(resumed, 4)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    # A stream made with another seed (a resumed run without --seed draws a new
    # one) adopts the state's: the same sequence again.
    adopted = stream(12)
    adopted.set_state(state)
    for x, y in zip(following, batches(adopted, 4)):
        np.testing.assert_array_equal(x[0], y[0])
    for s in (first, again, other, resumed, adopted):
        s.close()


def test_planning_in_worker_processes_or_in_process_gives_the_same_batches(jpegs):
    here = GpuJpegStream(jpegs, BatchShape(6), 24, seed=2, train=True, options=cpu(workers=0))
    there = GpuJpegStream(jpegs, BatchShape(6), 24, seed=2, train=True, options=cpu(workers=2))
    for x, y in zip(batches(here, 5), batches(there, 5)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    here.close()
    there.close()


def test_several_decoding_lanes_hand_out_the_same_batches_in_the_same_order(jpegs):
    """Lanes finish out of order; the consumer still gets one lane's sequence."""
    one = GpuJpegStream(jpegs, BatchShape(6), 24, seed=2, train=True, options=cpu(decoders=1))
    three = GpuJpegStream(jpegs, BatchShape(6), 24, seed=2, train=True, options=cpu(decoders=3, prefetch=1))
    assert (one.options.decoders, three.options.decoders) == (1, 3)
    for x, y in zip(batches(one, 9), batches(three, 9)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    assert one.get_state() == three.get_state()
    evaluation = [GpuJpegStream(jpegs, BatchShape(4), 24, seed=2, train=False, options=cpu(decoders=n))
                  for n in (1, 3)]
    for _ in range(2):  # each pass ends, and a new one starts from the beginning
        passes = [[tuple(np.asarray(a) for a in batch) for batch in stream]
                  for stream in evaluation]
        assert len(passes[0]) == len(passes[1]) == -(-len(jpegs) // 4)
        for x, y in zip(*passes):
            for a, b in zip(x, y):
                np.testing.assert_array_equal(a, b)
    for s in (one, three, *evaluation):
        s.close()


def test_the_step_is_compiled_for_every_canvas_shape_up_front(jpegs):
    """On GPUs the stream compiles its step for each canvas shape when it is made, in
    the background (`warmed`), so no batch waits for a compile in training: run here
    by hand (the CPU decoder does not warm up), no batch then compiles anything."""
    from preprocessing.gpu.canvas import canvas_step

    stream = GpuJpegStream(jpegs, BatchShape(4), 23, seed=0, train=True,
                           options=cpu(workers=0, canvas_sides=(64, 128)))
    assert stream.warmed is None
    step = canvas_step(23, "float32")
    assert stream._compile_steps() == 2 and step._cache_size() == 2
    for _ in range(4):
        next(stream)
    assert step._cache_size() == 2
    stream.close()


def test_arguments_are_checked(jpegs):
    """The stream's own checks (GpuOptions checks its fields, test_options.py)."""
    with pytest.raises(ValueError, match="records is empty"):
        GpuJpegStream([], BatchShape(4), 32, seed=0, train=True, options=cpu())
    with pytest.raises(ValueError, match="cannot fill one batch"):
        GpuJpegStream(jpegs[:3], BatchShape(4), 32, seed=0, train=True, options=cpu())
    with pytest.raises(ValueError, match="image_size must be >= 1, got 0"):
        GpuJpegStream(jpegs, BatchShape(4), 0, seed=0, train=True, options=cpu())
    with pytest.raises(ValueError, match="dtype must be one of"):
        GpuJpegStream(jpegs, BatchShape(4), 32, seed=0, train=True, dtype="int8", options=cpu())
    with pytest.raises(ValueError, match="image_size 300 exceeds the largest canvas side 256"):
        GpuJpegStream(jpegs, BatchShape(4), 300, seed=0, train=True, options=cpu(canvas_sides=(128, 256)))
    with pytest.raises(ValueError, match="needs GPU devices"):
        GpuJpegStream(jpegs, BatchShape(4), 32, seed=0, train=True, options=GpuOptions(decoder="nvimgcodec"))
    with pytest.raises(ValueError, match="shared over 2 device.* over 1 of this process's"):
        GpuJpegStream(jpegs, BatchShape(4, devices_per_process=2), 32, seed=0, train=True,
                      options=cpu())


# ---- in fresh processes: no TensorFlow, and two devices --------------------------------


def test_the_pipeline_imports_no_tensorflow(jpegs):
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from preprocessing.gpu.stream import GpuJpegStream\n"
        "from preprocessing.spec import BatchShape\n"
        f"s = GpuJpegStream({jpegs!r}, BatchShape(8), 32, seed=0, train=True)\n"
        "x, y = next(s)\n"
        "print(json.dumps({'tf': 'tensorflow' in sys.modules, 'decoder': s.options.decoder,"
        " 'shape': list(x.shape)}))\n")
    result = run_python(code, {"PYTHONPATH": NO_TF, "JAX_PLATFORMS": "cpu"})
    assert result == {"tf": False, "decoder": "cpu", "shape": [8, 32, 32, 3]}


def test_two_devices_get_their_slices_of_a_sharded_batch(jpegs):
    code = (
        "import json, sys, numpy as np, jax\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
        "from preprocessing.gpu.options import GpuOptions\n"
        "from preprocessing.gpu.stream import GpuJpegStream\n"
        "from preprocessing.spec import BatchShape\n"
        "sharding = NamedSharding(Mesh(np.array(jax.devices()), ('batch',)), P('batch'))\n"
        f"records = {jpegs!r}\n"
        "cpu = GpuOptions(decoder='cpu')\n"
        "two = GpuJpegStream(records, BatchShape(8, devices_per_process=2), 16, seed=4, train=True, sharding=sharding,"
        " options=cpu)\n"
        "one = GpuJpegStream(records, BatchShape(8), 16, seed=4, train=True, options=cpu)\n"
        "result = {'devices': len(jax.devices())}\n"
        "for _ in range(3):\n"
        "    (x, y), (x1, y1) = next(two), next(one)\n"
        "    result['sharding'] = x.sharding == sharding\n"
        "    result['labels_sharded'] = y.sharding.spec == P('batch')\n"
        "    result['shards'] = sorted(s.data.shape[0] for s in x.addressable_shards)\n"
        "    result['same'] = bool(np.array_equal(np.asarray(x), np.asarray(x1))"
        " and np.array_equal(np.asarray(y), np.asarray(y1)))\n"
        "    assert result['same']\n"
        "ev = GpuJpegStream(records, BatchShape(10, devices_per_process=2), 16, seed=4, train=False, sharding=sharding,"
        " options=cpu)\n"
        "result['eval_weights'] = float(sum(np.asarray(w).sum() for _, _, w in ev))\n"
        "print(json.dumps(result))\n")
    result = run_python(code, {"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                               "JAX_PLATFORMS": "cpu", "PYTHONPATH": NO_TF})
    assert result == {"devices": 2, "sharding": True, "labels_sharded": True,
                      "shards": [4, 4], "same": True, "eval_weights": 24.0}


FIT_COMPILES = """
import json, logging, sys, numpy as np, jax
sys.path.insert(0, {root!r})
import keras
from preprocessing.feed import Feed
from preprocessing.gpu.options import GpuOptions
from preprocessing.gpu.stream import GpuJpegStream
from preprocessing.spec import BatchShape
compiles = []

class Count(logging.Handler):
    def emit(self, record):
        if "Finished XLA compilation of jit(train_step)" in record.getMessage():
            compiles.append(record.getMessage())

logging.getLogger("jax").addHandler(Count())
jax.config.update("jax_log_compiles", True)
sharding = None
if {devices} > 1:
    distribution = keras.distribution.DataParallel(devices=jax.devices())
    keras.distribution.set_distribution(distribution)
    sharding = distribution.get_data_layout((8, 16, 16, 3)).backend_layout
stream = GpuJpegStream({records!r}, BatchShape(8, devices_per_process={devices}), 16, seed=1, train=True, dtype="float32",
                       sharding=sharding, options=GpuOptions(decoder="cpu", workers=0))
x, _ = next(stream)
model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3),
                          keras.layers.BatchNormalization(),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])
model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(Feed(stream, None), epochs=3, steps_per_epoch=3, verbose=0)
stream.close()
print(json.dumps({{"compiles": len(compiles), "committed": x.committed}}))
"""


@pytest.mark.parametrize("devices", [1, 2])
def test_fit_compiles_the_training_step_once(jpegs, devices):
    """One device: the batches are uncommitted, like Keras's state; were they committed,
    the first step would commit the state it returns and each change of commitment
    (that step, the metrics reset at every epoch's end) would compile the step again
    (on an H200, ~10 s each for ResNet-50). Two devices: laid out as DataParallel's."""
    code = FIT_COMPILES.format(root=ROOT, records=jpegs, devices=devices)
    result = run_python(code, {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
                               "JAX_PLATFORMS": "cpu", "KERAS_BACKEND": "jax",
                               "PYTHONPATH": NO_TF})
    assert result == {"compiles": 1, "committed": devices > 1}
