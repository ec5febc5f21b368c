"""GPU time of the gpu pipeline's compiled crop/resize step alone, per canvas side.

`python benchmarks/canvas_step_time.py` prints milliseconds per call (batch 256,
224 px out, bfloat16) for canvases of 512, 768 and 1024 px, each call waited for.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from preprocessing.gpu.canvas import canvas_step


def main(batch: int = 256, size: int = 224, calls: int = 30):
    step = canvas_step(size, "bfloat16")
    rng = np.random.default_rng(0)
    for side in (512, 768, 1024):
        canvas = jnp.zeros((batch, side, side, 3), jnp.uint8)
        sources = np.arange(batch, dtype=np.int32)
        h = rng.integers(64, side, batch)
        w = rng.integers(64, side, batch)
        boxes = np.stack([np.zeros(batch), np.zeros(batch), h, w], 1).astype(np.int32)
        flips = rng.random(batch) < 0.5
        valid = np.ones(batch, bool)
        for _ in range(3):
            step(canvas, sources, boxes, flips, valid)[0].block_until_ready()
        start = time.perf_counter()
        for _ in range(calls):
            step(canvas, sources, boxes, flips, valid)[0].block_until_ready()
        ms = (time.perf_counter() - start) / calls * 1000
        print(f"canvas_step side={side} batch={batch}: {ms:.2f} ms per call "
              f"({jax.devices()[0].device_kind})", flush=True)


if __name__ == "__main__":
    main()
