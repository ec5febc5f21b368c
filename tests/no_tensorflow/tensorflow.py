"""Stands in for a machine without TensorFlow (like the H200 hosts): importing it fails.

tests/test_cli.py puts this folder first on PYTHONPATH for JAX runs that must not
need TensorFlow at all.
"""

raise ImportError("TensorFlow is not available here (tests/no_tensorflow)")
