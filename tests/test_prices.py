"""The price catalog and the cost arithmetic, checked against the 2018 study."""

import re

import pytest

from app.engine import prices
from callbacks.figures import money

IMAGENET_TRAIN = 1_281_167


def test_the_study_tpu_cost_to_accuracy_is_reproduced_from_its_inputs():
    """Cloud TPU v2-8 at $6.50/h plus its n1-standard-4 host, 2,796 img/s:
    64 epochs to 75.7% cost about $55, 86 epochs to 76.4% about $73 (the study:
    https://medium.com/riseml/comparing-google-tpuv2-against-nvidia-v100-on-resnet-50-c2bbb6a51e5e)."""
    tpu = prices.load_catalog()["gcp-tpu-v2-8-2018"]
    price = tpu.price_per_hour_usd("on_demand")
    assert price == pytest.approx(6.50 + 0.19)
    hours_64 = money.hours_for_images(64 * IMAGENET_TRAIN, 2796)
    hours_86 = money.hours_for_images(86 * IMAGENET_TRAIN, 2796)
    assert hours_64 == pytest.approx(8.15, abs=0.01)
    assert hours_86 == pytest.approx(10.95, abs=0.01)
    assert money.cost_usd(hours_64 * 3600, price) == pytest.approx(55, abs=1.0)
    assert money.cost_usd(hours_86 * 3600, price) == pytest.approx(73, abs=1.0)


def test_v100_images_per_dollar_hour_on_demand():
    """The study's 4xV100 at 2,839 img/s on an on-demand p3.8xlarge ($12.24/h); its
    12-month reservation gave about 375 img/s per dollar-hour instead."""
    p3 = prices.load_catalog()["aws-p3.8xlarge"]
    per_dollar_hour = 2839 / p3.price_per_hour_usd("on_demand")
    assert per_dollar_hour == pytest.approx(232, abs=1)


def test_every_row_cites_a_public_source_and_the_date_it_was_read():
    """A page or a catalog file at a fixed commit, never a private notes file; a row
    without a sourced price carries its device's peak, and says so."""
    catalog = prices.load_catalog()
    assert len(catalog) >= 20
    for row in catalog.values():
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


def test_auto_machine_follows_the_device_kind():
    assert prices.machine_for_device("NVIDIA H200").machine == "aws-h200-per-gpu"
    assert prices.machine_for_device("TPU v4").machine == "gcp-tpu-v4"
    assert prices.machine_for_device("TPU v5 lite").machine == "gcp-tpu-v5e"
    assert prices.machine_for_device("cpu").machine == "gcp-n2-standard-4"
    assert prices.machine_for_device("Imaginary X1") is None


@pytest.mark.parametrize("device_kind, machine, peak", [
    ("TPU v2", "gcp-tpu-v2-8-2018", 22.5),  # the study's chip has a row again
    ("TPU v6 lite", "gcp-tpu-v6e", 918),
    ("NVIDIA H200", "aws-h200-per-gpu", 989),
    ("NVIDIA GH200 480GB", None, None),  # a Grace Hopper is not an H200
    ("NVIDIA H100 80GB HBM3", "aws-h100-per-gpu", 989),
    ("NVIDIA H100 PCIe", "nvidia-h100-pcie", 756),  # not the SXM part's 989
    ("NVIDIA B200", "aws-b200-per-gpu", 2250),
    ("NVIDIA GB200", None, None),
    ("NVIDIA L4", "aws-g6.xlarge", 121),  # priced now (issue 41): AWS first, see PROVIDER_ORDER
    ("NVIDIA L40S", None, None),
    ("Tesla T4", "nvidia-t4", 65),
    ("NVIDIA A100-SXM4-80GB", "aws-a100-80gb-per-gpu", 312),
    ("NVIDIA A100-SXM4-40GB", "aws-a100-40gb-per-gpu", 312),
])
def test_device_patterns_match_the_right_part(device_kind, machine, peak):
    row = prices.machine_for_device(device_kind)
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
    catalog = prices.resolve_billing("auto", "on_demand", None, None, "NVIDIA H200", 8)
    per_gpu = prices.load_catalog()["aws-h200-per-gpu"].price_per_hour_usd("on_demand")
    assert catalog.machines == 8 and catalog.price_per_hour_usd == pytest.approx(8 * per_gpu)
    named = prices.resolve_billing("aws-p5en.48xlarge", "on_demand", 10.0, None, "x", 12)
    assert named.price_per_hour_usd == 10.0


@pytest.mark.parametrize("machine, device_kind", [("aws-p3.8xlarge", "x"),
                                                  ("auto", "cpu")])
def test_a_pricing_the_row_does_not_sell_is_refused_the_same_way_named_or_found(
        machine, device_kind):
    """The CPU row and the study's p3.8xlarge sell on-demand only: spot is refused with
    the pricings accepted, whether the row was named or found for the device."""
    from flags import ConfigError

    with pytest.raises(ConfigError, match=r"--pricing=spot has no price for --machine="
                       r".*; accepted: on_demand, or --price_per_hour_usd"):
        prices.resolve_billing(machine, "spot", None, None, device_kind, 4)
    # The flag prices anything; a row found for the device that sells nothing (its
    # peak only) leaves the cost unknown.
    assert prices.resolve_billing(machine, "spot", 2.0, None, device_kind, 4
                                  ).price_per_hour_usd == 2.0
    assert prices.resolve_billing("auto", "spot", None, None, "NVIDIA H100 PCIe", 1
                                  ).price_per_hour_usd is None


def test_a_named_machine_that_is_not_the_device_is_billed_with_one_note(capsys):
    """--machine=aws-p3.8xlarge on a CPU host: billed $12.24/h as asked, one line says
    so, and MFU is not taken against the V100s' peak (issue 41: it printed one)."""
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
