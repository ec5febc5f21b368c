"""callbacks/profiling/kinds.py: which kind of work an HLO op or a TensorFlow op is
(what it computes first, then the Keras layer it came from), and what a module's text
says of each op."""

import textwrap

from callbacks.profiling import kinds


def test_the_kind_of_an_hlo_op_is_what_it_computes_then_the_layer_it_came_from():
    layers = {"stem_bn": "BatchNorm", "block_attention": "SelfAttention", "head": "Dense"}
    kind = kinds.category_of_hlo
    Op = kinds.Op
    assert kind(Op("convolution"), layers) == "convolutions"
    assert kind(Op("custom-call", "__cudnn$convForward"), layers) == "convolutions"
    assert kind(Op("fusion", fused=frozenset({"convolution", "add"})), layers) == "convolutions"
    assert kind(Op("custom-call", "__cublas$lt$matmul"), layers) == "matrix products"
    assert kind(Op("fusion", fused=frozenset({"dot", "multiply"}),
                   op_name="jit(train_step)/jvp(head)/dot_general"), layers) == "matrix products"
    assert kind(Op("custom-call", "__cudnn$fmhaSoftmax"), layers) == "attention"
    assert kind(Op("fusion", fused=frozenset({"reduce", "exponential"}),
                   op_name="jit(train_step)/jvp(block_attention)/softmax"), layers) == "attention"
    # an attention layer's projections are matrix products, on a GPU's cuBLAS too
    assert kind(Op("custom-call", "__cublas$lt$matmul",
                   op_name="jit(train_step)/jvp(block_attention)/qkv/dot_general"),
                layers) == "matrix products"
    assert kind(Op("fusion", fused=frozenset({"reduce"}),
                   op_name="jit(train_step)/transpose(jvp(stem_bn))/reduce_sum"),
                layers) == "normalization"
    assert kind(Op("all-reduce-start"), layers) == "collectives"
    assert kind(Op("fusion", fused=frozenset({"add", "maximum"})), layers) == \
        "elementwise and other"


def test_the_kind_of_a_tensorflow_op_is_its_type_then_its_layer():
    layers = {"stem_bn": "BatchNormalization"}
    kind = kinds.category_of_tf_op
    assert kind("model/stem_conv/convolution:Conv2D", layers) == "convolutions"
    assert kind("gradient_tape/model/stem_conv/Conv2DBackpropFilter:Conv2DBackpropFilter",
                layers) == "convolutions"
    assert kind("model/head/MatMul:MatMul", layers) == "matrix products"
    assert kind("model/stem_bn/moments/mean:Mean", layers) == "normalization"
    assert kind("model/relu/Relu:Relu", layers) == "elementwise and other"


def test_a_module_text_gives_each_fusion_what_it_holds():
    """graph_viewer's pbtxt, cut to what the reader uses: a fusion calling a computation
    that holds a convolution, with its framework name."""
    text = textwrap.dedent('''\
        hlo_module {
          computations {
            name: "fused_computation"
            instructions {
              name: "conv.1"
              opcode: "convolution"
            }
            id: 7
          }
          computations {
            name: "main"
            instructions {
              name: "fusion.2"
              opcode: "fusion"
              metadata {
                op_name: "jit(train_step)/jvp(stem_conv)/conv_general_dilated"
              }
              called_computation_ids: 7
            }
            id: 8
          }
        }
        ''')
    ops = kinds.parse_module(text)
    assert ops["fusion.2"].fused == {"convolution"}
    assert ops["fusion.2"].op_name == "jit(train_step)/jvp(stem_conv)/conv_general_dilated"
    assert kinds.category_of_hlo(ops["fusion.2"], {}) == "convolutions"
