"""The repository cites only what a reader can open: URLs and its own files, never the
team's notes or a path outside it (shared/..., ../shared, /work/...), and each result
JSON it names is in benchmarks/results/ or cited with a commit that has it ("NAME.json
at COMMIT", benchmarks/README.md: `git show COMMIT:benchmarks/results/NAME.json`)."""

import os
import re
import subprocess

from conftest import ROOT

OUTSIDE = re.compile(
    r"(?<![\w./-])(?:\.\./)*shared/[\w./-]+"  # shared/anchors.md, ../shared/...
    r"|\b(?:anchors|stack-notes|seed|gpu-machine|house-style)\.md\b"
    r"|team(?:'s)?\s+notes"
    r"|(?<![\w.])/work/[\w./-]*", re.IGNORECASE)
PRICES = "app/pricing/prices.csv"
# Verbatim outputs of past runs: they quote the price catalog as it was then.
RECORDS = "benchmarks/results/raw/"
RESULTS = "benchmarks/results/"
# A result JSON's name (DATE-NAME.json), and the commit that has it where the tree does
# not. A name broken over two lines of a comment or a docstring is joined first.
RESULT = re.compile(r"(?<![\w-])(\d{4}-\d{2}-\d{2}-[\w.-]*?\.json)"
                    r"(?:[\s#]+at[\s#]+([0-9a-f]{7,40})\b)?")
BROKEN = re.compile(r"-\n[ \t]*(?:#[ \t]*)?")


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
    for text in ("app/pricing/prices.csv", "https://example.org/shared/x", "tests/no_jax"):
        assert not OUTSIDE.search(text), text


def test_no_file_names_a_path_outside_the_repository():
    found = [m for path in _files() if path != PRICES for m in _mentions(path)]
    assert not found, "\n".join(found)


def test_the_price_catalog_cites_only_what_a_reader_can_open():
    found = _mentions(PRICES)
    assert not found, "\n".join(found)


def _results_named(text: str) -> list[tuple[str, str | None]]:
    """(name, commit or None) of each result JSON `text` names."""
    return [(m.group(1), m.group(2)) for m in RESULT.finditer(BROKEN.sub("-", text))]


def _in_git(commit: str, name: str) -> bool | None:
    """Whether `commit` has benchmarks/results/`name`; None outside a git checkout."""
    shown = subprocess.run(["git", "cat-file", "-e", f"{commit}:{RESULTS}{name}"], cwd=ROOT,
                           capture_output=True)
    if shown.returncode == 0:
        return True
    inside = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True)
    return False if inside.returncode == 0 else None


def _dangling(path: str, text: str) -> list[str]:
    """The result JSONs `path` names that a reader cannot open: neither in the tree nor
    in the commit cited with them."""
    found = []
    for name, commit in _results_named(text):
        if commit is None and not os.path.exists(os.path.join(ROOT, RESULTS, name)):
            found.append(f"{path}: {name} is not in {RESULTS} and is cited with no commit")
        elif commit is not None and _in_git(commit, name) is False:
            found.append(f"{path}: {name} at {commit}: that commit does not have it")
    return found


def test_the_result_checker_reads_names_commits_and_names_broken_over_lines():
    assert _results_named("x (2026-12-01-h200-step.json, feed)") == [
        ("2026-12-01-h200-step.json", None)]
    assert _results_named("see 2026-12-01-h200-nvjpeg.json at\n    # 35cc76c call5") == [
        ("2026-12-01-h200-nvjpeg.json", "35cc76c")]
    assert _results_named("(benchmarks/results/2026-12-01-h200-\n    nvjpeg.json)") == [
        ("2026-12-01-h200-nvjpeg.json", None)]
    assert _results_named("benchmarks/results/DATE-NAME.json, summary.json") == []
    assert _dangling("x", "2026-12-01-h200-nvjpeg.json") and not _dangling(
        "x", "2026-12-01-h200-nvjpeg.json at 35cc76c")
    assert not _dangling("x", "2026-12-01-h200-step.json")  # in the tree


def test_every_result_json_named_is_in_the_tree_or_cited_with_its_commit():
    """A result JSON deleted from benchmarks/results/ is still cited from code and docs:
    the reader needs the commit that has it. The results themselves are left out: each
    is a run's record as it was written, naming its peers as they were then."""
    found = []
    for path in _files():
        if path.startswith(RESULTS):
            continue
        try:
            with open(f"{ROOT}/{path}", encoding="utf-8") as f:
                found += _dangling(path, f.read())
        except (UnicodeDecodeError, FileNotFoundError):  # binary, or deleted and not committed
            continue
    assert not found, "\n".join(found)
