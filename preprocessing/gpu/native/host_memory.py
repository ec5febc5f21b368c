"""Host memory at a raw address seen as a numpy array (no copy).

A canvas on a CPU device (nvImageCodec's CPU backend decodes into it, as the CPU
tests run the C API's path) is host memory that JAX owns; the CPU's decodes of the
images the decoder refused are written into it in place, through this view.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np


def host_array(address: int, shape: tuple) -> np.ndarray:
    """The uint8 array of `shape` at `address` of this process. It does not own the
    memory: whoever does must keep it alive while the array is used."""
    view = np.ctypeslib.as_array((ctypes.c_uint8 * math.prod(shape)).from_address(address))
    return view.reshape(shape)
