"""Flags and the frozen config built from them (see definitions.py and config.py).

This package is named `flags`, like absl's module: import absl's as
`from absl import flags as absl_flags`, never `import flags` expecting absl.
"""

from flags.config import PRICINGS, Config, ConfigError  # noqa: F401
from flags.parse import config_from_flags  # noqa: F401
from flags.definitions import FLAGS, define_flags, help_text  # noqa: F401
