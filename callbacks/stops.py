"""The exceptions that end training early, importable without Keras.

`app/main.py` maps them to exit codes before Keras (and its backend) is imported,
so they live apart from the callbacks that raise them.
"""


class Preempted(Exception):
    """Training stopped after SIGTERM; a checkpoint was saved first."""

    def __init__(self, step: int, path: str | None):
        super().__init__(f"preempted (SIGTERM) at step {step}; checkpoint {path}")
        self.step, self.path = step, path


class Diverged(Exception):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, loss: float):
        super().__init__(f"training loss became {loss} at step {step}")
        self.step, self.loss = step, loss
