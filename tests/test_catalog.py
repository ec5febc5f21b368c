"""The price catalog as data (app/engine/prices.csv) and its reader, which trusts none of it.

The data: every row parses, every price names where it was copied from and when, no
row twice, and the machines a user rents today (issue 41) are there, each with an
on-demand price or a note saying why it has none. The reader (issue 38): a missing
column, "call us" as a price, a NaN, a duplicate machine, bytes that are not text...
each is one ConfigError line naming the file, the line and the problem, never another
exception (fuzzed with Hypothesis), and a real `python app/main.py` exits 2 with it.
"""

import csv
import io
import math
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine import prices
from flags import ConfigError

ISO_DATE = re.compile(r"\d{4}-\d{2}(-\d{2})?")
# The machines issue 41 names, by the catalog row that sells each.
NAMED = {
    "TPU v4": "gcp-tpu-v4", "TPU v5e": "gcp-tpu-v5e", "TPU v5p": "gcp-tpu-v5p",
    "TPU v6e": "gcp-tpu-v6e",
    "Google Cloud A100": "gcp-a2-highgpu-1g", "Google Cloud A100 80GB": "gcp-a2-ultragpu-1g",
    "Google Cloud H100": "gcp-a3-highgpu-1g", "Google Cloud H200": "gcp-a3-ultragpu-8g",
    "Google Cloud L4": "gcp-g2-standard-4",
    "p4d": "aws-p4d.24xlarge", "p4de": "aws-p4de.24xlarge", "p5": "aws-p5.48xlarge",
    "p5e": "aws-p5e.48xlarge", "p5en": "aws-p5en.48xlarge", "p6 B200": "aws-p6-b200.48xlarge",
    "g6 L4": "aws-g6.xlarge",
    "ND A100 v4": "azure-nd96asr-v4", "NDm A100 v4": "azure-nd96amsr-a100-v4",
    "ND H100 v5": "azure-nd96isr-h100-v5", "ND H200 v5": "azure-nd96isr-h200-v5",
}


def raw_rows():
    with open(prices.CATALOG_PATH, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- The data. ---------------------------------------------------------------------

def test_every_row_parses_and_no_machine_or_row_is_listed_twice():
    rows = raw_rows()
    catalog = prices.load_catalog()
    assert len(catalog) == len(rows) >= 30
    names = [row["machine"] for row in rows]
    assert len(set(names)) == len(names)
    contents = [tuple(v for k, v in row.items() if k != "machine") for row in rows]
    assert len(set(contents)) == len(contents)  # no row copied under another name


def test_every_price_names_its_source_page_and_the_date_it_was_read():
    for row in prices.load_catalog().values():
        assert ISO_DATE.fullmatch(row.date), row.machine
        if not row.pricings():
            continue
        assert "https://" in row.source, row.machine
        assert row.provider and row.region, row.machine
        assert row.pricing_page.startswith("https://"), row.machine
        for commit in re.findall(r"skypilot-catalog/blob/(\w+)/", row.source):
            assert len(commit) == 40, row.machine  # a fixed commit, never a branch


def test_summed_prices_equal_the_figures_they_were_copied_from():
    """A Google Cloud GPU machine is billed as its GPUs plus its VM: the catalog's
    price is the sum of the two figures its source quotes, under each option."""
    summed = [row for row in prices.load_catalog().values() if "plus VM row" in row.source]
    assert len(summed) >= 5
    for row in summed:
        gpu, vm = row.source.split("plus VM row")
        for option, word in (("on_demand", "on demand"), ("spot", "spot")):
            parts = [float(re.search(r"\$([\d.]+)/h " + word, text)[1]) for text in (gpu, vm)]
            assert row.prices_usd_per_hour[option] == pytest.approx(sum(parts), abs=1e-9), (
                row.machine, option)


def test_a_spot_price_is_the_catalog_figure_its_source_quotes():
    """A spot price copied from a SkyPilot catalog row quotes that row's SpotPrice (on
    AWS, the Availability Zone it is from); a per-GPU row is the machine's figure / 8."""
    quoted = [row for row in prices.load_catalog().values() if "SpotPrice $" in row.source]
    assert len(quoted) >= 10
    for row in quoted:
        figure = float(re.search(r"SpotPrice \$([\d.]+)/h spot", row.source)[1])
        divisor = 8 if "both / 8" in row.source else 1
        assert row.price_per_hour_usd("spot") == pytest.approx(figure / divisor, abs=1e-9), (
            row.machine)
        if row.provider == "aws":
            assert re.search(r"spot in zone use\d-az\d, the", row.source), row.machine


def test_spot_and_commitment_prices_are_below_on_demand():
    for row in prices.load_catalog().values():
        on_demand = row.price_per_hour_usd("on_demand")
        for option in ("spot", "one_year", "three_year"):
            price = row.price_per_hour_usd(option)
            if price is not None:
                assert on_demand is not None and price < on_demand, (row.machine, option)
        one_year, three_year = (row.price_per_hour_usd(p) for p in ("one_year", "three_year"))
        if one_year is not None and three_year is not None:
            assert three_year < one_year, row.machine


@pytest.mark.parametrize("family, machine", sorted(NAMED.items()))
def test_the_named_families_exist_with_a_price_or_a_note_saying_why_not(family, machine):
    row = prices.load_catalog()[machine]
    assert row.peak_bf16_tflops_per_device, family
    if row.price_per_hour_usd("on_demand") is None:
        assert "https://" in row.note and re.search(r"unpublished|no sourced price", row.note)
    else:
        assert row.price_per_hour_usd("on_demand") > 0


PUBLISHED_AT = {"gcp-tpu": "https://cloud.google.com/tpu/pricing",
                "gcp": "https://cloud.google.com/compute/gpus-pricing",
                "aws": "https://aws.amazon.com/ec2/pricing/reserved-instances/pricing/",
                "azure": "https://azure.microsoft.com/pricing/details/virtual-machines/linux/"}


@pytest.mark.parametrize("family, machine", sorted(NAMED.items()))
def test_commitment_prices_left_empty_name_the_page_checked(family, machine):
    """Issue 41: a 1-year or 3-year price is copied where a source publishes it; left
    empty, the row's note says so and names the provider's page that was checked."""
    row = prices.load_catalog()[machine]
    if None in (row.price_per_hour_usd("one_year"), row.price_per_hour_usd("three_year")):
        page = PUBLISHED_AT["gcp-tpu" if machine.startswith("gcp-tpu") else row.provider]
        assert "1-year and 3-year" in row.note and page in row.note, family


def test_an_unpublished_price_names_the_page_that_shows_it():
    """'unpublished' is a claim about the provider: the note names a page to check it
    by, and the row's on-demand price is empty."""
    marked = [row for row in prices.load_catalog().values() if "unpublished" in row.note]
    assert marked
    for row in marked:
        assert re.search(r"unpublished: .*https://", row.note), row.machine
        assert row.price_per_hour_usd("on_demand") is None, row.machine


# --- The reader. -------------------------------------------------------------------

GOOD = next(row for row in raw_rows() if row["machine"] == "gcp-tpu-v5p")  # damaged below


def catalog_text(rows, columns=prices.COLUMNS) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row.get(c, "") for c in columns])
    return out.getvalue()


def refusal(data) -> str:
    with pytest.raises(ConfigError) as caught:
        prices.parse_catalog(data, "/x/prices.csv")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the price catalog /x/prices.csv")
    return message


def test_the_real_rows_round_trip_through_the_reader():
    assert prices.parse_catalog(catalog_text(raw_rows())) == prices.load_catalog()


@pytest.mark.parametrize("field, value, expected", [
    ("on_demand_usd_per_hour", "call us", "on_demand_usd_per_hour is 'call us'; accepted"),
    ("spot_usd_per_hour", "nan", "spot_usd_per_hour is 'nan'"),
    ("on_demand_usd_per_hour", "inf", "is 'inf'"),
    ("on_demand_usd_per_hour", "1e400", "is '1e400'"),
    ("on_demand_usd_per_hour", "-1", "is '-1'"),
    ("on_demand_usd_per_hour", "1_000", "is '1_000'"),
    ("peak_bf16_tflops_per_device", "0", "accepted: a number > 0"),
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
        (catalog_text([GOOD], [c for c in prices.COLUMNS if c != "date"]),
         "line 1: the header lacks date"),
        (catalog_text([GOOD, GOOD]), "line 3: machine 'gcp-tpu-v5p' is listed twice"),
        (catalog_text([GOOD]) + "a,b,c\n", "line 3: 3 fields where the header has 17"),
        (catalog_text([GOOD]).encode() + b"\xff\xfe", "line 3: not UTF-8 text"),
        (catalog_text([GOOD]) + "x\0y\n", "line 3: 1 field where the header has 17"),
        (catalog_text([GOOD, {**GOOD, "machine": "b", "note": "\0"}]),
         "line 3: note holds a control character"),
        (catalog_text([GOOD]) + '"unclosed\n', "not CSV"),
        (b"", "the file is empty"),
        (header_only, "no machine is listed"),
        (b"x" * (prices.MAX_CATALOG_BYTES + 1), "more than a catalog's"),
        ("machine,machine\n" + header_only, "the header lacks"),
    ]:
        assert expected in refusal(data), expected


def test_blank_lines_and_a_byte_order_mark_are_accepted():
    text = catalog_text([GOOD]) + "\n,,,\n"
    assert list(prices.parse_catalog(b"\xef\xbb\xbf" + text.encode())) == ["gcp-tpu-v5p"]


HOSTILE = ["", " ", "0", "1", "2.5", "-1", "1e400", "nan", "NaN", "inf", "call us", "$4",
           "1,000", "0x10", "\0", "\n", '"', "(", "(a+)+$", "\\", "é", "TPU v5p",
           "https://x", "2026-11-30", "2026-02-30", "9" * 400, "٣"]
field_value = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({c: field_value for c in prices.COLUMNS}), max_size=4),
       st.sets(st.sampled_from(prices.COLUMNS), max_size=2))
def test_hostile_rows_give_a_catalog_or_one_line(rows, dropped):
    columns = [c for c in prices.COLUMNS if c not in dropped]
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
        catalog = prices.parse_catalog(data, "/x/prices.csv")
    except ConfigError as error:
        assert "\n" not in str(error) and str(error).startswith("the price catalog /x/prices.csv")
        return
    for row in catalog.values():
        assert row.devices_per_machine >= 1
        for price in [*row.prices_usd_per_hour.values(), row.host_usd_per_hour]:
            assert price is None or (math.isfinite(price) and price >= 0)
        peak = row.peak_bf16_tflops_per_device
        assert peak is None or (math.isfinite(peak) and peak > 0)
        prices.pick_machine("NVIDIA H100 80GB HBM3", 8, catalog)  # its patterns run
        prices.list_machines(None, catalog=catalog)


def test_a_run_with_a_damaged_catalog_exits_2_with_one_line_and_touches_nothing(tmp_path):
    """A real `python app/main.py` on a copy of the app whose prices.csv says "call us":
    exit 2, one `error:` line naming the file and line, no run folder."""
    for package in ("app", "callbacks", "flags", "preprocessing"):
        shutil.copytree(os.path.join(ROOT, package), tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    csv_path = tmp_path / "app" / "engine" / "prices.csv"
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
                      "on_demand_usd_per_hour is 'call us'; accepted: empty or a number >= 0 "
                      "(US dollars)"], done.stderr
    assert not logdir.exists()
