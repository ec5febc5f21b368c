"""The app: the entry point (main.py), the modes a run can be (modes/: training, the
throughput sweep, the effort ladder, the input benchmark, the probe), what every mode
shares (run/: the run folder, the context, the summary), the model and its recipe
(models/), the prices (pricing/), the engine (engine/: backend and distribution, the
start, compiling and kernels, measuring) and the report (report.py, the command;
report/, its rooms, and report/decision/, the decision)."""
