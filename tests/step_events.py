"""A second clock for a run's steps: the wall time of the TensorBoard event the metrics
sink (callbacks/metrics_logger.py) writes for each training step (--log_every_steps=1),
read back from the run folder's train/ events."""

import os

from callbacks.records import events


def step_times(logdir: str) -> dict[int, float]:
    """{global step: wall time of its batch event} of a run folder's training steps."""
    return {e.step: e.wall_time
            for path in events.event_files(os.path.join(logdir, "train"))
            for e in events.read_events(path)
            if any("/batch_" in v.tag for v in e.summary.value)}
