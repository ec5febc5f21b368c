"""Profiler: a trace of chosen training steps, for TensorBoard's profile plugin.

`tf.profiler` on TensorFlow and `jax.profiler` on JAX both write
<logdir>/plugins/profile/<session>/<host>.xplane.pb, which TensorBoard lists under
"Profile". Each step is wrapped in a step marker ("train", step_num) so the overview
page can break step time down. Profiling is diagnostic: errors are logged and
training goes on, and the trace is always stopped at the end.

This callback is not `async_safe` (its step markers open on the main thread and
must close there), so a profiled JAX run dispatches synchronously: profile a run
to see where time goes, not to time it.

When the trace stops, the traced steps are split by kind of work
(callbacks/profiling/breakdown.py): `breakdown` holds the split, with `host_clock_ms`,
the same steps timed by this callback's own clock around its step markers (the
figure the split is checked against), and a TensorBoard card gets it (scalars
step_breakdown/<kind> in ms per step, and a table under the Text tab).

The run reads the session it wrote, and no other: the profilers name a session by
the clock (plugins/profile/2026_12_06_08_44_03/), so a folder planted beside it, or
one an earlier run's clock put later, sorted after it and was read instead. The
session that appeared while this callback traced is `session`; `state()` keeps it
with the traced steps in each checkpoint, and a resumed attempt (`carried`) traces
nothing again: it splits that session at its end (a resumed run traced its own
first step, compile included, in place of the steps asked for).
"""

from __future__ import annotations

import os
import sys
import time

import keras

from callbacks.profiling import breakdown as step_breakdown
from callbacks.figures.steps import Position
from callbacks.records.untrusted import RecordError, field

PROFILE_FOLDER = ("plugins", "profile")  # under the logdir: where both profilers write


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: profiler: {message}\n")


class Profiler(keras.callbacks.Callback):
    """Traces training steps `start_step`..`stop_step` (1-based, inclusive, counted
    over the whole run).

    Args:
        logdir: the run folder; the trace goes to logdir/plugins/profile/.
        start_step: first step to trace.
        stop_step: last step to trace.
        backend: "tensorflow" or "jax".
        position: the run's Position (callbacks/figures/steps.py), to number steps
            over the whole run; None: a fit of its own.
        breakdown: whether to split the traced steps by kind of work at the end.
        carried: `state()` of the checkpoint a resumed attempt starts from (read back,
            so checked: a record that does not hold a trace is ignored), or None.
    """

    def __init__(self, logdir: str, start_step: int, stop_step: int, backend: str,
                 position: Position | None = None, breakdown: bool = True,
                 carried: dict | None = None):
        super().__init__()
        if not 1 <= start_step <= stop_step:
            raise ValueError(f"need 1 <= start_step <= stop_step, received "
                             f"{start_step}, {stop_step}")
        if backend not in ("tensorflow", "jax"):
            raise ValueError(f"backend must be tensorflow or jax, received {backend!r}")
        self.logdir = logdir
        self.start_step, self.stop_step = start_step, stop_step
        self.backend = backend
        self.position = position or Position()
        self.traced_steps = []
        self._tracing = False
        self._done = False
        self._marker = None
        self._epoch = 0
        self._steps_per_call = 1
        self.want_breakdown = breakdown
        self.breakdown = None  # the split, once the trace has stopped (see module docstring)
        self._marker_began = 0.0
        self._host_seconds = []  # this callback's clock around each step marker
        self.session = None  # the trace session this run wrote (a folder name), once stopped
        self._sessions_before = {}  # the sessions there as the trace began: name -> written
        self._traced_per_call = 1  # the steps in each traced marker
        earlier = _carried(carried)
        if earlier is not None:  # an earlier attempt traced: keep its trace, trace no more
            self.session = earlier["session"]
            self.traced_steps = earlier["traced_steps"]
            self._host_seconds = earlier["host_seconds"]
            self._traced_per_call = earlier["steps_per_call"]
            self._done = True

    @property
    def profile_folder(self) -> str:
        return os.path.join(self.logdir, *PROFILE_FOLDER)

    def state(self) -> dict:
        """What a checkpoint keeps of the trace once it has stopped: the session it
        wrote, the traced steps, this callback's clock around them ({} before)."""
        if not (self._done and self.session and self.traced_steps):
            return {}
        return {"session": self.session, "traced_steps": list(self.traced_steps),
                "host_seconds": list(self._host_seconds),
                "steps_per_call": self._traced_per_call}

    # The two backends' APIs, behind one interface.
    def _start(self):
        self._sessions_before = _sessions(self.profile_folder)
        if self.backend == "jax":
            import jax
            jax.profiler.start_trace(self.logdir)
        else:
            import tensorflow as tf
            tf.profiler.experimental.start(self.logdir)

    def _stop(self):
        if self.backend == "jax":
            import jax
            jax.profiler.stop_trace()
        else:
            import tensorflow as tf
            tf.profiler.experimental.stop()

    def _step_marker(self, step: int):
        if self.backend == "jax":
            import jax
            return jax.profiler.StepTraceAnnotation("train", step_num=step)
        import tensorflow as tf
        return tf.profiler.experimental.Trace("train", step_num=step, _r=1)

    def _global_step(self, batch: int) -> int:
        return self.position.global_step(self._epoch, batch, self.params)

    def on_train_begin(self, logs=None):
        # Read once: on JAX, `self.model` syncs the training state.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self._done:
            return
        first = self._global_step(batch)
        last = first + self._steps_per_call - 1
        if not self._tracing and first > self.stop_step:
            # Resumed past the steps asked for, with no trace of them carried (they ran
            # in an attempt that kept none): a trace of this step is not what was asked.
            self._done = True
            return
        try:
            if not self._tracing and last >= self.start_step:
                self._start()
                self._tracing = True
                self._traced_per_call = self._steps_per_call
            if self._tracing:
                self._marker = self._step_marker(first)
                self._marker.__enter__()
                self._marker_began = time.perf_counter()
                self.traced_steps.append(first)
        except Exception as error:  # never fatal: see module docstring
            _warn(f"could not start tracing at step {first}: {error}")
            self._done = True

    def on_train_batch_end(self, batch, logs=None):
        self._close_marker()
        if self._tracing and self._global_step(batch) >= self.stop_step:
            self._finish()

    def _finish(self):
        self._tracing, self._done = False, True
        try:
            self._stop()
        except Exception as error:
            _warn(f"could not stop tracing: {error}")
            return
        self.session = _written_session(self.profile_folder, self._sessions_before)

    def _close_marker(self):
        if self._marker is not None:
            self._host_seconds.append(time.perf_counter() - self._marker_began)
            self._marker.__exit__(None, None, None)
            self._marker = None

    def on_train_end(self, logs=None):
        self._close_marker()
        if self._tracing:
            self._finish()
        if self.want_breakdown and self.traced_steps and self.breakdown is None:
            self._split()

    def _device_kind(self) -> str | None:
        """The traced devices' kind as the framework names it ("NVIDIA H100 80GB HBM3",
        "cpu"), None where it cannot say."""
        try:
            if self.backend == "jax":
                import jax
                return jax.devices()[0].device_kind
            import tensorflow as tf
            gpus = tf.config.list_physical_devices("GPU")
            return (tf.config.experimental.get_device_details(gpus[0]).get("device_name")
                    if gpus else "cpu")
        except Exception:  # noqa: BLE001 - diagnostic: a kind unknown is a share unshown
            return None

    def _split(self):
        """The traced steps split by kind of work, a TensorBoard card of it."""
        layers = {layer.name: type(layer).__name__
                  for layer in self.model._flatten_layers(include_self=True)}
        if self.session is None:
            _warn(f"no step breakdown: no trace session of this run's under "
                  f"{self.profile_folder}")
            return
        started = time.perf_counter()
        try:
            result = step_breakdown.breakdown(
                os.path.join(self.profile_folder, self.session), layers,
                steps_per_mark=self._traced_per_call, device_kind=self._device_kind())
        except Exception as error:  # diagnostic: a trace the tools cannot read
            _warn(f"no step breakdown: {str(error).splitlines()[0] if str(error) else error!r}")
            return
        steps = len(self._host_seconds) * self._traced_per_call
        result["host_clock_ms"] = round(sum(self._host_seconds) / steps * 1e3, 4)
        result["seconds_to_read"] = round(time.perf_counter() - started, 2)
        self.breakdown = result
        try:
            _card(os.path.join(self.logdir, "train"), result)
        except OSError as error:
            _warn(f"could not write the step breakdown's card: {error}")


def _sessions(folder: str) -> dict[str, float]:
    """{session folder name: when its newest trace file was written} under `folder`."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        try:
            times = [entry.stat().st_mtime for entry in os.scandir(os.path.join(folder, name))
                     if entry.name.endswith(".xplane.pb")]
        except OSError:  # not a folder
            continue
        found[name] = max(times, default=0.0)
    return found


def _written_session(folder: str, before: dict[str, float]) -> str | None:
    """The session a trace wrote, `before` being `_sessions(folder)` as it began: the
    folder that appeared meanwhile with a trace file in it (of several, the one
    written last), or, where the profiler's name was taken already, the folder whose
    trace files changed. None if neither (never a folder that was there unchanged,
    however its name or its files' times sort)."""
    now = _sessions(folder)
    new = [name for name in now if now[name] and now[name] != before.get(name)]
    return max(new, key=lambda name: now[name]) if new else None


def _carried(record) -> dict | None:
    """A checkpoint's record of the trace (`Profiler.state()`), checked; None where it
    holds none or cannot be trusted (then nothing earlier is kept)."""
    if not record:
        return None
    try:
        session = field(record, "session", "text")
        steps = field(record, "traced_steps", "list")
        seconds = field(record, "host_seconds", "list")
        per_call = field(record, "steps_per_call", "integer", low=1, high=1 << 20)
        if session in ("", ".", "..") or os.path.basename(session) != session:
            raise RecordError(f"session {session!r} is not a folder name")
        if not steps or not all(isinstance(step, int) and not isinstance(step, bool)
                                and step >= 1 for step in steps):
            raise RecordError("traced_steps holds no list of steps")
        if not seconds or not all(isinstance(value, (int, float))
                                  and not isinstance(value, bool) and 0 <= value < 1e6
                                  for value in seconds):
            raise RecordError("host_seconds holds no list of durations")
    except RecordError as error:
        _warn(f"the checkpoint's record of the trace is not kept ({error})")
        return None
    return {"session": session, "traced_steps": steps, "host_seconds": [float(v) for v in seconds],
            "steps_per_call": per_call}


def _card(folder: str, result: dict) -> None:
    """Scalars step_breakdown/<kind> (ms per step) and a table under the Text tab."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    from callbacks.records import events

    step = result["traced"][-1]
    _, memory = step_breakdown.whole_device(result)
    writer = events.EventWriter(folder, suffix=".breakdown")
    try:
        rows = ["| kind of work | ms per step | share | achieved |", "|---|---:|---:|---|"]
        for name, part in result["parts"].items():
            writer.scalar(f"step_breakdown/{name}", part["ms"], step, description=(
                f"A profiled step's time in {name} (callbacks/profiling/breakdown.py), "
                f"at the last traced step. *Unit: ms per step.*"))
            # no rate: say why (TensorFlow's own ops have no shapes in the trace; idle
            # is no work)
            rate = (step_breakdown.rate_words(part, None, memory).removeprefix(" at ")
                    or part.get("no_rate") or ("nothing ran" if name == "idle" else ""))
            rows.append(f"| {name} | {part['ms']:.3f} | {part['share']:.1%} | {rate} |")
        writer.scalar("step_breakdown/step", result["step_ms"], step, description=(
            "A profiled step's length, its parts summed (the trace's step markers). "
            "*Unit: ms per step.*"))
        text = (f"**{step_breakdown.line(result)}** (steps {result['traced'][0]}-"
                f"{result['traced'][1]}; this step by the host's clock: "
                f"{result['host_clock_ms']:.1f} ms; traced steps run slower than timed "
                "ones: the run's closing breakdown line sets their work against the timed "
                "steps' time)\n\n" + "\n".join(rows))
        writer.summary(text_pb("step_breakdown", text), step)
    finally:
        writer.close()
