"""The GPU JPEG stream's knobs, in one frozen dataclass: what each does, and why its
default is what it is (the figures come from benchmarks/results/)."""

from __future__ import annotations

import dataclasses
import os

CANVAS_SIDES = (256, 384, 512, 768, 1024)  # canvas sides (square), in buckets
DECODERS = ("auto", "nvimgcodec", "cpu")
BACKENDS = ("default", "hw")
APIS = ("c", "nvjpeg")
READ_INS = ("shared", "workers", "stream")


@dataclasses.dataclass(frozen=True)
class GpuOptions:
    """How a GpuJpegStream decodes; every default is the fastest measured on an H200.

    A field left None is decided by the stream (`resolved`): the stream's `options`
    holds what it runs with.
    """

    # "nvimgcodec": the GPU decoders (with api "c" also on a CPU device, through
    # nvImageCodec's CPU backend: how the CPU tests run it); "cpu": every image decoded
    # on the host (preprocessing/host/images.py), the fallback without nvImageCodec;
    # "auto": nvimgcodec where it imports and the devices are GPUs, else cpu.
    decoder: str = "auto"
    # Batches made ahead of the consumer. With 2, fit waited 0.4 s for batches in the
    # last of 3 epochs (0.951 of synthetic data), with 3 it did not (0.974)
    # (2026-12-01-h200-step.json, "feed").
    prefetch: int = 3
    # Decode only each crop window on the GPU (False: the whole image).
    roi: bool = True
    # nvImageCodec's backend (api "c"): "default" (it picks: the JPEG engines, then
    # CUDA) or "hw" (the hardware JPEG engines only; what they refuse, progressive or
    # unusual chroma subsampling, is decoded on the CPU). "hw" was the fastest under
    # load; nvJPEG's CUDA decoder alone and each batch split between it and the engines
    # were slower and left (2026-11-30-h200-gpu-jpeg.json at 35cc76c, run_2).
    # (GPU_ONLY alone could not create a decoder on the H200, "Code: 7".)
    backend: str = "hw"
    # How the GPU decoder is called: "nvjpeg" (nvJPEG's hardware decoder called
    # directly, native/nvjpeg_c.py; backend "hw" only) or "c" (nvImageCodec's C API,
    # native/nvimgcodec_c.py: any backend, and the CPU). None: "nvjpeg" with backend
    # "hw" (0.93 of synthetic data against 0.84 for "c" in the same call,
    # 2026-12-01-h200-nvjpeg.json at 35cc76c call5), falling back to "c" with nvImageCodec's own
    # choice of backend on a GPU without JPEG engines; "c" with the other backends.
    api: str | None = None
    # Allowed canvas sides; the largest caps the canvas (a larger window is resized on
    # the host first).
    canvas_sides: tuple = CANVAS_SIDES
    # Processes that plan batches (read, headers, windows, CPU decodes); 0 plans in
    # this process (its Python then competes with training for the GIL). None: for the
    # GPU decoder half the cores, at most 8 (on an H200's 16 cores: 7,156 img/s with 4,
    # whose last epochs waited for plans, 7,188 with 8 and no wait;
    # 2026-12-01-h200-warm-up.json at 35cc76c call4), all cores but two for the CPU one.
    # They are spawned: the program's main module must be safe to import.
    workers: int | None = None
    # Batches decoded at the same time (lanes), each with its own decoder, CUDA stream
    # and canvases per device. None: 6 with api "nvjpeg" (7,978 img/s against 7,479
    # with 3 and 7,469 with 2, 2026-12-01-h200-gc.json lanes_call1), 3 with "c", 1 for
    # the CPU decoder.
    decoders: int | None = None
    # Where the GPU decoder's input bytes are read (api "nvjpeg"): "shared" (the
    # planning processes, which read each file for its header anyway, write them into
    # shared memory, native/shared_bytes.py), "workers" (they send them with the plan,
    # through the process pool's pipe: 29 ms of this process's CPU a batch of 256 and
    # at most 33 batches a second, against 0.5 ms through shared memory,
    # 2026-12-01-h200-shared.json at 35cc76c plan_transfer) or "stream" (a thread of this process
    # reads each file again). None: "shared" with api "nvjpeg" ("workers" without
    # planning processes: the bytes are here already); "stream" with api "c", which
    # reads its files itself.
    read_in: str | None = None
    # With api "nvjpeg", files drawn (from the seed) to warm nvJPEG's hardware decoders
    # up before their first batch: each decodes batches of made-up JPEGs as large as the
    # largest of these (planning.warm_up_jpegs), so it grows its buffers then and not in
    # training (without it nvJPEG took memory in 65 of the first epoch's 80 batches,
    # with it in 3; 2026-12-01-h200-warm-up.json at 35cc76c call1 and call3). A failed warm-up
    # warns; training goes on. 0: none.
    warm_up: int = 1024

    def __post_init__(self):
        object.__setattr__(self, "canvas_sides", tuple(sorted(int(s) for s in self.canvas_sides)))
        if self.decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {self.decoder!r}")
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {self.prefetch}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.api is not None and self.api not in APIS:
            raise ValueError(f"api must be one of {APIS}, got {self.api!r}")
        if self.api == "nvjpeg" and self.backend != "hw":
            raise ValueError(f"api='nvjpeg' drives the hardware JPEG engines only: backend "
                             f"must be 'hw', got {self.backend!r}")
        if self.decoders is not None and self.decoders < 1:
            raise ValueError(f"decoders must be >= 1, got {self.decoders}")
        if self.read_in is not None and self.read_in not in READ_INS:
            raise ValueError(f"read_in must be 'shared', 'workers' or 'stream', got "
                             f"{self.read_in!r}")
        if self.read_in in ("shared", "workers") and self.chosen_api() != "nvjpeg":
            raise ValueError(f"read_in={self.read_in!r} needs api='nvjpeg' (nvImageCodec's "
                             f"{self.chosen_api()!r} API reads its files itself)")
        if self.read_in == "shared" and self.workers == 0:
            raise ValueError("read_in='shared' needs planning processes (workers >= 1)")

    def chosen_api(self) -> str:
        """`api`, or what None stands for with this backend."""
        if self.api is not None:
            return self.api
        return "nvjpeg" if self.backend == "hw" else "c"

    def resolved(self, decoder: str) -> GpuOptions:
        """These options with every None decided, for `decoder` ("nvimgcodec" or "cpu",
        as the stream picked it for its devices) on the cores this process may use."""
        api = self.chosen_api()
        workers = self.workers
        if workers is None:
            cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count() or 1)
            workers = min(8, max(1, cores // 2)) if decoder == "nvimgcodec" else max(1, cores - 2)
        decoders = self.decoders
        if decoders is None:
            decoders = 1 if decoder == "cpu" else 6 if api == "nvjpeg" else 3
        read_in = self.read_in
        if read_in is None:
            read_in = ("shared" if workers else "workers") if api == "nvjpeg" else "stream"
        return dataclasses.replace(self, decoder=decoder, api=api, workers=workers,
                                   decoders=decoders, read_in=read_in)
