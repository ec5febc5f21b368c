"""The progress bar and a point's progress line (callbacks/progress.py), driven by hand:
a clock and a stream of our own, Keras's hooks called in the orders a run meets (a
resumed epoch, JAX's out-of-order worker threads, a stop asked for between hooks).
What a real run prints on a terminal and a pipe is tests/test_console.py's."""

import re


def test_the_bar_names_the_epoch_of_the_run_and_what_is_left(monkeypatch):
    """A run of 5 epochs of 10 steps, resumed in epoch 3 with 4 steps left (a short
    fit whose own epochs are 3): the bar and the epoch line say epoch 3/5, with the
    time left in the epoch and in the run at the pace so far."""
    import io

    from callbacks import progress

    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    stream = io.StringIO()
    bar = progress.Progress(stream=stream, total_epochs=5, steps_per_epoch=10)
    bar.set_params({"verbose": 1, "epochs": 3, "steps": 4})
    bar.verbose, bar.target, bar.epochs = 1, 4, 3
    bar.on_epoch_begin(2)
    clock[0] += 2.0
    bar.on_train_batch_end(0, {"loss": 1.0, "running_images_per_sec": 64.0})
    # 2 s a step: 6 s left in this fit's epoch, and 2 epochs of 10 steps (40 s) after.
    assert stream.getvalue().endswith("\repoch 3/5 step 1/4 [=====...............] 2 s, "
                                      "ETA 6 s (run 46 s) - loss 1.0000 - 64 images/sec")
    for batch in (1, 2, 3):
        clock[0] += 2.0
        bar.on_train_batch_end(batch, {"loss": 1.0, "running_images_per_sec": 64.0})
    bar.on_epoch_end(2, {"loss": 1.0, "epoch_images_per_sec": 32.0})
    assert stream.getvalue().split("\r")[-1].rstrip() == (
        "epoch 3/5 - 8 s - run ETA 40 s - loss 1.0000 - 32 images/sec")


def test_the_bar_never_counts_back_when_hooks_run_out_of_order(monkeypatch):
    """On JAX, batch hooks run in worker threads and may arrive out of order (step 13's
    before step 12's); the bar shows the most steps any hook has reported."""
    import io

    from callbacks import progress

    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)
    stream = io.StringIO()
    bar = progress.Progress(stream=stream)
    bar.set_params({"verbose": 1, "epochs": 1, "steps": 20})
    bar.verbose, bar.target, bar.epochs = 1, 20, 1
    bar.on_epoch_begin(0)
    for batch in (0, 1, 3, 2, 4):
        bar.on_train_batch_end(batch, {"loss": 1.0})
    drawn = [int(m) for m in re.findall(r"step (\d+)/20", stream.getvalue())]
    assert drawn == [1, 2, 4, 4, 5]


def test_a_stop_asked_for_after_the_last_hook_of_a_boundary_still_ends_the_bar(monkeypatch):
    """The race the terminal test above met on a loaded machine: the stop is asked for
    after this step's bar hook and taken by the checkpoint callback at the same
    boundary, so no later hook sees it. The bar's line ends as the stop is asked for,
    and no hook draws the bar again after it."""
    import io

    from callbacks import progress
    from callbacks.stops import StopRequest

    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)
    stream, stop = io.StringIO(), StopRequest()
    bar = progress.Progress(stream=stream, stop_request=stop)
    bar.set_params({"verbose": 1, "epochs": 1, "steps": 20})
    bar.verbose, bar.target, bar.epochs = 1, 20, 1
    bar.on_train_begin()
    bar.on_epoch_begin(0)
    bar.on_train_batch_end(0, {"loss": 1.0})
    assert not stream.getvalue().endswith("\n")
    stop.request("SIGINT")  # as the signal watcher does, from its thread
    assert stream.getvalue().endswith("\n")
    bar.on_train_batch_end(1, {"loss": 1.0})  # a late hook (a JAX worker thread)
    assert stream.getvalue().endswith("\n") and stream.getvalue().count("step ") == 1
    bar.on_train_end()
    assert not stop._listeners


def test_a_point_with_no_hook_for_a_while_still_writes_a_line_to_a_pipe():
    """A benchmark point's compile has no batch hook (a point was silent through it): its progress
    thread writes a whole line every `line_every_seconds` all the same, naming the
    phase and the time; close() stops it."""
    import io
    import time

    from callbacks.progress import PointProgress

    stream = io.StringIO()
    progress = PointProgress("[sweep] global batch 8", verbose=2, stream=stream,
                             line_every_seconds=0.2)
    progress.phase("compiling", 2)
    time.sleep(1.0)  # no hook: a compile
    progress.close()
    lines = stream.getvalue().splitlines()
    assert 2 <= len(lines) <= 6, lines
    assert all(re.fullmatch(r"\[sweep\] global batch 8: compiling, step 0/2, \d s", line)
               for line in lines), lines
    time.sleep(0.5)
    assert stream.getvalue().splitlines() == lines  # closed: silent


def test_a_points_terminal_line_is_cleared_for_its_result_and_ended_by_a_stop():
    """On a terminal the point's line is redrawn in place; close() clears it (the
    result line takes its place), and a stop asked for ends it instead (the error
    line that follows starts a line of its own)."""
    import io

    from callbacks.progress import PointProgress
    from callbacks.stops import StopRequest

    stream = io.StringIO()
    progress = PointProgress("[ladder] float32", verbose=1, stream=stream)
    progress.phase("timing window", 4)
    progress.on_train_batch_end(0)
    progress.close()
    line = "[ladder] float32: timing window, step 0/4, 0 s"
    assert stream.getvalue() == f"\r{line}\r{' ' * len(line)}\r"

    stream, stop = io.StringIO(), StopRequest()
    progress = PointProgress("[ladder] float32", verbose=1, stream=stream, stop_request=stop)
    progress.phase("compiling")
    stop.request("SIGINT")  # from the signal watcher's thread
    assert stream.getvalue().endswith("\n") and not stop._listeners
    progress.phase("tracing")  # nothing more is drawn
    assert stream.getvalue().count("\r") == 1
