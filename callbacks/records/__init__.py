"""The run folder's formats, and how each is read back (helpers, not callbacks).

- durable.py: files that survive kills and say when they are damaged;
- metrics_file.py: metrics.jsonl, one JSON line per epoch;
- checkpoint_files.py: checkpoint files: their names, their CRC, the newest intact one;
- events.py: TensorBoard event files, written without TensorFlow;
- dashboard.py: TensorBoard's vocabulary: where each log key goes, its tag and unit;
- hparams.py: TensorBoard's HParams record of a run;
- summary_fields.py: summary.json's fields read back, the table its writers and its
  readers share;
- untrusted.py: the reader every record read back goes through, trusting none of it;
- state_records.py: a run's kernels and machine state read back, trusting none of it;
- faults.py: fault injection for the tests: SIGKILL this process at a named point.
"""
