"""BatchNorm statistics per replica or global (--batchnorm_statistics), on CPU with
several JAX host devices and TensorFlow logical devices: the two forms differ exactly
as expected, the per-replica form puts no cross-device reduction on the step's path,
and digits trains as well either way."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, run_cli

LAYER_CHECK = textwrap.dedent("""
    import json, os
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from app.models.layers import BatchNorm

    rng = np.random.default_rng(0)
    # 16 images, 4 per replica; each replica's slice has its own scale and offset.
    x = (rng.normal(size=(16, 3, 3, 5)) * np.repeat([1, 2, 4, 8], 4)[:, None, None, None]
         + np.repeat([0, 1, -3, 5], 4)[:, None, None, None]).astype("float32")
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    sharded = jax.device_put(x, NamedSharding(mesh, PartitionSpec("batch")))
    out = {}
    for groups in (1, 4):
        layer = BatchNorm(groups=groups, momentum=0.0, epsilon=1e-3, dtype="float32")
        layer.build(x.shape)
        trainable = [v.value for v in layer.trainable_variables]
        fixed = [v.value for v in layer.non_trainable_variables]

        def forward(images):
            return layer.stateless_call(trainable, fixed, images, training=True)[0]

        def forward_and_stats(images):
            return layer.stateless_call(trainable, fixed, images, training=True)

        y = jax.jit(forward)(sharded)
        _, stats = jax.jit(forward_and_stats)(sharded)
        hlo = jax.jit(forward).lower(sharded).compile().as_text()
        out[groups] = {"y": np.asarray(y).tolist(),
                       "moving": [np.asarray(s).tolist() for s in stats],
                       "all_reduces": hlo.count("all-reduce-start") + hlo.count(" all-reduce(")}
    print("RESULT" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def layer_results():
    done = subprocess.run([sys.executable, "-c", LAYER_CHECK], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    return {int(k): v for k, v in json.loads(line[len("RESULT"):]).items()}


def _normalize(x, axes):
    import numpy as np

    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-3)


def test_per_replica_statistics_normalize_each_replica_slice_on_its_own(layer_results):
    import numpy as np

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(16, 3, 3, 5)) * np.repeat([1, 2, 4, 8], 4)[:, None, None, None]
         + np.repeat([0, 1, -3, 5], 4)[:, None, None, None]).astype("float32")
    per_replica = np.concatenate([_normalize(x[i:i + 4], (0, 1, 2)) for i in range(0, 16, 4)])
    whole = _normalize(x, (0, 1, 2))
    np.testing.assert_allclose(layer_results[4]["y"], per_replica, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer_results[1]["y"], whole, rtol=1e-4, atol=1e-4)
    # The two forms really differ on this batch (its slices have other statistics).
    assert np.abs(per_replica - whole).max() > 0.5
    # Moving averages (momentum 0: the step's own) are the mean of the slices' statistics.
    slices = x.reshape(4, 4, 3, 3, 5)
    np.testing.assert_allclose(layer_results[4]["moving"][0], slices.mean(axis=(1, 2, 3)).mean(0),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer_results[4]["moving"][1], slices.var(axis=(1, 2, 3)).mean(0),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer_results[1]["moving"][1], x.var(axis=(0, 1, 2)),
                               rtol=1e-4, atol=1e-5)


def test_per_replica_statistics_need_no_cross_device_reduction(layer_results):
    """Compiled over 4 devices with the batch sharded: the global form all-reduces
    its statistics inside the step; the per-replica form's output needs none."""
    assert layer_results[1]["all_reduces"] > 0
    assert layer_results[4]["all_reduces"] == 0


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_digits_trains_as_well_with_either_statistics(digits_dir, tmp_path, backend):
    top1 = {}
    for statistics in ("per_replica", "global"):
        logdir = tmp_path / statistics
        done = run_cli(f"--data_dir={digits_dir}", f"--logdir={logdir}", f"--backend={backend}",
                       "--image_size=8", "--num_devices=2", "--global_batch_size=64",
                       "--epochs=4", "--seed=1", "--verbose=0",
                       f"--batchnorm_statistics={statistics}")
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((logdir / "summary.json").read_text())
        config = json.loads((logdir / "config.json").read_text())
        assert config["batchnorm_statistics"] == statistics and summary["num_replicas"] == 2
        top1[statistics] = summary["best_val_top1"]
    assert min(top1.values()) >= 0.8, top1  # 4 epochs at 8x8 px: ~0.85 either way
    assert abs(top1["per_replica"] - top1["global"]) <= 0.05, top1


def test_tensorflow_replicas_keep_one_moving_statistic_the_mean_of_theirs():
    """MirroredStrategy gives each replica its own copy of the moving statistics;
    Keras's layer updated each from its own batch, so evaluation inside fit (each
    replica, its copy) and the saved model (replica 0's) disagreed. The app's layer
    updates every copy from the replicas' mean: here replica 0 sees zeros, replica 1
    tens, and both copies hold 5."""
    import keras
    import numpy as np
    import tensorflow as tf

    from app.models.layers import BatchNorm

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        inputs = keras.Input((4,))
        norm = BatchNorm(momentum=0.0)
        model = keras.Model(inputs, keras.layers.Dense(2)(norm(inputs)))
        model.compile("sgd", "mse")
    images = np.concatenate([np.zeros((8, 4)), np.full((8, 4), 10.0)]).astype("float32")
    model.fit(images, np.zeros((16, 2), "float32"), batch_size=16, epochs=1, verbose=0,
              shuffle=False)
    for statistic, expected in ((norm.moving_mean, 5.0), (norm.moving_variance, 0.0)):
        copies = [np.asarray(copy) for copy in statistic.value.values]
        assert len(copies) == 2
        np.testing.assert_allclose(copies[0], expected, atol=1e-5)
        np.testing.assert_array_equal(copies[0], copies[1])
