"""callbacks/profiling/xprof.py: which trace session is read, and the converters' log
noise kept off the user's terminal while everything else they write reaches it (real
files, the real file descriptor 2). The converters themselves are run on real traces by
test_breakdown.py."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

from callbacks.profiling import xprof


def test_the_newest_session_with_a_trace_is_read(tmp_path):
    for name, files in (("2026_12_01_10_00_00", ["host.xplane.pb"]),
                        ("2026_12_02_10_00_00", ["a.xplane.pb", "b.xplane.pb"]),
                        ("2026_12_03_10_00_00", ["notes.txt"])):  # newest, but no trace
        (tmp_path / name).mkdir()
        for file in files:
            (tmp_path / name / file).write_bytes(b"")
    found = xprof.session(str(tmp_path))
    assert [os.path.relpath(p, tmp_path) for p in found] == [
        os.path.join("2026_12_02_10_00_00", "a.xplane.pb"),
        os.path.join("2026_12_02_10_00_00", "b.xplane.pb")]
    with pytest.raises(xprof.ProfileError, match="no trace"):
        xprof.session(str(tmp_path / "2026_12_03_10_00_00"))


def test_the_converters_noise_is_dropped_and_the_rest_of_their_stderr_passes():
    """What C++ writes to file descriptor 2 inside the block: the converters' routine
    lines are dropped, any other line reaches the process's stderr after the block."""
    script = textwrap.dedent("""\
        import os
        from callbacks.profiling import xprof
        with xprof._converter_log():
            os.write(2, b"No UnifiedProfileProcessor registered for tool: trace_viewer\\n")
            os.write(2, b"a real fault\\n")
            os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called\\n")
        os.write(2, b"after\\n")
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["a real fault", "after"]
