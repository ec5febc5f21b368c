"""The run context: what every mode knows once its checks have passed.

Every mode (train, sweep, input benchmark) starts the same way, here:
  1. `prepare(config)`: check the run folder and the dataset, choose backend and
     devices (app/engine/distribute.py), resolve the price. Nothing is
     written and no model exists yet; any failure is one line for the user.
  2. `start(context)`: draw and share the seed, set the Keras dtype policy;
  3. `create_folder(context)`: create the run folder (process 0), once the mode's
     own checks (e.g. the data's size against the batch) have passed.
The result is one frozen `RunContext`, passed whole instead of loose values.
"""

from __future__ import annotations

import dataclasses
import os

from app.engine import autotune, distribute
from app.engine.data import input_spec
from app.engine.models import check_model
from app.engine.prices import Billing, resolve_billing
from app.run import rundir
from preprocessing.datasets import check_dataset
from preprocessing.spec import BatchShape, DataError, InputSpec

SMALLEST_IMAGE = 8  # --image_size's lower bound: the batch check never over-estimates


@dataclasses.dataclass(frozen=True)
class RunContext:
    """Where and how this run executes; built by `prepare`, completed by `start`."""

    config: object  # flags.Config
    topology: distribute.Topology
    run_dir: rundir.RunDir
    spec: InputSpec  # the data builders' inputs at --global_batch_size
    billing: Billing
    started_at: float  # time.time() when billing started (the process start)
    seed: int | None = None  # set by start(): the seed every process uses
    # How XLA picks GPU kernels (app/engine/autotune.py); None where it picks none.
    xla_autotune: str | None = None

    @property
    def logdir(self) -> str:
        return self.run_dir.path

    @property
    def batch(self) -> BatchShape:
        """--global_batch_size and its shares per process and per replica."""
        return self.spec.batch

    @property
    def is_chief(self) -> bool:
        return self.topology.is_chief


def prepare(config, started_at: float) -> RunContext:
    """Checks everything that can be wrong before a file is written.

    Raises:
        TopologyError, RunDirError, DataError: one line each.
    """
    run_dir = rundir.preflight(config)
    distribute.prepare_backend(config)
    check_model(config)  # a bad --model is one line before any file or device is touched
    # The data is looked at before the framework starts (seconds, on a small host):
    # the checks read files only, for the processes the flags ask for.
    spec = input_spec(config, batch=None)
    train_examples = check_dataset(config.dataset, spec)
    xla_autotune = autotune.choose(config, train_examples)
    autotune.apply(xla_autotune)  # before JAX compiles anything
    topology = distribute.make_topology(config)
    # The batch's shares once the devices are known: checked there, read everywhere.
    spec = dataclasses.replace(spec, batch=topology.batch_shape(config.global_batch_size))
    check_batch_fits(spec)
    billing = resolve_billing(config.machine, config.pricing, config.price_per_hour_usd,
                              config.peak_tflops_per_device, topology.device_kind,
                              topology.billed_devices)
    return RunContext(config, topology, run_dir, spec, billing, started_at,
                      xla_autotune=xla_autotune)


def check_batch_fits(spec: InputSpec) -> None:
    """One batch of this process's input must fit in the host's memory.

    Raises:
        DataError: naming the batch and the memory.
    """
    size = spec.image_size or SMALLEST_IMAGE
    batch_bytes = spec.batch_size * size * size * 3 * 4  # float32 RGB, at least
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if batch_bytes > memory:
        raise DataError(f"one batch of {spec.batch_size:,} images of {size}x{size} needs at "
                        f"least {batch_bytes / 2**30:,.0f} GiB, more than this host's "
                        f"{memory / 2**30:,.0f} GiB of memory; use a smaller "
                        "--global_batch_size")


def start(context: RunContext) -> RunContext:
    """Seeds Keras and sets the dtype policy; returns the context with its seed.

    The seed is --seed, or a fresh one; process 0's on every process (model
    initialization must agree across hosts).
    """
    import keras

    config = context.config
    seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
    seed = context.topology.shared_seed(seed)
    set_random_seed(keras, seed)
    keras.config.set_dtype_policy(config.policy)
    return dataclasses.replace(context, seed=seed)


def with_steps_per_execution(context: RunContext, steps: int) -> RunContext:
    """The context with --steps_per_execution resolved (auto, 0, becomes `steps`):
    from here on one value, in the model's compile, the banner and summary.json."""
    return dataclasses.replace(context, config=dataclasses.replace(
        context.config, steps_per_execution=steps))


def set_random_seed(keras, seed: int) -> None:
    """keras.utils.set_random_seed, without importing TensorFlow to seed it.

    Trap: Keras seeds TensorFlow whenever it is installed, so on the JAX backend it
    imported TensorFlow (2-4 s, and the JAX path must not touch it). Where TensorFlow
    is not imported yet, it is not seeded: its only user here, the tf.data pipeline,
    draws every random number from explicit stateless seeds.
    """
    import sys

    from keras.src.utils import module_utils

    lazy = module_utils.tensorflow
    if "tensorflow" in sys.modules or lazy._available is not None:
        keras.utils.set_random_seed(seed)
        return
    lazy._available = False  # for this call only: Keras asks again later
    try:
        keras.utils.set_random_seed(seed)
    finally:
        lazy._available = None


def create_folder(context: RunContext) -> None:
    """Creates the run folder and saves the config (process 0): from here on the run
    leaves traces. Call it once every check of the mode has passed."""
    if context.is_chief:
        rundir.create(context.run_dir, context.config)
