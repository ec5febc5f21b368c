"""The architecture, enforced: every import points downward, and there is no circle.

Layers, top to bottom (a module may import its own layer and the ones below):
  app.main, app.report  ->  app.modes  ->  app.run  ->  app.engine, app.models,
  app.pricing  ->  callbacks, preprocessing, flags   (these three never import app)
Modes are peers: no mode imports another mode. Imports inside functions count too.

Inside preprocessing/, the same rule, floor by floor (PREPROCESSING_RANK): the
contract (spec, augment) <- the native floors (gpu/native, host/native) <- the
pipeline wings (tfdata, host, gpu) and feed <- streams <- datasets. Only gpu/ imports
gpu/native and only host/ host/native, the two places that call C libraries; the top
level holds the contract's few files and nothing else.

Each product module has its tests findable by name, and none is over 400 lines. Each
package's docstring names what it holds, and no file cites an issue by its number.
What has one owner (the batch's shares, the bill) is checked in test_one_owner.py.
"""

import ast
import os
import re

from conftest import ROOT

PACKAGES = ("app", "callbacks", "flags", "preprocessing")
RANK = {"app.main": 5, "app.report": 5, "app.modes": 4, "app.run": 3, "app.models": 2,
        "app.pricing": 2, "app.engine": 2, "callbacks": 1, "preprocessing": 1, "flags": 1}


PREPROCESSING_RANK = {"preprocessing": 0, "preprocessing.spec": 0, "preprocessing.augment": 0,
                      "preprocessing.files": 0,
                      "preprocessing.gpu.native": 1, "preprocessing.host.native": 1,
                      "preprocessing.tfdata": 2,
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
                    if name != "__init__.py" and os.path.isdir(path[:-3]):
                        # A command's file beside its package (app/report.py, whose
                        # package is app/report/): imports find the package; the file
                        # is checked as the package's entry.
                        module += ".__main__"
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


# What the modes share: the training callbacks (train and sweep), a measured point and
# its names and folder (sweep and ladder), and the package itself (it holds nothing).
MODES_SHARED = ("app.modes", "app.modes.train_callbacks", "app.modes.points",
                "app.modes.bench", "app.modes.point_folders")
# The floors that call C (ctypes), each imported by its own wing only: the GPU wing's
# (CUDA, nvJPEG, nvImageCodec, memory) and the host wing's (prctl's parent-death
# signal, so that the host pipeline's decoding workers die with the run).
NATIVE_FLOORS = {"preprocessing.gpu.native": "preprocessing.gpu",
                 "preprocessing.host.native": "preprocessing.host"}


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


# callbacks/ holds the callbacks at its top and, below them, what they share and what
# others read without Keras: figures/ (a run's plain arithmetic: pure Python, nothing
# of ours), records/ (the run folder's formats), profiling/ (the trace's reading). A
# subpackage imports no callback; figures/ imports nothing of ours at all.
CALLBACK_SUBPACKAGES = ("callbacks.figures", "callbacks.records", "callbacks.profiling")


def test_callbacks_subpackages_import_no_callback():
    found = []
    for module, targets in _graph().items():
        home = next((p for p in CALLBACK_SUBPACKAGES if module.startswith(p)), None)
        if home is None:
            continue
        for target in targets:
            if home == "callbacks.figures" and not target.startswith(home):
                found.append(f"{module} -> {target} (figures/ is pure arithmetic)")
            elif target.startswith("callbacks") and not target.startswith(CALLBACK_SUBPACKAGES):
                found.append(f"{module} -> {target}")
    assert not found, "a subpackage of callbacks/ importing a callback:\n" + "\n".join(found)


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


def test_only_each_wing_imports_its_native_floor():
    found = [f"{module} -> {target}" for module, targets in _graph().items()
             for target in targets for floor, wing in NATIVE_FLOORS.items()
             if target.startswith(floor) and not module.startswith(wing)]
    assert not found, "\n".join(sorted(found))


def test_ctypes_is_called_only_from_the_native_floors():
    found = []
    for module, path in _modules().items():
        tree = ast.parse(open(path).read(), path)
        names = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names} | {node.module for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom) and node.module}
        if any(n == "ctypes" or n.startswith("ctypes.") for n in names) and not any(
                module.startswith(floor) for floor in NATIVE_FLOORS):
            found.append(module)
    assert not found, "ctypes outside the native floors: " + ", ".join(sorted(found))


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
    planted.write_text("def f():\n    from app.pricing import prices\n")
    assert _imports(str(planted), {"app.pricing.prices": ""}) == {"app.pricing.prices"}


# ------------------------------------------------------- each module's tests by name
# tests/ mirrors the packages: a module's tests are tests/**/test_<module>.py, or
# test_<package>_<module>.py where the bare name is another module's (tests/gpu/
# test_gpu_stream.py), or for a module of a sub-package its package's file
# test_<package>.py (tests/app/models/test_models.py for app/models/*). A
# package's __init__.py holding only imports needs none. The modules below are covered
# by a test of a behaviour across modules, named with the file that covers them; each
# is one that could have its own file.
COVERED_ELSEWHERE = {
    # the command line and its runs, end to end (real processes)
    "tests/test_cli.py": ("app.main", "app.engine.data"),
    "tests/test_console.py": ("app.run.summary", "app.engine.native_stderr"),
    "tests/app/engine/test_distribute.py": ("app.engine.cold_start", "app.engine.environment",
                                            "app.engine.topology"),
    "tests/test_real_data.py": ("app.modes.input_benchmark", "preprocessing.tfdata.pipeline"),
    "tests/test_sweep.py": ("app.modes.bench", "app.modes.point_folders"),
    "tests/app/test_report.py": ("app.engine.plots",),
    # the decision's epochs, overhead and start-up, through the lines that name them
    "tests/app/report/decision/test_decision_why.py": ("app.report.decision.basis",),
    "tests/test_steps.py": ("callbacks.profiler",),
    # the run folder's life: resumes, kills, stops, damage, its one writer
    "tests/test_run_folder.py": ("app.run.context", "app.run.resume"),
    "tests/test_one_writer.py": ("app.run.rundir",),
    "tests/test_stops.py": ("app.run.signals",),
    "tests/test_billing.py": ("app.run.ledger",),
    "tests/test_resilience.py": ("callbacks.records.faults",),
    "tests/test_damage.py": ("callbacks.records.checkpoint_files", "callbacks.records.durable",
                             "callbacks.records.metrics_file"),
    # what the callbacks and the report share: their arithmetic, through its users
    "tests/callbacks/test_accuracy.py": ("callbacks.figures.targets",),
    "tests/callbacks/test_throughput.py": ("callbacks.figures.window",),
    # flags at the door: parsed, ranged, helped
    "tests/test_flag_door.py": ("flags.parse", "flags.ranges"),
    "tests/flags/test_config.py": ("flags.checks", "flags.choices"),
    "tests/test_help_and_errors.py": ("flags.definitions",),
    # the input pipelines' shared parts, through the pipelines
    "tests/preprocessing/host/test_host_images.py": ("preprocessing.augment",
                                                     "preprocessing.host.decoding"),
    "tests/preprocessing/host/test_grain_stream.py": ("preprocessing.host.grain_source",),
    "tests/gpu/test_gpu_stream.py": ("preprocessing.feed",),
    "tests/test_data_door.py": ("preprocessing.files",),
    "tests/test_workers.py": ("preprocessing.host._children",),
    "tests/gpu/test_nvjpeg_on_gpu.py": ("preprocessing.gpu.native.nvjpeg_c",),  # needs a GPU
}


def _test_files() -> set[str]:
    found = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        found.update(name[:-3] for name in files
                     if name.startswith("test_") and name.endswith(".py"))
    return found


def _tests_by_name(module: str, path: str, test_files: set[str]) -> bool:
    """Whether `module`'s tests are findable by its name (see COVERED_ELSEWHERE's comment)."""
    parts = module.split(".")
    name, package = parts[-1], parts[-2]
    if path.endswith("__init__.py") and not re.search(r"^(def|class) ", open(path).read(), re.M):
        return True
    candidates = {f"test_{name}", f"test_{package}_{name}"}
    if not path.endswith("__init__.py") and len(parts) > 2:
        candidates.add(f"test_{package}")  # a sub-package's modules in its own file
    return bool(candidates & test_files)


def test_each_module_has_its_tests_findable_by_its_name():
    test_files = _test_files()
    elsewhere = {m: test for test, modules in COVERED_ELSEWHERE.items() for m in modules}
    missing, stale = [], []
    for module, path in sorted(_modules().items()):
        if module in PACKAGES:
            continue
        by_name = _tests_by_name(module, path, test_files)
        if not by_name and module not in elsewhere:
            missing.append(f"{module} ({os.path.relpath(path, ROOT)})")
        elif by_name and module in elsewhere:
            stale.append(module)
    assert not missing, ("no tests/**/test_<module>.py for these; write one, or name the test "
                         f"that covers the module in COVERED_ELSEWHERE: {missing}")
    assert not stale, f"these have tests by name now; drop them from COVERED_ELSEWHERE: {stale}"


def test_the_allow_list_names_real_modules_and_real_test_files():
    modules = _modules()
    for test, names in COVERED_ELSEWHERE.items():
        assert os.path.isfile(os.path.join(ROOT, test)), test
        for module in names:
            assert module in modules, f"{module} (COVERED_ELSEWHERE) is no module"


def test_the_name_check_sees_a_module_without_tests(tmp_path):
    """The rule as a function: a module with none of the names is caught."""
    lonely = tmp_path / "lonely.py"
    lonely.write_text("def f():\n    pass\n")
    files = {"test_models", "test_gpu_stream", "test_throughput"}
    assert not _tests_by_name("callbacks.lonely", str(lonely), files)
    assert _tests_by_name("callbacks.throughput", str(lonely), files)
    assert _tests_by_name("preprocessing.gpu.stream", str(lonely), files)
    assert _tests_by_name("app.models.resnet", str(lonely), files)
    # a top-level package's file is no module's cover
    assert not _tests_by_name("app.lonely", str(lonely), files | {"test_app"})


# ---- rooms a newcomer can read: no module over MAX_LINES --------------------------------
MAX_LINES = 400


def _over(paths) -> list[str]:
    over = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_LINES:
            over.append(f"{os.path.relpath(path, ROOT)}: {lines} lines")
    return over


def test_no_module_is_over_400_lines():
    """A module over 400 lines holds more than one idea; split it where the
    ideas part (the product's packages and the tests alike)."""
    paths = list(_modules().values())
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        paths += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    assert not _over(paths), _over(paths)


def test_the_size_check_sees_a_long_module(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1))
    short = tmp_path / "short.py"
    short.write_text("x = 1\n" * MAX_LINES)
    assert _over([str(long), str(short)]) == [f"{os.path.relpath(long, ROOT)}: 401 lines"]


# ---- each package's docstring names what it holds ---------------------------------------
# Rule: every module as `name.py` (private `_name.py` too; not __init__.py) and every
# subpackage as `name/`, bare or from the repository root (app/engine/kernels.py).
def _unnamed(folder: str) -> list[str]:
    doc = ast.get_docstring(ast.parse(open(os.path.join(folder, "__init__.py")).read())) or ""
    held = sorted(n if n.endswith(".py") else n + "/" for n in os.listdir(folder)
                  if n.endswith(".py") and n != "__init__.py"
                  or os.path.isfile(os.path.join(folder, n, "__init__.py")))
    here = re.escape(os.path.relpath(folder, ROOT).replace(os.sep, "/"))
    return [n for n in held if not re.search(rf"(?<![\w/.])(?:{here}/)?{re.escape(n)}(?!\w)", doc)]


def test_each_package_docstring_names_its_modules_and_subpackages():
    unnamed = [f"{os.path.relpath(folder, ROOT)}: {', '.join(_unnamed(folder))}"
               for package in PACKAGES for folder, _, files in os.walk(os.path.join(ROOT, package))
               if "__init__.py" in files and _unnamed(folder)]
    assert not unnamed, "package docstrings missing what they hold:\n" + "\n".join(unnamed)


def test_the_docstring_check_sees_an_unnamed_module(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Holds a.py, _p.py and sub/; not b."""\n')
    for name in ("a.py", "_p.py", "b.py", "sub/__init__.py", "data/x.csv"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).touch()
    assert _unnamed(str(tmp_path)) == ["b.py"]
    (tmp_path / "__init__.py").write_text('"""Holds a.py, _p.py and b.py."""\n')
    assert _unnamed(str(tmp_path)) == ["sub/"]


# ---- citations a reader can follow ------------------------------------------------------
# The issue tracker is not in the repository: a comment says what an issue found, the
# result JSON (benchmarks/results/) or the test that guards it, never its number.
CITATION = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
CITING = ("app", "callbacks", "flags", "preprocessing", "benchmarks", "tests")


def _citations(path: str) -> list[str]:
    text = open(path, encoding="utf-8").read()
    return [f"{os.path.relpath(path, ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: "
            f"{m.group(0)}" for m in CITATION.finditer(text)]


def test_no_file_cites_an_issue_by_its_number():
    paths = [os.path.join(ROOT, "app", "pricing", "PRICES.md")] + [
        os.path.join(folder, n) for top in CITING for folder, _, files in
        os.walk(os.path.join(ROOT, top)) for n in files if n.endswith((".py", ".sh"))]
    found = [c for p in paths for c in _citations(p)]
    assert not found, "say what it found, or its result JSON or test:\n" + "\n".join(found)


def test_the_citation_check_sees_a_number(tmp_path):
    cited = tmp_path / "cited.py"
    cited.write_text("# see Issue " + "47's run\n# (issue #" + "3)\n# issues, 2 of them\n")
    assert [c.split(":")[1] for c in _citations(str(cited))] == ["1", "2"]  # "issues, 2": none
