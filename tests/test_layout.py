"""The architecture, enforced: every import points downward, and there is no circle.

Layers, top to bottom (a module may import its own layer and the ones below):
  app.main, app.report  ->  app.modes  ->  app.run  ->  app.engine
  ->  callbacks, preprocessing, flags   (these three never import app)
Modes are peers: no mode imports another mode. Imports inside functions count too.

Inside preprocessing/, the same rule, floor by floor (PREPROCESSING_RANK): the
contract (spec, augment) <- gpu/native <- the pipeline wings (tfdata, host, gpu)
and feed <- streams <- datasets. Only gpu/ imports gpu/native, the one place that
calls C libraries; the top level holds the contract's few files and nothing else.
"""

import ast
import os

from conftest import ROOT

PACKAGES = ("app", "callbacks", "flags", "preprocessing")
RANK = {"app.main": 5, "app.report": 5, "app.report_page": 5, "app.modes": 4, "app.run": 3, "app.engine": 2,
        "callbacks": 1, "preprocessing": 1, "flags": 1}


PREPROCESSING_RANK = {"preprocessing": 0, "preprocessing.spec": 0, "preprocessing.augment": 0,
                      "preprocessing.files": 0,
                      "preprocessing.gpu.native": 1, "preprocessing.tfdata": 2,
                      "preprocessing.host": 2, "preprocessing.gpu": 2, "preprocessing.device": 2,
                      "preprocessing.feed": 2, "preprocessing.streams": 3,
                      "preprocessing.datasets": 4}
CONTRACT_FILES = {"__init__.py", "spec.py", "augment.py", "streams.py", "feed.py", "files.py"}
WINGS = {"datasets", "tfdata", "host", "gpu", "device"}


def _modules() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[module.removesuffix(".__init__")] = path
    return found


def _imports(path: str, modules) -> set[str]:
    """Our modules that `path` imports (module-level or inside functions)."""
    tree = ast.parse(open(path).read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n in modules}


def _layer(module: str) -> str:
    for prefix in sorted(RANK, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return module.split(".")[0]


def _wing(module: str) -> str:
    for prefix in sorted(PREPROCESSING_RANK, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"{module} is in no floor of PREPROCESSING_RANK")


def _graph():
    modules = _modules()
    return {m: _imports(p, modules) for m, p in modules.items()}


# What the modes share: the training callbacks (train and sweep), a measured point
# (sweep and ladder), and the package itself (it holds nothing).
MODES_SHARED = ("app.modes", "app.modes.train_callbacks", "app.modes.points")
# ctypes outside the GPU wing's native floor: one libc call, prctl(PR_SET_PDEATHSIG), so
# that the host pipeline's decoding workers die with the run (Python has no prctl).
CTYPES_ALSO = ("preprocessing.host._children",)


def test_every_import_points_downward():
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if target.split(".")[0] == "app" and module.split(".")[0] in ("callbacks", "flags",
                                                                          "preprocessing"):
                upward.append(f"{module} -> {target}")
            elif RANK.get(_layer(target), 0) > RANK.get(_layer(module), 0):
                upward.append(f"{module} -> {target}")
            elif (_layer(module) == _layer(target) == "app.modes" and module != target
                  and target not in MODES_SHARED and module != "app.modes"
                  and not (module.endswith(".train") and target.endswith("train_callbacks"))):
                upward.append(f"{module} -> {target} (modes are peers)")
    assert not upward, "imports against the layering:\n" + "\n".join(sorted(upward))


def test_preprocessing_imports_point_down_its_floors():
    upward = []
    for module, targets in _graph().items():
        if not module.startswith("preprocessing"):
            continue
        for target in targets:
            if target.startswith("preprocessing") and (
                    PREPROCESSING_RANK[_wing(target)] > PREPROCESSING_RANK[_wing(module)]):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports against preprocessing's floors:\n" + "\n".join(sorted(upward))


def test_only_the_gpu_wing_imports_its_native_floor():
    found = [f"{module} -> {target}" for module, targets in _graph().items()
             for target in targets if target.startswith("preprocessing.gpu.native")
             and not module.startswith("preprocessing.gpu")]
    assert not found, "\n".join(sorted(found))


def test_ctypes_is_called_only_from_gpu_native():
    found = []
    for module, path in _modules().items():
        tree = ast.parse(open(path).read(), path)
        names = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names} | {node.module for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom) and node.module}
        if any(n == "ctypes" or n.startswith("ctypes.") for n in names) and not module.startswith(
                "preprocessing.gpu.native") and module not in CTYPES_ALSO:
            found.append(module)
    assert not found, "ctypes outside preprocessing/gpu/native: " + ", ".join(sorted(found))


def test_preprocessing_top_level_holds_only_the_contract():
    folder = os.path.join(ROOT, "preprocessing")
    files = {n for n in os.listdir(folder) if n.endswith(".py")}
    folders = {n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))
               and n != "__pycache__"}
    assert files == CONTRACT_FILES, sorted(files ^ CONTRACT_FILES)
    assert folders <= WINGS, sorted(folders - WINGS)


def test_no_import_circle():
    graph = _graph()
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            # A package's __init__ importing its own submodules is not a circle.
            if nxt == node or nxt.startswith(node + "."):
                continue
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_the_checker_sees_a_planted_upward_import(tmp_path):
    """The rule would fail: an import of app from callbacks is found as such."""
    planted = tmp_path / "bad.py"
    planted.write_text("def f():\n    from app.engine import prices\n")
    assert _imports(str(planted), {"app.engine.prices": ""}) == {"app.engine.prices"}
