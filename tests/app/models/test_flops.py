"""Training FLOPs from the step's XLA HLO (app/models/flops.py): the counting rule is
XLA's own, op by op; both backends give the same figure; it equals a count by hand
for the built-in models and others; where nothing can be counted, MFU is unknown."""

import csv
import json
import os
import re
import textwrap
import types

import pytest
from conftest import ROOT, run_python
from flops_by_hand import train_flops_per_image as by_hand

from app import models
from app.models import flops, recipe
from callbacks.mfu import ModelFlopsUtilization
from flags import Config

NO_TF_JAX = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
             "PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow")}
# (model, image size, classes): each kind of layer the count meets.
CASES = [("resnet50", 224, 1000), ("small_resnet", 16, 10), ("vit_ti16", 32, 10),
         ("vit_b16", 224, 1000), ("applications:MobileNetV3Small", 32, 10),
         ("applications:EfficientNetB0", 32, 10), ("examples/my_model.py:make_model", 16, 10)]
# Counted on JAX too (each JAX build compiles its initializers: seconds on a CPU).
JAX_CASES = [CASES[0], CASES[3], CASES[4]]


def app_count(name, size, classes, backend="tensorflow"):
    """What the app counts for --model=name (the ResNets on their Keras-stem twin)."""
    config = Config(model=name, backend=backend, logdir="x")
    topology = types.SimpleNamespace(num_replicas=1, compilation_cache_dir=None)
    layer_set = recipe.layer_set(config, topology)
    model = models.make_model(name, classes, size, layer_set)
    return model, recipe.count_train_flops(config, topology, model, classes, size)


JAX_COUNTS = textwrap.dedent("""
    import json, types
    from app import models
    from app.models import flops, recipe
    from flags import Config
    out = {}
    for name, size, classes in CASES:
        config = Config(model=name, backend="jax", logdir="x")
        topology = types.SimpleNamespace(num_replicas=1, compilation_cache_dir=None)
        model = models.make_model(name, classes, size, recipe.layer_set(config, topology))
        counted = recipe.count_train_flops(config, topology, model, classes, size)
        twin = models.make_model(name, classes, size, models.KERAS) if name == "resnet50" else model
        out[name] = [counted, flops.jax_cost_analysis_flops(twin, size)
                     if name in ("resnet50", "vit_b16") else None]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def jax_counts():
    return run_python(f"CASES = {JAX_CASES!r}\n" + JAX_COUNTS, NO_TF_JAX)


@pytest.fixture(scope="module")
def tensorflow_counts():
    return {}


@pytest.mark.parametrize("name, size, classes", CASES, ids=[c[0] for c in CASES])
def test_the_count_equals_a_count_by_hand(tensorflow_counts, name, size, classes):
    model, counted = app_count(name, size, classes)
    twin = models.make_model(name, classes, size, models.KERAS) if name == "resnet50" else model
    assert counted == pytest.approx(by_hand(twin), rel=0.02)
    tensorflow_counts[name] = counted


@pytest.mark.parametrize("name", [c[0] for c in JAX_CASES])
def test_both_backends_count_the_same(jax_counts, tensorflow_counts, name):
    if name not in tensorflow_counts:
        tensorflow_counts[name] = app_count(*next(c for c in CASES if c[0] == name))[1]
    assert jax_counts[name][0] == pytest.approx(tensorflow_counts[name], rel=1e-9)


@pytest.mark.parametrize("name", ["resnet50", "vit_b16"])
def test_xla_cost_analysis_agrees_within_two_percent_elementwise_included(jax_counts, name):
    """The same lowered step counted by XLA itself: its elementwise ops add 1.0%
    (ResNet-50) and 0.7% (ViT-B/16); the ResNet's hand count is 3 x 4.09 GMAC's
    24.54 GFLOPs less the zero border's taps and the images' gradient: 23.46."""
    counted, analysed = jax_counts[name]
    assert counted < analysed < 1.02 * counted


def test_resnet50_counts_the_models_math_not_the_padded_stem(jax_counts):
    assert jax_counts["resnet50"][0] == pytest.approx(23.457e9, rel=1e-3)


RULE = textwrap.dedent("""
    import json, jax, jax.numpy as jnp
    from jax import lax
    from app.models.flops import hlo_contraction_flops

    def conv(stride, padding, groups=1):
        return lambda x, w: lax.conv_general_dilated(
            x, w, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=groups)

    cases = [(conv(1, "SAME"), (2, 7, 7, 8), (3, 3, 8, 16)),
             (conv(2, "SAME"), (2, 14, 14, 8), (3, 3, 8, 16)),
             (conv(2, "SAME"), (2, 32, 32, 3), (7, 7, 3, 8)),
             (conv(16, "VALID"), (2, 32, 32, 3), (16, 16, 3, 8)),
             (conv(2, "SAME", 8), (2, 9, 9, 8), (3, 3, 1, 8)),
             (lambda a, b: a @ b, (4, 5, 6), (6, 7)),
             (lambda q, k: jnp.einsum("btnh,bsnh->bnts", q, k), (2, 5, 3, 8), (2, 5, 3, 8))]
    out = []
    for f, *shapes in cases:
        args = [jax.ShapeDtypeStruct(s, "float32") for s in shapes]
        for g in (f, jax.grad(lambda *a: f(*a).sum(), argnums=(0, 1))):
            lowered = jax.jit(g).lower(*args)
            out.append([hlo_contraction_flops(lowered.as_text(dialect="hlo")),
                        lowered.cost_analysis()["flops"]])
    print(json.dumps(out))
""")


def test_the_hlo_rule_is_xlas_own_op_by_op():
    """Convolutions same and valid, strided, depthwise, their gradients (dilated and
    transposed), dots and einsums: the text count equals XLA's cost analysis."""
    for mine, xla in run_python(RULE, NO_TF_JAX):
        assert mine == xla


def test_a_count_that_fails_is_none_said_once_and_mfu_is_unknown(monkeypatch, capsys):
    model = models.make_model("small_resnet", 10, 16)

    def broken(*args):
        raise RuntimeError("no HLO here\nsecond line")

    monkeypatch.setattr(flops, "_tensorflow_step_hlo", broken)
    assert flops.train_flops_per_image(model, 16) is None
    assert capsys.readouterr().err == ("warning: the training FLOPs of small_resnet were not "
                                       "counted (RuntimeError: no HLO here); MFU is unknown\n")
    mfu = ModelFlopsUtilization(None, 1, peak_tflops_per_device=989.0)
    logs = {"images_per_sec": 100.0}
    mfu.on_epoch_end(0, logs)
    assert mfu.utilization(100.0) is None and "mfu" not in logs and mfu.mfu is None
    facts = flops.model_facts(model, None)
    assert facts["train_gflops_per_image"] is None and facts["flops_method"] is None


def test_model_facts_say_what_was_counted_and_how():
    model, counted = app_count("vit_ti16", 32, 10)
    facts = flops.model_facts(model, counted)
    assert json.loads(json.dumps(facts)) == facts
    assert facts["model_name"] == "vit_ti16" and facts["trainable_parameters"] == facts[
        "parameters"] > 5e6
    assert facts["train_gflops_per_image"] == round(counted / 1e9, 4)
    assert facts["flops_method"] == flops.METHODS["tensorflow"]
    # what an image keeps for the gradient, in float32: its 5 tokens (4 patches of 16 px
    # and the class token), 192 values each, for each of the ~59 layer outputs kept
    assert 5 * 192 * 4 * 50 < facts["kept_bytes_per_image"] < 5 * 192 * 4 * 70


def test_counting_leaves_keras_attention_setting_as_it_was():
    import keras

    model = models.make_model("vit_ti16", 10, 32)
    assert keras.config.is_flash_attention_enabled() is None
    flops.train_flops_per_image(model, 32)
    assert keras.config.is_flash_attention_enabled() is None
    keras.config.disable_flash_attention()
    try:
        flops.train_flops_per_image(model, 32)
        assert keras.config.is_flash_attention_enabled() is False
    finally:
        keras.config.enable_flash_attention()


def test_a_kept_count_is_read_back_and_anything_else_is_counted_again(monkeypatch, tmp_path):
    """The count is kept in the folder: the same model again reads it (nothing traced);
    another model (10 classes against 7), a damaged entry, or a folder that cannot be
    written are counted afresh, to the same figure; without a folder nothing is kept."""
    model = models.make_model("small_resnet", 10, 16)
    counted = flops.train_flops_per_image(model, 16)
    folder = str(tmp_path / "kept")
    assert flops.cached_train_flops_per_image(model, 16, folder=folder) == counted
    entries = os.listdir(folder)
    assert len(entries) == 1 and entries[0].endswith(".json")

    calls = []
    real = flops.train_flops_per_image
    monkeypatch.setattr(flops, "train_flops_per_image",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    assert flops.cached_train_flops_per_image(model, 16, folder=folder) == counted
    assert calls == []  # read back, not traced
    other = models.make_model("small_resnet", 7, 16)
    assert flops.cached_train_flops_per_image(other, 16, folder=folder) == real(other, 16)
    assert len(calls) == 1 and len(os.listdir(folder)) == 2
    assert flops.cached_train_flops_per_image(model, 32, folder=folder) != counted  # size

    with open(os.path.join(folder, entries[0]), "w") as f:
        f.write('{"train_flops_per_image": ')  # a run killed mid-write (or a bad disk)
    assert flops.cached_train_flops_per_image(model, 16, folder=folder) == counted
    with open(os.path.join(folder, entries[0])) as f:
        assert json.load(f)["train_flops_per_image"] == counted  # written afresh

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert flops.cached_train_flops_per_image(model, 16, folder=str(blocked / "x")) == counted
    calls.clear()
    assert flops.cached_train_flops_per_image(model, 16, folder=None) == counted
    assert len(calls) == 1


def test_the_docs_give_the_apps_count_and_the_mfu_it_makes(jax_counts):
    """The measured results' (benchmarks/README.md) and BUILD.md's training GFLOPs are what
    the app counts now, and the ResNet-50 MFU there is the cited run's images/sec at that
    count over the H200's peak."""
    def words(name):
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            return " ".join(f.read().split())

    readme, build = words(os.path.join("benchmarks", "README.md")), words("BUILD.md")
    resnet, vit = (jax_counts[name][0] / 1e9 for name in ("resnet50", "vit_b16"))
    assert f"ResNet-50 {resnet:.2f} GFLOPs a training image" in build
    assert f"ViT-B/16 {vit:.2f};" in build
    assert f"the app's count of {resnet:.2f} training GFLOPs per image" in readme
    assert f"at XLA's {vit:.1f} training GFLOPs per image" in readme
    with open(os.path.join(ROOT, "app", "pricing", "prices.csv"), encoding="utf-8") as f:
        peaks = {float(row["peak_bf16_tflops_per_device"]) for row in csv.DictReader(f)
                 if row["device"] == "H200"}
    assert len(peaks) == 1, peaks
    cited = re.search(r"\(`([\w-]+\.json)`; at 1024, MFU ([\d.]+)% at the app's count", readme)
    with open(os.path.join(ROOT, "benchmarks", "results", cited[1]), encoding="utf-8") as f:
        rate = json.load(f)["one_gpu"]["app_best_batch"]["images_per_sec"]
    assert cited[2] == f"{100 * rate * resnet / (peaks.pop() * 1e3):.1f}"


def test_keeping_a_count_on_jax_leaves_tensorflow_unimported(tmp_path):
    """The key of a kept count serializes the model's config (`to_json`), where Keras
    asks whether TensorFlow is available for each value and imports it to answer: on
    JAX with TensorFlow installed (not made unimportable, as elsewhere here), 3.6 s of
    a 2-core host's start and a framework the JAX path must not load. Seeding the run
    asks too (app/run/context.py): neither imports it now, and the count is kept."""
    found = run_python(textwrap.dedent(f"""
        import json, os, sys
        import keras
        from app import models
        from app.models import flops
        from app.run import context
        context.set_random_seed(keras, 3)
        model = models.make_model("small_resnet", 10, 16)
        counted = flops.cached_train_flops_per_image(model, 16, folder={str(tmp_path)!r})
        print(json.dumps([counted, len(os.listdir({str(tmp_path)!r})),
                          "tensorflow" in sys.modules]))
    """), {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT})
    assert found[0] > 0 and found[1] == 1 and found[2] is False
