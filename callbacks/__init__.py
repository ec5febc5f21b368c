"""Keras callbacks, one per file, each built from plain values and independent of
the others. Each publishes its figures into Keras `logs` (so History, the progress
bar and the metrics sink see them) and as public attributes.

The run's figures:
- throughput.py: steady-state images/sec, step-time spread, the wall-clock rate, eval
  speed;
- accuracy.py: top-1 per epoch, the best so far, when each target top-1 was first reached;
- mfu.py: model FLOPs utilization: how much of the devices' peak the model's math uses;
- energy.py: joules per image, board power and kWh per epoch, over the steady state;
- cost.py: the bill's meter: billed hours and the running cloud cost;
- learning_rate.py: the optimizer's current rate, into each epoch's logs;
- machine_state.py: clocks, power, heat, throttling and neighbours through the timed
  window;
- first_step.py: when fit began and its first training call ended (the start-up's end);
- profiler.py: a trace of chosen training steps, for TensorBoard's profile plugin.

Where they go, and how a run stops:
- metrics_logger.py: every figure in the logs to metrics.jsonl and TensorBoard;
- progress.py: the console during `fit`: the few figures a person watches;
- checkpoint.py: checkpoints that survive kills and preemption: atomic, periodic, on
  SIGTERM;
- nan_guard.py: stop at the first non-finite training loss, and say where;
- stall.py: the watchdog that ends a run whose training makes no progress for long;
- stop_on_request.py: stop `fit` at the next step boundary once asked (SIGTERM, Ctrl-C);
- stops.py: what ends training early, importable without Keras;
- heap.py: Python's heap frozen again once fit has compiled its steps;
- sampling.py: a meter read in a background thread (energy's power, the machine's state).

Below them, what they share and others read without Keras: figures/ (the plain
arithmetic: the bill, steps, the timed window, targets, spreads), records/ (the run
folder's formats, read back as untrusted) and profiling/ (a trace's reading: where a
step's time went)."""
