"""The measured choice of kernels (app/engine/measured.py): two programs of one step timed
against each other, interleaved, and the autotuned one kept only where it wins by 2%.

On a CPU XLA picks no GPU kernels, so the stand-ins are real jitted step functions of
controllable cost (one doing more matrix products than the other); the real step's
A/B is run through precompile and settle on a tiny Keras model; a CPU run of the app
does not measure, and says so once."""

import json
import os
import types

import pytest

from app.engine import kernel_choice, measured
from conftest import ROOT, run_cli, run_python
from measured_step import HELPERS

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")


@pytest.fixture(autouse=True)
def no_choice_left_behind():
    """A choice noted here (kernels.note_choice) is this process's: gone after each test,
    so that another test's kernels block in this process does not carry it."""
    from app.engine import kernels

    yield
    kernels._at_start.pop("choice", None)


def stand_in(products: int):
    """A jitted step (state, data) -> (loss, state) doing `products` chained matrix
    products of the batch: its cost grows with them (donating its state, as Keras's)."""
    import jax
    import jax.numpy as jnp

    def step(state, data):
        out = jax.lax.fori_loop(0, products, lambda i, y: jnp.tanh(y @ data), data)
        loss = out.sum() * 1e-9
        return loss, [s + loss for s in state]

    return jax.jit(step, donate_argnums=0)


def ab(autotuned: int, heuristic: int, windows: int = 3) -> dict:
    import jax.numpy as jnp

    programs = {"autotuned": stand_in(autotuned), "heuristic": stand_in(heuristic)}
    states = {name: [jnp.zeros(4)] for name in programs}
    data = jnp.full((160, 160), 0.01, jnp.float32)
    return measured.decide(measured.time_programs(programs, states, data, windows=windows))


def test_a_slower_autotuned_program_is_rejected():
    """XLA's autotuner was fooled: its program does 8x the work of the heuristic one."""
    choice = ab(autotuned=48, heuristic=6)
    assert choice["kept"] == "heuristic", choice
    assert choice["autotuned_step_ms"] > 2 * choice["heuristic_step_ms"], choice
    assert choice["autotuned_gain"] < -0.5 and choice["windows"] == 3
    assert all(len(v) == 3 for v in choice["window_step_ms"].values())


def test_a_faster_autotuned_program_is_kept():
    choice = ab(autotuned=6, heuristic=48)
    assert choice["kept"] == "autotuned", choice
    assert choice["autotuned_gain"] > 1.0, choice  # over twice as fast


@pytest.mark.parametrize("autotuned, heuristic, kept", [
    ([10.0, 10.1, 9.9], [10.15, 10.2, 10.1], "heuristic"),  # 1.5% faster: under the margin
    ([10.0, 10.1, 9.9], [10.25, 10.3, 9.0], "autotuned"),  # 2.5% faster (medians 10.0, 10.25)
    ([10.0, 50.0, 9.9], [10.5, 10.6, 10.4], "autotuned"),  # a hiccup is not the program's
    ([10.0, 10.0, 10.0], [10.2, 10.2, 10.2], "autotuned"),  # exactly 2%: kept
])
def test_the_autotuned_program_must_win_by_two_percent(autotuned, heuristic, kept):
    choice = measured.decide({"autotuned": autotuned, "heuristic": heuristic})
    assert choice["kept"] == kept, choice
    assert choice["margin"] == 0.02


def test_the_windows_alternate_and_each_program_warms_up_first():
    """Each program steps once to warm up, then the windows go A B, B A, A B: a drift
    of the machine over the measurement hits both programs alike."""
    import jax.numpy as jnp

    calls = []

    def recording(name, step):
        def run(state, data):
            calls.append(name)
            return step(state, data)
        return run

    programs = {"autotuned": recording("a", stand_in(1)), "heuristic": recording("h", stand_in(1))}
    states = {name: [jnp.zeros(2)] for name in programs}
    measured.time_programs(programs, states, jnp.ones((4, 4)), windows=3, steps=2)
    assert "".join(calls) == "ah" + "aahh" + "hhaa" + "aahh"


REAL_STEP = HELPERS + """
before = [np.array(v.numpy()) for v in model.trainable_variables]
plan = measured.Plan(variants=[("heuristic", measured.HEURISTIC_OPTIONS), ("autotuned", {})],
                     key=key, store=store)
compiling = compiled(plan.variants, plan)
block = measured.settle(compiling, model)
untouched = all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables))
assert compiling.hand_to(model) == ["train"]
x, y = np.ones((64, 16), "float32"), np.zeros((64, 2), "float32")
history = model.fit(x, y, batch_size=32, epochs=1, verbose=0)
print(json.dumps({"block": block, "untouched": untouched, "variants_left": len(compiling.variants),
                  "fallbacks": compiling.handed["train"].fallbacks,
                  "trained": bool(np.isfinite(history.history["loss"][0]))}))
"""


def test_the_real_step_is_timed_on_copies_and_the_kept_program_is_fits(tmp_path):
    """Both programs of a Keras model's training step, compiled from one lowering in the
    thread, run the real step on copies of the model's state (its own variables stay as
    they were: the step donates its state) and a batch of its shapes; the kept one is
    handed to fit, which runs it; the other is dropped. On a CPU both chose the same
    kernels (none), which the choice says."""
    found = run_python(REAL_STEP, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                   "PYTHONPATH": f"{NO_TF}:{ROOT}", "STORE": str(tmp_path)})
    block = found["block"]
    assert found["untouched"] and found["trained"] and found["fallbacks"] == 0
    assert found["variants_left"] == 0
    assert block["how"] == "measured" and block["kept"] in ("autotuned", "heuristic")
    assert block["windows"] == 3 and block["kernels_differ"] == 0
    assert set(block["compile_seconds"]) == {"heuristic", "autotuned"}
    assert all(len(v) == 3 and min(v) > 0 for v in block["window_step_ms"].values())


def test_a_program_raising_on_its_first_step_is_named_unless_memory_ran_out():
    import jax.numpy as jnp

    def raising(state, data):
        raise RuntimeError(raising.message)

    for raising.message, named in (("INTERNAL: raw_hash_map<>::at", True),
                                   ("RESOURCE_EXHAUSTED: Out of memory, 2.1GiB", False)):
        programs = {"autotuned": stand_in(1), "heuristic": raising}
        with pytest.raises(measured.ProgramFailed if named else RuntimeError) as error:
            measured.time_programs(programs, {n: [jnp.zeros(2)] for n in programs},
                                   jnp.ones((4, 4)), windows=1, steps=1)
        assert (getattr(error.value, "name", None), str(error.value.__cause__ or error.value)) \
            == (("heuristic", raising.message) if named else (None, raising.message))


ONE_DOES_NOT_RUN = HELPERS + """
plan = measured.Plan(variants=[("heuristic", measured.HEURISTIC_OPTIONS), ("autotuned", {})],
                     key=key, store=store)
compiling = compiled(plan.variants, plan)

class Fails:  # the compiled program, which raises when it runs, as XLA's execute did
    def __init__(self, ran): self.ran = ran
    def __getattr__(self, name): return getattr(self.ran, name)
    def __call__(self, state, data): raise IndexError("absl::container_internal::raw_hash_map<>::at")

compiling.variants[os.environ["FAILS"]] = Fails(compiling.variants[os.environ["FAILS"]])
block = measured.settle(compiling, model)
assert compiling.hand_to(model) == ["train"]
history = model.fit(np.ones((64, 16), "float32"), np.zeros((64, 2), "float32"), batch_size=32,
                    epochs=1, verbose=0)
print(json.dumps({"block": block, "fallbacks": compiling.handed["train"].fallbacks,
                  "trained": bool(np.isfinite(history.history["loss"][0]))}))
"""


@pytest.mark.parametrize("fails, kept", [("heuristic", "autotuned"), ("autotuned", "heuristic")])
def test_a_program_that_does_not_run_is_named_and_the_other_is_the_step(tmp_path, fails, kept):
    """ViT-B/16 on an H100 (2026-12-07): its heuristic program raised when it ran, and the
    run said only "timing them failed". The one that failed is named, the other is fit's
    step; an autotuned one goes to the store (on a CPU XLA writes no results to keep)."""
    found = run_python(ONE_DOES_NOT_RUN, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                          "PYTHONPATH": f"{NO_TF}:{ROOT}",
                                          "STORE": str(tmp_path), "FAILS": fails})
    block = found["block"]
    assert block["kept"] == kept and block["how"] == "unmeasured", block
    assert block["not_measured"] == (f"the {fails} program did not run (IndexError: "
                                     "absl::container_internal::raw_hash_map<>::at)")
    assert found["trained"] and found["fallbacks"] == 0
    assert ("kept_in" in block) == (kept == "autotuned")
    assert f" kept, not measured: {block['not_measured']}" in kernels_words(block)


KEPT_AND_LOADED = HELPERS + """
# The timing is fixed here (the heuristic 26% faster, as ConvNeXt-T's on an H100), so that
# what is kept and loaded is known.
measured.time_programs = lambda programs, states, data: {"autotuned": [105.4, 105.0, 106.0],
                                                         "heuristic": [78.1, 78.0, 78.3]}
kept_file = os.path.join(store, "run", "kernels", "autotune.textproto")  # --keep_kernels'
os.makedirs(os.path.dirname(kept_file))
open(kept_file, "w").write("entries {}")  # as XLA wrote it: the autotuned program's
plan = measured.Plan(variants=[("heuristic", measured.HEURISTIC_OPTIONS), ("autotuned", {})],
                     key=key, store=store, kept_file=kept_file)
first = measured.settle(compiled(plan.variants, plan), model)
set_aside = [os.path.exists(kept_file), os.path.exists(os.path.join(
    os.path.dirname(kept_file), "autotuned_not_run.textproto"))]
found, line = kernel_choice.find(store, key)
again = measured.Plan(variants=[("kept", measured.HEURISTIC_OPTIONS)], key=key, store=store,
                      found=found)
second = measured.settle(compiled(again.variants, again), model)
block, _ = kernels.describe("", served=False, loaded_from=None)
print(json.dumps({"first": first, "line": line, "second": second,
                  "closing": kernels.line(block), "set_aside": set_aside}))
"""


def test_the_kept_choice_is_loaded_by_the_next_run_and_measured_nothing(tmp_path):
    found = run_python(KEPT_AND_LOADED, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                         "PYTHONPATH": f"{NO_TF}:{ROOT}",
                                         "STORE": str(tmp_path)})
    first, second = found["first"], found["second"]
    folder = kernel_choice.entry_folder(str(tmp_path), {
        "device_kind": "cpu", "model": "tiny", "per_device_batch": 32, "precision": "float32",
        "image_size": None})
    assert first["kept"] == "heuristic" and first["kept_in"] == folder
    # --keep_kernels' file held the autotuned program's kernels, which did not run: set
    # aside, so that --kernels_from of the run folder cannot load them as this run's
    assert found["set_aside"] == [False, True] and "heuristic program ran" in first[
        "keep_kernels"]
    assert first["autotuned_gain"] == round(78.1 / 105.4 - 1, 4)
    assert found["line"] == f"loaded from {folder}"
    assert second["how"] == "loaded" and second["kept"] == "heuristic"
    assert second["loaded_from"] == folder and second["measured"]["heuristic_step_ms"] == 78.1
    assert found["closing"].endswith(
        f"; XLA's heuristic kernels kept (35.0% faster than the autotuned when measured): "
        f"the measured choice loaded from {folder}")


def plan_context(tmp_path, **config):
    values = dict(keep_kernels=False, kernels_from="", backend="jax", accelerator="gpu",
                  model="applications:ConvNeXtTiny", policy="mixed_bfloat16")
    values.update(config)
    return types.SimpleNamespace(
        config=types.SimpleNamespace(**values), xla_autotune="measured",
        logdir=str(tmp_path / "run"),
        topology=types.SimpleNamespace(device_kind="NVIDIA H100 80GB HBM3"),
        batch=types.SimpleNamespace(per_replica=256))


def test_a_miss_compiles_both_programs_and_a_hit_compiles_the_kept_one(tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.setenv(kernel_choice.STORE_ENV, str(tmp_path / "store"))
    context = plan_context(tmp_path)
    plan = measured.plan(context, 224, hand_to_fit=True)
    assert [name for name, _ in plan.variants] == ["heuristic", "autotuned"]
    assert plan.variants[0][1] == measured.HEURISTIC_OPTIONS  # first, reading no folder
    assert plan.variants[1][1] == {measured.DUMP_RESULTS: plan.results}
    assert capsys.readouterr().out.startswith("kernel choice: none kept for this step in ")
    results = plan.results
    with open(results, "w") as f:  # as XLA writes it
        f.write(open(os.path.join(ROOT, "tests", "fixtures", "autotune_h100_head.textproto")).read())
    kernel_choice.save(plan.store, plan.key, {"kept": "autotuned"}, results)
    again = measured.plan(context, 224, hand_to_fit=True)
    name, options = again.variants[0]
    assert name == "kept" and options == {
        "xla_gpu_load_autotune_results_from": again.found["results"],
        measured.REQUIRE_COMPLETE: True}
    assert capsys.readouterr().out.startswith("kernel choice: loaded from ")
    # a user's --kernels_from, or fit compiling its own step: nothing measured, said once
    for context_, hand in ((plan_context(tmp_path, kernels_from="/x"), True),
                           (context, False)):
        assert measured.plan(context_, 224, hand_to_fit=hand).variants is None
        said = capsys.readouterr().out.splitlines()
        assert len(said) == 1 and said[0].startswith("kernel choice: the autotuned kernels "
                                                     "kept, not measured: ")


def test_a_cpu_run_measures_nothing_and_says_so_once(tmp_path):
    done = run_cli("--backend=jax", "--dataset=synthetic", "--image_size=16",
                   "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=6",
                   "--validation_steps=-1", "--verbose=2", f"--logdir={tmp_path / 'run'}",
                   env={"JAX_PLATFORMS": "cpu", "PYTHONPATH": f"{NO_TF}:{ROOT}"})
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("kernel choice: ")]
    assert said == ["kernel choice: not measured: a CPU run: XLA picks no GPU kernels, so "
                    "there are no two programs to time"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["kernels"]["choice"] == {
        "kept": None, "not_measured": "a CPU run: XLA picks no GPU kernels, so there are no "
                                      "two programs to time"}
    assert "kernels_measured" not in [p["part"] for p in summary["startup"]["parts"]]
    assert summary["xla_autotune"] is None


def test_a_short_run_keeps_the_heuristic_and_says_what_measuring_would_cost(tmp_path):
    """auto keeps XLA's heuristic for a short run of the app's ResNets (compiling is most
    of it): the run's end says what measuring would have added, from its own compile and
    step; a user's own --xla_autotune=heuristic is not told."""
    from app.engine import kernels

    def ended(asked):
        context = types.SimpleNamespace(
            config=types.SimpleNamespace(xla_autotune=asked, keep_kernels=False),
            xla_autotune="heuristic", logdir=str(tmp_path))
        result = {"kernels": {"digest": "0" * 64, "library_calls": 60, "fusions": 90,
                              "source": "autotuned"}, "step_time_ms": 20.0}
        measured.complete(result, context, types.SimpleNamespace(
            compiling=types.SimpleNamespace(seconds=7.0)))
        return result["kernels"]

    block = ended("auto")
    # 2 x (1 + 30) timed steps of 20 ms, and the autotuned compile at 2.3x the 7 s one
    assert block["choice"]["would_cost_seconds"] == round(62 * 0.020 + 2.3 * 7.0, 1)
    assert kernels.line(block).endswith(
        "; XLA's heuristic kernels kept, not measured: a short run, where compiling is most "
        "of the job: measuring would add about 17 s (the autotuned compile, ~2.3x this "
        "run's, and 62 timed steps)")
    assert "choice" not in ended("heuristic")


def test_the_driver_is_read_from_the_kernel_module_where_nvml_cannot_be(tmp_path):
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  "
                       "Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 2025\n"
                       "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
    assert measured.driver_facts(str(version)) == {"driver": "580.95.05", "cuda_driver": None}
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar 5\n")
    assert measured.driver_facts(str(version))["driver"] == "550.54.15"
    assert measured.driver_facts(str(tmp_path / "absent"))["driver"] is None


AS_IF_ON_A_GPU = """
import runpy, sys
from app.engine import autotune

# On a CPU XLA picks no GPU kernels and auto measures nothing: here auto is made to
# measure anyway, so that the whole path runs as on a GPU (two programs of one step).
plain = autotune.choose
autotune.choose = lambda config, examples: "measured" if plain(config, examples) is None \\
    and config.backend == "jax" else plain(config, examples)
# Both programs are one on a CPU: a margin none can meet keeps the heuristic, which is
# what the next run loads (an autotuned winner's results XLA writes on a GPU only).
import functools
from app.engine import measured
measured.decide = functools.partial(measured.decide, margin=10.0)
sys.argv = ["app/main.py"] + sys.argv[1:]
runpy.run_path("app/main.py", run_name="__main__")
"""


def test_the_measured_path_end_to_end_then_the_next_run_loads_its_choice(tmp_path):
    """Through the app, as on a GPU: the step compiled twice in the thread (two compiles
    of train_step in the start-up timeline, a part of its own for the timing), the A/B
    said in one line and in the closing kernels line and summary.json; the next run of the
    same step finds the kept choice and measures nothing."""
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "KERAS_BACKEND": "jax",
           "PYTHONPATH": f"{NO_TF}:{ROOT}", "PYTHONUNBUFFERED": "1",
           kernel_choice.STORE_ENV: str(tmp_path / "store")}
    flags = ["--backend=jax", "--dataset=synthetic", "--image_size=16", "--global_batch_size=8",
             "--epochs=1", "--steps_per_epoch=6", "--validation_steps=-1", "--verbose=2"]

    def run(name):
        done = subprocess.run([sys.executable, "-c", AS_IF_ON_A_GPU, *flags,
                               f"--logdir={tmp_path / name}"], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        said = [line for line in done.stdout.splitlines() if line.startswith("kernel choice: ")]
        return said, json.loads((tmp_path / name / "summary.json").read_text())

    said, summary = run("first")
    assert len(said) == 2 and said[0].startswith("kernel choice: none kept for this step in ")
    choice = summary["kernels"]["choice"]
    assert choice["how"] == "measured" and choice["kept"] == "heuristic"
    assert choice["margin"] == 10.0 and choice["kernels_differ"] == 0
    assert said[1] == "kernel choice: " + kernels_words(choice)
    assert summary["xla_autotune"] == "measured" and summary["images_per_sec"] > 0
    from callbacks.records import events

    cards = [value.tensor.string_val[0].decode()
             for path in events.event_files(str(tmp_path / "first" / "train"))
             for event in events.read_events(path) for value in event.summary.value
             if value.tag == "machine_state"]
    assert len(cards) == 1 and kernels_words(choice) in cards[0]  # TensorBoard's text card
    startup = summary["startup"]
    assert "kernels_measured" in [p["part"] for p in startup["parts"]]
    (train,) = [p for p in startup["programs"] if p["program"] == "train_step"]
    assert train["compiles"] + train["cache_reads"] == 2  # the two programs of one step
    assert set(startup["kernel_choice"]["compile_seconds"]) == {"heuristic", "autotuned"}
    said, again = run("second")
    assert said == [f"kernel choice: loaded from {choice['kept_in']}",
                    "kernel choice: " + kernels_words(again["kernels"]["choice"])]
    assert again["kernels"]["choice"]["how"] == "loaded"
    assert again["kernels"]["choice"]["measured"]["heuristic_step_ms"] == \
        choice["heuristic_step_ms"]
    assert "kernels_measured" in [p["part"] for p in again["startup"]["parts"]]
    (train,) = [p for p in again["startup"]["programs"] if p["program"] == "train_step"]
    assert train["compiles"] + train["cache_reads"] == 1  # the kept one only


def kernels_words(choice):
    from app.engine import kernels

    return kernels.choice_words(choice)
