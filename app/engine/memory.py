"""Memory: the most a process may hold, whether an error is an out-of-memory one, and
the device's high-water mark."""

from __future__ import annotations

import os

# Where a Linux control group caps its processes' memory: v2's file, then v1's. "max"
# (v2) or a huge number (v1: 2**63 rounded down to a page) means no cap.
CGROUP_LIMIT_FILES = ("/sys/fs/cgroup/memory.max",
                      "/sys/fs/cgroup/memory/memory.limit_in_bytes")

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
