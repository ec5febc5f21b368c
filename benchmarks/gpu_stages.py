"""Where the GPU JPEG pipeline's time goes while the app trains: the app, timed inside.

    STAGES_OUT=stages.json [STREAM_KW='{"backend": "default"}'] \
        python benchmarks/gpu_stages.py --dataset=folder:DIR --input_pipeline=gpu ...

runs app/main.py with those flags, unchanged except that the pipeline's stages are
timed per thread (wall seconds and calls), and, for a variant, the training stream is
built with STREAM_KW's keyword arguments (GpuJpegStream's: backend, prefetch,
workers, canvas_sides, decoder_options, ...). On exit it writes STAGES_OUT:

    planning thread   plan_wait (waiting for the worker processes' plans), finish
                      (labels and nvImageCodec code streams), plans_put (waiting for
                      room: the decoder is behind)
    decoding thread   plans_get (waiting for a plan: planning is behind), materialize
                      (the whole batch) = fill [acquire (a canvas; waits for the step
                      that read it last) + decode + sync (the decode stream)] + step
                      (dispatching the compiled crop/resize) + ..., batches_put
                      (waiting for room: the pipeline is ahead of training)
    training thread   take (fit waiting for a batch)

plus canvases allocated and images decoded on the CPU instead of the GPU. Two probes
of the GIL: SWITCH_INTERVAL=seconds sets sys.setswitchinterval (Python's default
0.005), BUSY_THREAD=1 runs a thread of pure Python beside training. And one probe of
the GPU: SHADOW_FOLDER=DIR runs a GpuJpegStream over DIR/train (batch 256, 224 px,
bfloat16) in a thread beside training from its 11th batch, its batches dropped: with
--dataset=synthetic, how much decoding on the GPU alone slows the training step
(SHADOW_NO_STEP=1: without the compiled crop/resize step, the decoding alone).
PYTHON_TRACE=1 makes
the app's profile (--profile_steps) trace Python calls and host threads as well;
TRACE_BATCHES=FIRST,LAST[;FIRST,LAST...] TRACE_DIR=DIR traces the same between two batches
without the profiler callback (which makes Keras run callbacks synchronously), each
range in DIR/batches_FIRST_LAST (TRACE_PYTHON=0: GPU and CUDA calls only, no Python).
NVJPEG_DETAIL=1 records every call of nvJPEG's batch decode (`nvjpeg_calls`: start s,
seconds in the call, thread, images, bytes, device memory it took: cuMemGetInfo's free
bytes before minus after); NVJPEG_PADDING=BYTES gives its decoders that padding.
GC_LOG=1 adds Python's garbage collections to the timeline ("gc N": generation N, the
pause); GC_FREEZE=1 collects and freezes what exists when fit asks for its first batch
(gc.freeze: later collections do not scan it). TIMELINE=1 adds a timeline of the stages' calls
(take, getitem: fit's wait for each batch; materialize, fill, step, acquire) and of
every XLA compile, in seconds since start. A benchmark, not part of the app: it patches the pipeline's classes in this process only.
"""

import collections
import functools
import json
import os
import re
import runpy
import sys
import threading
import time

_TIMES = collections.defaultdict(float)
_CALLS = collections.Counter()
_LOCK = threading.Lock()
_T0 = time.perf_counter()
# TIMELINE=1: every call of these stages as (start s, seconds, thread, stage), and each
# XLA compile as (end s, seconds, thread, "compile NAME").
_TIMELINE_STAGES = {"take", "materialize", "fill", "step", "getitem", "acquire", "sync"}
_TIMELINE = [] if os.environ.get("TIMELINE") else None
_NVJPEG_CALLS = []


def _timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            thread = threading.current_thread().name
            key = f"{thread}/{name}"
            with _LOCK:
                _TIMES[key] += end - start
                _CALLS[key] += 1
                if _TIMELINE is not None and name in _TIMELINE_STAGES:
                    _TIMELINE.append((round(start - _T0, 4), round(end - start, 4), thread,
                                      name))
    return wrapper


def _log_compiles():
    """Adds each XLA compile (JAX's jax_log_compiles messages) to the timeline."""
    import logging

    import jax

    class Compiles(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            match = re.search(r"Finished XLA compilation of (.*) in ([0-9.e-]+) sec", message)
            if match:
                with _LOCK:
                    _TIMELINE.append((round(time.perf_counter() - _T0, 4),
                                      round(float(match.group(2)), 4),
                                      threading.current_thread().name,
                                      f"compile {match.group(1)}"))

    jax.config.update("jax_log_compiles", True)
    logging.getLogger("jax").addHandler(Compiles())


def _patch(extra: dict, streams: list):
    from preprocessing import background, gpu_decode, gpu_pipeline

    canvases = gpu_decode.NvImageCodecCanvases
    canvases._acquire = _timed("acquire", canvases._acquire)
    canvases.fill = _timed("fill", canvases.fill)
    gpu_decode.CudaDriver.synchronize = _timed("sync", gpu_decode.CudaDriver.synchronize)
    _patch_c_api()
    stream_class = gpu_pipeline.GpuJpegStream
    stream_class._materialize = _timed("materialize", stream_class._materialize)
    stream_class._finish = _timed("finish", stream_class._finish)
    stream_class._cpu_fallback = _timed("cpu_fallback", stream_class._cpu_fallback)
    running = background.Running

    def get(self, where):  # the plans queue (the only one _get reads)
        return _timed("plans_get", original_get)(self, where)

    def put(self, where, item):
        name = "plans_put" if where is self.plans else "batches_put"
        return _timed(name, original_put)(self, where, item)

    original_get, original_put = running._get, running._put
    running._get, running._put = get, put
    running.take = _timed("take", running.take)
    # Importing the feed imports Keras: with the backend these runs use (--backend=jax),
    # or the app would find Keras set up for TensorFlow.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from preprocessing import feed
    feed.Feed.__getitem__ = _timed("getitem", feed.Feed.__getitem__)
    original_init = stream_class.__init__

    def init(self, records, *args, **kwargs):
        if kwargs.get("train", args[3] if len(args) > 3 else False):
            kwargs.update(extra)
        original_init(self, records, *args, **kwargs)
        self._step = _timed("step", self._step)
        streams.append(self)

    stream_class.__init__ = init
    # The plans' futures: time the decoding side waits on them is plan_wait.
    import concurrent.futures
    future = concurrent.futures.Future
    future.result = _timed("future_result", future.result)


def _patch_c_api():
    """Times the C API's batch decode and its memory pools (called from nvImageCodec's
    threads: named by them), and counts the frees per CUDA stream (0: the legacy default
    stream, whose work waits for every blocking stream of the device)."""
    from preprocessing import memory_pool, nvimgcodec_c

    decoder, pool = nvimgcodec_c.Decoder, memory_pool.Pool
    decoder.decode = _timed("c_decode", decoder.decode)
    pool.malloc = _timed("pool_malloc", pool.malloc)
    original_free = pool.free

    def free(self, pointer, stream=None):
        with _LOCK:
            _CALLS[f"pool_free_stream/{'0' if not stream else 'own'}"] += 1
        return original_free(self, pointer, stream)

    pool.free = _timed("pool_free", free)


def _patch_nvjpeg(detail: bool, padding: int):
    """NVJPEG_DETAIL: each batch decode's call time, images, bytes and the device memory
    nvJPEG took meanwhile; NVJPEG_PADDING: the decoders' padding."""
    from preprocessing import nvjpeg_c
    from preprocessing.cuda_driver import CudaDriver

    decoder = nvjpeg_c.HardwareDecoder
    if padding:
        original_init = decoder.__init__

        def init(self, *args, **kwargs):
            kwargs.setdefault("padding", padding)
            original_init(self, *args, **kwargs)

        decoder.__init__ = init
    if not detail:
        return
    original_decode = decoder.decode

    def decode(self, datas, *args, **kwargs):
        cuda = CudaDriver.get()
        before, start = cuda.free_memory(), time.perf_counter()
        try:
            return original_decode(self, datas, *args, **kwargs)
        finally:
            end = time.perf_counter()
            taken = before - cuda.free_memory()
            with _LOCK:
                _NVJPEG_CALLS.append((round(start - _T0, 4), round(end - start, 4),
                                      threading.current_thread().name, len(datas),
                                      sum(len(d) for d in datas), taken))

    decoder.decode = decode


def _log_gc():
    import gc

    started = {}

    def callback(phase, info):
        thread = threading.current_thread().name
        if phase == "start":
            started[thread] = time.perf_counter()
        elif thread in started:
            start = started.pop(thread)
            with _LOCK:
                _TIMELINE.append((round(start - _T0, 4), round(time.perf_counter() - start, 4),
                                  thread, f"gc {info['generation']}"))

    gc.callbacks.append(callback)


def _freeze_gc_on_first_batch():
    import gc

    from preprocessing import feed

    original = feed.Feed.__getitem__
    frozen = []

    def getitem(self, index):
        if not frozen:
            gc.collect()
            gc.freeze()
            frozen.append(gc.get_freeze_count())
        return original(self, index)

    feed.Feed.__getitem__ = getitem


def _shadow_after_compile(folder):
    """Starts the shadow stream when fit asks for its 11th batch (JAX set up and the
    training step compiled by then)."""
    from preprocessing import feed

    original = feed.Feed.__getitem__
    started = []

    def shadow():
        import glob
        from preprocessing.gpu_pipeline import GpuJpegStream

        files = sorted(glob.glob(os.path.join(folder, "train", "*", "*")))
        stream = GpuJpegStream([(f, 0) for f in files], 256, 224, 0, train=True,
                               dtype="bfloat16")
        if os.environ.get("SHADOW_NO_STEP"):  # decode only: no crop/resize step on XLA
            stream._step = lambda canvas, *args: (canvas, canvas)
        try:
            while True:
                images = next(stream)[0]
                images.block_until_ready()
                with _LOCK:
                    _CALLS["shadow/batches"] += 1
        except RuntimeError:  # the interpreter is exiting: its pools are shut down
            return

    calls = []

    def getitem(self, index):
        # After the compile (10 batches in): started with the first batch, it made the
        # model's compile take over a minute on the H200 (2026-12-01 evening).
        calls.append(index)
        if not started and len(calls) > 10:
            started.append(threading.Thread(target=shadow, daemon=True, name="shadow"))
            started[0].start()
        return original(self, index)

    feed.Feed.__getitem__ = getitem


def _trace_options():
    """Profiler options that trace Python calls and host threads too."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level, options.host_tracer_level = 1, 2
    return options


def _trace_batches(ranges, logdir, python=True):
    """Traces (Python too, unless `python` is False) from the first to the last batch fit
    takes of each (first, last) range, into logdir/batches_FIRST_LAST, without the app's
    profiler callback, which is not async_safe and so makes Keras run every batch's
    callbacks synchronously: this shows the run as it runs unprofiled."""
    from preprocessing import feed

    original = feed.Feed.__getitem__
    starts = {first: f"{logdir}/batches_{first}_{last}" for first, last in ranges}
    stops = {last for _, last in ranges}

    def getitem(self, index):
        import jax

        if self._count is None and self.served + 1 in starts:
            options = _trace_options() if python else jax.profiler.ProfileOptions()
            jax.profiler.start_trace(starts[self.served + 1], profiler_options=options)
        elif self._count is None and self.served + 1 in stops:
            jax.profiler.stop_trace()
        return original(self, index)

    feed.Feed.__getitem__ = getitem


def main():
    out = os.environ.get("STAGES_OUT", "stages.json")
    extra = json.loads(os.environ.get("STREAM_KW", "{}"))
    streams = []
    _patch(extra, streams)
    if _TIMELINE is not None:
        _log_compiles()
        if os.environ.get("GC_LOG"):
            _log_gc()
    if os.environ.get("GC_FREEZE"):
        _freeze_gc_on_first_batch()
    if os.environ.get("SWITCH_INTERVAL"):
        sys.setswitchinterval(float(os.environ["SWITCH_INTERVAL"]))
    if os.environ.get("SHADOW_FOLDER"):
        _shadow_after_compile(os.environ["SHADOW_FOLDER"])
    if os.environ.get("PYTHON_TRACE"):  # the profile (--profile_steps) traces Python too
        import jax

        start_trace = jax.profiler.start_trace

        def traced(logdir, *args, **kwargs):
            return start_trace(logdir, *args, profiler_options=_trace_options(), **kwargs)

        jax.profiler.start_trace = traced
    if os.environ.get("TRACE_BATCHES"):
        ranges = [tuple(map(int, r.split(","))) for r in os.environ["TRACE_BATCHES"].split(";")]
        _trace_batches(ranges, os.environ["TRACE_DIR"], os.environ.get("TRACE_PYTHON") != "0")
    if os.environ.get("NVJPEG_DETAIL") or os.environ.get("NVJPEG_PADDING"):
        _patch_nvjpeg(bool(os.environ.get("NVJPEG_DETAIL")),
                      int(os.environ.get("NVJPEG_PADDING", "0")))
    if os.environ.get("BUSY_THREAD"):
        def spin():
            while True:
                sum(range(1000))
        threading.Thread(target=spin, daemon=True, name="busy").start()
    started = time.perf_counter()
    code = 0
    sys.argv = ["app/main.py", *sys.argv[1:]]
    try:
        runpy.run_path("app/main.py", run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        train = [s for s in streams if s.train]
        fillers = [f for s in train for f in s._fillers]
        result = {
            "stream_kwargs": extra, "exit": code,
            "switch_interval": sys.getswitchinterval(),
            "busy_thread": bool(os.environ.get("BUSY_THREAD")),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "seconds": {k: round(v, 3) for k, v in sorted(_TIMES.items())},
            "calls": dict(sorted(_CALLS.items())),
            "timeline": sorted(_TIMELINE or []),
            "nvjpeg_calls": sorted(_NVJPEG_CALLS),
            "canvas_allocations": sum(getattr(f, "allocations", 0) for f in fillers),
            "d2d_copies": sum(getattr(f, "copies", 0) for f in fillers),
            "train_stream": [{"decoder": s.decoder, "workers": s.workers,
                              "prefetch": s.prefetch, "canvas_sides": s.canvas_sides,
                              "skipped": s.skipped_images()} for s in train],
        }
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    sys.exit(code)


if __name__ == "__main__":
    main()
