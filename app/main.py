"""Entry point: `python app/main.py [--flags]`; `--help` lists the flags by group.

A thin absl shell: it parses the flags, builds the frozen config once, checks the
run (app/run/context.py: run folder, devices, data, price) and hands it to one
mode of app/modes/: train (the default), sweep (--sweep, --sweep_batch_sizes), the
input benchmark (--benchmark=input), the effort ladder (--benchmark=ladder) or the
probe (--benchmark=probe). Each mode returns the summary dict it wrote.

Exit codes: 0 done (or already complete), 2 a user mistake (one line on stderr,
nothing touched), 69 no training progress (the input stream yields nothing), 74 the
run folder cannot be written (full, read-only, deleted; the last good checkpoint, if
any, is kept), 75 preempted by SIGTERM or Ctrl-C (checkpoint saved; the error line
gives the command that resumes), 76 diverged (loss NaN/Inf; the last good checkpoint
is kept), 130 Ctrl-C twice (stopped at once), or once before the run started (nothing
written). --list_machines[=PATTERN] prints the price catalog and exits 0.
"""

# First thing: a Ctrl-C before app/run/signals.py is installed (its imports take
# milliseconds) is noted here and replayed to it: one line, exit 130, never a
# KeyboardInterrupt. One in Python's own start-up (its `site` imports, ~30 ms), before
# this line runs, cannot be covered: Python raises it inside `site`, or at this
# file's "line 0" before its first statement, or, inside some imports, loses it.
# `_signal` (the builtin under `signal`) is loaded by then: `import signal` searched
# sys.path first, and a Ctrl-C in that search was a KeyboardInterrupt at this file.
import _signal

_EARLY_SIGNALS = []
if __name__ == "__main__":
    _signal.signal(_signal.SIGINT, lambda number, _: _EARLY_SIGNALS.append(number))
elif __name__ == "__mp_main__":
    # A worker multiprocessing spawned (grain's decoders) runs this file first, under
    # this name: a terminal's Ctrl-C reaches the whole process group, and is the run's
    # to take (it closes its workers), never a worker's KeyboardInterrupt traceback,
    # also while it starts (preprocessing/host/_children.py ignores it from then on).
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)

import signal  # noqa: E402
import time  # noqa: E402

# Billing starts with the process: just after the handler above, so that a signal sent
# after this time is the app's to take (tests/test_flag_door.py).
STARTED_AT = time.time()

import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

# `python app/main.py` puts app/ first on sys.path; the packages live one level up.
_APP_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_APP_DIR)
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != _APP_DIR]

# Before any heavy import: a SIGTERM or Ctrl-C from here on stops the run cleanly.
from app.run import signals  # noqa: E402

if __name__ == "__main__":
    signals.install()
    for _number in _EARLY_SIGNALS:
        signal.raise_signal(_number)  # to the watcher: one line, exit 130

from absl import app as absl_app  # noqa: E402

from flags import FLAGS, ConfigError, config_from_flags, define_flags, help_text  # noqa: E402
from flags.config import did_you_mean  # noqa: E402
from flags.parse import check_flagfiles, with_bare_actions  # noqa: E402

EXIT_USER_ERROR = 2
EXIT_STORAGE = 74
EXIT_PREEMPTED = signals.EXIT_PREEMPTED
EXIT_DIVERGED = 76


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    return code


def run(config, started_at: float | None = None) -> dict:
    """Checks the run, then runs the mode the config asks for; returns its summary.

    Raises:
        ConfigError, TopologyError, RunDirError, DataError: user mistakes (`_user_errors`).
        callbacks.stops.Preempted, callbacks.stops.Diverged: see the exit codes.
    """
    import importlib

    from app.engine.startup import TIMELINE
    from app.pricing import prices
    from app.run import context as run_context
    from flags.modes import mode_of

    if started_at is None:  # called in-process: the start-up timeline starts here
        started_at = time.time()
        TIMELINE.begin(started_at, from_process_start=False)
    prices.check_config(config)
    context = run_context.prepare(config, started_at)
    # The mode is imported only now: its modules import Keras, whose backend
    # prepare() has just chosen.
    mode = importlib.import_module(f"app.modes.{mode_of(config).module}")  # flags/modes.py
    TIMELINE.mark("mode_imports")
    try:
        return mode.run(context)
    except BaseException:
        # A mode's own checks (e.g. the data's size against the batch) run before it
        # makes the folder the run's: refused there, the run leaves nothing behind
        # either (once the folder is the run's, this does nothing).
        from app.run import rundir

        rundir.abandon(context.run_dir)
        raise


def _user_errors() -> tuple:
    from app.engine.distribute import TopologyError
    from app.run.rundir import RunDirError
    from preprocessing.spec import DataError

    return (ConfigError, TopologyError, RunDirError, DataError)


def main(argv):
    if len(argv) > 1:
        return _fail(f"unexpected argument(s) {' '.join(argv[1:])!r}; all settings are "
                     "--flags (see --helpfull)", EXIT_USER_ERROR)
    if FLAGS.list_machines is not None:  # an action: no config, no run
        return _list_machines(FLAGS.list_machines)
    from app.engine.startup import TIMELINE

    # The start-up timeline (summary.json's `startup`) runs from the process's start.
    TIMELINE.begin(STARTED_AT, from_process_start=True)
    try:
        config = config_from_flags(FLAGS)
    except ConfigError as error:
        return _fail(str(error), EXIT_USER_ERROR)
    from app.engine import cold_start

    try:
        cold_start.cuts()  # its environment variable, checked before anything is touched
    except ValueError as error:
        return _fail(str(error), EXIT_USER_ERROR)
    TIMELINE.mark("app_imports_and_flags")

    from app.engine import native_stderr
    from callbacks.stops import PROCESS_STOP, STORAGE_ERRNOS, Diverged, Preempted, StorageError

    native_stderr.start(config.accelerator)  # before any framework is imported
    try:
        PROCESS_STOP.raise_if_requested()
        run(config, started_at=STARTED_AT)
    except _user_errors() as error:
        return _fail(str(error), EXIT_USER_ERROR)
    except Preempted as error:
        return _fail(f"{error}; resume with: {_resume_command(config)}", EXIT_PREEMPTED)
    except Diverged as error:
        kept = (f"the last good checkpoint is kept: {error.checkpoint}" if error.checkpoint
                else "no checkpoint was saved before it")
        return _fail(f"{error}; stopped, {kept}", EXIT_DIVERGED)
    except StorageError as error:
        _storage_exit(str(error))
    except OSError as error:
        if error.errno not in STORAGE_ERRNOS:
            raise
        from callbacks.records.checkpoint_files import kept_line

        _storage_exit(f"cannot write {error.filename or config.logdir}: {error.strerror}; "
                      f"stopped, {kept_line(config.logdir, 'the last good checkpoint')}")
    return 0


def _list_machines(pattern: str) -> int:
    """--list_machines[=PATTERN]: the price catalog (--price_catalog's, else the app's) on
    stdout (pure Python: no framework)."""
    from app.pricing import catalog

    try:
        text = catalog.list_machines(pattern or None, path=FLAGS.price_catalog)
    except ConfigError as error:  # a damaged catalog
        return _fail(str(error), EXIT_USER_ERROR)
    if text.startswith(catalog.NO_MATCH):
        return _fail(f"{text}; accepted: part of a machine, accelerator, device or provider "
                     "name, or a regular expression (--list_machines lists every row)",
                     EXIT_USER_ERROR)
    sys.stdout.write(text + "\n")
    return 0


def _resume_command(config) -> str:
    """This process's command, with --logdir added when it was defaulted. The default
    folder is named by the config (runs/MODEL-DATASET-BACKEND-FINGERPRINT, see
    flags/config.py), relative to the current folder: the command as run resumes it
    only from the same folder, and the added --logdir names the folder to be in."""
    from app.run.summary import shell_command

    extra = [] if FLAGS.logdir else [f"--logdir={config.logdir}"]
    return shell_command(*sys.argv, *extra)


def _storage_exit(message: str):
    """Exit 74 without running libraries' exit handlers: HDF5's crashes (a segfault)
    after a write of a checkpoint failed. Summary and ledger are written by then."""
    _fail(message, EXIT_STORAGE)
    sys.stdout.flush()
    os._exit(EXIT_STORAGE)


HELP = ("--help", "-h", "-?", "--helpshort")


def parse_flags(argv):
    """absl's parsing, with its mistakes reported like every other: `error:`, exit 2.
    `--help` lists the project's flags by group (absl's lists its own ~60 first)."""
    from absl import flags as absl_flags

    if any(arg in HELP for arg in argv[1:]):
        sys.stdout.write(help_text())
        sys.exit(0)
    try:
        check_flagfiles(argv)  # before absl reads them
    except ConfigError as error:
        sys.exit(_fail(str(error), EXIT_USER_ERROR))
    try:
        return FLAGS(with_bare_actions(argv, FLAGS))  # flagfiles' bare actions too
    except absl_flags.Error as error:
        line = str(error).strip().splitlines()[0]
        while line.startswith("ERROR:"):  # absl's flagfile errors say it twice
            line = line[len("ERROR:"):].lstrip(": ")
        enum = re.match(r"flag --\w+=(.*): value should be one of <(.*)>", line)
        if enum:  # a near miss of an enum value gets a suggestion
            line += did_you_mean(enum.group(1), enum.group(2).split("|"))
        sys.exit(_fail(line, EXIT_USER_ERROR))


def _exit_now(code) -> None:
    """Ends the process once its work is done: the bill ends with the summary, and the
    frameworks' teardown after Python's exit handlers (2-5 s on a CPU, once 46 s on JAX)
    would be billed by the cloud but by no figure. Exit handlers still run."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    define_flags()
    try:
        absl_app.run(main, flags_parser=parse_flags)
    except SystemExit as done:
        code = done.code
        if code is not None and not isinstance(code, int):  # sys.exit("message")
            sys.stderr.write(f"{code}\n")
            code = 1
        _exit_now(code or 0)
