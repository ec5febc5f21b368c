"""Why the GPU JPEG stream is slower while the GPU trains: its rate under four loads.

    python benchmarks/decode_contention.py --folder /tmp/jpegs/train --out OUT

For each stream variant (GpuJpegStream keyword arguments: lanes, nvImageCodec backend)
it counts the images/sec the training stream delivers, batch 256 at 224 px bfloat16,
while this process also runs:
    idle     nothing
    shallow  a jitted chain of bf16 matmuls about as long as a ResNet-50 step (~30 ms),
             each call waited for before the next (one step queued on the GPU)
    deep     the same with up to 8 calls in flight (what JAX's asynchronous dispatch
             lets a training loop queue)
    python   a thread of pure Python (the GIL busy, the GPU idle)
and the load's own rate (calls/sec), so both sides of the contention show. A decode
that waits for the whole device (a cudaFree, a synchronizing copy) slows under `deep`
far more than under `shallow`; one starved of the GIL slows under `python`; engines
that are simply saturated give the same rate under every load. Writes
OUT/decode_contention.json. A benchmark, not part of the app.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

VARIANTS = {
    "hw_lanes1": {"decoders": 1, "backend": "hw"},
    "hw_lanes3": {"decoders": 3, "backend": "hw"},
    "hw_lanes6": {"decoders": 6, "backend": "hw"},
    "hw+cuda_lanes3": {"decoders": 3, "backend": "hw+cuda"},
    "default_lanes3": {"decoders": 3, "backend": "default"},
    "c_hw_lanes1": {"decoders": 1, "backend": "hw", "api": "c"},
    "c_hw_lanes3": {"decoders": 3, "backend": "hw", "api": "c"},
    "c_hw_lanes6": {"decoders": 6, "backend": "hw", "api": "c"},
    "nvjpeg_lanes1": {"decoders": 1, "backend": "hw", "api": "nvjpeg"},
    "nvjpeg_lanes3": {"decoders": 3, "backend": "hw", "api": "nvjpeg"},
    "nvjpeg_lanes3_low": {"decoders": 3, "backend": "hw", "api": "nvjpeg",
                          "high_priority": False},
    "nvjpeg_lanes6": {"decoders": 6, "backend": "hw", "api": "nvjpeg"},
    # nvjpegCreateEx flags (nvjpeg.h): 0 = the engines' own chroma upsampling (not
    # libjpeg's interpolation), 1 = HW_DECODE_NO_PIPELINE, 2 = ENABLE_MEMORY_POOLS
    "nvjpeg_lanes3_flags0": {"decoders": 3, "backend": "hw", "api": "nvjpeg", "nvjpeg_flags": 0},
    "nvjpeg_lanes3_nopipe": {"decoders": 3, "backend": "hw", "api": "nvjpeg",
                             "nvjpeg_flags": 32 | 1},
    "nvjpeg_lanes3_pools": {"decoders": 3, "backend": "hw", "api": "nvjpeg",
                            "nvjpeg_flags": 32 | 2},
}
LOADS = ("idle", "shallow", "deep", "python")


class Load:
    """A background load of one kind; `rate()` is its calls per second so far."""

    def __init__(self, kind, step, x):
        self.kind, self.step, self.x = kind, step, x
        self.calls, self.stopping = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.perf_counter()
        if kind != "idle":
            self.thread.start()

    def _run(self):
        in_flight = collections.deque()
        while not self.stopping.is_set():
            if self.kind == "python":
                total = 0
                for i in range(20000):
                    total += i * i
            else:
                in_flight.append(self.step(self.x))
                limit = 1 if self.kind == "shallow" else 8
                while len(in_flight) >= limit:
                    in_flight.popleft().block_until_ready()
            self.calls += 1
        for y in in_flight:
            y.block_until_ready()

    def stop(self):
        seconds = time.perf_counter() - self.started
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()
        return self.calls / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", required=True)
    parser.add_argument("--out", default="")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--trace_dir", default="",
                        help="trace the first variant under the shallow load here")
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    from preprocessing.gpu_pipeline import GpuJpegStream

    files = sorted(glob.glob(os.path.join(args.folder, "*", "*")))
    records = [(f, i % 100) for i, f in enumerate(files)]

    @jax.jit
    def step(x):
        def body(_, y):
            return jnp.tanh(y @ x).astype(jnp.bfloat16)
        return jax.lax.fori_loop(0, 150, body, x)

    x = jax.random.normal(jax.random.key(0), (4096, 4096), jnp.bfloat16) * 0.02
    step(x).block_until_ready()
    start = time.perf_counter()
    for _ in range(5):
        step(x).block_until_ready()
    results = {"files": len(files), "load_step_ms": (time.perf_counter() - start) / 5 * 1e3,
               "device": str(jax.devices()[0].device_kind), "variants": {}}
    alone = {}
    for kind in ("shallow", "deep", "python"):
        load = Load(kind, step, x)
        time.sleep(args.seconds)
        alone[kind] = round(load.stop(), 2)
    results["load_alone_calls_per_sec"] = alone
    print(json.dumps(results), flush=True)

    for number, name in enumerate(args.variants.split(",")):
        kwargs = dict(VARIANTS[name])
        row = {"kwargs": dict(kwargs)}
        if "nvjpeg_flags" in kwargs:  # every HardwareDecoder this variant makes
            from preprocessing import nvjpeg_c
            nvjpeg_c.HardwareDecoder.__init__.__defaults__ = (kwargs.pop("nvjpeg_flags"),)
        try:
            stream = GpuJpegStream(records, 256, 224, seed=0, train=True, dtype="bfloat16",
                                   **kwargs)
            for _ in range(3 * stream.decoders + 6):  # canvases, compiles, plans warm
                next(stream)[0].block_until_ready()
            for kind in LOADS:
                tracing = args.trace_dir and number == 0 and kind == "shallow"
                if tracing:  # host threads and CUDA calls, no Python tracer
                    options = jax.profiler.ProfileOptions()
                    options.host_tracer_level = 2
                    jax.profiler.start_trace(args.trace_dir, profiler_options=options)
                load = Load(kind, step, x)
                images, started = 0, time.perf_counter()
                while time.perf_counter() - started < args.seconds:
                    batch = next(stream)
                    images += batch[0].shape[0]
                batch[0].block_until_ready()
                seconds = time.perf_counter() - started
                if tracing:
                    jax.profiler.stop_trace()
                row[kind] = {"images_per_sec": round(images / seconds, 1),
                             "load_calls_per_sec": round(load.stop(), 2)}
            row["skipped"] = stream.skipped_images()
            stream.close()
        except Exception as e:  # noqa: BLE001 - keep measuring the other variants
            row["error"] = f"{type(e).__name__}: {e}"
        results["variants"][name] = row
        print(name, json.dumps(row), flush=True)
        if args.out:
            with open(os.path.join(args.out, "decode_contention.json"), "w") as f:
                json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
