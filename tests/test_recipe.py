"""The training recipe: each model family's optimizer and defaults (flags.config.RECIPES),
what a flag overrides, what weight decay skips, gradient clipping."""

import json
import os

import keras
import numpy as np
import pytest

from app.engine import models, recipe
from flags import Config, ConfigError


@pytest.mark.parametrize("model, optimizer, lr, decay, warmup, clip", [
    ("resnet50", "sgd", 0.4, 5e-4, 1.0, 0.0),
    ("vit_b16", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
    ("applications:ConvNeXtTiny", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
    ("examples/my_model.py:make_model", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
])
def test_each_family_gets_its_recipe_resolved_into_the_config(model, optimizer, lr, decay,
                                                              warmup, clip):
    config = Config(model=model, logdir="x")
    assert (config.optimizer, config.base_learning_rate, config.weight_decay,
            config.warmup_epochs, config.gradient_clip_norm) == (optimizer, lr, decay, warmup,
                                                                 clip)
    assert config.to_dict()["optimizer"] == optimizer  # config.json records what ran
    assert recipe.recipe_facts(config)["peak_learning_rate"] == lr * 64 / 256


def test_flags_override_the_recipe_and_an_optimizer_brings_its_own_defaults():
    config = Config(model="vit_s16", base_learning_rate=1e-3, gradient_clip_norm=0.0,
                    logdir="x")
    assert (config.optimizer, config.base_learning_rate, config.gradient_clip_norm,
            config.weight_decay) == ("adamw", 1e-3, 0.0, 0.05)
    sgd = Config(model="vit_s16", optimizer="sgd", logdir="x")
    assert (sgd.base_learning_rate, sgd.weight_decay, sgd.warmup_epochs) == (0.4, 5e-4, 1.0)
    assert Config(model="vit_s16", logdir="x").logdir != Config(model="vit_s16",
                                                                optimizer="sgd").logdir


@pytest.mark.parametrize("values, message", [
    ({"optimizer": "adam"}, "--optimizer='adam' is unknown; accepted: auto, sgd, adamw"),
    ({"gradient_clip_norm": -1.0}, "--gradient_clip_norm=-1.0 must be >= 0"),
    ({"model": "vgg16"}, "--model='vgg16' is unknown; accepted: small_resnet"),
    ({"model": "my.py"}, "FILE.py:FUNCTION (a function of (num_classes, image_size)"),
])
def test_bad_recipe_and_model_values_are_one_line(values, message):
    with pytest.raises(ConfigError) as error:
        Config(logdir="x", **values)
    assert message in str(error.value) and "\n" not in str(error.value)


def compiled(model_name, **changes):
    config = Config(model=model_name, logdir="x", **changes)
    model = models.make_model(model_name, 10, 32)
    recipe.compile_model(model, config, 10, steps_per_epoch=10)
    model.optimizer.build(model.trainable_variables)
    return model


def test_adamw_decays_kernels_but_no_bias_norm_or_position_embedding():
    model = compiled("vit_ti16", weight_decay=0.5, base_learning_rate=256.0, warmup_epochs=0.0)
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    before = {v.path: np.asarray(v) for v in model.trainable_variables}
    zeros = [np.zeros(v.shape, "float32") for v in model.trainable_variables]
    model.optimizer.apply(zeros, model.trainable_variables)
    changed = {v.path for v in model.trainable_variables
               if not np.array_equal(np.asarray(v), before[v.path])}
    skipped = {v.path for v in recipe.no_decay_variables(model)}
    assert any(p.endswith("position_embedding") for p in skipped)
    assert any(p.endswith("gamma") for p in skipped) and any(p.endswith("bias") for p in skipped)
    # a zero gradient moves only the decayed variables (the zero-initialized head stays 0)
    kernels = {v.path for v in model.trainable_variables if len(v.shape) > 1
               and np.abs(before[v.path]).max() > 0} - skipped
    assert changed == kernels


def test_sgd_for_the_resnets_and_the_global_norm_clipped_where_asked():
    sgd = compiled("small_resnet")
    assert isinstance(sgd.optimizer, keras.optimizers.SGD) and sgd.optimizer.global_clipnorm is None
    assert compiled("vit_ti16").optimizer.global_clipnorm == 1.0


HOST_BUILT = """
import json, jax, keras, numpy as np
from app.engine import recipe
from app.engine.distribute import Topology
from flags import Config

jax.config.update("jax_default_device", jax.devices("cpu")[1])  # the "accelerator"
made_on = set()
move = Topology.to_devices
def to_devices(self, variables):
    made_on.update(str(d) for v in variables for d in v.value.devices())
    move(self, variables)
Topology.to_devices = to_devices
config = Config(model="small_resnet", backend="jax", accelerator="gpu", logdir="x")
built = {}
# cpu: built where it trains; gpu: on the host first (the first build of a process
# draws its logits apart from later ones: "first" takes that build, and is not compared)
for accelerator in ("first", "cpu", "gpu"):
    keras.utils.set_random_seed(7)
    made_on.clear()
    topology = Topology("jax", accelerator.replace("first", "cpu"), 1, 0, 1, "cpu")
    model, _ = recipe.make_compiled_model(config, topology, 10, 28, 10)
    state = model.variables + list(model.optimizer.variables)
    built[accelerator] = [np.asarray(v.value) for v in state]
    places = {str(d) for v in state for d in v.value.devices()}
    committed = any(v.value.committed for v in state)
    print(json.dumps({"accelerator": accelerator, "places": sorted(places),
                      "made_on": sorted(made_on),
                      "committed": committed, "optimizer": len(model.optimizer.variables)}))
same = all(np.array_equal(a, b) for a, b in zip(built["cpu"], built["gpu"]))
print(json.dumps({"same": same, "count": len(built["gpu"])}))
"""


def test_on_a_jax_accelerator_the_variables_are_made_on_the_host_then_moved_uncommitted():
    """Topology.on_host/to_devices, with a second CPU device standing in for the GPU:
    the model and optimizer variables end on the default device, uncommitted (as
    Keras keeps its state), holding the very values built there directly."""
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run([sys.executable, "-c", HOST_BUILT], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    direct, hosted, result = (json.loads(line) for line in done.stdout.strip().splitlines()[-3:])
    assert direct["places"] == hosted["places"] == ["cpu:1"]
    assert direct["made_on"] == ["cpu:1"] and hosted["made_on"] == ["cpu:0"]  # the host's
    assert not direct["committed"] and not hosted["committed"]
    assert hosted["optimizer"] > 2  # the momentum slots were built (on the host) too
    assert result["same"] and result["count"] > 40
