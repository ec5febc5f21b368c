"""Memory: the most a process may hold and what it may still take, a lower bound of
what a training step keeps, whether an error is an out-of-memory one, and the
device's high-water mark."""

from __future__ import annotations

import math
import os

# Where a Linux control group caps its processes' memory: v2's file, then v1's. "max"
# (v2) or a huge number (v1: 2**63 rounded down to a page) means no cap.
CGROUP_LIMIT_FILES = ("/sys/fs/cgroup/memory.max",
                      "/sys/fs/cgroup/memory/memory.limit_in_bytes")
# What the control group holds now, by the same two versions (in the same order).
CGROUP_USAGE_FILES = ("/sys/fs/cgroup/memory.current",
                      "/sys/fs/cgroup/memory/memory.usage_in_bytes")
# Copies of the weights a training step holds at least: the weights, their gradients
# and one optimizer slot (SGD's momentum; AdamW keeps two).
WEIGHT_COPIES = 3

OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM",
               "Resource exhausted")


def process_memory_limit() -> tuple[int, str]:
    """(bytes, what sets them): the least of the host's memory, this process's
    address-space limit (RLIMIT_AS) and its control group's memory limit.

    Trap: a batch past RLIMIT_AS or the cgroup's limit but within the host's memory
    passes a check against the host alone, then fails in an allocator deep in the
    framework (SIGABRT, no line); so the check takes the smallest.
    """
    limits = [(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
               "this host's memory")]
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append((soft, "this process's address-space limit (RLIMIT_AS)"))
    except (ImportError, OSError, ValueError):  # not every platform has it
        pass
    for path in CGROUP_LIMIT_FILES:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**62:  # else "max" or v1's "no limit"
            limits.append((int(text), f"this control group's memory limit ({path})"))
        break  # the first file found is the one in force
    return min(limits)


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _mapped_bytes() -> int | None:
    """What this process maps now (/proc/self/status VmSize): what RLIMIT_AS counts."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def headroom() -> tuple[int, str]:
    """(bytes, what sets them) this process may still take: the least of the host's
    memory, its address-space limit (RLIMIT_AS) less what it maps now, and its control
    group's memory limit less what the group holds now.

    Trap: the limits hold the whole process, not one batch: under a 6 GB address-space
    cap, TensorFlow and a model map 2-3 GB before the first step allocates anything.
    """
    limit, what = process_memory_limit()
    room = [(limit, what)]
    if "RLIMIT_AS" in what:
        mapped = _mapped_bytes()
        if mapped is not None:
            room.append((max(0, limit - mapped), f"its address-space limit (RLIMIT_AS) of "
                         f"{_gib(limit)} GiB less the {_gib(mapped)} GiB it maps already"))
    elif "control group" in what:
        for path in CGROUP_USAGE_FILES:
            used = _read_int(path)
            if used is not None:
                room.append((max(0, limit - used), f"{what} of {_gib(limit)} GiB less the "
                             f"{_gib(used)} GiB the group holds already"))
                break
    return min(room)


def kept_bytes_per_image(model, bytes_per_value: int) -> int:
    """A lower bound of what one image's training step keeps for the gradient: the
    outputs of the model's layers that hold weights (convolutions, matrix products,
    attention), each needed by the next layer's gradient. Normalizations and
    activations, which XLA may fuse into them, and temporaries are left out: the
    step needs more (ResNet-50's kept outputs are 11.1 M values an image at 224 px, a
    quarter of all its layers' outputs)."""
    count = 0
    for layer in model._flatten_layers(include_self=False, recursive=False):
        if not layer.weights or "Norm" in type(layer).__name__:
            continue
        try:
            outputs = layer.output
        except (AttributeError, ValueError):  # not a node of the functional graph
            continue
        for output in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
            count += math.prod(int(d or 1) for d in tuple(output.shape)[1:])
    return count * bytes_per_value


def step_bytes(model, batch: int, bytes_per_value: int) -> int:
    """A lower bound of a training step's memory: what `batch` images keep for the
    gradient, and WEIGHT_COPIES float32 copies of the weights."""
    return (batch * kept_bytes_per_image(model, bytes_per_value)
            + WEIGHT_COPIES * 4 * model.count_params())


def _gib(count: int) -> str:
    """Bytes in GiB for a line: whole GiB, or two decimals below 10 GiB."""
    gib = count / 2**30
    return f"{gib:,.0f}" if gib >= 10 else f"{gib:.2f}"


def is_out_of_memory(error: BaseException) -> bool:
    return any(marker in f"{type(error).__name__} {error}" for marker in OOM_MARKERS)


def peak_memory_gib(backend: str) -> float | None:
    """High-water mark of device memory over the local devices, or None (CPU)."""
    try:
        if backend == "jax":
            import jax
            stats = [d.memory_stats() for d in jax.local_devices()]
            peaks = [s.get("peak_bytes_in_use") for s in stats if s]
        else:
            import tensorflow as tf
            gpus = tf.config.list_logical_devices("GPU")
            peaks = [tf.config.experimental.get_memory_info(g.name)["peak"] for g in gpus]
    except Exception:  # not every platform reports memory
        return None
    peaks = [p for p in peaks if p]
    return round(max(peaks) / 2**30, 3) if peaks else None
