"""The run folder's formats, and how each is read back: durable JSON, TensorBoard event
files and their vocabulary, HParams, metrics.jsonl, checkpoint files, summary.json's
field table (summary_fields.py, shared by its writers and its readers), the untrusted
reader every record read back goes through (untrusted.py, state_records.py), and
fault injection for the tests."""
