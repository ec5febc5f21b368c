"""The kernels a training step runs (app/engine/kernels.py), read from compiled programs:
ConvNeXt-T's training step as XLA compiled it for an H100 (run cx3 of
benchmarks/results/2026-12-06-h100-autotune-spread.json; tests/fixtures/), whose
choices are counted here a second way (the text's own markers), and a CPU program,
which chooses none."""

import gzip
import hashlib
import os
import re

import pytest

from app.engine import kernels
from conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def hlo(name: str) -> str:
    with gzip.open(os.path.join(FIXTURES, f"{name}_after_optimizations.hlo.txt.gz"), "rt") as f:
        return f.read()


@pytest.fixture(scope="module")
def convnext():
    return hlo("convnext_tiny_h100")


def test_every_choice_of_the_gpu_program_is_listed_as_the_text_counts_them(convnext):
    """A hand count from the text's markers: each cuDNN convolution's `"algo_id"`, each
    cuBLAS call's `"selected_algorithm"`, each Triton fusion's block-level tiling."""
    found = kernels.chosen_kernels(convnext)
    cudnn = convnext.count('"algo_id"')
    cublas = convnext.count('"selected_algorithm"')
    tiled = convnext.count('"block_level_fusion_config"')
    assert (cudnn, cublas, tiled) == (65, 99, 184)
    assert kernels.counts(found) == {"library_calls": cudnn + cublas, "fusions": tiled}
    targets = {e["target"] for e in found if e["kind"] == "library"}
    assert targets == set(re.findall(r'custom_call_target="(__cu[^"]+)"', convnext))
    conv = next(e for e in found if e["instruction"] == "cudnn-conv.50")
    assert conv["config"]["algo_id"] == "5" and conv["target"] == "__cudnn$convForward"
    assert conv["op_name"].endswith("stage_0_block_0_depthwise_conv)/conv_general_dilated")
    assert conv["shape"] == "bf16[256,56,56,96]{3,2,1,0}"  # the u8[0] scratch left out
    gemm = next(e for e in found if e["instruction"] == "custom-call.142")
    assert gemm["config"] == {"selected_algorithm": "7"}
    assert gemm["shape"] == "bf16[802816,384]{1,0}"  # its s8[33554432] workspace left out


def test_attention_and_every_convolution_kind_are_listed():
    """op_zoo (every convolution kind and cuDNN's flash attention, tests/fixtures/op_zoo.py)."""
    found = kernels.chosen_kernels(hlo("op_zoo_h100"))
    targets = {e["target"] for e in found}
    assert {"__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward", "__cudnn$convBackwardInput",
            "__cudnn$convBackwardFilter", "fusion:__triton_nested_gemm_fusion"} <= targets
    fmha = next(e for e in found if e["target"] == "__cudnn$fmhaSoftmax")
    assert fmha["config"]["is_cudnn_frontend"] is True  # the algorithm, not the seed etc.
    assert "seed" not in fmha["config"]


def test_the_digest_ignores_numbering_and_sees_one_changed_choice(convnext):
    found = kernels.chosen_kernels(convnext)
    renumbered = re.sub(r"%(cudnn-conv|custom-call|input_transpose_fusion)\.(\d+)",
                        lambda m: f"%{m.group(1)}.{int(m.group(2)) + 1000}", convnext)
    assert kernels.digest(kernels.chosen_kernels(renumbered)) == kernels.digest(found)
    # Run cx1's choice for one convolution: engine 22 with a 616 MB workspace, not 5.
    other = convnext.replace('"algorithm":{"algo_id":"5","is_cudnn_frontend":false,'
                             '"math_type":"DEFAULT_MATH","tuning_knobs":{},"workspace_size":"0"}',
                             '"algorithm":{"algo_id":"22","is_cudnn_frontend":false,'
                             '"math_type":"DEFAULT_MATH","tuning_knobs":{"2":"5"},'
                             '"workspace_size":"616863760"}', 1)
    changed = kernels.chosen_kernels(other)
    assert kernels.digest(changed) != kernels.digest(found)
    assert kernels.differing(found, changed) == 1 and kernels.differing(found, found) == 0
    assert kernels.differing(found, found[:-3]) == 3  # operations one side lacks count whole


def test_a_cpu_program_chooses_nothing_and_its_digest_is_that_of_an_empty_list():
    import jax
    import jax.numpy as jnp

    def step(w, x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.tanh(y.reshape(x.shape[0], -1) @ jnp.ones((8 * 8 * 4, 3))).sum()

    grad = jax.jit(jax.grad(step))
    args = (jnp.ones((3, 3, 2, 4)), jnp.ones((2, 8, 8, 2)))
    digests = set()
    for _ in range(2):  # two compiles of the same program
        text = grad.lower(*args).compile().as_text()
        assert "backend_config" in text or "HloModule" in text
        found = kernels.chosen_kernels(text)
        assert found == []
        digests.add(kernels.digest(found))
    assert digests == {hashlib.sha256(b"[]").hexdigest()}


def test_a_scratch_buffer_is_left_out_of_a_shape_and_nothing_else():
    assert kernels.result_shape("(bf16[8,96]{1,0}, u8[616863760]{0})") == "bf16[8,96]{1,0}"
    assert kernels.result_shape("f32[4]{0}") == "f32[4]{0}"
    assert (kernels.result_shape("(f32[2]{0}, f32[3]{0}, s8[64]{0})")
            == "(f32[2]{0}, f32[3]{0})")


def test_the_closing_line_says_what_was_chosen_and_where_it_came_from(convnext):
    block, found = kernels.describe(convnext, served=False, loaded_from=None)
    assert block["digest"] == kernels.digest(found) and block["file"] == "kernels.json"
    line = kernels.line(block)
    assert line.startswith(f"kernels: {block['digest'][:12]} (164 library calls, 184 fusions; ")
    assert line.endswith("autotuned by this run)") or "autotune cache" in line
    assert kernels.line(kernels.describe(convnext, True, None)[0]).endswith(
        "from JAX's cache)")
    loaded = kernels.describe(convnext, False, "/runs/a/kernels/autotune.textproto")[0]
    assert kernels.line(loaded).endswith("loaded from /runs/a/kernels/autotune.textproto)")
    assert kernels.line({"digest": None, "not_known": "because"}) == "kernels: not known: because"
    one = kernels.line({"digest": "0" * 64, "library_calls": 1, "fusions": 1,
                        "source": "compiled"})
    assert "(1 library call, 1 fusion; compiled by this run)" in one


def test_a_step_of_xla_s_heuristic_choice_is_not_said_to_be_autotuned(convnext):
    """--xla_autotune=heuristic: the kernels were taken, none timed. An H100's heuristic
    runs of ConvNeXt-T closed with "autotuned by this run" (2026-12-07)."""
    block = kernels.describe(convnext, served=False, loaded_from=None, heuristic=True)[0]
    assert block["source"] == "heuristic"
    assert kernels.line(block).endswith(
        "(164 library calls, 184 fusions; XLA's heuristic choice, compiled by this run; "
        "nothing timed)")
    # a program from JAX's cache or a loaded file keeps saying where it came from
    assert kernels.describe(convnext, True, None, heuristic=True)[0]["source"] == "jax_cache"
    # the record reader accepts every source the closing line can name, and no other
    from callbacks.records.state_records import SOURCES

    assert set(SOURCES) == set(kernels.SOURCES)


def test_a_file_a_program_had_no_use_for_is_not_said_to_be_loaded():
    """--kernels_from on a CPU: the program chose nothing, so nothing was loaded; the
    block's source is what compiled it, and the line says that nothing was loaded."""
    block, found = kernels.describe("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }",
                                    served=False, loaded_from="/gpu/autotune.textproto")
    assert found == [] and block["source"] == "compiled"
    assert block["not_loaded"] == kernels.NOTHING_LOADED.format(path="/gpu/autotune.textproto")
    assert kernels.line(block) == (
        f"kernels: {block['digest'][:12]} (0 library calls, 0 fusions; compiled by this "
        "run); nothing loaded from /gpu/autotune.textproto: this program chooses no GPU "
        "kernels (a CPU's compiles none)")


def test_a_step_compiled_where_the_autotune_cache_held_choices_says_so(tmp_path, monkeypatch):
    """JAX has XLA keep each fusion's autotuning in its cache folder: a compile that
    missed JAX's cache may still take those choices untimed."""
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    kernels.note_start()
    assert kernels.source(False, 10, None) == "autotuned"
    held = tmp_path / kernels.XLA_AUTOTUNE_CACHE / "ab"
    held.mkdir(parents=True)
    (held / "entry").write_text("x")
    kernels.note_start()
    assert kernels.source(False, 10, None) == "autotune_cache"
    kernels.note_start(cache_enabled=False)  # --keep_kernels turns that cache off
    assert kernels.source(False, 10, None) == "autotuned"
    assert kernels.source(False, 0, None) == "compiled"
    assert kernels.source(True, 10, None) == "jax_cache"
    assert kernels.source(True, 10, "/x") == "loaded"
