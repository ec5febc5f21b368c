"""callbacks/profiling/contractions.py: a dot's and a convolution's FLOPs as XLA's own
cost analysis counts them, checked against it on modules JAX lowers here, on the CPU
(read from their HloProto text, the form a trace's modules come in): convolutions
strided, grouped, depthwise, dilated and transposed, with both gradients; a dot with
batch dimensions."""

import pytest

from callbacks.profiling import hlo_cost, hlo_text

# (image shape NHWC, kernel HWIO, strides, padding, lhs dilation, rhs dilation, groups)
CONVOLUTIONS = [
    ((2, 9, 9, 4), (3, 3, 4, 8), (1, 1), "SAME", (1, 1), (1, 1), 1),
    ((2, 9, 7, 4), (3, 3, 4, 8), (2, 2), ((1, 1), (1, 1)), (1, 1), (1, 1), 1),
    ((2, 8, 8, 6), (3, 3, 2, 6), (1, 1), "SAME", (1, 1), (1, 1), 3),   # grouped
    ((2, 7, 7, 8), (7, 7, 1, 8), (1, 1), "SAME", (1, 1), (1, 1), 8),   # depthwise 7x7 on 7x7
    ((1, 6, 6, 4), (3, 3, 4, 4), (1, 1), ((2, 2), (2, 2)), (2, 2), (1, 1), 1),  # transposed
    ((1, 10, 10, 4), (3, 3, 4, 4), (1, 1), "VALID", (1, 1), (2, 2), 1),  # dilated kernel
]


def _module_text(lowered) -> str:
    """The lowered module as graph_viewer gives it: the HloProto in text form."""
    from google.protobuf import text_format
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    return "hlo_module {\n" + text_format.MessageToString(
        hlo_pb2.HloModuleProto.FromString(proto)) + "}\n"


def _counted(text: str) -> int:
    """Every dot and convolution of the module, as the reader counts them."""
    module = hlo_text.computations(text)
    costs = hlo_cost.Costs(module)
    return sum(costs.flops(i) for instructions in module.values() for i in instructions
               if hlo_text.first(i, "opcode") in ("dot", "convolution"))


@pytest.mark.parametrize("shape,kernel,strides,padding,lhs_dilation,rhs_dilation,groups",
                         CONVOLUTIONS)
def test_a_convolution_and_its_gradients_count_what_xla_counts(
        shape, kernel, strides, padding, lhs_dilation, rhs_dilation, groups):
    """The forward convolution, and its gradients for the image and the kernel (XLA's
    backward convolutions: windows as large as the map, batch groups for grouped
    filters): the reader's count equals XLA's cost analysis of the same module, read
    from its HloProto text and from XLA's dump format alike."""
    import jax
    import jax.numpy as jnp

    def conv(x, w):
        return jax.lax.conv_general_dilated(
            x, w, strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)

    x, w = jnp.ones(shape), jnp.ones(kernel)
    cotangent = jnp.ones(jax.eval_shape(conv, x, w).shape)
    for function, args in ((conv, (x, w)),
                           (lambda x, w, g: jax.vjp(conv, x, w)[1](g), (x, w, cotangent))):
        lowered = jax.jit(function).lower(*args)
        expected = lowered.cost_analysis()["flops"]
        assert _counted(_module_text(lowered)) == pytest.approx(expected, rel=1e-9)
        assert _counted(lowered.as_text(dialect="hlo")) == pytest.approx(expected, rel=1e-9)


def test_a_dot_with_batch_dimensions_counts_what_xla_counts():
    import jax
    import jax.numpy as jnp

    def attention_scores(q, k):
        return jnp.einsum("bqhd,bkhd->bhqk", q, k)

    lowered = jax.jit(attention_scores).lower(jnp.ones((2, 5, 3, 8)), jnp.ones((2, 7, 3, 8)))
    assert _counted(_module_text(lowered)) == 2 * 2 * 3 * 5 * 7 * 8
    assert _counted(lowered.as_text(dialect="hlo")) == 2 * 2 * 3 * 5 * 7 * 8
    assert lowered.cost_analysis()["flops"] == 2 * 2 * 3 * 5 * 7 * 8
