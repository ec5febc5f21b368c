"""Protocol buffers' text format read without a schema (app/engine/textproto.py), as the
autotune log's reader (app/engine/kernel_truth.py) uses it."""

import pytest

from app.engine import textproto


def test_the_text_form_is_read_without_a_schema_and_bad_text_is_one_line():
    message = textproto.parse(b'a: "x\\303\\251" "y" b { c: [1, 2.5] d: true e: [FOO] } '
                              b'[type.googleapis.com/x.Y] { z: 0x10 } n < m: -1e3 >')
    assert message == {"a": ["x\u00e9y"], "b": [{"c": [1, 2.5], "d": [True], "e": ["FOO"]}],
                       "[type.googleapis.com/x.Y]": [{"z": [16]}], "n": [{"m": [-1000.0]}]}
    assert textproto.unpacked({"[type.googleapis.com/x.Y]": [{"z": [1]}]}) == {"z": [1]}
    for bad in ("a { b: 1", "a: ", "{ b }", "a: @"):
        with pytest.raises(textproto.TextProtoError) as caught:
            textproto.parse(bad)
        assert "\n" not in str(caught.value)
