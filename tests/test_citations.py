"""The repository cites only what a reader can open: URLs and its own files, never the
team's notes or a path outside it (shared/..., ../shared, /work/...)."""

import os
import re
import subprocess

from conftest import ROOT

OUTSIDE = re.compile(
    r"(?<![\w./-])(?:\.\./)*shared/[\w./-]+"  # shared/anchors.md, ../shared/...
    r"|\b(?:anchors|stack-notes|seed|gpu-machine|house-style)\.md\b"
    r"|team(?:'s)?\s+notes"
    r"|(?<![\w.])/work/[\w./-]*", re.IGNORECASE)
PRICES = "app/engine/prices.csv"
# Verbatim outputs of past runs: they quote the price catalog as it was then.
RECORDS = "benchmarks/results/raw/"


# Outside a git checkout (a source archive): everything but what .gitignore leaves out.
IGNORED = {".git", ".venv", ".whl", "runs", "build", "test-artifacts", "__pycache__",
           ".pytest_cache"}


def _walk() -> list[str]:
    paths = []
    for folder, folders, names in os.walk(ROOT):
        folders[:] = [f for f in folders if f not in IGNORED and not f.endswith(".egg-info")]
        paths += [os.path.relpath(os.path.join(folder, name), ROOT) for name in names]
    return paths


def _files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True)
    paths = listed.stdout.splitlines() if listed.returncode == 0 else _walk()
    return [path for path in paths
            if path != "tests/test_citations.py" and not path.startswith(RECORDS)]


def _mentions(path: str) -> list[str]:
    try:
        with open(f"{ROOT}/{path}", encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, FileNotFoundError):  # binary, or deleted and not committed
        return []
    return [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in OUTSIDE.finditer(text)]


def test_the_checker_finds_what_it_looks_for():
    for text in ("see shared/seed.md", "(../shared/stack-notes.md)", "in the team's\nnotes",
                 "/work/main/runs", "not in anchors.md"):
        assert OUTSIDE.search(text), text
    for text in ("app/engine/prices.csv", "https://example.org/shared/x", "tests/no_jax"):
        assert not OUTSIDE.search(text), text


def test_no_file_names_a_path_outside_the_repository():
    found = [m for path in _files() if path != PRICES for m in _mentions(path)]
    assert not found, "\n".join(found)


def test_the_price_catalog_cites_only_what_a_reader_can_open():
    found = _mentions(PRICES)
    assert not found, "\n".join(found)
