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


def test_the_license_is_an_spdx_expression_that_setuptools_reads_without_a_warning():
    """`license = {text = ...}` made .ci/run's install print setuptools'
    deprecation box (three times). An SPDX string needs setuptools 77 (PEP 639), which
    the build requires; where such a setuptools is importable, pyproject.toml is read
    with every warning recorded."""
    import warnings

    with open(f"{ROOT}/pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:
        return  # (this venv's own is older: pip builds in an isolated one with >=77)
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), f"{ROOT}/pyproject.toml")
    assert not [w for w in caught if "Deprecat" in w.category.__name__], caught
