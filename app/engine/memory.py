"""Device memory: whether an error is an out-of-memory one, and the high-water mark."""

from __future__ import annotations

OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM",
               "Resource exhausted")


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
