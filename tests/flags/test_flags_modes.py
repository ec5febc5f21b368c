"""flags/modes.py: the modes, declared once. Each row's module is in app/modes/ with its
`run`; the rows say what the app asked of the names before (--benchmark's values, the
run folders' names, a probe's three windows, which modes take --repeats); and a mode
planted in a copy of the app (its module and its row, nothing else) runs from the
command line as a user would."""

import ast
import os
import shutil
import subprocess
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT

from flags.modes import BENCHMARKS, MODES, mode_of

PRODUCT = ("app", "callbacks", "flags", "preprocessing")


@pytest.mark.parametrize("name", sorted(MODES))
def test_each_modes_module_runs_it(name):
    path = os.path.join(ROOT, "app", "modes", f"{MODES[name].module}.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    assert "run" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, path


def test_the_rows_say_what_the_names_meant():
    assert BENCHMARKS == ("none", "input", "ladder", "probe")
    assert [n for n, m in MODES.items() if m.trains] == ["none"]
    assert [n for n, m in MODES.items() if not m.builds_model] == ["input"]
    assert {n: m.repeats for n, m in MODES.items()} == {
        "none": None, "sweep": 1, "input": 1, "ladder": 1, "probe": 3}
    assert {n for n, m in MODES.items() if m.decides} == {"none", "probe"}

    class Asked:
        is_sweep, benchmark = True, "none"
    assert mode_of(Asked).name == "sweep"
    Asked.is_sweep, Asked.benchmark = False, "probe"
    assert mode_of(Asked).folder.format(dataset="digits") == "probe-digits"


def test_a_planted_mode_needs_its_module_and_its_row(tmp_path):
    """A copy of the app with one mode more: `hello`, its module and its row. The
    command line takes --benchmark=hello, the checks, the context and the run folder's
    name ask its row, and its run() runs; no other product file changed."""
    for package in PRODUCT:
        shutil.copytree(os.path.join(ROOT, package), tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = _files(tmp_path)
    modes = tmp_path / "flags" / "modes.py"
    text = modes.read_text(encoding="utf-8")
    row = '    Mode("hello", "hello", "hello-{dataset}", builds_model=False),\n)}'
    modes.write_text(text.replace("\n)}", "\n" + row, 1), encoding="utf-8")
    (tmp_path / "app" / "modes" / "hello.py").write_text(
        '"""A planted mode: says hello and what it was asked."""\n\n\n'
        "def run(context):\n"
        '    print(f"hello: {context.config.model} on {context.config.dataset}, "\n'
        '          f"{context.config.repeats} window(s), folder {context.config.logdir}")\n'
        '    return {"mode": "hello", "status": "completed"}\n', encoding="utf-8")
    changed = {p for p in _files(tmp_path) if before.get(p) != _files(tmp_path)[p]}
    assert changed == {"flags/modes.py", "app/modes/hello.py"}
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "app" / "main.py"), "--benchmark=hello",
         "--dataset=synthetic", "--repeats=2", "--backend=jax"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("hello: ")]
    assert len(said) == 1 and said[0].startswith("hello: small_resnet on synthetic, "
                                                 "2 window(s), folder runs/"), done.stdout
    assert "-hello-synthetic-jax-" in said[0]


def _files(root) -> dict:
    found = {}
    for package in PRODUCT:
        for folder, _, names in os.walk(root / package):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    found[os.path.relpath(path, root)] = open(path, "rb").read()
    return found
