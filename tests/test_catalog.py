"""The price catalog's reader (app/pricing/catalog.py), which trusts none of it.

A missing column, "call us" as a price, a NaN, $1e300 an hour (once billed), a
duplicate machine, bytes that are not text... each is one ConfigError line naming the
file, the line and the field, never another exception nor a figure out of range
(fuzzed with Hypothesis), and a real `python app/main.py` exits 2 with it, before
anything is touched, whether the catalog is the app's own or --price_catalog's. The
catalog's data (its sources, dates and figures) is tests/test_price_data.py's.
"""

import csv
import io
import math
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pricing import catalog, prices
from flags import ConfigError



def raw_rows():
    with open(catalog.CATALOG_PATH, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- The reader. -------------------------------------------------------------------

GOOD = next(row for row in raw_rows() if row["machine"] == "gcp-tpu-v5p")  # damaged below


def catalog_text(rows, columns=catalog.COLUMNS) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row.get(c, "") for c in columns])
    return out.getvalue()


def refusal(data) -> str:
    with pytest.raises(ConfigError) as caught:
        catalog.parse_catalog(data, "/x/prices.csv")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the price catalog /x/prices.csv")
    return message


def test_the_real_rows_round_trip_through_the_reader():
    assert catalog.parse_catalog(catalog_text(raw_rows())) == catalog.load_catalog()


@pytest.mark.parametrize("field, value, expected", [
    ("on_demand_usd_per_hour", "call us", "on_demand_usd_per_hour is 'call us'; accepted"),
    ("spot_usd_per_hour", "nan", "spot_usd_per_hour is 'nan'"),
    ("on_demand_usd_per_hour", "inf", "is 'inf'"),
    ("on_demand_usd_per_hour", "1e400", "is '1e400'"),
    ("on_demand_usd_per_hour", "-1", "is '-1'"),
    ("on_demand_usd_per_hour", "1_000", "is '1_000'"),
    # Prices have a range: a device-hour costs a tenth of a cent to $1,000.
    ("on_demand_usd_per_hour", "1e300", "on_demand_usd_per_hour is '1e300'; accepted: empty "
                                        "or $0.001 to $1,000 an hour"),
    ("spot_usd_per_hour", "0", "spot_usd_per_hour is '0'; accepted: empty or $0.001"),
    ("one_year_usd_per_hour", "1000.01", "one_year_usd_per_hour is '1000.01'"),
    ("host_usd_per_hour", "1e300", "host_usd_per_hour is '1e300'; accepted: empty or a "
                                   "number from 0 to 1,000"),
    ("peak_bf16_tflops_per_device", "0", "accepted: empty or a number > 0"),
    ("peak_bf16_tflops_per_device", "1e300", "peak_bf16_tflops_per_device is '1e300'"),
    ("memory_gib_per_device", "-1", "memory_gib_per_device is '-1'"),
    ("devices_per_machine", "0", "devices_per_machine is '0'"),
    ("devices_per_machine", "2.5", "devices_per_machine is '2.5'"),
    ("devices_per_machine", "", "devices_per_machine is ''"),
    ("devices_per_machine", "٣", "devices_per_machine is '٣'"),  # a digit, not ASCII
    ("date", "2026-13-01", "date is '2026-13-01'; accepted: an ISO date"),
    ("date", "yesterday", "date is 'yesterday'"),
    ("device_kind_pattern", "H100(", "is not a regular expression"),
    ("machine", "", "machine is ''"),
    ("machine", "a b", "machine is 'a b'"),
    ("source", "my notes", "names no https:// page"),
    ("note", "two\nlines", "note holds a control character"),
])
def test_a_bad_field_is_one_line_naming_the_file_line_and_problem(field, value, expected):
    message = refusal(catalog_text([GOOD, {**GOOD, "machine": "second", field: value}]))
    assert "line 3" in message and expected in message, message


def test_a_bad_file_is_one_line():
    header_only = catalog_text([])
    for data, expected in [
        (catalog_text([GOOD], [c for c in catalog.COLUMNS if c != "date"]),
         "line 1: the header lacks date"),
        (catalog_text([GOOD, GOOD]), "line 3: machine 'gcp-tpu-v5p' is listed twice"),
        (catalog_text([GOOD]) + "a,b,c\n", "line 3: 3 fields where the header has 18"),
        (catalog_text([GOOD]).encode() + b"\xff\xfe", "line 3: not UTF-8 text"),
        (catalog_text([GOOD]) + "x\0y\n", "line 3: 1 field where the header has 18"),
        (catalog_text([GOOD, {**GOOD, "machine": "b", "note": "\0"}]),
         "line 3: note holds a control character"),
        (catalog_text([GOOD]) + '"unclosed\n', "not CSV"),
        (b"", "the file is empty"),
        (header_only, "no machine is listed"),
        (b"x" * (catalog.MAX_CATALOG_BYTES + 1), "more than a catalog's"),
        ("machine,machine\n" + header_only, "the header lacks"),
    ]:
        assert expected in refusal(data), expected


def test_a_catalog_file_over_the_limit_is_refused_by_its_size(tmp_path):
    """The adversarial pass: a 3 MB file read as "1,048,577 bytes" (what the bounded read
    took); the line gives the file's own size."""
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * (3 << 20))
    with pytest.raises(ConfigError) as refused:
        catalog.load_catalog(str(big))
    assert f"{3 << 20:,} bytes, more than a catalog's {catalog.MAX_CATALOG_BYTES:,}" \
        in str(refused.value)


def test_blank_lines_and_a_byte_order_mark_are_accepted():
    text = catalog_text([GOOD]) + "\n,,,\n"
    assert list(catalog.parse_catalog(b"\xef\xbb\xbf" + text.encode())) == ["gcp-tpu-v5p"]


HOSTILE = ["", " ", "0", "1", "2.5", "-1", "1e400", "1e300", "1000.5", "0.0009", "nan", "NaN",
           "inf", "call us", "$4",
           "1,000", "0x10", "\0", "\n", '"', "(", "(a+)+$", "\\", "é", "TPU v5p",
           "https://x", "2026-11-30", "2026-02-30", "9" * 400, "٣"]
field_value = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({c: field_value for c in catalog.COLUMNS}), max_size=4),
       st.sets(st.sampled_from(catalog.COLUMNS), max_size=2))
def test_hostile_rows_give_a_catalog_or_one_line(rows, dropped):
    columns = [c for c in catalog.COLUMNS if c not in dropped]
    check(catalog_text(rows, columns))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=600), st.text(max_size=600)))
def test_arbitrary_bytes_or_text_give_a_catalog_or_one_line(data):
    check(data)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(catalog_text(raw_rows()).encode()) - 1), st.binary(min_size=1,
                                                                             max_size=8))
def test_the_real_catalog_with_bytes_changed_gives_a_catalog_or_one_line(at, junk):
    data = catalog_text(raw_rows()).encode()
    check(data[:at] + junk + data[at + len(junk):])


def check(data):
    """A parse gives a catalog whose every figure is in range, or one ConfigError line."""
    try:
        parsed = catalog.parse_catalog(data, "/x/prices.csv")
    except ConfigError as error:
        assert "\n" not in str(error) and str(error).startswith("the price catalog /x/prices.csv")
        return
    low, high = catalog.PRICE_PER_DEVICE_HOUR_USD
    for row in parsed.values():
        assert row.devices_per_machine >= 1
        for price in row.prices_usd_per_hour.values():
            assert price is None or low <= price / row.devices_per_machine <= high
        assert 0 <= row.host_usd_per_hour <= catalog.HOST_USD_PER_HOUR_MAX
        for figure in (row.peak_bf16_tflops_per_device, row.memory_gib_per_device):
            assert figure is None or (math.isfinite(figure) and figure > 0)
        prices.pick_machine("NVIDIA H100 80GB HBM3", 8, parsed)  # its patterns run
        catalog.list_machines(None, catalog=parsed)


def test_a_run_with_a_damaged_catalog_exits_2_with_one_line_and_touches_nothing(tmp_path):
    """A real `python app/main.py` on a copy of the app whose prices.csv says "call us":
    exit 2, one `error:` line naming the file and line, no run folder."""
    for package in ("app", "callbacks", "flags", "preprocessing"):
        shutil.copytree(os.path.join(ROOT, package), tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    csv_path = tmp_path / "app" / "pricing" / "prices.csv"
    text = csv_path.read_text(encoding="utf-8").replace(",4.20,1.68,", ",call us,1.68,", 1)
    csv_path.write_text(text, encoding="utf-8")
    line = 1 + text.splitlines().index(next(r for r in text.splitlines() if "call us" in r))
    logdir = tmp_path / "run"
    done = subprocess.run([sys.executable, str(tmp_path / "app" / "main.py"),
                           f"--logdir={logdir}", "--epochs=1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    errors = [l for l in done.stderr.splitlines() if l.startswith("error:")]
    assert errors == [f"error: the price catalog {csv_path}, line {line}: "
                      "on_demand_usd_per_hour is 'call us'; accepted: empty or $0.001 to "
                      "$1,000 an hour (US dollars per machine-hour)"], done.stderr
    assert not logdir.exists()


def test_a_price_out_of_range_in_price_catalog_is_one_line_before_anything(tmp_path):
    """A row priced $1e300 an hour was billed (exit 0, $3.5e297, values
    not finite in TensorBoard). Now --price_catalog's file is checked at the door: exit
    2, one line naming the file, the line and the field, no run folder; --list_machines
    reads the same file and says the same."""
    rows = [GOOD, {**GOOD, "machine": "dear", "device_kind_pattern": "^cpu$",
                   "on_demand_usd_per_hour": "1e300"}]
    path = tmp_path / "mine.csv"
    path.write_text(catalog_text(rows), encoding="utf-8")
    expected = (f"error: the price catalog {path}, line 3: on_demand_usd_per_hour is '1e300'; "
                "accepted: empty or $0.001 to $1,000 an hour (US dollars per machine-hour)")
    logdir = tmp_path / "run"
    for args in ([f"--logdir={logdir}", "--epochs=1", "--machine=dear"],
                 ["--list_machines"]):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "main.py"),
                               f"--price_catalog={path}", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert [l for l in done.stderr.splitlines() if l.startswith("error:")] == [expected]
    assert not logdir.exists()
