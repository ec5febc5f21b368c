"""Shared by the benchmark scripts (run as `python benchmarks/NAME.py`, so this folder
is on sys.path): print a result as JSON and, if asked, write it to a file."""

import json
import os


def emit(result: dict, path: str = "") -> None:
    text = json.dumps(result, indent=2)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
    print(text)


class Folder:
    """The runner's output for one recipe."""

    def __init__(self, path: str):
        self.path = path

    def text(self, name: str) -> str | None:
        try:
            with open(os.path.join(self.path, name), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def json(self, name: str):
        text = self.text(name)
        return json.loads(text) if text else None


def ratio(a, b, digits: int = 4):
    return round(a / b, digits) if a is not None and b else None
