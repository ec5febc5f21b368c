"""The rates table (app/report/decision/device_rates.py): its rows as data, each citing the result
JSON it came from, and its door: a share that is text, negative, over 1 or 1e300, a kind
without a rate, a source that is not a result JSON, is one line naming the file, the
line and the problem, as the price catalog's door refuses a bad price."""

import os

import pytest
from conftest import ROOT

from app.report.decision import device_rates
from flags import ConfigError

HEADER = ",".join(device_rates.COLUMNS)
GOOD = ("H100 80GB SXM,NVIDIA H100 80GB HBM3,matrix products,vit_b16,peak,0.8065,"
        "benchmarks/results/2026-12-06-h100-models-call5.json,797.6 TFLOP/s over 989,")


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        device_rates.parse_rates(text, "/x/rates.csv")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the rates table /x/rates.csv")
    return message


def test_a_good_row_is_read():
    (rate,) = device_rates.parse_rates(f"{HEADER}\n{GOOD}\n")
    assert (rate.device_class, rate.kind, rate.family, rate.measure, rate.value) == (
        "H100 80GB SXM", "matrix products", "vit_b16", "peak", 0.8065)


@pytest.mark.parametrize("value, shown", [("fast", "'fast'"), ("-0.5", "'-0.5'"),
                                          ("1e300", "'1e300'"), ("nan", "'nan'"),
                                          ("1.5", "'1.5'"), ("0", "'0'"), ("", "''")])
def test_a_hostile_share_is_one_line(value, shown):
    row = GOOD.replace(",0.8065,", f",{value},")
    assert refusal(f"{HEADER}\n{row}\n") == (
        f"the rates table /x/rates.csv, line 2: value is {shown}; accepted: a share of the "
        "peak, > 0 and at most 1")


@pytest.mark.parametrize("old, new, said", [
    (",matrix products,", ",magic,", "kind is 'magic'; accepted: convolutions, matrix "
                                     "products, attention, normalization, elementwise and other"),
    (",peak,", ",bandwidth,", "measure 'bandwidth' for matrix products; accepted: peak or "
                              "cpu_bytes"),
    ("benchmarks/results/2026-12-06-h100-models-call5.json", "/etc/passwd",
     "source is '/etc/passwd'; accepted: the result JSON the figure came from, "
     "benchmarks/results/YYYY-MM-DD-NAME.json"),
    ("H100 80GB SXM,", "H100\x07,", "device_class holds a control character"),
])
def test_other_hostile_fields_are_one_line(old, new, said):
    assert refusal(f"{HEADER}\n{GOOD.replace(old, new, 1)}\n").endswith(f"line 2: {said}")


def test_a_row_twice_a_missing_column_and_an_empty_file_are_one_line():
    assert refusal(f"{HEADER}\n{GOOD}\n{GOOD}\n").endswith(
        "line 3: H100 80GB SXM, matrix products, vit_b16 is listed twice")
    assert refusal(HEADER.replace(",note", "") + "\n").endswith("the header lacks note")
    assert refusal(HEADER + ",note\n").endswith("line 1: the header names note twice")
    assert refusal(f"{HEADER}\nx\n").endswith("line 2: 1 field where the header has "
                                                f"{len(device_rates.COLUMNS)}")
    assert refusal("").endswith("the file is empty")
    assert refusal(b"\xff\xfe").endswith("line 1: not UTF-8 text (byte 0)")


def test_the_apps_table_is_read_and_cites_result_jsons_in_the_tree():
    rates = device_rates.load_rates()
    assert {r.measure for r in rates} >= {"peak", "bandwidth", "cpu_bytes"}
    for rate in rates:
        assert os.path.isfile(os.path.join(ROOT, rate.source)), rate.source


def test_a_fifo_a_folder_or_a_table_too_large_is_one_line_and_never_waited_on(tmp_path):
    """The table's door is the one file door (callbacks/records/untrusted.py): a FIFO in
    its place is refused at once (an open() of it would wait for a writer forever)."""
    os.mkfifo(tmp_path / "rates.csv")
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * (device_rates.MAX_TABLE_BYTES + 1))
    for path, said in ((tmp_path / "rates.csv", "not a regular file"),
                       (tmp_path, "not a regular file"),
                       (big, f"{device_rates.MAX_TABLE_BYTES + 1:,} bytes, more than")):
        with pytest.raises(ConfigError, match=said):
            device_rates.load_rates(str(path))
