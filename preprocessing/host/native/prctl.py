"""prctl(2)'s parent-death signal, through libc: the one call the host wing makes
outside Python (preprocessing/host/_children.py asks it in each decoding worker).

PR_SET_PDEATHSIG asks Linux to send a signal to this process when its parent ends;
PR_GET_PDEATHSIG reads the request back. Trap: the "parent" is the *thread* that
forked this process, not the whole parent process (_children.py's docstring says
what that means for grain's workers). Linux only: elsewhere `supported()` is False
and nothing is asked.
"""

from __future__ import annotations

import ctypes
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_GET_PDEATHSIG = 2


def supported() -> bool:
    """Whether this system has prctl's parent-death signal (Linux)."""
    return sys.platform.startswith("linux")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal(signum: int) -> None:
    """Asks Linux to send `signum` to this process when its parent thread ends.

    Raises:
        OSError: prctl refused (errno set: EINVAL for a signal number out of range).
    """
    if _libc().prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def parent_death_signal() -> int:
    """The signal this process gets when its parent thread ends; 0 for none.

    Raises:
        OSError: prctl refused.
    """
    signum = ctypes.c_int(0)
    if _libc().prctl(PR_GET_PDEATHSIG, ctypes.byref(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_GET_PDEATHSIG) failed")
    return signum.value
