"""One device's slice of a batch, from its planned slots to images (GpuJpegStream's
device side).

The slice's canvas is filled by its lane's GPU decoder (decoders.py); what the GPU
refuses is decoded on the CPU into the same slot (planning.host_decode/host_window);
an image no decoder can read is replaced by the next good image of the slice, pixels
and label (training), or gets weight 0 (evaluation). The compiled crop/resize step
(canvas.py) then makes the slice's images. Canvases are square, from the few sides
of options.canvas_sides: fewer shapes, so fewer compiles and more canvases reused.
"""

from __future__ import annotations

import concurrent.futures
import warnings

import numpy as np

from preprocessing.gpu.planning import PlanSpec, host_decode, host_window, read_file


class SliceMaker:
    """Makes one device's slice: `make(filler, slots)` -> (images, labels, weights),
    or None in training when no image of the slice could be read.

    Args:
        records: the stream's (path, label) pairs (slots name them by index).
        step: the compiled crop/resize step (canvas.canvas_step).
        canvas_sides: the canvas buckets, ascending.
        train: stand-ins for unreadable images (True) or weight 0 (False).
        skipped: the stream's set of unreadable paths, added to here.
        warm_jpegs: a Future of the JPEGs that warm nvJPEG up, or None.

    `spec` (the stream's PlanSpec) is an attribute: the stream replaces it when a
    resumed state brings its own seed.
    """

    def __init__(self, records, step, canvas_sides, train: bool, skipped: set,
                 spec: PlanSpec, warm_jpegs: concurrent.futures.Future | None):
        self.records, self.step, self.canvas_sides, self.train = (
            records, step, tuple(canvas_sides), train)
        self.skipped, self.spec, self.warm_jpegs = skipped, spec, warm_jpegs
        # Their own threads: every thread decoding slices may be waiting on these.
        self._cpu_threads = concurrent.futures.ThreadPoolExecutor(
            4, thread_name_prefix="jpeg_cpu")

    def bucket(self, extent: int) -> int:
        """The smallest canvas side that holds `extent` pixels."""
        for side in self.canvas_sides:
            if extent <= side:
                return side
        raise AssertionError(f"content of {extent} px beyond the canvas cap")  # planned away

    def compile_all(self, devices, count: int, commit: bool) -> int:
        """Runs the step once on a zero canvas of `count` images of each shape and
        device (freed after); returns the number of shapes run. commit: the canvases
        are placed on their device (a sharded stream), else left uncommitted."""
        import jax.numpy as jnp

        for device in devices:
            for side in self.canvas_sides:
                canvas = jnp.zeros((count, side, side, 3), jnp.uint8,
                                   device=device if commit else None)
                boxes = np.tile(np.array([0, 0, side, side], np.int32), (count, 1))
                images, _ = self.step(canvas, np.arange(count, dtype=np.int32), boxes,
                                      np.zeros(count, bool), np.ones(count, bool))
                images.block_until_ready()
                del canvas, images
        return len(devices) * len(self.canvas_sides)

    def make(self, filler, slots):
        """Fills the slice's canvas, then runs the compiled crop/resize step on it."""
        if self.warm_jpegs is not None and not filler.warmed_up:
            self.warm(filler)
        side = self.bucket(max(max(s.content) for s in slots))
        canvas, failed = filler.fill((len(slots), side, side, 3), slots)
        if failed:  # what the GPU could not decode, the CPU decodes into the same slot
            self._decode_on_the_host(filler, canvas, failed, side)
        good = [s.index for s in slots if s.route != "bad"]
        if self.train and not good:
            filler.release(canvas, None)
            return None
        sources, labels, boxes, flips, valid = self._arrays(slots, good)
        weights = valid.astype(np.float32)
        images, done = self.step(canvas, sources, boxes, flips, valid)
        filler.release(canvas, done)
        return images, labels, weights

    def warm(self, filler) -> None:
        """Warms `filler`'s decoder up (from its lane's thread, before its first batch)."""
        try:
            jpegs = self.warm_jpegs.result()
        except Exception as e:  # noqa: BLE001 - the warm-up only saves time
            warnings.warn(f"nvJPEG's warm-up images could not be made ({e!r}); its buffers "
                          "will grow while training instead", RuntimeWarning, stacklevel=2)
            filler.warmed_up = True
            return
        filler.warm(list(jpegs.values()))

    def _decode_on_the_host(self, filler, canvas, failed, side: int) -> None:
        for slot, pixels in self._cpu_threads.map(self._host_pixels, failed):
            if pixels is None or max(pixels.shape[:2]) > side:
                slot.route = "bad"
                self.skipped.add(self.records[slot.record][0])
            else:
                slot.route, slot.pixels = "host", pixels
                slot.box = (0, 0, pixels.shape[0], pixels.shape[1])
        filler.fill_host(canvas, [s for s in failed if s.route == "host"])

    def _host_pixels(self, slot):
        pixels = host_window(host_decode(read_file(self.records[slot.record][0])),
                             slot.window, self.spec)
        return slot, pixels

    def _arrays(self, slots, good: list[int]):
        """The step's per-image arrays; an unreadable image's row is the next good
        image's (training) or label 0 and invalid (evaluation)."""
        sources = np.arange(len(slots), dtype=np.int32)
        labels = np.array([s.label for s in slots], np.int32)
        boxes = np.array([s.box for s in slots], np.int32)
        flips = np.array([s.flip for s in slots], bool)
        valid = np.array([s.route != "bad" for s in slots], bool)
        for i, slot in enumerate(slots):
            if slot.route == "bad" and self.train:
                # The next good image of this device stands in: its pixels and label.
                j = min(good, key=lambda g: (g - i) % len(slots))
                sources[i], labels[i], boxes[i], flips[i], valid[i] = (
                    j, labels[j], boxes[j], flips[j], True)
            elif slot.route == "bad":
                labels[i] = 0
        return sources, labels, boxes, flips, valid
