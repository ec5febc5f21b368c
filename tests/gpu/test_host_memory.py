"""Host memory at an address as a numpy array (preprocessing/gpu/native/host_memory.py)."""

import numpy as np

from preprocessing.gpu.native.host_memory import host_array


def test_host_array_writes_the_memory_in_place():
    buffer = np.zeros((2, 3, 4), np.uint8)
    view = host_array(buffer.ctypes.data, buffer.shape)
    assert view.shape == (2, 3, 4) and view.dtype == np.uint8
    view[1, 2] = 7
    assert buffer[1, 2].tolist() == [7] * 4 and buffer.sum() == 28
