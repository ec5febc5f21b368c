"""callbacks/profiling/bandwidth.py: each device's memory bandwidth, found by the kind
the framework names it with, as the price catalog finds its peak."""

import csv

import pytest

from app.pricing import catalog as price_catalog
from callbacks.profiling import bandwidth

# Device kinds as JAX names them (and TensorFlow's device_name on a GPU).
KINDS = {"NVIDIA H100 80GB HBM3": 3350.0, "NVIDIA H100 PCIe": 2000.0, "NVIDIA H100 NVL": None,
         "NVIDIA H200": 4800.0, "NVIDIA B200": 8000.0, "NVIDIA A100-SXM4-80GB": 2039.0,
         "NVIDIA A100-SXM4-40GB": 1555.0, "Tesla V100-SXM2-16GB": 900.0,
         "TPU v2": 350.0, "TPU v3": 450.0, "TPU v4": 1200.0, "TPU v5 lite": 819.0,
         "TPU v5": 2765.0, "TPU v5p": 2765.0, "TPU v6 lite": 1640.0, "NVIDIA L4": 300.0,
         "Tesla T4": 320.0, "AMD Instinct MI300X": 5300.0,
         "cpu": None, None: None}


@pytest.mark.parametrize("kind,expected", KINDS.items())
def test_a_devices_bandwidth_by_its_kind(kind, expected):
    assert bandwidth.memory_gb_per_sec(kind) == expected


def test_each_pattern_is_the_price_catalogs_for_the_same_device():
    """The two tables recognise a device alike: every pattern here is a catalog row's,
    and each figure has its source."""
    with open(price_catalog.CATALOG_PATH, newline="", encoding="utf-8") as f:
        catalog = {row["device_kind_pattern"] for row in csv.DictReader(f)}
    for pattern, rate, source in bandwidth.MEMORY_GB_PER_SEC:
        assert pattern in catalog, pattern
        assert rate > 0 and source.startswith("https://")
