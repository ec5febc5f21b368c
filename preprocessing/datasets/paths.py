"""Small filesystem facts shared by the data builders and the run folder."""

from __future__ import annotations

import os


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
