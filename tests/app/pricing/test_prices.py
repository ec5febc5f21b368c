"""How a run's price is chosen (app/pricing/prices.py) from the catalog
(app/pricing/catalog.py), and the cost arithmetic, checked against the 2018 study."""

import datetime
import re
import types

import pytest

from app.pricing import catalog, prices
from callbacks.figures import bill as money
from flags import ConfigError

IMAGENET_TRAIN = 1_281_167


def test_the_study_tpu_cost_to_accuracy_is_reproduced_from_its_inputs():
    """Cloud TPU v2-8 at $6.50/h plus its n1-standard-4 host, 2,796 img/s:
    64 epochs to 75.7% cost about $55, 86 epochs to 76.4% about $73 (the study:
    https://medium.com/riseml/comparing-google-tpuv2-against-nvidia-v100-on-resnet-50-c2bbb6a51e5e)."""
    tpu = catalog.load_catalog()["gcp-tpu-v2-8-2018"]
    price = tpu.price_per_hour_usd("on_demand")
    assert price == pytest.approx(6.50 + 0.19)
    hours_64 = money.hours_for_images(64 * IMAGENET_TRAIN, 2796)
    hours_86 = money.hours_for_images(86 * IMAGENET_TRAIN, 2796)
    assert hours_64 == pytest.approx(8.15, abs=0.01)
    assert hours_86 == pytest.approx(10.95, abs=0.01)
    assert money.dollars(hours_64, price) == pytest.approx(55, abs=1.0)
    assert money.dollars(hours_86, price) == pytest.approx(73, abs=1.0)


def test_v100_images_per_dollar_hour_on_demand():
    """The study's 4xV100 at 2,839 img/s on an on-demand p3.8xlarge ($12.24/h); its
    12-month reservation gave about 375 img/s per dollar-hour instead."""
    p3 = catalog.load_catalog()["aws-p3.8xlarge"]
    per_dollar_hour = 2839 / p3.price_per_hour_usd("on_demand")
    assert per_dollar_hour == pytest.approx(232, abs=1)


def test_every_row_cites_a_public_source_and_the_date_it_was_read():
    """A page or a catalog file at a fixed commit, never a private notes file; a row
    without a sourced price carries its device's peak, and says so."""
    rows = catalog.load_catalog()
    assert len(rows) >= 20
    for row in rows.values():
        assert "https://" in row.source, row.machine
        assert not re.search(r"shared/|anchors|seed\.md|notes", row.source), row.machine
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", row.date), row.machine
        assert row.devices_per_machine >= 1
        price = row.price_per_hour_usd("on_demand")
        if price is None:
            # its peak only, saying so, or a note saying why the price is empty
            assert row.peak_bf16_tflops_per_device, row.machine
            assert "Peak only" in row.source or row.note, row.machine
        else:
            assert price > 0
        for catalog_file in re.findall(r"skypilot-catalog/blob/(\w+)/", row.source):
            assert len(catalog_file) == 40  # a fixed commit, not a moving branch


def _row_for(device_kind: str):
    pick = prices.pick_machine(device_kind, 1)
    return pick.row if pick else None


def test_auto_machine_follows_the_device_kind():
    assert _row_for("NVIDIA H200").machine == "aws-h200-per-gpu"
    assert _row_for("TPU v4").machine == "gcp-tpu-v4"
    assert _row_for("TPU v5 lite").machine == "gcp-tpu-v5e"
    assert _row_for("cpu").machine == "gcp-n2-standard-4"
    assert _row_for("Imaginary X1") is None


@pytest.mark.parametrize("device_kind, machine, peak", [
    ("TPU v2", "gcp-tpu-v2-8-2018", 22.5),  # the study's chip has a row again
    ("TPU v6 lite", "gcp-tpu-v6e", 918),
    ("NVIDIA H200", "aws-h200-per-gpu", 989),
    ("NVIDIA GH200 480GB", None, None),  # a Grace Hopper is not an H200
    ("NVIDIA H100 80GB HBM3", "aws-h100-per-gpu", 989),
    ("NVIDIA H100 PCIe", "nvidia-h100-pcie", 756),  # not the SXM part's 989
    ("NVIDIA B200", "aws-b200-per-gpu", 2250),
    ("NVIDIA GB200", None, None),
    ("NVIDIA L4", "aws-g6.xlarge", 121),  # priced now: AWS first, see PROVIDER_ORDER
    ("NVIDIA L40S", None, None),
    ("Tesla T4", "nvidia-t4", 65),
    ("NVIDIA A100-SXM4-80GB", "aws-a100-80gb-per-gpu", 312),
    ("NVIDIA A100-SXM4-40GB", "aws-a100-40gb-per-gpu", 312),
    ("TPU7x", "gcp-tpu7x", 2307),  # JAX's name for Ironwood (app/pricing/PRICES.md)
    ("AMD Instinct MI300X", "crusoe-mi300x", 1307.4),
])
def test_device_patterns_match_the_right_part(device_kind, machine, peak):
    row = _row_for(device_kind)
    assert (row.machine if row else None) == machine
    assert (row.peak_bf16_tflops_per_device if row else None) == peak


def test_billing_charges_whole_machines_and_honours_overrides():
    eight = prices.resolve_billing("aws-p5en.48xlarge", "on_demand", None, None, "x", 12)
    assert eight.machines == 2
    assert eight.price_per_hour_usd == pytest.approx(2 * 63.296)
    spot = prices.resolve_billing("gcp-tpu-v6e", "spot", None, None, "x", 4)
    assert spot.price_per_hour_usd == pytest.approx(4 * 0.64833)
    peak_only = prices.resolve_billing("auto", "on_demand", None, None, "NVIDIA H100 PCIe", 1)
    assert peak_only.price_per_hour_usd is None and peak_only.peak_tflops_per_device == 756
    override = prices.resolve_billing("auto", "on_demand", 1.5, 100.0, "cpu", 1)
    assert override.price_per_hour_usd == 1.5 and override.peak_tflops_per_device == 100.0
    unknown = prices.resolve_billing("auto", "on_demand", None, None, "Imaginary X1", 1)
    assert unknown.price_per_hour_usd is None and "no catalog row" in unknown.source


def test_the_price_flag_is_the_whole_runs_price_never_multiplied():
    """--price_per_hour_usd is "dollars per hour for everything the run uses": 8 GPUs
    at $10/h are billed $10/h, not 8 x $10; the catalog's own price is per machine."""
    flag = prices.resolve_billing("auto", "on_demand", 10.0, None, "NVIDIA H200", 8)
    assert flag.price_per_hour_usd == 10.0 and flag.machines is None
    assert flag.machine == "aws-h200-per-gpu" and flag.peak_tflops_per_device == 989
    billed = prices.resolve_billing("auto", "on_demand", None, None, "NVIDIA H200", 8)
    per_gpu = catalog.load_catalog()["aws-h200-per-gpu"].price_per_hour_usd("on_demand")
    assert billed.machines == 8 and billed.price_per_hour_usd == pytest.approx(8 * per_gpu)
    named = prices.resolve_billing("aws-p5en.48xlarge", "on_demand", 10.0, None, "x", 12)
    assert named.price_per_hour_usd == 10.0


def _config(machine: str, pricing: str, price=None, path=""):
    return types.SimpleNamespace(machine=machine, pricing=pricing, price_per_hour_usd=price,
                                 price_catalog=path)


def test_a_pricing_the_row_does_not_sell_is_refused_once_named_or_found():
    """The study's p3.8xlarge and the CPU row sell on-demand only: spot is refused with
    the pricings accepted, at the door for a row named by --machine (check_config),
    when the row is found for the device otherwise (resolve_billing): once each."""
    accepted = r"; accepted: on_demand, or --price_per_hour_usd"
    with pytest.raises(ConfigError, match=r"--pricing=spot has no price for "
                       r"--machine=aws-p3.8xlarge in the catalog" + accepted):
        prices.check_config(_config("aws-p3.8xlarge", "spot"))
    with pytest.raises(ConfigError, match=r"--pricing=spot has no price for --machine=auto "
                       r"\(catalog row gcp-n2-standard-4, for 'cpu'\) in the catalog" + accepted):
        prices.resolve_billing("auto", "spot", None, None, "cpu", 4)
    prices.check_config(_config("auto", "spot"))  # the device is not known yet
    prices.check_config(_config("aws-p3.8xlarge", "spot", price=2.0))
    # The flag prices anything; a row found for the device that sells nothing (its
    # peak only) leaves the cost unknown.
    for machine, device_kind in (("aws-p3.8xlarge", "x"), ("auto", "cpu")):
        assert prices.resolve_billing(machine, "spot", 2.0, None, device_kind, 4
                                      ).price_per_hour_usd == 2.0
    assert prices.resolve_billing("auto", "spot", None, None, "NVIDIA H100 PCIe", 1
                                  ).price_per_hour_usd is None


def test_a_named_machine_that_is_not_the_device_is_billed_with_one_note(capsys):
    """--machine=aws-p3.8xlarge on a CPU host: billed $12.24/h as asked, one line says
    so, and MFU is not taken against the V100s' peak (it printed one)."""
    p3 = prices.resolve_billing("aws-p3.8xlarge", "on_demand", None, None, "cpu", 1)
    assert p3.price_per_hour_usd == pytest.approx(12.24)  # what the user asked
    assert p3.peak_tflops_per_device is None  # this host's own: a CPU has none
    (line,) = capsys.readouterr().err.splitlines()
    note = ("--machine=aws-p3.8xlarge has 4 x V100 16GB but this run is on cpu: billed at "
            "aws-p3.8xlarge's price as asked; no MFU (no peak is known for cpu)")
    assert line == "warning: " + note and p3.notes == (note,)
    on_h200 = prices.resolve_billing("aws-p3.8xlarge", "on_demand", None, None,
                                     "NVIDIA H200", 8, warn=False)
    assert on_h200.peak_tflops_per_device == 989 and on_h200.price_per_hour_usd == 2 * 12.24
    assert "MFU against this host's devices (989 TFLOP/s each)" in on_h200.notes[0]
    for machine, device_kind in (("aws-p3.8xlarge", "Tesla V100-SXM2-16GB"),
                                 ("gcp-n2-standard-4", "cpu"), ("auto", "cpu")):
        billing = prices.resolve_billing(machine, "on_demand", None, None, device_kind, 1)
        assert not any("this run is on" in note for note in billing.notes)
    assert capsys.readouterr().err == ""  # the machine the run is on: no word


def test_dollars_per_million_images():
    assert money.usd_per_million_images(1000.0, 3.6) == pytest.approx(1.0)


def test_logical_cpu_devices_are_one_machine_and_accelerators_count_one_by_one():
    from app.engine.distribute import Topology

    cpu = Topology("jax", "cpu", num_processes=1, process_index=0, devices_per_process=4,
                   device_kind="cpu")
    assert cpu.num_replicas == 4 and cpu.billed_devices == 1
    two_hosts = Topology("jax", "cpu", 2, 0, 2, "cpu")
    assert two_hosts.billed_devices == 2
    gpus = Topology("jax", "gpu", 1, 0, 8, "NVIDIA H200")
    assert gpus.billed_devices == 8
    billing = prices.resolve_billing("auto", "on_demand", None, None, "cpu",
                                     cpu.billed_devices)
    assert billing.machines == 1 and billing.price_per_hour_usd == pytest.approx(0.194236)


# --- The machine is found, not assumed. ----------------------------------------------

@pytest.mark.parametrize("device_kind, count, machine, machines, others", [
    # Device kinds as JAX and TensorFlow name them; counts as a host of each has them.
    ("TPU v2", 8, "gcp-tpu-v2-8-2018", 1, ()),  # 8 cores: one v2-8
    ("TPU v3", 8, "gcp-tpu-v3", 4, ()),  # 8 cores, 2 per chip
    ("TPU v4", 4, "gcp-tpu-v4", 4, ()),  # billed per chip
    ("TPU v5 lite", 8, "gcp-tpu-v5e", 8, ()),
    ("TPU v5e", 1, "gcp-tpu-v5e", 1, ()),
    ("TPU v5p", 4, "gcp-tpu-v5p", 4, ()),
    ("TPU v6e", 8, "gcp-tpu-v6e", 8, ("gcp-tpu-v6e-commit-2024",)),
    ("TPU v6 lite", 4, "gcp-tpu-v6e", 4, ("gcp-tpu-v6e-commit-2024",)),
    # One GPU sold alone first (AWS's, then the neoclouds' in the file's order), then the
    # machines of 8; the spot/DWS-only one-GPU A3 shape (no on-demand price) last.
    ("NVIDIA H100 80GB HBM3", 8, "aws-h100-per-gpu", 8,
     ("nebius-h100", "runpod-h100", "crusoe-h100", "together-h100", "aws-p5.48xlarge",
      "gcp-a3-highgpu-8g", "azure-nd96isr-h100-v5", "lambda-8x-h100", "coreweave-8x-h100",
      "gcp-a3-highgpu-1g")),
    ("NVIDIA H200", 8, "aws-h200-per-gpu", 8,
     ("nebius-h200", "runpod-h200", "crusoe-h200", "together-h200", "aws-p5en.48xlarge",
      "gcp-a3-ultragpu-8g", "azure-nd96isr-h200-v5", "coreweave-8x-h200")),
    ("TPU7x", 4, "gcp-tpu7x", 4, ()),
    ("NVIDIA A100-SXM4-80GB", 1, "aws-a100-80gb-per-gpu", 1,
     ("gcp-a2-ultragpu-1g", "aws-p4de.24xlarge", "azure-nd96amsr-a100-v4")),
    ("NVIDIA A100-SXM4-40GB", 2, "aws-a100-40gb-per-gpu", 2,
     ("gcp-a2-highgpu-1g", "aws-p4d.24xlarge", "azure-nd96asr-v4")),
    ("NVIDIA L4", 1, "aws-g6.xlarge", 1, ("gcp-g2-standard-4",)),
    ("cpu", 1, "gcp-n2-standard-4", 1, ()),
])
def test_the_row_is_picked_from_the_device_kind_and_count(device_kind, count, machine,
                                                           machines, others):
    pick = prices.pick_machine(device_kind, count)
    assert pick.row.machine == machine and pick.row.machines_for(count) == machines
    assert pick.others == others
    if others:  # several sell it: the banner says which row and how to take another
        assert pick.note.startswith(f"billed as {machines} x catalog row {machine} (")
        more = " and more" if len(others) > 4 else ""
        assert (f"also sold as {', '.join(others[:4])}{more}: choose with --machine=NAME"
                in pick.note)
    else:
        assert pick.note is None


def test_the_default_order_is_documented_and_a_named_row_wins():
    assert prices.PROVIDER_ORDER == ("aws", "gcp", "azure")
    billing = prices.resolve_billing("gcp-g2-standard-4", "spot", None, None, "NVIDIA L4", 2)
    assert billing.machine == "gcp-g2-standard-4" and billing.notes == ()
    assert billing.price_per_hour_usd == pytest.approx(2 * 0.28184)
    auto = prices.resolve_billing("auto", "on_demand", None, None, "NVIDIA L4", 2)
    assert auto.machine == "aws-g6.xlarge" and auto.notes == (
        prices.pick_machine("NVIDIA L4", 2).note,)


def test_a_foreign_machine_keeps_this_hosts_peak_and_says_so():
    """--machine=aws-p3.8xlarge on 8 H200: billed 2 x $12.24/h as asked; MFU against
    the H200's 989, not the V100's 125; an explicit --peak_tflops_per_device still wins."""
    billing = prices.resolve_billing("aws-p3.8xlarge", "on_demand", None, None,
                                     "NVIDIA H200", 8, warn=False)
    assert billing.price_per_hour_usd == pytest.approx(2 * 12.24)
    assert billing.peak_tflops_per_device == 989
    assert billing.notes == ("--machine=aws-p3.8xlarge has 4 x V100 16GB but this run is on "
                             "NVIDIA H200: billed at aws-p3.8xlarge's price as asked; MFU "
                             "against this host's devices (989 TFLOP/s each)",)
    forced = prices.resolve_billing("aws-p3.8xlarge", "on_demand", None, 500.0, "cpu", 1,
                                    warn=False)
    assert forced.peak_tflops_per_device == 500.0 and "(500 TFLOP/s each)" in forced.notes[0]


# --- Stale prices, the table, every way to pay. --------------------------------------

def test_a_price_read_more_than_12_months_ago_is_stale():
    row = catalog.load_catalog()["gcp-tpu-v6e"]  # read 2026-11-30
    assert not catalog.stale(row, datetime.date(2027, 11, 30))
    assert catalog.stale(row, datetime.date(2027, 12, 1))
    study = catalog.load_catalog()["gcp-tpu-v2-8-2018"]  # read 2018-04: from 2018-04-01
    assert not catalog.stale(study, datetime.date(2019, 4, 1))
    assert catalog.stale(study, datetime.date(2019, 4, 2))
    peak_only = catalog.load_catalog()["nvidia-t4"]  # no price to go stale
    assert not catalog.stale(peak_only, datetime.date(2099, 1, 1))
    billing = prices.resolve_billing("gcp-tpu-v2-8-2018", "on_demand", None, None, "TPU v2",
                                     8, today=datetime.date(2026, 12, 4))
    assert billing.notes == ("gcp-tpu-v2-8-2018's prices were read 2018-04, over 12 months "
                             "ago: check https://cloud.google.com/tpu/pricing",)


def test_list_machines_sorts_by_price_per_device_hour_with_date_and_source():
    today = datetime.date(2026, 12, 6)
    table = catalog.list_machines(today=today)
    lines = table.splitlines()
    assert lines[0].split() == ["machine", "devices", "$/device-h", "on_demand", "spot",
                                "one_year", "three_year", "peak", "TF", "GiB", "read", "source"]
    rows = catalog.load_catalog()
    assert len(lines) == 1 + len(rows) + 2  # header, rows, legend, stale
    listed = [rows[line.split()[0]] for line in lines[1:-2]]

    def key(row):  # on demand per device-hour, else the cheapest option; unpriced last
        sold = [row.price_per_device_hour_usd(p) for p in row.pricings()]
        price = row.price_per_device_hour_usd("on_demand")
        price = price if price is not None else min(sold, default=None)
        return (price is None, price or 0.0)
    assert listed == sorted(listed, key=key)
    v6e = next(line for line in lines if line.startswith("gcp-tpu-v6e "))
    assert v6e.split() == ["gcp-tpu-v6e", "1", "x", "TPU", "v6e", "chip", "2.7", "2.7",
                           "0.6483", "-", "-", "918", "-", "2026-11-30",
                           "github.com/skypilot-org/skypilot-catalog"]
    h200 = next(line for line in lines if line.startswith("azure-nd96isr-h200-v5"))
    assert h200.split()[-2:] == ["2026-08-20", "prices.azure.com/api/retail/prices"]
    assert next(line for line in lines if line.startswith("crusoe-h100")).split()[-2] == (
        "2026-05-25*")  # a neocloud's price, read over 90 days before
    study = next(line for line in lines if line.startswith("gcp-tpu-v2-8-2018"))
    assert "2018-04*" in study.split()
    few = catalog.list_machines("tpu7x|h200-v5", today=today).splitlines()
    assert [line.split()[0] for line in few[1:3]] == ["azure-nd96isr-h200-v5", "gcp-tpu7x"]
    assert f"gcp-tpu7x: note: {rows['gcp-tpu7x'].note}" in few  # a few rows: their sources
    assert f"azure-nd96isr-h200-v5: source: {rows['azure-nd96isr-h200-v5'].source}" in few
    assert catalog.list_machines("no such thing") == (
        "no machine in the price catalog matches 'no such thing'")
    assert catalog.list_machines("[").startswith("no machine")  # not a regex: a plain string


HAND_ROW = {"machine": "hand", "accelerator": "x", "device": "X", "devices_per_machine": "8",
            "device_kind_pattern": "", "provider": "gcp", "region": "r",
            "on_demand_usd_per_hour": "6.50", "spot_usd_per_hour": "1.95",
            "one_year_usd_per_hour": "4.55", "three_year_usd_per_hour": "",
            "host_usd_per_hour": "0.19", "peak_bf16_tflops_per_device": "45",
            "memory_gib_per_device": "", "pricing_page": "https://x", "source": "https://x",
            "date": "2018-04", "note": ""}


def test_dollars_by_option_is_billed_hours_times_each_price_by_hand(tmp_path):
    """The study's table: on demand against 12-month commitment. A hand computation on
    a catalog of one row with three options (--price_catalog), then the app's v6e."""
    path = tmp_path / "hand.csv"
    path.write_text(",".join(HAND_ROW) + "\n" + ",".join(HAND_ROW.values()) + "\n")
    billing = prices.resolve_billing("hand", "one_year", None, None, "cpu", 24,
                                     catalog_path=str(path), warn=False)
    assert billing.machines == 3 and billing.price_per_hour_usd == pytest.approx(3 * 4.74)
    assert billing.bill(0.0).dollars_by_option(8.15) == pytest.approx(
        {"on_demand": 8.15 * 3 * 6.69, "spot": 8.15 * 3 * 2.14, "one_year": 8.15 * 3 * 4.74})
    billing = prices.resolve_billing("gcp-tpu-v6e", "spot", None, None, "TPU v6e", 4)
    assert billing.price_per_hour_by_option == pytest.approx({"on_demand": 10.8,
                                                               "spot": 2.59332})
    assert billing.bill(0.0).dollars_by_option(0.5) == pytest.approx({"on_demand": 5.4,
                                                                      "spot": 1.29666})
    flag = prices.resolve_billing("gcp-tpu-v6e", "spot", 3.0, None, "TPU v6e", 4)
    # the flag's price, under --pricing
    assert flag.bill(0.0).dollars_by_option(2.0) == {"spot": 6.0}
