"""Each accelerator's memory bandwidth, what a kind of work bound by memory is measured
against (its GB/s as a share of it), as the compute kinds' TFLOP/s are against the
dense bf16 peak (app/pricing/prices.csv's peak_bf16_tflops_per_device).

Per device as the framework counts devices: a GPU or a TPU chip, but a core of a TPU v2
or v3 (JAX and TensorFlow see each core), which gets half its chip's. Devices are
recognised by the framework's device kind, with the price catalog's patterns. Figures
from the vendors' datasheets (read 2026-12); a device not listed has none (None), and
its kinds' GB/s are shown without a share.
"""

from __future__ import annotations

import re

# (device-kind pattern, GB/s per device, source): the first match is taken.
MEMORY_GB_PER_SEC = (
    (r"\bH100(?!.*(PCIe|NVL))", 3350.0,
     "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM: 3.35 TB/s)"),
    (r"\bH200(?! NVL)", 4800.0, "https://www.nvidia.com/en-us/data-center/h200/ (4.8 TB/s)"),
    (r"\bB200\b", 8000.0, "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: 8 TB/s "
                          "per GPU)"),
    (r"A100.*80GB", 2039.0, "https://www.nvidia.com/en-us/data-center/a100/ (80GB SXM: "
                            "2,039 GB/s)"),
    (r"A100(?!.*80GB)", 1555.0, "https://www.nvidia.com/en-us/data-center/a100/ (40GB: "
                                "1,555 GB/s)"),
    (r"V100", 900.0, "https://www.nvidia.com/en-us/data-center/v100/ (900 GB/s)"),
    (r"\bH100.*PCIe", 2000.0, "https://www.nvidia.com/en-us/data-center/h100/ (H100 PCIe: "
                              "2 TB/s)"),
    (r"\bL4\b", 300.0, "https://www.nvidia.com/en-us/data-center/l4/ (300 GB/s)"),
    (r"\bT4\b", 320.0, "https://www.nvidia.com/en-us/data-center/tesla-t4/ (320 GB/s)"),
    (r"MI300X", 5300.0, "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html "
                        "(5.3 TB/s)"),
    (r"TPU v5 ?lite|TPU v5e", 819.0, "https://cloud.google.com/tpu/docs/v5e (819 GB/s a chip)"),
    (r"TPU v5p|TPU v5$", 2765.0, "https://cloud.google.com/tpu/docs/v5p (2,765 GB/s a chip)"),
    (r"TPU v6", 1640.0, "https://cloud.google.com/tpu/docs/v6e (1,640 GB/s a chip)"),
    (r"TPU v4", 1200.0, "https://cloud.google.com/tpu/docs/v4 (1,200 GB/s a chip)"),
    (r"TPU v3", 450.0, "https://cloud.google.com/tpu/docs/v3 (900 GB/s a chip of 2 cores)"),
    (r"TPU v2", 350.0, "https://cloud.google.com/tpu/docs/v2 (700 GB/s a chip of 2 cores)"),
)


def memory_gb_per_sec(device_kind: str | None) -> float | None:
    """The memory bandwidth of one device of `device_kind` in GB/s; None where unknown."""
    if not isinstance(device_kind, str):
        return None
    for pattern, rate, _ in MEMORY_GB_PER_SEC:
        if re.search(pattern, device_kind):
            return rate
    return None
