"""callbacks/profiling/hlo_text.py: an HLO module's text in either form read into one.
XLA's dump format (the GPU fixtures saved from an H100 run) and the HloProto text
graph_viewer gives a trace's modules (the same fixture through XLA's own parser and
protobuf's text form) read as the same ops, custom calls' fields included; one line
read by hand; hostile text read without a traceback (Hypothesis)."""

import json
import textwrap

import hlo_fixtures

from callbacks.profiling import hlo_text, kinds


def _described(op):
    return (op.opcode, op.target, op.op_name, op.fused, op.flops, op.bytes)


def test_both_forms_of_the_gpu_module_read_as_the_same_ops():
    """Every op of the op zoo's compiled training step (cuDNN convolutions, cuBLAS GEMMs,
    fused attention, Triton fusions): the same opcode, call target, layer, fused
    opcodes, FLOPs and bytes from the dump text as from its HloProto text."""
    dump = hlo_fixtures.text("op_zoo_h100_after")
    from_dump = kinds.parse_module(dump)
    from_proto = kinds.parse_module(hlo_fixtures.proto_text(dump))
    assert len(from_dump) == 2814
    assert {name: _described(op) for name, op in from_dump.items()} == {
        name: _described(from_proto[name]) for name in from_dump}
    convolutions = [op for op in from_dump.values() if op.target.startswith("__cudnn$conv")]
    assert len(convolutions) == 17 and all(op.flops for op in convolutions)


def test_one_line_of_the_dump_by_hand():
    line = ('  %cudnn-conv.17 = (bf16[64,16,16,32]{3,2,1,0}, u8[0]{0}) custom-call('
            '%cudnn-conv-bias-activation.14#0, /*index=1*/%input_transpose_fusion.1#1), '
            'window={size=5x3 stride=2x1 pad=2_1x0_0 rhs_dilate=1x2 rhs_reversal=1x0}, '
            'dim_labels=b01f_o01i->b01f, feature_group_count=32, '
            'custom_call_target="__cudnn$convForward", metadata={op_name="jit(s)/jvp('
            'depth\\"wise)/conv" stack_frame_id=269}, backend_config={"algo":{"id":"0"},'
            '"note":"a, b}"}')
    item = hlo_text.instruction(line)
    assert item["name"] == item["id"] == ["cudnn-conv.17"]
    assert item["opcode"] == ["custom-call"]
    assert item["operand_ids"] == ["cudnn-conv-bias-activation.14#0",
                                   "input_transpose_fusion.1#1"]
    assert item["shape"] == [{"tuple_shapes": [
        {"element_type": ["BF16"], "dimensions": ["64", "16", "16", "32"]},
        {"element_type": ["U8"], "dimensions": ["0"]}]}]
    first, second = item["window"][0]["dimensions"]
    assert (first["size"], first["stride"], first["padding_low"], first["padding_high"],
            first["window_dilation"], first["window_reversal"]) == (
        ["5"], ["2"], ["2"], ["1"], ["1"], ["true"])
    assert (second["size"], second["window_dilation"], second["window_reversal"]) == (
        ["3"], ["2"], ["false"])
    numbers = item["convolution_dimension_numbers"][0]
    assert numbers["input_spatial_dimensions"] == ["1", "2"]
    assert numbers["kernel_output_feature_dimension"] == ["0"]
    assert numbers["kernel_input_feature_dimension"] == ["3"]
    assert item["feature_group_count"] == ["32"]
    assert item["custom_call_target"] == ["__cudnn$convForward"]
    assert json.loads(item["backend_config"][0]) == {"algo": {"id": "0"}, "note": "a, b}"}
    assert item["metadata"] == [{"op_name": ['jit(s)/jvp(depth"wise)/conv']}]


def test_a_computation_or_instruction_of_id_0_is_found_in_protobufs_text():
    """protobuf's text form leaves out a field at its default, an id of 0: the fusion
    calling computation 0 still holds the dot in it, and reads instruction 0's shape."""
    text = textwrap.dedent('''\
        hlo_module {
          computations {
            name: "fused"
            instructions {
              name: "p"
              opcode: "parameter"
              shape { element_type: F32 dimensions: 4 dimensions: 6 }
            }
            instructions {
              name: "w"
              opcode: "parameter"
              shape { element_type: F32 dimensions: 6 dimensions: 5 }
              id: 1
            }
            instructions {
              name: "dot.1"
              opcode: "dot"
              shape { element_type: F32 dimensions: 4 dimensions: 5 }
              id: 2
              operand_ids: 0
              operand_ids: 1
              dot_dimension_numbers { lhs_contracting_dimensions: 1 }
            }
          }
          computations {
            name: "main"
            id: 9
            instructions {
              name: "fusion.1"
              opcode: "fusion"
              shape { element_type: F32 dimensions: 4 dimensions: 5 }
              id: 3
              called_computation_ids: 0
            }
          }
        }
        ''').replace("{ ", "{\n").replace(" }", "\n}").replace(" dimensions", "\ndimensions")
    ops = kinds.parse_module(text)
    assert ops["fusion.1"].flops == 2 * 4 * 5 * 6
    assert ops["fusion.1"].fused == {"parameter", "dot"}


def test_the_dump_reader_takes_any_text_without_a_traceback():
    """Hypothesis: the fixture's lines cut, garbled, mixed with made-up ones: read into
    ops whose costs are known and whole or unknown (None), never a traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lines = [line for line in hlo_fixtures.text("op_zoo_h100_after").splitlines()
             if "custom-call(" in line or " fusion(" in line or line.startswith(("%", "}"))]
    lines = lines[:400]
    pieces = st.one_of(
        st.sampled_from(lines),
        st.builds(lambda line, cut: line[:cut], st.sampled_from(lines),
                  st.integers(0, 300)),
        st.sampled_from(["HloModule m", "ENTRY %main () -> f32[] {", "}", "((((((((",
                         "  %x = f32[99999999999,9999999] parameter(0)",
                         "  %y = (f32[1], (f32[2], (u8[3]))) custom-call(%x#0#1#2)",
                         '  %z = f32[2]{0} custom-call(%x), custom_call_target="__cudnn$'
                         'convForward", window={size=0x-1}, dim_labels=b0f_0io->b0f',
                         "  %w = bf16[8,8] dot(%x, %x#5), lhs_contracting_dims={9}"]),
        st.text(max_size=40))

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(pieces, max_size=40))
    def read(chosen):
        text = "HloModule m\n\n" + "\n".join(chosen)
        assert hlo_text.is_dump(text)
        for op in kinds.parse_module(text).values():
            assert op.flops is None or (isinstance(op.flops, int) and op.flops >= 0)
            assert op.bytes is None or op.bytes >= 0

    read()
