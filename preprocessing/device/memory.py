"""How much a split takes decoded, and how much memory is free to hold it.

Asked by preprocessing/streams.py's `pick` before anything is decoded: the decoded
size of a list of files comes from a sample of their headers (the pixels are not
read), of decoded `Pixels` from the array itself.
"""

from __future__ import annotations

from preprocessing.spec import Pixels

HEADER_SAMPLE = 64  # image headers read to estimate a split's decoded size


def decoded_bytes(split) -> int:
    """Bytes the split takes decoded (uint8, one channel for gray images), or 0 when
    that cannot be known without decoding (encoded bytes, TFDS records)."""
    if isinstance(split, Pixels):
        return int(split.images.nbytes + 16 * len(split))  # + labels, offsets, sizes
    from preprocessing.files import MAX_PIXELS, unreadable_why
    from preprocessing.host.images import pillow

    Image = pillow()  # (told not to warn of large images: the decoders refuse them)
    sample = split[::max(1, len(split) // HEADER_SAMPLE)][:HEADER_SAMPLE]
    sizes = []
    for item, _ in sample:
        if not isinstance(item, str):
            return 0
        if unreadable_why(item):  # never opened: a FIFO would block (the decode skips it)
            continue
        try:
            with Image.open(item) as image:  # lazy: only the header is read
                channels = 1 if image.mode in ("1", "L", "I;16", "I") else 3
                if image.size[0] * image.size[1] <= MAX_PIXELS:  # else never decoded
                    sizes.append(image.size[0] * image.size[1] * channels)
        except Exception:  # noqa: BLE001 - corrupt or a bomb (Pillow raises many types):
            continue  # the decode leaves it out
    if not sizes:
        return 0
    return int(sum(sizes) / len(sizes) * len(split)) + 16 * len(split)


def free_bytes(backend: str, accelerator: str) -> tuple[int | None, str]:
    """(free bytes, where) of the memory the device pipeline's data would live in: the
    accelerators' on JAX (summed over this process's devices; each holds its share),
    the host's on a CPU and for tf.data's cache. None when unknown."""
    if backend == "jax" and accelerator != "cpu":
        import jax

        devices = jax.local_devices()
        stats = [d.memory_stats() or {} for d in devices]
        if all("bytes_limit" in s for s in stats):
            free = sum(s["bytes_limit"] - s.get("bytes_in_use", 0) for s in stats)
            return free, f"the memory of {len(devices)} {devices[0].platform.upper()}(s)"
    return host_available_bytes(), "host memory"


def host_available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be taken without swapping), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
