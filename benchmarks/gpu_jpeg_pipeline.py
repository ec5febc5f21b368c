"""The GPU JPEG pipeline on one GPU, in one go: API check, decode-only rates per
nvImageCodec backend (with and without region-of-interest decoding), the whole
pipeline's rate per configuration, its rate while a heavy jitted loop keeps the GPU
busy (a stand-in for training), and its pixels against the CPU decoder's.

    python benchmarks/gpu_jpeg_pipeline.py --out /tmp/out --images 2048

Writes OUT/gpu_jpeg.json (and prints it). Needs nvidia-nvimgcodec-cu13 and
nvidia-nvjpeg (LD_LIBRARY_PATH=<site>/nvidia/cu13/lib); see h200_gpu_jpeg.sh.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import multiprocessing
import os
import sys
import time
import traceback

import numpy as np

from results_io import emit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
RESULTS: dict = {}


def section(name):
    """Runs fn, records its result or its error under `name`, never stops the script."""

    def wrap(fn):
        def run(*args, **kwargs):
            start = time.time()
            try:
                RESULTS[name] = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - keep measuring the other sections
                RESULTS[name] = {"error": f"{type(e).__name__}: {e}",
                                 "trace": traceback.format_exc()[-1500:]}
            print(f"[{time.time() - start:6.1f}s] {name}: {RESULTS[name]}", flush=True)
            _write()
            return RESULTS[name]
        return run
    return wrap


def _write():
    if ARGS.out:
        with open(os.path.join(ARGS.out, "gpu_jpeg.json"), "w") as f:
            json.dump(RESULTS, f, indent=2)


# ---- the files ---------------------------------------------------------------------


def _make_one(args):
    index, folder = args
    from PIL import Image

    rng = np.random.default_rng(index)
    height, width = (int(v) for v in rng.integers(300, 601, 2))
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    a, b, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6)]
    base = (np.sin(xx * a + phase) + np.cos(yy * b)) * 60 + 128
    image = np.stack([base, np.roll(base, 40, 1), 255 - base], -1)
    image += rng.normal(0, 16, image.shape).astype(np.float32)  # ~90 KiB, like ImageNet
    pixels = Image.fromarray(np.clip(image, 0, 255).astype("uint8"))
    path = os.path.join(folder, f"{index:05d}.JPEG")
    pixels.save(path, quality=90)
    return path


def make_files(folder: str, count: int):
    """`count` photo-like JPEGs (300-600 px a side, quality 90) and 7 odd files."""
    os.makedirs(folder, exist_ok=True)
    with multiprocessing.Pool(min(16, os.cpu_count() or 1)) as pool:
        paths = pool.map(_make_one, [(i, folder) for i in range(count)], chunksize=16)
    from PIL import Image

    source = Image.open(paths[0])
    odd = {}

    def save(name, **kwargs):
        buffer = io.BytesIO()
        kwargs.pop("image", source).save(buffer, **kwargs)
        return buffer.getvalue()

    odd["png_named_jpeg"] = save("png", format="PNG")
    odd["cmyk"] = save("cmyk", image=source.convert("CMYK"), format="JPEG", quality=90)
    odd["gray"] = save("gray", image=source.convert("L"), format="JPEG", quality=90)
    odd["progressive"] = save("prog", format="JPEG", quality=90, progressive=True)
    odd["huge"] = save("huge", image=source.resize((2600, 1900)), format="JPEG", quality=90)
    whole = open(paths[1], "rb").read()
    odd["truncated"] = whole[: len(whole) * 2 // 3]
    odd["corrupt"] = b"\xff\xd8\xff\xe0" + os.urandom(2000)
    odd_paths = []
    for name, data in odd.items():
        path = os.path.join(folder, f"odd_{name}.JPEG")
        with open(path, "wb") as f:
            f.write(data)
        odd_paths.append(path)
    sizes = [os.path.getsize(p) for p in paths]
    return paths, odd_paths, {"count": count, "mean_kib": round(float(np.mean(sizes)) / 1024, 1)}


# ---- the measurements --------------------------------------------------------------------


@section("environment")
def environment():
    import jax
    from nvidia import nvimgcodec

    devices = jax.devices()
    return {"jax": jax.__version__, "nvimgcodec": nvimgcodec.__version__,
            "device": devices[0].device_kind, "devices": len(devices),
            "cpus": os.cpu_count(),
            "decode_signature": nvimgcodec.Decoder.decode.__doc__.splitlines()[3][:400]}


def _backends(nvimgcodec, name):
    kinds = {"default": None, "hw": ["HW_GPU_ONLY"], "cuda": ["GPU_ONLY"],
             "hybrid": ["HYBRID_CPU_GPU"], "hw+cuda": ["HW_GPU_ONLY", "GPU_ONLY"]}[name]
    if kinds is None:
        return None
    return [nvimgcodec.Backend(getattr(nvimgcodec.BackendKind, k)) for k in kinds]


@section("decode_only")
def decode_only(paths, batch: int):
    """Decode-only rates: batches of code streams made beforehand, stream synced."""
    from nvidia import nvimgcodec

    from preprocessing import augment
    from preprocessing.cuda_driver import CudaDriver
    from preprocessing.jpeg_header import read_jpeg_header

    import jax

    jax.devices()
    cuda = CudaDriver.get()
    cuda.use(0)
    stream, _ = cuda.new_stream()
    datas = [open(p, "rb").read() for p in paths]
    headers = [read_jpeg_header(d) for d in datas]
    rng = np.random.default_rng(0)
    windows = [augment.random_crop_window(h.height, h.width, rng) for h in headers]
    start = time.perf_counter()
    plain = [nvimgcodec.CodeStream(d) for d in datas]
    code_stream_us = (time.perf_counter() - start) / len(datas) * 1e6
    start = time.perf_counter()
    rois = [cs.get_sub_code_stream(region=nvimgcodec.Region(y, x, y + h, x + w))
            for cs, (y, x, h, w) in zip(plain, windows)]
    region_us = (time.perf_counter() - start) / len(datas) * 1e6
    from_path = [nvimgcodec.CodeStream(p).get_sub_code_stream(
        region=nvimgcodec.Region(y, x, y + h, x + w)) for p, (y, x, h, w) in zip(paths, windows)]
    params = nvimgcodec.DecodeParams(apply_exif_orientation=False,
                                     color_spec=nvimgcodec.ColorSpec.SRGB,
                                     sample_format=nvimgcodec.SampleFormat.I_RGB)
    out = {"code_stream_us_per_image": round(code_stream_us, 1),
           "region_us_per_image": round(region_us, 1)}
    for name in ("default", "hw", "hw+cuda", "hybrid"):
        for options in (":fancy_upsampling=1",) if name != "default" else (
                ":fancy_upsampling=1", ""):
            key = name + ("" if options else "_no_fancy")
            try:
                decoder = nvimgcodec.Decoder(backends=_backends(nvimgcodec, name),
                                             options=options)
            except Exception as e:  # noqa: BLE001
                out[key] = f"no decoder: {e}"
                continue
            for label, streams in (("full", plain), ("roi", rois), ("roi_from_path", from_path)):
                _decode_all(decoder, streams, batch, params, stream, cuda)  # warm-up
                start = time.perf_counter()
                reps = 2
                for _ in range(reps):
                    bad = _decode_all(decoder, streams, batch, params, stream, cuda)
                seconds = time.perf_counter() - start
                done = reps * (len(streams) // batch) * batch
                out[f"{key}_{label}"] = {"img_per_s": round(done / seconds),
                                         "failed_per_pass": bad}
            del decoder
    return out


def _decode_all(decoder, streams, batch, params, stream, cuda) -> int:
    """Decodes `streams` in batches into nvImageCodec's buffers; returns failures."""
    bad = 0
    for i in range(0, len(streams) - batch + 1, batch):
        images = decoder.decode(streams[i:i + batch], params=params, cuda_stream=stream)
        bad += sum(image is None for image in images)
    cuda.synchronize(stream)
    return bad


def _stream(records, batch, train, **kwargs):
    from preprocessing.gpu_pipeline import GpuJpegStream

    return GpuJpegStream(records, batch, 224, seed=0, train=train, dtype="bfloat16", **kwargs)


def pipeline(records, configs, batches: int):
    """Whole pipeline, batch 256 (or as named): images out as device arrays, waited for."""
    out = {}
    for name, batch, kwargs in configs:
        stream = _stream(records, batch, True, **kwargs)
        try:
            for _ in range(3):  # compile the canvas buckets, fill the queue
                next(stream)[0].block_until_ready()
            start = time.perf_counter()
            for _ in range(batches):
                images = next(stream)[0]
            images.block_until_ready()
            seconds = time.perf_counter() - start
            filler = stream._fillers[0]
            out[name] = {"batch": batch, "img_per_s": round(batches * batch / seconds),
                         "skipped": stream.skipped_images(), "decoder": stream.decoder,
                         "d2d_copies": getattr(filler, "copies", None),
                         "direct_error": getattr(filler, "direct_error", None),
                         "stream_priority": getattr(filler, "stream_priority", None)}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": f"{type(e).__name__}: {e}",
                         "trace": traceback.format_exc()[-1200:]}
        finally:
            stream.close()
    return out


@section("planner_only")
def planner_only(records, batch: int):
    """The host side alone: planning in this process (one thread) and in the worker
    processes, then the code streams the training process makes."""
    out = {}
    for workers in (0, 4):
        stream = _stream(records, batch, True, decoder="nvimgcodec", backend="hw",
                         workers=workers)
        n = 8
        start = time.perf_counter()
        futures = [stream._submit((1, k % stream.steps_per_epoch)) for k in range(n)]
        planned = [(r, f.result(), b) for r, f, b in futures]
        out[f"plan_img_per_s_workers_{workers}"] = round(n * batch / (time.perf_counter() - start))
        start = time.perf_counter()
        for k, (r, slots, b) in enumerate(planned):
            stream._finish((1, k), r, slots, b)
            stream._release(b)
        out["finish_img_per_s"] = round(n * batch / (time.perf_counter() - start))
        stream.close()
    return out


def _heavy():
    """A jitted bf16 loop taking about ResNet-50's step time at batch 256 (35 ms)."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    w1 = jax.random.normal(key, (672, 4096), jnp.bfloat16) * 0.02
    w2 = jax.random.normal(key, (4096, 672), jnp.bfloat16) * 0.02

    @jax.jit
    def heavy(x):
        h = x.reshape(-1, 672)

        def body(_, h):
            return jnp.tanh(jnp.tanh(h @ w1) @ w2)

        return jax.lax.fori_loop(0, 34, body, h).sum()

    return heavy, jnp.zeros((256, 224, 224, 3), jnp.bfloat16)


def _loop(heavy, source, steps: int, fixed) -> float:
    """img/s of `steps` heavy steps on batches from source(), two steps in flight."""
    pending = collections.deque()
    heavy(fixed).block_until_ready()
    start = time.perf_counter()
    for _ in range(steps):
        pending.append(heavy(source()))
        if len(pending) > 2:
            pending.popleft().block_until_ready()
    for p in pending:
        p.block_until_ready()
    return steps * 256 / (time.perf_counter() - start)


@section("under_load")
def under_load(records, configs, steps: int):
    """The heavy loop fed by the pipeline, against the same loop fed one fixed batch:
    the share of 'synthetic' speed kept (what training would keep)."""
    heavy, fixed = _heavy()
    synthetic = _loop(heavy, lambda: fixed, steps, fixed)
    out = {"synthetic_img_per_s": round(synthetic)}
    for name, kwargs in configs:
        stream = _stream(records, 256, True, **kwargs)
        try:
            for _ in range(3):
                next(stream)[0].block_until_ready()
            fed = _loop(heavy, lambda: next(stream)[0], steps, fixed)
            out[name] = {"img_per_s": round(fed), "share_of_synthetic": round(fed / synthetic, 3)}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            stream.close()
    return out


@section("decode_under_load")
def decode_under_load(paths, batch: int, seconds: float = 3.0):
    """Decode-only rates while the heavy loop runs in another thread (and the loop's
    rate meanwhile): tells nvImageCodec's contention with compute from our pipeline's."""
    import threading

    from nvidia import nvimgcodec

    from preprocessing.cuda_driver import CudaDriver
    from preprocessing.gpu_decode import DECODER_OPTIONS

    heavy, fixed = _heavy()
    cuda = CudaDriver.get()
    cuda.use(0)
    streams = [nvimgcodec.CodeStream(p) for p in paths]
    params = nvimgcodec.DecodeParams(apply_exif_orientation=False,
                                     color_spec=nvimgcodec.ColorSpec.SRGB,
                                     sample_format=nvimgcodec.SampleFormat.I_RGB)
    out = {"heavy_alone_img_per_s": round(_loop(heavy, lambda: fixed, 40, fixed))}
    for name in ("hw", "default"):
        decoder = nvimgcodec.Decoder(backends=_backends(nvimgcodec, name),
                                     options=DECODER_OPTIONS)
        for high in (False, True):
            stream, priority = cuda.new_stream(high)
            _decode_all(decoder, streams, batch, params, stream, cuda)  # warm-up
            stop, steps = threading.Event(), [0]

            def run_heavy():
                pending = collections.deque()
                while not stop.is_set():
                    pending.append(heavy(fixed))
                    if len(pending) > 2:
                        pending.popleft().block_until_ready()
                        steps[0] += 1

            thread = threading.Thread(target=run_heavy)
            thread.start()
            time.sleep(0.5)
            begin, decoded, count0 = time.perf_counter(), 0, steps[0]
            while time.perf_counter() - begin < seconds:
                _decode_all(decoder, streams, batch, params, stream, cuda)
                decoded += len(streams) // batch * batch
            elapsed = time.perf_counter() - begin
            heavy_rate = (steps[0] - count0) * 256 / elapsed
            stop.set()
            thread.join()
            out[f"{name}_priority_{priority}"] = {
                "decode_img_per_s": round(decoded / elapsed),
                "heavy_img_per_s_meanwhile": round(heavy_rate)}
        del decoder
    return out


@section("correctness")
def correctness(records, configs):
    """The same files and windows through nvImageCodec and through the CPU decoder."""
    from preprocessing.augment import STDDEV_RGB

    std = np.asarray(STDDEV_RGB, np.float32)

    def collect(train, **kwargs):
        from preprocessing.gpu_pipeline import GpuJpegStream

        stream = GpuJpegStream(records, 128, 224, seed=7, train=train, dtype="float32",
                               **kwargs)
        if train:
            got = [tuple(np.asarray(a) for a in next(stream)) for _ in range(4)]
        else:
            got = [tuple(np.asarray(a) for a in b) for b in stream]
        skipped = stream.skipped_images()
        stream.close()
        return got, skipped

    out = {}
    for train in (False, True):
        reference, ref_skipped = collect(train, decoder="cpu")
        for name, kwargs in configs:
            got, skipped = collect(train, decoder="nvimgcodec", **kwargs)
            diffs, labels_equal = [], True
            for a, b in zip(got, reference):
                labels_equal &= bool(np.array_equal(a[1], b[1]))
                diffs.append(np.abs((a[0] - b[0]) * std))
            diff = np.concatenate(diffs)
            per_image = diff.reshape(diff.shape[0], -1)
            out[f"{'train' if train else 'eval'}_{name}"] = {
                "mean_abs_gray_levels": round(float(diff.mean()), 4),
                "max_abs_gray_levels": round(float(diff.max()), 2),
                "p99_image_mean": round(float(np.percentile(per_image.mean(1), 99)), 4),
                "images": int(diff.shape[0]), "labels_equal": labels_equal,
                "skipped": skipped, "skipped_cpu": ref_skipped}
    return out


def main():
    folder = "/tmp/gpu_jpeg_files"
    start = time.time()
    paths, odd, info = make_files(folder, ARGS.images)  # forks: before JAX starts
    import jax

    RESULTS["files"] = {**info, "odd": [os.path.basename(p) for p in odd],
                        "seconds": round(time.time() - start, 1)}
    jax.devices()  # JAX's GPU start-up, before anything is timed
    environment()
    records = [(p, i % 1000) for i, p in enumerate(paths)]
    with_odd = records + [(p, 7) for p in odd]
    decode_only(paths, 256)
    planner_only(records, 256)
    configs = [
        ("default_roi", 256, {"decoder": "nvimgcodec", "backend": "default"}),
        ("hw_roi", 256, {"decoder": "nvimgcodec", "backend": "hw"}),
        ("default_full", 256, {"decoder": "nvimgcodec", "backend": "default", "roi": False}),
        ("hw_full", 256, {"decoder": "nvimgcodec", "backend": "hw", "roi": False}),
        ("hw_full_normal_priority", 256, {"decoder": "nvimgcodec", "backend": "hw",
                                          "roi": False, "high_priority": False}),
        ("hw_roi_odd_files", 256, {"decoder": "nvimgcodec", "backend": "hw"}),
        ("hw_roi_8_workers", 256, {"decoder": "nvimgcodec", "backend": "hw", "workers": 8}),
        ("hw_full_b1024", 1024, {"decoder": "nvimgcodec", "backend": "hw", "roi": False}),
        ("cpu_decoder_14_workers", 256, {"decoder": "cpu"}),
    ]
    section("pipeline")(pipeline)(
        records, [c for c in configs if c[0] != "hw_roi_odd_files"], ARGS.batches)
    section("pipeline_with_odd_files")(pipeline)(with_odd, [configs[5]], ARGS.batches)
    decode_under_load(paths, 256)
    under_load(records, [
        ("hw_full", {"decoder": "nvimgcodec", "backend": "hw", "roi": False}),
        ("hw_full_normal_priority", {"decoder": "nvimgcodec", "backend": "hw", "roi": False,
                                     "high_priority": False}),
        ("default_full", {"decoder": "nvimgcodec", "backend": "default", "roi": False}),
        ("hw_roi", {"decoder": "nvimgcodec", "backend": "hw"}),
        ("default_roi", {"decoder": "nvimgcodec", "backend": "default"}),
        ("cpu_decoder", {"decoder": "cpu"})], ARGS.load_steps)
    sample = records[:384] + [(p, 7) for p in odd]
    correctness(sample, [("default_roi", {"backend": "default"}), ("hw_roi", {"backend": "hw"}),
                         ("hw_full", {"backend": "hw", "roi": False})])
    RESULTS["total_seconds"] = round(time.time() - start, 1)
    _write()
    emit(RESULTS)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="")
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--load_steps", type=int, default=80)
    ARGS = parser.parse_args()
    if ARGS.out:
        os.makedirs(ARGS.out, exist_ok=True)
    main()
