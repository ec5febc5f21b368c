"""The app: the entry point (main.py), the modes a run can be (modes/: training, the
throughput sweep, the effort ladder, the input benchmark), what every mode shares
(run/: the run folder, the context, the summary), the engine (engine/: backend and
distribution, the model factory, the recipe, prices) and the report (report.py, the
command; report/, its rooms)."""
