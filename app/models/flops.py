"""Training FLOPs per image of any model, counted from the training step's XLA HLO.

The step counted is the model's forward pass in training mode on a batch, a
cross-entropy of its logits, and the gradient of that loss with respect to every
trainable variable: what `fit` differentiates (the optimizer's update, a few
operations per parameter per step, is left out: under 0.01% of a step at batch 256).
It is lowered to XLA HLO, from shapes only (nothing is run, compiled or allocated):

- JAX: `jax.jit(jax.grad(loss)).lower(...)`, the lowered module's text. (Its compiled
  form is not used: on GPUs its cost analysis is reported wrong or -1, jax-ml/jax
  #16008, #22249, and convolutions become custom calls.)
- TensorFlow: the same step (`model.stateless_call`) as a `tf.function(jit_compile=True)`,
  its HLO taken with
  `experimental_get_compiler_ir(...)(stage="hlo")` (traced, not run or compiled). Its
  instructions no output needs (the images' gradient through the first layer, which
  TensorFlow's tape writes and XLA would delete) are left out.

Counted: every `dot` and `convolution`, as XLA's cost analysis counts them (2 FLOPs per
multiply-add; a convolution's taps that meet the input only, so a "same"
convolution's zero border is not counted: a 3x3 convolution on a 7x7 map makes 19 of
21 taps per axis; `tests/app/models/test_flops.py` checks the rule against
`Lowered.cost_analysis()` op by op). These are the tensor-core work the peak of MFU
measures; elementwise ops and reductions are not counted (`Lowered.cost_analysis()`,
which counts them too, is 1.0% higher on ResNet-50 and 0.7% on ViT-B/16 at 224 px,
2.9% on ConvNeXt-T, 7% on EfficientNet-B0 with its swish and squeeze-excitation).
Both backends give the same figure, and the built-in models' matches a count by hand
(tests/app/models/test_flops.py).

Attention runs unfused while counting (keras.config.disable_flash_attention()): a
fused kernel is a custom call, whose FLOPs XLA does not see. Where a backend cannot
count (another backend, or the step does not lower), the count is None, one warning
line says why, and MFU is unknown (None), never 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys

import keras

from callbacks.profiling.contractions import valid_taps

# How the FLOPs were counted (summary.json's flops_method), by backend.
METHODS = {"jax": "xla_hlo_dot_convolution_of_lowered_train_step_jax",
           "tensorflow": "xla_hlo_dot_convolution_of_train_step_tensorflow"}


@contextlib.contextmanager
def _unfused_attention():
    was = keras.config.is_flash_attention_enabled()
    keras.config.disable_flash_attention()
    try:
        yield
    finally:
        if was is not False:  # None (auto) or True: enable_flash_attention() gives auto
            keras.config.enable_flash_attention()


def _loss(labels, logits):
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(
        labels, keras.ops.cast(logits, "float32"), from_logits=True))


def _jax_step(model, image_size: int, batch: int):
    """The training step of `model`, lowered by JAX (jax.stages.Lowered)."""
    import jax

    def spec(variable):
        return jax.ShapeDtypeStruct(tuple(variable.shape), variable.dtype)

    def loss(trainable, fixed, images, labels):
        logits, _ = model.stateless_call(trainable, fixed, images, training=True)
        return _loss(labels, logits)

    with _unfused_attention():
        return jax.jit(jax.grad(loss)).lower(
            [spec(v) for v in model.trainable_variables],
            [spec(v) for v in model.non_trainable_variables],
            jax.ShapeDtypeStruct((batch, image_size, image_size, 3), "float32"),
            jax.ShapeDtypeStruct((batch,), "int32"))


def _jax_step_hlo(model, image_size: int, batch: int) -> str:
    return _jax_step(model, image_size, batch).as_text(dialect="hlo")


def jax_cost_analysis_flops(model, image_size: int, batch: int = 1) -> float:
    """XLA's own cost analysis of the lowered JAX step, elementwise ops included (the
    cross-check of the count; JAX backend only)."""
    analysis = _jax_step(model, image_size, batch).cost_analysis()
    if isinstance(analysis, (list, tuple)):  # older JAX: one dict per computation
        analysis = analysis[0] if analysis else {}
    return float((analysis or {}).get("flops", -1.0)) / batch


def _tensorflow_step_hlo(model, image_size: int, batch: int) -> str:
    import tensorflow as tf

    # The variables' values are arguments (stateless_call), not captured variables: a
    # MirroredStrategy's copies live on other devices, which one XLA cluster cannot read.
    trained = len(model.trainable_variables)

    @tf.function(jit_compile=True)
    def gradients(images, labels, *values):  # flat: the IR takes TensorSpecs only
        trainable, fixed = list(values[:trained]), list(values[trained:])
        with tf.GradientTape() as tape:
            tape.watch(trainable)
            logits, _ = model.stateless_call(trainable, fixed, images, training=True)
            loss = _loss(labels, logits)
        return tape.gradient(loss, trainable)

    with _unfused_attention():
        return gradients.experimental_get_compiler_ir(
            tf.TensorSpec((batch, image_size, image_size, 3), tf.float32),
            tf.TensorSpec((batch,), tf.int32),
            *[tf.TensorSpec(tuple(v.shape), v.dtype)
              for v in model.trainable_variables + model.non_trainable_variables]
        )(stage="hlo")


def train_flops_per_image(model, image_size: int, batch_size: int = 1) -> float | None:
    """Forward + backward FLOPs of one training image, or None where not counted.

    Args:
        model: the built model (its variables' shapes are read, not their values).
        image_size: the square images' side.
        batch_size: images in the counted step; a multiple of the app BatchNorm's
            groups (the replicas on JAX). Every term but the loss's mean grows with it.
    """
    steps = {"jax": _jax_step_hlo, "tensorflow": _tensorflow_step_hlo}
    backend = keras.config.backend()
    if backend not in steps:
        return None
    try:
        flops = hlo_contraction_flops(steps[backend](model, image_size, batch_size))
    except Exception as error:  # noqa: BLE001 - a count that fails leaves MFU unknown, said
        sys.stderr.write(f"warning: the training FLOPs of {model.name} were not counted "
                         f"({type(error).__name__}: {(str(error).splitlines() or [''])[0]}); "
                         "MFU is unknown\n")
        return None
    return flops / batch_size if flops > 0 else None


def cached_train_flops_per_image(model, image_size: int, batch_size: int = 1,
                                 folder: str | None = None) -> float | None:
    """train_flops_per_image, kept in `folder` (None: not kept) between runs.

    Counting traces the model's whole training step in Python (on the H200 host ~1.5 s
    of the small ResNet's start, before the first step): a run of the same model, input
    and counter finds its count there instead. The key is everything the count reads:
    the model's Keras config, its variables' paths, shapes and dtypes, the image size,
    the batch, the backend, the Keras and framework versions and this file's own text;
    a model without a config, an unreadable entry or a folder that cannot be written
    falls back to counting.
    """
    key = _count_key(model, image_size, batch_size) if folder else None
    path = os.path.join(folder, f"{key}.json") if key else None
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                kept = json.load(f)["train_flops_per_image"]
            if isinstance(kept, float) and kept > 0:
                return kept
        except (OSError, ValueError, KeyError, TypeError):
            pass  # absent or damaged: counted again, and written afresh
    flops = train_flops_per_image(model, image_size, batch_size)
    if path and flops is not None:
        try:
            os.makedirs(folder, exist_ok=True)
            partial = f"{path}.{os.getpid()}.partial"
            with open(partial, "w", encoding="utf-8") as f:
                json.dump({"train_flops_per_image": flops, "model": model.name}, f)
            os.replace(partial, path)  # a reader sees a whole entry or none
        except OSError:
            pass  # unkept, counted again next time
    return flops


def _count_key(model, image_size: int, batch_size: int) -> str | None:
    from keras.src.utils import module_utils

    from app.engine.cold_start import tensorflow_unseen

    try:
        with tensorflow_unseen(module_utils.tensorflow):  # to_json asked for it (3.6 s)
            described = model.to_json()
    except Exception:  # noqa: BLE001 - e.g. a subclassed model without get_config
        return None
    backend = keras.config.backend()
    framework = sys.modules.get("jax" if backend == "jax" else "tensorflow")
    with open(__file__, "rb") as f:
        counter = hashlib.sha256(f.read()).hexdigest()
    text = json.dumps([described, [(v.path, tuple(v.shape), str(v.dtype), v.trainable)
                                   for v in model.weights],
                       image_size, batch_size, backend, keras.__version__,
                       getattr(framework, "__version__", None), counter])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def model_facts(model, flops: float | None) -> dict:
    """What summary.json says of the model: its Keras name, parameters (all, and
    trainable), a lower bound of the bytes an image keeps for the gradient (app/models/
    memory.py: what the decision checks another device's memory with), training GFLOPs
    per image and how they were counted (None: not)."""
    from app.models import memory

    def count(variables):
        return int(sum(int(_product(v.shape)) for v in variables))

    compute = str(getattr(getattr(model, "dtype_policy", None), "compute_dtype", "float32"))
    return {"model_name": model.name,
            "parameters": count(model.weights),
            "trainable_parameters": count(model.trainable_weights),
            "kept_bytes_per_image": memory.kept_bytes_per_image(
                model, 2 if compute in ("bfloat16", "float16") else 4),
            "train_gflops_per_image": round(flops / 1e9, 4) if flops else None,
            "flops_method": METHODS.get(keras.config.backend()) if flops else None}


def _product(shape) -> int:
    result = 1
    for size in shape:
        result *= int(size)
    return result


# ------------------------------------------------------------- HLO text count
# "name = f32[2,3]{1,0} opcode(operands), attributes": TensorFlow prints each operand
# with its shape ("f32[2,3]{1,0} %x"), JAX by name only ("x.1"): shapes come from the
# instructions that define the names.
_DEFINITION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(\(.*?\)|\S+)\s+"
                         r"([\w\-]+)\(([^)]*)\)(.*)$")


_SHAPE = re.compile(r"^\w+\[([\d,]*)\]")


def _dims(text: str) -> list[int]:
    return [int(d) for d in text.split(",")] if text else []


def _attribute(rest: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\{{[^}}]*\}}|[\w\->]+)", rest)
    return found.group(1).strip("{}") if found else ""


def _convolution_flops(out, lhs, rhs, rest) -> float:
    lhs_labels, rhs_labels, out_labels = re.split(r"_|->", _attribute(rest, "dim_labels"))
    window = dict(item.split("=") for item in _attribute(rest, "window").split())
    spatial = len(lhs_labels) - 2

    def per_axis(key, default):
        values = window.get(key)
        return [default] * spatial if values is None else values.split("x")

    stride, pad = per_axis("stride", 1), per_axis("pad", "0_0")
    lhs_dilate, rhs_dilate = per_axis("lhs_dilate", 1), per_axis("rhs_dilate", 1)
    taps = 1
    for axis in range(spatial):
        label = str(axis)
        taps *= valid_taps(lhs[lhs_labels.index(label)], rhs[rhs_labels.index(label)],
                            out[out_labels.index(label)], int(stride[axis]),
                            int(pad[axis].split("_")[0]), int(lhs_dilate[axis]),
                            int(rhs_dilate[axis]))
    groups = int(_attribute(rest, "feature_group_count") or 1)
    batch_groups = int(_attribute(rest, "batch_group_count") or 1)
    features_in = lhs[lhs_labels.index("f")] // groups
    batch = lhs[lhs_labels.index("b")] // batch_groups
    return 2.0 * features_in * out[out_labels.index("f")] * batch * taps


def _live(instructions) -> set[str]:
    """Names of the instructions some ROOT needs (every computation's ROOT counts)."""
    needs = {name: [op.split()[-1].lstrip("%") for op in operands.split(", ") if op]
             for _, name, _, _, operands, _ in instructions}
    live, todo = set(), [name for root, name, *_ in instructions if root]
    while todo:
        name = todo.pop()
        if name not in live:
            live.add(name)
            todo += [n for n in needs.get(name, ()) if n in needs]
    return live


def hlo_contraction_flops(hlo_text: str) -> float:
    """FLOPs of every dot and convolution of an HLO module's text that its outputs need,
    as XLA's cost analysis counts them (2 per multiply-add; convolution taps on the
    input only)."""
    instructions = [found.groups() for line in hlo_text.splitlines()
                    if (found := _DEFINITION.match(line))]
    live = _live(instructions)
    shapes = {name: _dims(_SHAPE.match(shape).group(1)) for _, name, shape, *_ in instructions
              if _SHAPE.match(shape)}
    total = 0.0
    for _, name, shape, opcode, operands, rest in instructions:
        if opcode not in ("dot", "convolution") or name not in live:
            continue
        lhs, rhs = (shapes[operand.split()[-1].lstrip("%")] for operand in operands.split(", "))
        out = shapes[name]
        if opcode == "dot":
            contracting = _dims(_attribute(rest, "lhs_contracting_dims"))
            total += 2.0 * _product(out) * _product(lhs[d] for d in contracting)
        else:
            total += _convolution_flops(out, lhs, rhs, rest)
    return total
