"""The price catalog as data (app/pricing/prices.csv): prices a user can trust.

Every row parses; every priced cell (row x option) quotes its figure in the row's
source, with the date it was read; the figures read from a seller's own page or API
(Google Cloud's price list, AWS's price files, Azure's Retail Prices API) equal what
was recorded from that page, below, by hand (the pages cannot be fetched here); no
two rows selling one device under one option differ by more than 2x without a note
that says so and by how much; the machines a user rents (NAMED's and the neoclouds')
are there, each with a price or a note saying why it has none; and the one-GPU Google
Cloud rows are not half their seller's price any more.
"""

import datetime
import re

import pytest

from app.pricing import catalog, prices

ISO_DATE = re.compile(r"\d{4}-\d{2}(-\d{2})?")
# The big clouds' machines a user rents, by the catalog row that sells each.
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
# The neoclouds: each sells these devices by the hour (MI300X at Crusoe).
NEOCLOUDS = {"lambda": {"H100 80GB SXM", "B200"},
             "coreweave": {"H100 80GB SXM", "H200", "B200"},
             "nebius": {"H100 80GB SXM", "H200", "B200"},
             "runpod": {"H100 80GB SXM", "H200", "B200"},
             "crusoe": {"H100 80GB SXM", "H200", "MI300X"},
             "together": {"H100 80GB SXM", "H200", "B200"}}
# What each seller's own page or API said, as read (US dollars per device-hour, the
# read date): Google Cloud's accelerator-optimized price list as in a term catalog of
# 2026-09-27 (on demand, 1-year, 3-year) and Google's billing SKUs as generated
# 2026-07-30 (spot; a2-highgpu-1g's commitments); AWS's price files as in a term
# catalog of 2026-09-27 (on demand; EC2 Instance Savings Plans, no upfront); Azure's
# Retail Prices API, East US 2, as read 2026-08-20 and 2026-09-27 (per VM of 8 GPUs:
# $84.80, and $407,526 and $1,109,592 a 1-year and 3-year term).
READ_FROM_SELLER = {
    "gcp-a3-highgpu-8g": {"on_demand": (11.06, "2026-09-27"), "one_year": (7.67, "2026-09-27"),
                          "three_year": (4.86, "2026-09-27"), "spot": (6.33, "2026-07-30")},
    "gcp-a3-highgpu-1g": {"spot": (6.33, "2026-07-30")},
    "gcp-a2-ultragpu-1g": {"on_demand": (5.07, "2026-09-27"), "one_year": (4.20, "2026-09-27"),
                           "three_year": (3.50, "2026-09-27"), "spot": (2.76, "2026-07-30")},
    "gcp-a3-ultragpu-8g": {"on_demand": (10.60, "2026-09-27"), "one_year": (7.31, "2026-09-27"),
                           "three_year": (4.65, "2026-09-27")},
    "gcp-a2-highgpu-1g": {"on_demand": (3.673, "2026-07-30"), "one_year": (2.314, "2026-07-30"),
                          "three_year": (1.286, "2026-07-30")},
    **{name: {"on_demand": (6.88, "2026-09-27"), "one_year": (4.33, "2026-09-27"),
              "three_year": (2.97, "2026-09-27")}
       for name in ("aws-p5.48xlarge", "aws-h100-per-gpu")},
    **{name: {"on_demand": (7.91, "2026-09-27"), "one_year": (4.98, "2026-09-27"),
              "three_year": (3.42, "2026-09-27")}
       for name in ("aws-p5en.48xlarge", "aws-h200-per-gpu")},
    **{name: {"on_demand": (14.24, "2026-09-27"), "one_year": (11.22, "2026-09-27"),
              "three_year": (6.15, "2026-09-27")}
       for name in ("aws-p6-b200.48xlarge", "aws-b200-per-gpu")},
    "azure-nd96isr-h200-v5": {"on_demand": (84.80 / 8, "2026-08-20"),
                              "one_year": (407_526 / 8_760 / 8, "2026-08-20"),
                              "three_year": (1_109_592 / 26_280 / 8, "2026-08-20")},
}
# A row whose source names one of these read the seller's own page or API.
SELLER_PAGES = ("cloud.google.com/products/compute/pricing", "cloudbilling",
                "cloud.google.com/billing", "aws.amazon.com/savingsplans",
                "prices.azure.com")


def rows():
    return list(catalog.load_catalog().values())


def test_every_row_parses_and_no_row_is_listed_twice():
    parsed = rows()
    assert len(parsed) >= 50
    contents = [tuple(v for k, v in vars(r).items() if k != "machine") for r in parsed]
    assert len(set(map(repr, contents))) == len(contents)  # no row copied under another name


def test_every_price_names_its_source_page_and_the_date_it_was_read():
    for row in rows():
        assert ISO_DATE.fullmatch(row.date), row.machine
        if not row.pricings():
            continue
        assert "https://" in row.source, row.machine
        assert row.provider and row.region, row.machine
        assert row.pricing_page.startswith("https://"), row.machine
        for commit in re.findall(r"skypilot-catalog/blob/(\w+)/", row.source):
            assert len(commit) == 40, row.machine  # a fixed commit, never a branch


def _quoted(row) -> list[float]:
    """Every dollar figure the row's source quotes."""
    return [float(f.replace(",", "")) for f in re.findall(r"\$([\d,]+(?:\.\d+)?)", row.source)]


def _divisors(row) -> list[int]:
    """The counts a source divides a quoted figure by: "/ 8", "(4 chips)", "6,144 chips"."""
    found = re.findall(r"/ (\d+)\b|\b([\d,]+) chips\b", row.source)
    return [int((a or b).replace(",", "")) for a, b in found]


def test_at_least_60_priced_cells_each_quoted_in_its_source():
    """Each priced cell's figure is in its row's source: as the machine's price, as a
    per-GPU figure (x the GPUs), as a larger shape's divided as the source says (/ 8,
    per chip of 4 chips), or as the sum of a GPU row and a VM row."""
    cells = 0
    for row in rows():
        quoted = _quoted(row)
        sums = [a + b for i, a in enumerate(quoted) for b in quoted[i + 1:]]
        for option in row.pricings():
            price = row.prices_usd_per_hour[option]
            candidates = (quoted + sums + [q * row.devices_per_machine for q in quoted]
                          + [q / d for q in quoted for d in _divisors(row)])
            assert any(abs(price - c) <= 0.006 * row.devices_per_machine for c in candidates), (
                row.machine, option, price)
            cells += 1
    assert cells >= 60


@pytest.mark.parametrize("machine", sorted(READ_FROM_SELLER))
def test_each_price_read_from_a_sellers_page_equals_the_figure_recorded(machine):
    row = catalog.load_catalog()[machine]
    for option, (figure, read) in READ_FROM_SELLER[machine].items():
        assert row.price_per_device_hour_usd(option) == pytest.approx(figure, abs=0.006), option
        assert row.date <= read  # the row is never dated fresher than a figure in it


def test_every_cloud_row_that_cites_its_sellers_page_is_checked_above():
    citing = {row.machine for row in rows() if row.provider in catalog.HYPERSCALERS
              and any(page in row.source for page in SELLER_PAGES)}
    assert citing and citing <= set(READ_FROM_SELLER), citing - set(READ_FROM_SELLER)


def test_the_one_gpu_google_cloud_rows_are_their_sellers_price_not_half_of_it():
    """Google Cloud's a3-highgpu-1g was $5.38/h (SkyPilot's GPU row + VM row) against the
    page's $11.06 a GPU; it is sold through spot and DWS only, so it has no on-demand
    price and says why; a2-ultragpu-1g was $2.95 against $5.07."""
    table = catalog.load_catalog()
    one = table["gcp-a3-highgpu-1g"]
    assert one.price_per_hour_usd("on_demand") is None
    assert re.search(r"unpublished: .*Spot VMs and the Dynamic Workload Scheduler only", one.note)
    eight = table["gcp-a3-highgpu-8g"]
    assert eight.price_per_device_hour_usd("on_demand") > 2 * 5.38327 * 0.9
    assert table["gcp-a2-ultragpu-1g"].price_per_hour_usd("on_demand") == 5.07


def test_no_two_rows_of_one_device_and_option_differ_by_2x_without_a_note():
    """Where a row's price per device-hour is over 2x the cheapest row's for the same
    device and option, its note says so: 'spread (OPTION): Nx the cheapest DEVICE row,
    MACHINE', with N as it is (to 0.1), and why."""
    for option in catalog.PRICE_COLUMNS:
        by_device = {}
        for row in rows():
            if row.price_per_device_hour_usd(option) is not None:
                by_device.setdefault(row.device, []).append(row)
        for device, group in by_device.items():
            cheapest = min(group, key=lambda r: r.price_per_device_hour_usd(option))
            low = cheapest.price_per_device_hour_usd(option)
            for row in group:
                ratio = row.price_per_device_hour_usd(option) / low
                said = re.search(rf"spread \({option}\): ([\d.]+)x the cheapest "
                                 rf"{re.escape(device)} row, {re.escape(cheapest.machine)}",
                                 row.note)
                if ratio > 2:
                    assert said and float(said[1]) == pytest.approx(ratio, abs=0.051), (
                        row.machine, option, round(ratio, 2), row.note)
                else:
                    assert not said, (row.machine, option)


def test_spot_and_commitment_prices_are_below_on_demand():
    for row in rows():
        on_demand = row.price_per_hour_usd("on_demand")
        for option in ("spot", "one_year", "three_year"):
            price = row.price_per_hour_usd(option)
            if price is not None and on_demand is None:  # a spot/DWS shape says why
                assert "unpublished" in row.note, (row.machine, option)
            elif price is not None:
                assert price < on_demand, (row.machine, option)
        one_year, three_year = (row.price_per_hour_usd(p) for p in ("one_year", "three_year"))
        if one_year is not None and three_year is not None:
            assert three_year < one_year, row.machine


@pytest.mark.parametrize("family, machine", sorted(NAMED.items()))
def test_the_named_families_exist_with_a_price_or_a_note_saying_why_not(family, machine):
    row = catalog.load_catalog()[machine]
    assert row.peak_bf16_tflops_per_device, family
    if row.price_per_hour_usd("on_demand") is None:
        assert "https://" in row.note and re.search(r"unpublished|no sourced price", row.note)
    else:
        assert row.price_per_hour_usd("on_demand") > 0


@pytest.mark.parametrize("family, machine", sorted(NAMED.items()))
def test_commitment_prices_left_empty_name_the_page_checked(family, machine):
    """A 1-year or 3-year price is copied where a source publishes it; left empty, the
    row's note says so and names the seller's page that was checked."""
    row = catalog.load_catalog()[machine]
    if None in (row.price_per_hour_usd("one_year"), row.price_per_hour_usd("three_year")):
        assert "1-year and 3-year" in row.note and "https://" in row.note, family


def test_neoclouds_sell_h100_h200_b200_and_mi300x_with_sources_and_dates():
    sold = {}
    for row in rows():
        if row.provider in NEOCLOUDS:
            assert row.pricings() == ["on_demand"], row.machine
            assert row.pricing_page.startswith("https://"), row.machine
            assert row.peak_bf16_tflops_per_device, row.machine
            sold.setdefault(row.provider, set()).add(row.device)
            for device_kind, matched in (("NVIDIA H100 80GB HBM3", "H100 80GB SXM"),
                                         ("NVIDIA H200", "H200"), ("NVIDIA B200", "B200")):
                assert row.matches(device_kind) == (row.device == matched), row.machine
    assert sold == NEOCLOUDS


def test_a_neocloud_price_goes_stale_after_90_days_a_clouds_after_12_months():
    table = catalog.load_catalog()
    crusoe = table["crusoe-h100"]  # read 2026-05-25
    assert not catalog.stale(crusoe, datetime.date(2026, 8, 23))
    assert catalog.stale(crusoe, datetime.date(2026, 8, 24))
    nebius = table["nebius-h200"]  # read 2026-08: from 2026-08-01
    assert not catalog.stale(nebius, datetime.date(2026, 10, 30))
    assert catalog.stale(nebius, datetime.date(2026, 10, 31))
    azure = table["azure-nd96isr-h200-v5"]  # read 2026-08-20
    assert not catalog.stale(azure, datetime.date(2027, 8, 20))
    assert catalog.stale(azure, datetime.date(2027, 8, 21))
    note = prices.stale_note(crusoe, datetime.date(2026, 12, 6))
    assert note == ("crusoe-h100's prices were read 2026-05-25, over 90 days ago: check "
                    "https://crusoe.ai/cloud/pricing")


def test_tpu7x_is_recognized_by_its_device_kind_and_unpriced_with_why():
    pick = prices.pick_machine("TPU7x")
    row = pick.row
    assert (row.machine, row.peak_bf16_tflops_per_device, row.memory_gib_per_device) == (
        "gcp-tpu7x", 2307, 192)
    assert row.pricings() == [] and "no public price" in row.note
    assert not any(catalog.load_catalog()[m].matches("TPU7x") for m in ("gcp-tpu-v6e",
                                                                       "gcp-tpu-v5p"))
    billing = prices.resolve_billing("auto", "on_demand", None, None, "TPU7x", 4)
    assert billing.price_per_hour_usd is None and billing.peak_tflops_per_device == 2307
    assert billing.notes == (
        "gcp-tpu7x (1 x TPU7x chip) has no price in the catalog: " + row.note
        + "; pass --price_per_hour_usd for a cost",)
