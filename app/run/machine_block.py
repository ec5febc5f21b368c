"""The machine a benchmark point ran on: a sweep point's or a ladder rung's
`machine_state` (app/modes/bench.py, sweep.py), the block a training run's summary.json
holds (app/run/provenance.py):
the device, the host, the driver and libraries, and the GPUs' clocks, power,
temperature, throttle reasons and other processes through the point's timed windows
(callbacks/machine_state.py, sampled by the same NVML reader at the same rate).

Why: one command gave 27% apart on two H100s of one kind, and a figure whose machine
is not recorded cannot be told from a slow program; a sweep's summary.json held no
machine at all. Each point samples its own timed windows (not its warm-up, nor its
traced steps), so that a point measured while the GPU throttled says so in its row.
"""

from __future__ import annotations

from app.engine import machine
from app.run import provenance


def sampler(config, topology):
    """The point's machine-state sampler (provenance.Sampled: the MachineState callback
    for its timed fits, and the GPUs' fixed facts), or None where there is none (not a
    GPU, no NVML, or BENCH_STATE_SAMPLE_SECONDS=0)."""
    return provenance.make_sampler(config, topology)


def block(topology, backend: str, sampled) -> dict:
    """`machine_state` as a training run records it, with the point's timed windows."""
    if sampled is not None:
        sampled.callback.on_train_end()  # its thread stops, whatever the fit did
    return {"device_kind": topology.device_kind, "accelerator": topology.accelerator,
            "devices_per_process": topology.devices_per_process,
            "host": machine.host(), "software": machine.software_versions(backend),
            **(sampled.facts() if sampled is not None else
               {"driver": None, "cuda_driver": None, "devices": []}),
            "timed_window": sampled.callback.summary() if sampled is not None else None,
            "not_sampled": (None if sampled is not None
                            else provenance.why_not_sampled(topology))}


def campaign_block(topology, backend: str) -> dict:
    """The campaign's summary.json `machine_state`: what every point shares (device,
    host, driver, libraries); each row's own holds its timed windows."""
    made = sampler_facts(topology)
    return {**block(topology, backend, None), **made,
            "timed_window": None,
            "not_sampled": "a campaign's windows are its points': each row's machine_state"}


def sampler_facts(topology) -> dict:
    """The GPUs' fixed facts (driver, CUDA driver, each GPU's clocks and limits) read
    once through NVML, where it can be read; {} elsewhere."""
    if topology.accelerator != "gpu":
        return {}
    from callbacks.energy import visible_gpu_indices
    from callbacks.machine_state import nvml_sampler

    made = nvml_sampler(visible_gpu_indices(topology.devices_per_process))
    return made[1]() if made is not None else {}
