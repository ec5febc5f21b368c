"""The modes a run can be, declared once: what each is, and what the rest of the app
asks of it.

A mode is a row of MODES and a module `app/modes/<module>.py` whose `run(context)`
runs it and returns its summary; --benchmark=<name> picks it (the sweep: --sweep or
--sweep_batch_sizes; a training run: neither). app/main.py imports the module the
row names; the checks, the run's context, XLA's autotuning and the decision read the
row, never the name. Adding a mode is its module, its row and, where the decision or
the report reads its record, that record's fields (callbacks/records/summary_fields.py).
Pure Python: the config reads it.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Mode:
    """One mode.

    name: its --benchmark value ("none": a training run; "sweep": --sweep).
    module: app/modes/<module>.py, whose run(context) runs it.
    folder: the middle of its default run folder's name ("{dataset}": the dataset's).
    trains: trains the job to its end: a batch past the data and a step past the
        process's memory are refused at the door, and XLA picks kernels for a run.
    builds_model: builds the model (the input benchmark measures the data alone).
    repeats: its --repeats where not given; None: it takes no --repeats (a training
        run times every epoch of its own).
    needs_data: refuses --dataset=synthetic (which has no input pipeline).
    record: the file it writes beside summary.json, None where none.
    decides: the decision reads its folder (app/report/decision/).
    """

    name: str
    module: str
    folder: str
    trains: bool = False
    builds_model: bool = True
    repeats: int | None = 1
    needs_data: bool = False
    record: str | None = None
    decides: bool = False


MODES = {mode.name: mode for mode in (
    Mode("none", "train", "{dataset}", trains=True, repeats=None, decides=True),
    Mode("sweep", "sweep", "sweep", record="sweep.json"),
    Mode("input", "input_benchmark", "{dataset}", builds_model=False, needs_data=True,
         record="input_benchmark.json"),
    Mode("ladder", "ladder", "ladder", record="ladder.json"),
    # one timed window of a probe is the machine's noise (three 50-step probes of one job
    # on a 2-core CPU read 1,373, 705 and 822 images/sec): three by default
    Mode("probe", "probe", "probe-{dataset}", repeats=3, record="probe.json", decides=True),
)}
# --benchmark's values: every mode but the sweep, which has flags of its own
BENCHMARKS = tuple(name for name in MODES if name != "sweep")


def mode_of(config) -> Mode:
    """The mode a Config asks for (one of --sweep and --benchmark: flags/checks.py)."""
    return MODES["sweep" if config.is_sweep else config.benchmark]
