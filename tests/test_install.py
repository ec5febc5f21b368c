"""The install recipes README prints stay in step with pyproject.toml."""

import re
import tomllib

from conftest import ROOT


def _names(requirements) -> dict[str, str]:
    return {re.split(r"[\[<>=!~ ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-"): r.strip()
            for r in requirements if r.strip() and not r.strip().startswith("#")}


def test_the_gpu_host_requirements_are_pyprojects_without_tensorflow():
    with open(f"{ROOT}/pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    base = _names(project["dependencies"])
    gpu_extra = _names(project["optional-dependencies"]["gpu"])
    with open(f"{ROOT}/requirements-jax-gpu.txt") as f:
        listed = _names(f.read().splitlines())
    assert "tensorflow" not in listed
    expected = {name: spec for name, spec in {**base, **gpu_extra}.items() if name != "tensorflow"}
    expected["jax"] = "jax[cuda13]"  # the CUDA build instead of the CPU wheel
    assert listed == expected


def test_the_readme_prints_that_install():
    readme = open(f"{ROOT}/README.md").read()
    assert "pip install --no-deps -e . && .venv/bin/python -m pip install -r requirements-jax-gpu.txt" in readme
