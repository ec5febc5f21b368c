"""Entry point: `python app/main.py [--flags]` (see README.md, BUILD.md, --helpfull).

A thin absl shell: it parses the flags, builds the frozen config once, and calls
`app.train.run(config)`. Exit codes: 0 done, 2 a user mistake (one line on stderr,
nothing touched), 75 preempted (checkpoint saved; rerun the same command to
resume), 76 diverged (loss NaN/Inf; the last good checkpoint is kept).
"""

import os
import sys
import time

STARTED_AT = time.time()  # billing starts with the process

# `python app/main.py` puts app/ first on sys.path; the packages live one level up.
_APP_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_APP_DIR)
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != _APP_DIR]

from absl import app as absl_app  # noqa: E402

from flags import FLAGS, ConfigError, config_from_flags, define_flags  # noqa: E402

EXIT_USER_ERROR = 2
EXIT_PREEMPTED = 75
EXIT_DIVERGED = 76


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    return code


def main(argv):
    if len(argv) > 1:
        return _fail(f"unexpected argument(s) {' '.join(argv[1:])!r}; all settings are "
                     "--flags (see --helpfull)", EXIT_USER_ERROR)
    try:
        config = config_from_flags(FLAGS)
    except ConfigError as error:
        return _fail(str(error), EXIT_USER_ERROR)

    from app.train import USER_ERRORS, run
    from callbacks.stops import Diverged, Preempted

    try:
        run(config, started_at=STARTED_AT)
    except USER_ERRORS as error:
        return _fail(str(error), EXIT_USER_ERROR)
    except Preempted as error:
        return _fail(f"{error}; rerun the same command to resume", EXIT_PREEMPTED)
    except Diverged as error:
        return _fail(f"{error}; stopped, the last good checkpoint is kept in "
                     f"{config.logdir}/checkpoints", EXIT_DIVERGED)
    return 0


if __name__ == "__main__":
    define_flags()
    absl_app.run(main)
