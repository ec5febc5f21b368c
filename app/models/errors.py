"""ModelError: a --model that cannot be built, said in one line (its own module, so that
the model's modules and the run's checks raise and catch it without importing the factory)."""

from flags.config import ConfigError


class ModelError(ConfigError):
    """A --model that cannot be built: a missing file, function or class, a wrong
    signature or output. One line, fit to print as is (app/main.py: exit 2)."""
