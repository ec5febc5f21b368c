"""Docs a newcomer reads in one sitting: README.md at most 200 lines, BUILD.md at most 300,
and every section of BUILD.md that the code or the docs cite by its quoted name is a
heading BUILD.md has (a section merged away leaves its citations pointing at nothing)."""

import os
import re

from conftest import ROOT

LIMITS = {"README.md": 200, "BUILD.md": 300}
CITED = re.compile(r"BUILD\.md[,:]? \"([^\"]+)\"")
SKIP = {".git", ".venv", "runs", "build", "__pycache__", ".pytest_cache", "node_modules"}


def _lines(name: str) -> int:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return sum(1 for _ in f)


def test_readme_and_build_fit_one_sitting():
    over = {name: _lines(name) for name, limit in LIMITS.items() if _lines(name) > limit}
    assert not over, f"over their limits {LIMITS}: {over}"


def _citations() -> dict[str, list[str]]:
    found = {}
    for folder, folders, names in os.walk(ROOT):
        folders[:] = [f for f in folders if f not in SKIP and not f.startswith(".")]
        for name in names:
            if name.endswith((".py", ".md", ".sh", ".flags")):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for cited in CITED.findall(f.read().replace("\n", " ")):
                        found.setdefault(cited, []).append(os.path.relpath(path, ROOT))
    return found


def test_every_cited_build_section_is_a_heading():
    with open(os.path.join(ROOT, "BUILD.md"), encoding="utf-8") as f:
        headings = [line.lstrip("#").strip() for line in f if line.startswith("#")]
    cited = _citations()
    assert cited, "no citation of a BUILD.md section found: the pattern no longer matches"
    missing = {section: where for section, where in cited.items()
               if not any(h.startswith(section) for h in headings)}
    assert not missing, f"cited sections BUILD.md does not have: {missing}"
