"""A run's bookkeeping: the context, run folder, ledger, resume and summary.

- context.py: the run context, what every mode knows once its checks have passed;
- rundir.py: the run folder (--logdir), taken under its lock first, then judged;
- signals.py: SIGTERM and SIGINT, noted at once, acted on at the next step boundary;
- ledger.py: the billing ledger, the wall-clock time of every attempt, kill-proof;
- resume.py: whether a run may resume, its newest good checkpoint, its logs rewound;
- summary.py: the run's summary (summary.json) and the lines printed at the end;
- provenance.py: what the run ran on and which kernels it ran (summary.json's
  machine_state and kernels, kernels.json, a TensorBoard card);
- machine_block.py: the machine a benchmark point ran on, as a training run's block;
- differences.py: what differed between two runs of the same work whose speeds differ.
"""
