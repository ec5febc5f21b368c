"""A resumed run's `images_per_sec_wall` against a count of its own.

A digits run on TensorFlow stopped by SIGTERM in epoch 3 and rerun to its end reported
792.25 images/sec over the wall clock, where its images since each attempt's first
window start, over those attempts' seconds to their ends, gave 939.6. The figure
differed from such a count in two ways. It kept an attempt's clock per `fit`: the
resumed attempt's two fits (the rest of the interrupted epoch, then the others) each
restarted it after a warm-up, so the start of the second fit and its first steps were
in no one's seconds. And the interrupted attempt's sums stopped at its last epoch end,
leaving out the steps and seconds after it up to the SIGTERM's checkpoint, which the
rerun does not train again.

Here a real run (JAX, a model whose step naps: tests/nap_model.py) gets a real SIGTERM
in epoch 2, about 12 steps in, and is rerun to its end; the first attempt steps in 100
ms, the rerun in 20 (as on a faster machine), so that a figure leaving out part of
either attempt is far from the count (8.9% above it before the fix). The count: each
attempt's images from its first timed step (the warm-up's 2 steps after its start, by
hand) to where it ended (the step the rerun resumed from; the last step), over the
seconds from that step's end (the metrics sink's event of the step, a second clock:
tests/step_events.py) to the attempt's end in the billing ledger.
"""

import json
import signal
import time

import pytest
from conftest import run_cli
from processes import start, until
from step_events import step_times

from callbacks.records.metrics_file import read_metrics

BATCH, STEPS, EPOCHS = 8, 20, 3
WARMUP = 2  # the first window of a fit starts after 2 steps (callbacks/figures/window.py)


def flags(logdir):
    return ["--backend=jax", "--model=tests/nap_model.py:make_model", "--dataset=synthetic",
            "--image_size=8", f"--global_batch_size={BATCH}", f"--epochs={EPOCHS}",
            f"--steps_per_epoch={STEPS}", "--validation_steps=1", "--log_every_steps=1",
            "--seed=1", "--verbose=2", f"--logdir={logdir}"]


@pytest.mark.slow
def test_a_resumed_runs_wall_rate_is_its_images_over_its_attempts_seconds(tmp_path):
    logdir = tmp_path / "resumed"
    process = start(flags(logdir), env={"NAP_SECONDS": "0.1"})
    until(process, lambda: read_metrics(str(logdir)), "epoch 1 in metrics.jsonl")
    time.sleep(1.2)  # about 12 of epoch 2's 100 ms steps
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 75, stderr[-2000:]
    done = run_cli(*flags(logdir), env={"NAP_SECONDS": "0.02"})
    assert done.returncode == 0, done.stderr[-2000:]

    summary = json.loads((logdir / "summary.json").read_text())
    first, second = json.loads((logdir / "billing.json").read_text())["attempts"]
    resumed = second["resumed_from"]["step"]
    # Mid-epoch 2, with 4 steps or more left: the short fit's warm-up is its first 2.
    assert STEPS < resumed < 2 * STEPS - 2 * WARMUP, resumed
    starts = (WARMUP, resumed + WARMUP)  # each attempt's first timed step, 1-based
    ends = (resumed, EPOCHS * STEPS)
    clock = step_times(str(logdir))
    images = sum(end - begin for begin, end in zip(starts, ends)) * BATCH
    seconds = sum(attempt["last_seen"] - clock[begin]
                  for attempt, begin in zip((first, second), starts))
    assert summary["images_per_sec_wall"] == pytest.approx(images / seconds, rel=0.02), (
        summary["images_per_sec_wall"], images, seconds)
