"""A tiny TFDS image-classification dataset, prepared offline by the tests."""
