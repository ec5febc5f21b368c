"""Flags and the frozen config built from them.

- definitions.py: every command-line flag of the app, defined in one place;
- parse.py: the flags (and the launcher's environment) -> the one frozen Config;
- config.py: the run's frozen configuration: built once, validated, then read-only;
- choices.py: what each flag accepts, and what its values mean;
- modes.py: the modes a run can be (train, sweep, input, ladder, probe), declared once;
- checks.py: each value and combination refused before anything is touched, in one line;
- ranges.py: the range of every number flag;
- autotune_results.py: --kernels_from at the door: an XLA autotune results file, or a run
  folder that kept one.

This package is named `flags`, like absl's module: import absl's as
`from absl import flags as absl_flags`, never `import flags` expecting absl.
"""

from flags.config import PRICINGS, Config, ConfigError  # noqa: F401
from flags.parse import config_from_flags  # noqa: F401
from flags.definitions import FLAGS, define_flags, help_text  # noqa: F401
