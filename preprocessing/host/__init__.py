"""The TensorFlow-free pipeline on the CPU: grain worker processes and numpy image ops."""
