"""When nvJPEG's hardware decoder grows its buffers, and whether a warm-up stops it.

    python benchmarks/nvjpeg_growth_probe.py FOLDER OUT_DIR [--batches=30]

On a GPU, for each warm-up strategy, a fresh HardwareDecoder (preprocessing/nvjpeg_c.py,
made as the gpu pipeline makes it: 256 images, 1,024 px) decodes `--batches` batches of
256 of FOLDER's JPEGs (drawn at random, the same draws for every strategy), each image
limited to a random crop window as training draws them. Per strategy it prints how many
batch decodes took device memory (cuMemGetInfo before and after), how much, and the
decode times, and writes a CUDA trace (cuMemAlloc/cuMemFree/cuMemHostAlloc calls:
benchmarks/trace_report.py reads it) to OUT_DIR/STRATEGY. Strategies (the warm-up
before the measured batches):
    none           nothing
    area_roi       one batch of the 256 largest images by pixel count, 64x64 windows
    area_full      the same images decoded whole
    largest_roi    the one largest image in all 256 slots, 64x64 windows
    bytes_roi      the 256 largest files by bytes, 64x64 windows
    noise_roi      one made-up JPEG (noise, 4:4:4, quality 95) of the largest image's
                   side squared, in all 256 slots, 64x64 windows
    noise1024_roi  the same at 1,024 x 1,024
    app            as the gpu pipeline warms its decoders up (GpuJpegStream's warm_up):
                   jpeg_plan.warm_up_jpegs of 1,024 of the files, HardwareDecoder.warm
In the app's runs (benchmarks/h200_first_epoch.sh) nvJPEG freed and allocated device
memory during the first epochs (cuMemFree waits for the GPU and holds the driver's lock,
so XLA's step launches waited behind it).
"""

import argparse
import glob
import os
import time

import numpy as np

STRATEGIES = ("none", "area_roi", "area_full", "largest_roi", "bytes_roi", "noise_roi",
              "noise1024_roi", "app")
BATCH, SIDE = 256, 1024


def _window(rng, height, width):
    """A training crop window (y, x, h, w): 8-100% of the area, aspect 3/4-4/3."""
    for _ in range(10):
        area = height * width * rng.uniform(0.08, 1.0)
        aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w, h = int(round(np.sqrt(area * aspect))), int(round(np.sqrt(area / aspect)))
        if 0 < w <= min(width, SIDE) and 0 < h <= min(height, SIDE):
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    side = min(height, width, SIDE)
    return (height - side) // 2, (width - side) // 2, side, side


def _noise_jpeg(side: int) -> bytes:
    import io

    from PIL import Image

    pixels = np.random.default_rng(1).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=95, subsampling=0)
    return buffer.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("out")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()

    import jax

    from preprocessing import nvjpeg_c
    from preprocessing.cuda_driver import CudaDriver
    from preprocessing.jpeg_header import read_jpeg_header
    from preprocessing.jpeg_plan import warm_up_jpegs

    jax.devices()
    cuda = CudaDriver.get()
    cuda.use(0)
    stream, _ = cuda.new_stream()
    paths = sorted(glob.glob(os.path.join(args.folder, "*", "*")))
    datas = [open(p, "rb").read() for p in paths]
    headers = [read_jpeg_header(d) for d in datas]
    ok = [i for i, h in enumerate(headers) if h is not None and h.gpu_decodable]
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(args.batches):
        chosen = rng.choice(ok, BATCH, replace=False)
        draws.append([(int(i), _window(rng, headers[i].height, headers[i].width)) for i in chosen])
    by_area = sorted(ok, key=lambda i: headers[i].height * headers[i].width)[-BATCH:]
    by_bytes = sorted(ok, key=lambda i: len(datas[i]))[-BATCH:]
    big = max(headers[i].height * headers[i].width for i in ok)
    print(f"{len(paths)} files, {len(ok)} GPU-decodable; largest {big} px "
          f"({max(max(headers[i].height, headers[i].width) for i in ok)} px side); "
          f"largest file {max(len(datas[i]) for i in ok)} bytes", flush=True)
    full_side = max(max(headers[i].height, headers[i].width) for i in ok)
    output = cuda.alloc(BATCH * full_side * full_side * 3)

    def decode(decoder, items, side):
        """items: (file index, region or None); returns (seconds, bytes taken, ok)."""
        before, start = cuda.free_memory(), time.perf_counter()
        pointers = [output + k * side * side * 3 for k in range(len(items))]
        ok = decoder.decode([datas[i] for i, _ in items], [r for _, r in items], pointers,
                            [side * 3] * len(items), stream)
        cuda.synchronize(stream)
        return time.perf_counter() - start, before - cuda.free_memory(), ok

    small = (0, 0, 64, 64)
    for side in (full_side, 1024):
        datas.append(_noise_jpeg(side))
        headers.append(read_jpeg_header(datas[-1]))
    warmups = {"none": [], "area_roi": [[(i, small) for i in by_area]],
               "area_full": [[(i, None) for i in by_area]],
               "largest_roi": [[(by_area[-1], small)] * BATCH],
               "bytes_roi": [[(i, small) for i in by_bytes]],
               "noise_roi": [[(len(datas) - 2, small)] * BATCH],
               "noise1024_roi": [[(len(datas) - 1, small)] * BATCH]}
    for name in args.strategies.split(","):
        decoder = nvjpeg_c.HardwareDecoder(BATCH, SIDE)
        if name == "app":
            started, before = time.perf_counter(), cuda.free_memory()
            jpegs = warm_up_jpegs([paths[i] for i in rng.choice(len(paths), 1024, replace=False)])
            made = time.perf_counter() - started
            assert decoder.warm(list(jpegs.values()), output, stream)
            warm = [(time.perf_counter() - started - made, before - cuda.free_memory(), True)]
            print(f"app: made-up JPEGs {[(k, len(v)) for k, v in jpegs.items()]} in "
                  f"{made * 1e3:.0f} ms", flush=True)
        else:
            warm = [decode(decoder, items, full_side) for items in warmups[name]]
        jax.profiler.start_trace(os.path.join(args.out, name))
        calls = [decode(decoder, items, SIDE) for items in draws]
        jax.profiler.stop_trace()
        decoder.close()
        taken = [t for _, t, _ in calls]
        grew = [k for k, t in enumerate(taken) if t]
        print(f"{name:12s} warm-up took {sum(t for _, t, _ in warm) / 2**20:7.1f} MiB in "
              f"{sum(s for s, _, _ in warm) * 1e3:6.1f} ms; then {len(grew)}/{len(calls)} "
              f"decodes took memory ({sum(taken) / 2**20:.1f} MiB; at batches {grew[:12]}), "
              f"decode ms median {np.median([s for s, _, _ in calls]) * 1e3:.1f} "
              f"max {max(s for s, _, _ in calls) * 1e3:.1f}, all ok {all(o for _, _, o in calls)}",
              flush=True)


if __name__ == "__main__":
    main()
