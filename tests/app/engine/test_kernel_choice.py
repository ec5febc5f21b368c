"""Where a measured choice of kernels is kept (app/engine/kernel_choice.py): found again
under the same key; another driver or XLA version measures again, saying which field
differs; a damaged, empty or foreign file is refused in one line."""

import json
import os
import shutil
import types

import pytest

from app.engine import kernel_choice
from conftest import ROOT

DUMPED = os.path.join(ROOT, "tests", "fixtures", "autotune_h100_head.textproto")
SOFTWARE = {"cuda_runtime": "13.0", "cudnn": "9.19.0", "jaxlib": "0.11.2",
            "xla_extension_version": 412}
DRIVER = {"driver": "580.95.05", "cuda_driver": "13.0"}
MEASURED = {"kept": "autotuned", "how": "measured", "autotuned_step_ms": 57.5,
            "heuristic_step_ms": 58.2, "autotuned_gain": 0.0122, "margin": 0.02}


def key(**changes):
    config = types.SimpleNamespace(model="applications:ConvNeXtTiny", policy="mixed_bfloat16")
    software = {**SOFTWARE, **{k: v for k, v in changes.items() if k in SOFTWARE}}
    driver = {**DRIVER, **{k: v for k, v in changes.items() if k in DRIVER}}
    return kernel_choice.make_key(config, "NVIDIA H100 80GB HBM3", 256, 224, software, driver)


def kept_autotuned(store, k):
    results = store / "autotuned.textproto"
    shutil.copy(DUMPED, results)
    return kernel_choice.save(str(store), k, MEASURED, str(results))


def test_a_choice_kept_under_its_key_is_found_again_with_its_results(tmp_path):
    folder = kept_autotuned(tmp_path, key())
    assert os.path.basename(folder).startswith("applications_ConvNeXtTiny-b256-mixed_bfloat16-224px-")
    found, line = kernel_choice.find(str(tmp_path), key())
    assert line == f"loaded from {folder}"
    assert found == {"kept": "autotuned", "results": os.path.join(folder, "autotune.textproto"),
                     "measured": MEASURED, "folder": folder}
    heuristic = kernel_choice.save(str(tmp_path / "h"), key(), {**MEASURED, "kept": "heuristic"},
                                   None)
    assert kernel_choice.find(str(tmp_path / "h"), key())[0]["results"] is None
    assert json.loads(open(os.path.join(heuristic, "choice.json")).read())["results"] is None


@pytest.mark.parametrize("change, words", [
    ({"driver": "575.57.08"}, "driver 580.95.05, here 575.57.08"),
    ({"xla_extension_version": 413}, "xla_extension_version 412, here 413"),
    ({"jaxlib": "0.11.3"}, "jaxlib 0.11.2, here 0.11.3"),
])
def test_another_driver_or_xla_measures_again_and_says_what_differs(tmp_path, change, words):
    kept_autotuned(tmp_path, key())
    found, line = kernel_choice.find(str(tmp_path), key(**change))
    assert found is None
    assert line == (f"none kept for this step in {tmp_path} (one kept for this step under "
                    f"another key: {words}): measuring")


def test_a_damaged_empty_or_foreign_file_is_refused_in_one_line(tmp_path):
    folder = kept_autotuned(tmp_path, key())
    choice = os.path.join(folder, "choice.json")
    results = os.path.join(folder, "autotune.textproto")
    good = open(choice).read()

    def refused(why):
        found, line = kernel_choice.find(str(tmp_path), key())
        assert found is None and "\n" not in line, line
        assert line.startswith(f"{choice} ") and line.endswith(": measuring again"), line
        assert why in line, line

    open(choice, "w").write(good[:40])  # cut short
    refused("is damaged (")
    open(choice, "w").write("")
    refused("is damaged (")
    open(choice, "w").write(good.replace('"kept": "autotuned"', '"kept": "fastest"'))
    refused("is damaged ('kept' holds 'fastest'")
    # foreign: a choice.json another machine wrote, put where this key's belongs
    record = json.loads(good)
    record["key"]["device_kind"] = "NVIDIA H200"
    open(choice, "w").write(json.dumps(record))
    refused("was measured for another step or machine (device_kind NVIDIA H200, here "
            "NVIDIA H100 80GB HBM3)")
    open(choice, "w").write(good)
    open(results, "w").write("")  # XLA's results file emptied
    refused("holds a results file XLA could not load:")
    open(results, "w").write('{"not": "an autotune file"}')
    refused("holds a results file XLA could not load:")
    os.remove(results)
    refused("cannot be read")
    shutil.copy(DUMPED, results)
    assert kernel_choice.find(str(tmp_path), key())[0] is not None


def test_without_a_store_nothing_is_kept_and_the_run_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv(kernel_choice.STORE_ENV, "")
    assert kernel_choice.store_folder() is None
    assert kernel_choice.find(None, key())[1].startswith("no store of kernel choices")
    monkeypatch.delenv(kernel_choice.STORE_ENV)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    assert kernel_choice.store_folder() == str(tmp_path / "kernel_choices")


def test_a_model_from_a_file_is_keyed_by_its_contents_too(tmp_path):
    source = tmp_path / "net.py"
    source.write_text("def make(): pass\n")
    config = types.SimpleNamespace(model=f"{source}:make", policy="float32")
    first = kernel_choice.make_key(config, "x", 8, 32, SOFTWARE, DRIVER)
    source.write_text("def make(): return 1\n")
    second = kernel_choice.make_key(config, "x", 8, 32, SOFTWARE, DRIVER)
    assert first["model_file_sha256"] != second["model_file_sha256"]
    assert kernel_choice.entry_name(first) != kernel_choice.entry_name(second)
