"""Flags and files at the door (issue 38; --list_machines of issue 41): every number
flag has a range, flagfiles are text without cycles, a user's model is built before
the run folder exists, a Ctrl-C before the run is one line, and each mistake is one
`error:` line, exit 2, nothing written. Real processes where the door is the process."""

import pytest
from conftest import error_lines
from processes import run

from flags.config import Config, ConfigError
from flags.ranges import FLOAT_RANGES, INT_RANGES


def one_error(done, code=2):
    """The single `error:` line of a process expected to end with `code`."""
    errors = error_lines(done.stderr)
    assert done.returncode == code and len(errors) == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    return errors[0]


# ------------------------------------------------------------------ number ranges
def config(**values):
    """A Config that fails, if at all, for `values` (multi-host settings allowed)."""
    return Config(backend="jax", coordinator_address="host:1234", **values)


@pytest.mark.parametrize("name", sorted(INT_RANGES))
def test_every_integer_flag_refuses_values_past_its_range(name):
    low, high = INT_RANGES[name]
    for value in (high + 1, 10**20):
        with pytest.raises(ConfigError) as error:
            config(**{name: value})
        assert str(error.value).startswith(f"--{name}={value} "), str(error.value)
    with pytest.raises(ConfigError, match=f"^--{name}={low - 1} "):
        config(**{name: low - 1})
    config(**{name: high, **({"num_processes": high + 1} if name == "process_id" else {})})


@pytest.mark.parametrize("name", sorted(FLOAT_RANGES))
def test_every_float_flag_refuses_values_past_its_range(name):
    low, high = FLOAT_RANGES[name]
    with pytest.raises(ConfigError) as error:
        config(**{name: high * 2 + 1})
    assert str(error.value).startswith(f"--{name}={high * 2 + 1} "), str(error.value)
    with pytest.raises(ConfigError, match=f"^--{name}="):
        config(**{name: low - 1})


def test_a_huge_number_on_the_command_line_is_one_line(tmp_path):
    done = run(["--epochs=99999999999999999999", f"--logdir={tmp_path / 'run'}"])
    assert one_error(done) == ("error: --epochs=99999999999999999999 is out of range; "
                               "accepted: 1..1000000")
    done = run(["--price_per_hour_usd=1e300", f"--logdir={tmp_path / 'run'}"])
    assert one_error(done) == ("error: --price_per_hour_usd=1e+300 is out of range; "
                               "accepted: 0..1000000")
    assert not (tmp_path / "run").exists()
