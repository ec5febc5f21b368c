"""Shared by the benchmark scripts (run as `python benchmarks/NAME.py`, so this folder
is on sys.path): print a result as JSON and, if asked, write it to a file."""

import json


def emit(result: dict, path: str = "") -> None:
    text = json.dumps(result, indent=2)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
    print(text)
