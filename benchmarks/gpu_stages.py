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
bfloat16) in a thread beside training, its batches dropped: with --dataset=synthetic,
how much decoding on the GPU alone slows the training step (SHADOW_NO_STEP=1: without
the compiled crop/resize step, nvImageCodec's decoding alone). PYTHON_TRACE=1 makes
the app's profile (--profile_steps) trace Python calls and host threads as well;
TRACE_BATCHES=FIRST,LAST TRACE_DIR=DIR traces the same between two batches without the
profiler callback (which makes Keras run callbacks synchronously). TIMELINE=1 adds a timeline of the stages' calls
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
_TIMELINE_STAGES = {"take", "materialize", "fill", "step", "getitem", "acquire"}
_TIMELINE = [] if os.environ.get("TIMELINE") else None


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


def _shadow_on_first_batch(folder):
    """Starts the shadow stream when fit asks for its first batch (JAX set up by then)."""
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

    def getitem(self, index):
        if not started:
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


def _trace_batches(first, last, logdir):
    """Traces (Python too) from the `first` to the `last` batch fit takes, without the
    app's profiler callback, which is not async_safe and so makes Keras run every
    batch's callbacks synchronously: this shows the run as it runs unprofiled."""
    from preprocessing import feed

    original = feed.Feed.__getitem__

    def getitem(self, index):
        import jax

        if self._count is None and self.served + 1 in (first, last):
            if self.served + 1 == first:
                jax.profiler.start_trace(logdir, profiler_options=_trace_options())
            else:
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
    if os.environ.get("SWITCH_INTERVAL"):
        sys.setswitchinterval(float(os.environ["SWITCH_INTERVAL"]))
    if os.environ.get("SHADOW_FOLDER"):
        _shadow_on_first_batch(os.environ["SHADOW_FOLDER"])
    if os.environ.get("PYTHON_TRACE"):  # the profile (--profile_steps) traces Python too
        import jax

        start_trace = jax.profiler.start_trace

        def traced(logdir, *args, **kwargs):
            return start_trace(logdir, *args, profiler_options=_trace_options(), **kwargs)

        jax.profiler.start_trace = traced
    if os.environ.get("TRACE_BATCHES"):
        _trace_batches(*map(int, os.environ["TRACE_BATCHES"].split(",")), os.environ["TRACE_DIR"])
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
