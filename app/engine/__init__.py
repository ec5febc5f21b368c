"""What every mode shares: backend and devices (distribute.py, topology.py), models, the
recipe, the start-up, the kernels, prices and the decision, measuring."""
