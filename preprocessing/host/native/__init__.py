"""The host wing's floor of foreign calls (ctypes): Linux's prctl (prctl.py), so that the
host pipeline's decoding workers die with the run (Python's standard library has no
prctl). Only preprocessing/host/ imports it, as only preprocessing/gpu/ imports
preprocessing/gpu/native/."""
