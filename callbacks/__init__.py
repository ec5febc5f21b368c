"""Keras callbacks, one per file, each built from plain values and independent of
the others. Each publishes its figures into Keras `logs` (so History, the progress
bar and the metrics sink see them) and as public attributes."""
