"""What the callbacks write and how: durable JSON, TensorBoard event files and their
vocabulary, metrics.jsonl, checkpoint files, and fault injection for the tests."""
