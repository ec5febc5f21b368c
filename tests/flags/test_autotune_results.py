"""--kernels_from at the door (flags/autotune_results.py): a file XLA would load, read
at its head in either form, or a run folder that kept one; anything else is one line
naming the path and what is accepted, before the run starts."""

import os

import pytest

from conftest import ROOT, error_lines, run_cli
from flags import Config, ConfigError
from flags.autotune_results import (
    KEPT,
    AutotuneFileError,
    binary_form,
    check,
    resolve,
    text_form,
)

# The head of XLA's dump on an H100 (run cx1 of
# benchmarks/results/2026-12-06-h100-autotune-spread.json): two emitter
# entries, a cuDNN convolution's and a cuBLASLt call's.
DUMPED = os.path.join(ROOT, "tests", "fixtures", "autotune_h100_head.textproto")
# XLA's older text form (autotune_results.proto): a version, then results.
OLD_FORM = b"""# proto-file: xla/autotune_results.proto
# proto-message: xla.AutotuneResults
version: 3
results {
  device: "CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz"
  hlo: "{...}"
  result { run_time { nanos: 31744 } conv { algorithm: 28 } }
}
"""
# The binary form of `entries { key { target { device: "ab" } } }`, wire by hand.
BINARY = bytes([0x0A, 0x08, 0x0A, 0x06, 0x0A, 0x04, 0x0A, 0x02]) + b"ab"


def test_a_dump_in_text_form_and_in_binary_form_are_accepted(tmp_path):
    check(DUMPED, "x")
    old = tmp_path / "old.txt"
    old.write_bytes(OLD_FORM)
    check(str(old), "x")
    binary = tmp_path / "results.pb"
    binary.write_bytes(BINARY)
    check(str(binary), "x")
    assert text_form(open(DUMPED, "rb").read()) is None and binary_form(BINARY, True) is None


@pytest.mark.parametrize("content, why", [
    (b"", "is empty"),
    (b'{"entries": []}', "neither form"),  # JSON
    (b"hello world\n", "neither form"),
    (b"\x1f\x8b\x08\x00" + bytes(40), "neither form"),  # gzip: XLA reads no .gz
    (BINARY[:-3], "neither form"),  # a binary file cut short
    (b"model {\n}\n", "its first field is 'model'"),
])
def test_what_xla_could_not_load_is_refused_with_why(tmp_path, content, why):
    path = tmp_path / "results.textproto"
    path.write_bytes(content)
    with pytest.raises(AutotuneFileError, match=why) as refused:
        check(str(path), f"--kernels_from={path}")
    assert str(refused.value).startswith(f"--kernels_from={path} ")
    assert "accepted: an XLA autotune results file" in str(refused.value)


def test_a_run_folder_serves_the_file_it_kept(tmp_path):
    with pytest.raises(AutotuneFileError, match="a folder without kept kernels"):
        resolve(str(tmp_path))
    kept = tmp_path / KEPT
    kept.parent.mkdir()
    kept.write_bytes(open(DUMPED, "rb").read())
    assert resolve(str(tmp_path)) == str(kept)
    with pytest.raises(AutotuneFileError, match="cannot be read"):
        resolve(str(tmp_path / "missing.textproto"))
    os.mkfifo(tmp_path / "fifo")  # would block an open
    with pytest.raises(AutotuneFileError, match="not a regular file"):
        resolve(str(tmp_path / "fifo"))


def test_the_config_checks_the_file_and_the_backend():
    Config(backend="jax", kernels_from=DUMPED, keep_kernels=True, logdir="x")
    with pytest.raises(ConfigError, match="accepted with --backend=jax"):
        Config(kernels_from=DUMPED, logdir="x")
    with pytest.raises(ConfigError, match="--keep_kernels chooses"):
        Config(keep_kernels=True, logdir="x")
    with pytest.raises(ConfigError, match="--kernels_from=/nonexistent cannot be read"):
        Config(backend="jax", kernels_from="/nonexistent", logdir="x")


def test_a_bad_file_is_one_line_before_the_run_starts(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("these are my notes\n")
    done = run_cli("--backend=jax", f"--kernels_from={bad}", f"--logdir={tmp_path / 'run'}")
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0].startswith(f"error: --kernels_from={bad} is neither form")
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()


def test_a_value_with_a_newline_is_one_line_with_the_newline_escaped(tmp_path):
    """A path holding a newline was printed raw, so its error spanned two lines; now the
    one line shows the value as Python escapes it. A folder's kept file likewise."""
    odd = str(tmp_path / "a\nb")
    with pytest.raises(AutotuneFileError) as caught:
        resolve(odd)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"--kernels_from={odd!r} cannot be read")
    done = run_cli("--backend=jax", f"--kernels_from={odd}", f"--logdir={tmp_path / 'run'}")
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0] == (f"error: --kernels_from={odd!r} cannot be read (No such file or "
                         "directory); accepted: an XLA autotune results file (.textproto or "
                         ".pb, as --xla_gpu_dump_autotune_results_to writes it) or a run "
                         "folder that kept one (--keep_kernels)")
    assert not any(line.startswith("b") for line in done.stderr.splitlines())
