"""Where and how a step runs and starts: the engine under app/modes/ and app/run/. The
model and its recipe are app/models/, the prices app/pricing/, the decision
app/report/decision/.

Backend, devices and the start:
- distribute.py: the one place that chooses the Keras backend and how training is
  distributed;
- topology.py: where a run executes (processes, devices, strategy) and the batch's shares;
- environment.py: the process environment a run sets before Keras and its framework start;
- native_stderr.py: what C++ code writes to stderr at the frameworks' start, filtered;
- cold_start.py: the measures that make a run start sooner, each switchable;
- precompile.py: the training and evaluation steps compiled beside the start (JAX);
- startup.py: the start-up timeline, where a run's seconds went before its first step;
- data.py: what every mode asks of the data: the builders' plain inputs, epoch length.

Measuring, and the kernels measured:
- measure.py: timed fits, on synthetic data or a dataset's stream;
- kernels.py: the GPU kernels a training step runs, read from its compiled program;
- autotune.py: how XLA picks the convolutions' and matrix products' kernels
  (--xla_autotune);
- measured.py: the autotuned step timed against the heuristic one, the faster kept;
- kernel_choice.py: where a measured choice of kernels is kept between runs, and its key;
- kernel_truth.py: where the trace shows a library call far slower than the autotuner
  measured its kernel;
- textproto.py: protocol buffers' text format, read without the message's schema;
- machine.py: what a run ran on: the devices, their driver, the libraries' versions;
- plots.py: PNG charts (matplotlib, headless): curves, and bars with error bars.

"""
