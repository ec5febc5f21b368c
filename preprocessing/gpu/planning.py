"""The host's share of the GPU JPEG pipeline: plan one batch, without any GPU.

`plan_batch` reads a batch's files, reads each JPEG's size from its header, draws
the crop windows and flips (one numpy Generator per batch, from the seed and the
batch's position, so any process can plan any batch and get the same answer),
and routes every image: "gpu" (nvImageCodec decodes its window), "host" (decoded
here on the CPU: not a JPEG nvJPEG decodes like libjpeg, or too large for any
canvas) or "bad" (no decoder can read it). It is a plain function of plain values,
so the pipeline runs it in worker processes, away from the training process's GIL.
Only numpy, the augmentation's definition and the CPU decoders are imported here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from preprocessing import augment
from preprocessing.host import images as host_images
from preprocessing.gpu.native import shared_bytes
from preprocessing.gpu.jpeg_header import read_jpeg_header


@dataclasses.dataclass(frozen=True)
class PlanSpec:
    """What planning needs to know about the stream."""

    seed: int
    train: bool
    roi: bool  # the GPU decodes only the window (else the whole image)
    max_side: int  # the largest canvas side
    image_size: int
    gpu: bool  # False: every image is decoded on the host
    hw_only: bool = False  # the GPU decoder is the hardware engines alone
    keep_bytes: bool = False  # gpu-route slots carry the file's bytes (no second read)


@dataclasses.dataclass
class Slot:
    """One image of a batch: what to decode, where, and how to cut it."""

    route: str = "bad"  # "gpu", "host" or "bad"
    window: tuple | None = None  # (y, x, h, w) in the image
    flip: bool = False
    region: tuple | None = None  # what the GPU decodes: the window (ROI) or None (all)
    box: tuple = (0, 0, 1, 1)  # the window inside what the canvas slot holds
    content: tuple = (1, 1)  # height and width of what the canvas slot holds
    pixels: np.ndarray | None = None  # host route: the uint8 content of the slot
    # gpu route with spec.keep_bytes: the file's bytes, or where plan_batch wrote them
    # in its shared-memory block, (offset, size); the stream makes that a HostBytes.
    data: bytes | tuple[int, int] | None = None
    # Filled in by the pipeline, not by planning:
    record: int = -1  # index into the records; -1 for eval padding
    label: int = 0
    index: int = 0  # the slot in its device's canvas
    code_stream: object = None  # gpu route: the nvImageCodec CodeStream to decode


def read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def host_decode(data: bytes | None) -> np.ndarray | None:
    """host_images.decode, or None for bytes no decoder can read."""
    if not data:
        return None
    try:
        return host_images.decode(data)
    except host_images.UndecodableImage:
        return None


def host_window(pixels: np.ndarray | None, window, spec: PlanSpec) -> np.ndarray | None:
    """The window of decoded `pixels` as the canvas slot's uint8 content.

    A window larger than the biggest canvas is resized to image_size here (TF's
    bilinear, host_images.resize), so the device step's resize of it is the identity;
    rounding it to uint8 costs at most half a gray level.
    """
    if pixels is None:
        return None
    y, x, h, w = window
    crop = pixels[y:y + h, x:x + w]  # clipped if the decode disagreed with the header
    if crop.size == 0:
        return None
    if max(crop.shape[:2]) > spec.max_side:
        crop = host_images.resize(crop, spec.image_size)
        crop = np.clip(np.rint(crop), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(crop)


def warm_up_jpegs(paths: list, cap: int = 2048, multiple: int = 64) -> dict[str, bytes]:
    """Made-up JPEGs as demanding as the most demanding of the files, per chroma layout.

    For each layout (JpegHeader.layout) among the files' hardware-decodable JPEGs, one
    square JPEG of that layout whose side is their longest side (rounded up to
    `multiple`, at most `cap`: a rare huge photo should not make every lane decode a
    batch of huge images) and whose size in bytes is at least their largest file's
    (at most 4x their 99th percentile; or as many as noise of that side gives). nvJPEG's
    hardware decoder grows its buffers, freeing the old ones, when a batch holds a
    larger image of a layout than it has met (each cuMemFree waits for the GPU and
    holds the driver's lock, which stalls the training step's launch): decoding a
    batch of these first makes them big enough for what the files hold.
    """
    sides: dict[str, int] = {}  # layout -> the longest side
    sizes: dict[str, list] = {}  # layout -> the files' bytes
    for path in paths:
        data = read_file(path)
        header = read_jpeg_header(data) if data else None
        if header is not None and header.hw_decodable:
            sides[header.layout] = max(sides.get(header.layout, 0), header.height, header.width)
            sizes.setdefault(header.layout, []).append(len(data))
    jpegs = {}
    for layout, side in sides.items():
        # The largest file, but not beyond 4x the 99th percentile: one outlier (a
        # 10 MB photo) would make every lane hold buffers for a batch of them.
        size = min(max(sizes[layout]), 4 * int(np.percentile(sizes[layout], 99)))
        jpegs[layout] = made_up_jpeg(layout, min(cap, -(-side // multiple) * multiple), size)
    return jpegs


def made_up_jpeg(layout: str, side: int, min_bytes: int = 0) -> bytes:
    """A side x side JPEG of `layout` ("gray", "444", "422", "420", "440") of at least
    min_bytes (or as many as quality 95 gives a picture of noise): a smooth gradient
    whose first rows are noise, as many as it takes."""
    import simplejpeg

    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, side, dtype=np.float32)
    smooth = np.stack([ramp[None, :].repeat(side, 0), ramp[:, None].repeat(side, 1),
                       np.full((side, side), 128, np.float32)], -1).astype(np.uint8)
    noise = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)

    def encode(rows: int) -> bytes:
        pixels = smooth.copy()
        pixels[:rows] = noise[:rows]
        if layout == "gray":
            return simplejpeg.encode_jpeg(np.ascontiguousarray(pixels[..., :1]), quality=95,
                                          colorspace="GRAY")
        return simplejpeg.encode_jpeg(pixels, quality=95, colorspace="RGB",
                                      colorsubsampling=layout)

    data = encode(0)
    if len(data) >= min_bytes:
        return data
    full = encode(side)
    # The size grows about linearly with the noisy rows: one guess, then all if short.
    rows = min(side, int(np.ceil(side * (min_bytes - len(data)) / max(len(full) - len(data), 1)
                                 * 1.1)))
    data = encode(rows)
    return data if len(data) >= min_bytes else full


def plan_batch(paths: list, position: tuple, spec: PlanSpec,
               block: str | None = None) -> list[Slot]:
    """Plans the images of one batch (a path of None is eval padding: "bad").

    Args:
        paths: the batch's files, in order.
        position: (epoch, batch); with spec.seed, decides the windows and flips.
        spec: the stream's settings.
        block: with spec.keep_bytes, a shared-memory block (shared_bytes.Blocks) to
            write the gpu-route files' bytes into; those slots' data is then (offset,
            size) there, except for files that did not fit (their bytes).

    Returns:
        One Slot per path; host-route slots carry their pixels.
    """
    slots = [Slot() for _ in paths]
    datas = [read_file(p) if p is not None else None for p in paths]
    rng = np.random.default_rng([spec.seed, 2, *position]) if spec.train else None
    for slot, data in zip(slots, datas):
        header = read_jpeg_header(data) if data else None
        pixels = None
        if header is not None:
            height, width = header.height, header.width
        else:  # not a JPEG (or a broken one): decode first, its size comes from that
            pixels = host_decode(data)
            if pixels is None:
                continue  # no window drawn; the slot stays "bad"
            height, width = pixels.shape[:2]
        if spec.train:
            slot.window = augment.random_crop_window(height, width, rng)
            slot.flip = augment.flip_draw(rng)
        else:
            slot.window = augment.center_crop_window(height, width)
        y, x, h, w = slot.window
        content = (h, w) if spec.roi else (height, width)
        on_gpu = header is not None and (header.hw_decodable if spec.hw_only
                                         else header.gpu_decodable)
        if spec.gpu and on_gpu and max(content) <= spec.max_side:
            slot.route, slot.content = "gpu", content
            slot.region = slot.window if spec.roi else None
            slot.box = (0, 0, h, w) if spec.roi else slot.window
            if spec.keep_bytes:
                slot.data = data
            continue
        if pixels is None:
            pixels = host_decode(data)
        slot.pixels = host_window(pixels, slot.window, spec)
        if slot.pixels is not None:
            slot.route, slot.content = "host", slot.pixels.shape[:2]
            slot.box = (0, 0, *slot.content)
    carried = [slot for slot in slots if slot.data is not None]
    if block is not None and carried:
        for slot, place in zip(carried, shared_bytes.write(block, [s.data for s in carried])):
            if place is not None:
                slot.data = place
    return slots
