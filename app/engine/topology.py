"""Where a run executes: its processes, devices and their kind, the strategy (TensorFlow)
or distribution (JAX) that spreads a step over them, and the global batch shared out
over them (`Topology.batch`). app/engine/distribute.py makes it, once; the rest of the
app reads it (its facts go into summary.json: `describe`).
"""

from __future__ import annotations

import contextlib
import dataclasses

from preprocessing.spec import BatchError, BatchShape


class TopologyError(RuntimeError):
    """The devices or hosts asked for are not there; the message is one line."""


@dataclasses.dataclass
class Topology:
    """Where the run executes; built once by `make_topology`."""

    backend: str
    accelerator: str
    num_processes: int
    process_index: int
    devices_per_process: int
    device_kind: str
    strategy: object = None  # tf.distribute.Strategy (TensorFlow backend)
    distribution: object = None  # keras.distribution.Distribution (JAX backend)
    jit_compile: object = "auto"  # what model.compile gets
    # The folder JAX keeps compiled programs in, None when it keeps none (TensorFlow has
    # none): a run that finds its programs there starts seconds sooner.
    compilation_cache_dir: str | None = None

    @property
    def num_replicas(self) -> int:
        return self.num_processes * self.devices_per_process

    @property
    def billed_devices(self) -> int:
        """Devices a cloud charges for: the logical CPU devices of one host are one
        machine (its host), accelerators are counted one by one."""
        return self.num_processes if self.accelerator == "cpu" else self.num_replicas

    @property
    def is_chief(self) -> bool:
        """Process 0 alone writes logs, summaries, checkpoints and traces."""
        return self.process_index == 0

    def shared_seed(self, seed: int) -> int:
        """Process 0's `seed`, on every process (model initialization must agree)."""
        if self.num_processes == 1:
            return seed
        import numpy as np
        from jax.experimental import multihost_utils

        return int(multihost_utils.broadcast_one_to_all(np.array(seed, dtype=np.uint32)))

    def batch_shape(self, global_size: int) -> BatchShape:
        """`global_size` images a step, shared by this topology's processes and devices.

        Raises:
            TopologyError: if the replicas cannot share it evenly.
        """
        try:
            return BatchShape(global_size, self.num_processes, self.devices_per_process)
        except BatchError as error:
            raise TopologyError(str(error)) from None

    def scope(self):
        """Context in which the model and optimizer must be built."""
        if self.strategy is not None:
            return self.strategy.scope()
        return contextlib.nullcontext()

    def describe(self) -> dict:
        """What summary.json records of where the run executed."""
        return {
            "backend": self.backend,
            "accelerator": self.accelerator,
            "num_processes": self.num_processes,
            "devices_per_process": self.devices_per_process,
            "num_replicas": self.num_replicas,
            "device_kind": self.device_kind,
            "jit_compile": self.jit_compile,
            "compilation_cache_dir": self.compilation_cache_dir,
            "strategy": type(self.strategy).__name__ if self.strategy is not None
            else (type(self.distribution).__name__ if self.distribution is not None
                  else "single device"),
        }
