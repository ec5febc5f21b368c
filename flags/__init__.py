"""Flags and the frozen config built from them: definitions.py defines them, config.py
builds the config, choices.py holds what each accepts and checks.py refuses the rest.

This package is named `flags`, like absl's module: import absl's as
`from absl import flags as absl_flags`, never `import flags` expecting absl.
"""

from flags.config import PRICINGS, Config, ConfigError  # noqa: F401
from flags.parse import config_from_flags  # noqa: F401
from flags.definitions import FLAGS, define_flags, help_text  # noqa: F401
