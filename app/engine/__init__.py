"""What every mode shares: the engine under app/modes/ and app/run/.

Backend, devices and the start:
- distribute.py: the one place that chooses the Keras backend and how training is
  distributed;
- topology.py: where a run executes (processes, devices, strategy) and the batch's shares;
- environment.py: the process environment a run sets before Keras and its framework start;
- native_stderr.py: what C++ code writes to stderr at the frameworks' start, filtered;
- cold_start.py: the measures that make a run start sooner, each switchable;
- precompile.py: the training and evaluation steps compiled beside the start (JAX);
- startup.py: the start-up timeline, where a run's seconds went before its first step;
- memory.py: what a process may hold and still take, and a training step's lower bound.

The model and its training:
- models/: the model factory, every value of --model, checked, then built;
- layers.py: faster drop-in layers for ResNet training (Keras ops only);
- recipe.py: the training recipe: optimizer, learning-rate schedule, loss and metrics;
- data.py: what every mode asks of the data: the builders' plain inputs, epoch length.

Measuring, and the kernels measured:
- measure.py: timed fits, on synthetic data or a dataset's stream;
- flops.py: training FLOPs per image, counted from the training step's XLA HLO;
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

Prices and the decision:
- catalog.py: the price catalog (prices.csv, or --price_catalog): read, checked, listed
  (PRICES.md says where each price comes from);
- prices.py: the catalog row a run is billed as, and under which option;
- decision.py: which machine and pricing option reach a target top-1 for the fewest
  dollars, and which the soonest;
- decision_inputs.py: what the decision reads from run folders, checked as untrusted;
- decision_basis.py: what a prediction rests on: epochs to the target, epoch overhead,
  start-up;
- decision_predicted.py: machines never probed, their rate predicted by the device model;
- decision_why.py: the term of the winner's hours (or dollars) that decides;
- decision_page.py: the decision written out: its lines, its table, decision.md, .json,
  .png;
- device_model.py: the step on a device never measured, predicted from one run's work by
  kind;
- device_rates.py: the rates table (device_rates.csv) the device model reads, each row
  citing its result JSON.
"""
