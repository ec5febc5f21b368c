"""Stands in for a machine without JAX: importing it fails.

tests/test_errors.py puts this folder first on PYTHONPATH to see what `--backend=jax`
says there.
"""

raise ImportError("No module named 'jax' (tests/no_jax)")
