"""Small filesystem facts shared by the data builders, the decoders and the run folder.

The data door's rules live here, so every reader applies the same ones:
- a file is opened only if it is a regular file (os.stat, following links) of at most
  MAX_FILE_BYTES: a FIFO would block the read forever, a link to /dev/zero would read
  without end, and a 50 GB "photo" would take the host's memory (`unreadable_why`);
- an image is decoded only if its header says at most MAX_PIXELS pixels (the decoders
  check it: host/images.py, tfdata/images.py);
- a name that is not UTF-8 is shown with its odd bytes escaped (`shown`), never
  handed to TensorFlow or to grain, which take UTF-8 text only.
"""

from __future__ import annotations

import os
import stat

# Larger files are not read: no training image comes near (a 16,000 x 16,000 PNG of
# noise is 768 MiB), and reading one whole into memory is what the decoders would do.
MAX_FILE_BYTES = 1 << 30
# Larger images are not decoded (checked from the header, before any pixel): Pillow's
# own bound (PIL.Image.MAX_IMAGE_PIXELS, about 9,459 x 9,459), past which it warns and,
# at twice it, refuses; decoded as RGB it is 256 MiB. Every pipeline applies it.
MAX_PIXELS = 89_478_485


def unreadable_why(path: str) -> str | None:
    """Why the file at `path` must not be opened for reading, or None if it may be.

    One os.stat (links followed): only regular files of at most MAX_FILE_BYTES pass.
    """
    return stat_or_why(path)[1]


def stat_or_why(path: str) -> tuple[os.stat_result | None, str | None]:
    """(its os.stat, None) if the file at `path` may be opened for reading, else (None,
    why not), as `unreadable_why` says: the stat is kept for the listing's fingerprint
    (preprocessing/datasets/fingerprint.py), not made twice."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as error:  # a dangling link, no permission, a NUL
        return None, f"cannot be read ({getattr(error, 'strerror', None) or error})"
    if not stat.S_ISREG(info.st_mode):
        return None, "not a regular file"
    if info.st_size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES >> 30} GiB"
    return info, None


def is_utf8(name: str) -> bool:
    """Whether a name from os.listdir is valid UTF-8 text (undecodable bytes come back
    as lone surrogates, which TensorFlow's and grain's string paths cannot carry)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(name: str) -> str:
    """`name` printable in one line: its undecodable bytes as \\xNN escapes."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def writable_ancestor(path: str) -> str | None:
    """The nearest existing folder at or above `path`, if this process may write there."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    if os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK):
        return path
    return None
