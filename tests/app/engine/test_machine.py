"""What a run records of its machine and libraries (app/engine/machine.py), each checked
against a second source: the package metadata, /proc/cpuinfo, the CUDA version numbers'
own definitions."""

import importlib.metadata
import os
import platform

import pytest

from app.engine import machine


@pytest.mark.parametrize("number, kind, text", [
    (12080, "cuda", "12.8"), (13000, "cuda", "13.0"), (12020, "cuda", "12.2"),
    (91100, "cudnn", "9.11.0"), (90300, "cudnn", "9.3.0"), (8907, "cudnn", "8.9.7"),
    (0, "cuda", None), (None, "cudnn", None),
])
def test_cuda_and_cudnn_numbers_read_as_their_releases(number, kind, text):
    assert machine._dotted(number, kind) == text


def test_jax_versions_are_those_installed_and_nothing_is_imported_for_them():
    import jax  # noqa: F401 - imported, as in a JAX run

    versions = machine.software_versions("jax")
    assert versions["jax"] == importlib.metadata.version("jax")
    assert versions["jaxlib"] == importlib.metadata.version("jaxlib")
    assert isinstance(versions["xla_extension_version"], int)
    assert versions["python"] == platform.python_version()
    assert versions["cudnn"] is None and versions["cuda_runtime"] is None  # a CPU jaxlib
    tensorflow = machine.software_versions("tensorflow")
    assert tensorflow["tensorflow"] == importlib.metadata.version("tensorflow")


def test_the_host_is_the_cpu_proc_names():
    with open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    facts = machine.host()
    assert facts["cpu"] == names[0] and facts["cores"] == len(os.sched_getaffinity(0))


def test_nothing_is_sampled_off_a_gpu():
    assert machine.sampler("cpu", 1) is None and machine.sampler("tpu", 4) is None
