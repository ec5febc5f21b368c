"""summary.json's fields that are read back: the table its writers and its readers share.

A run folder's summary.json is written by its mode: a training run's by
app/run/summary.py (`build`), a sweep's and a ladder's by app/modes/sweep.py and
app/modes/ladder.py (through app/modes/points.py), with what the campaign adds. Each
field below is (kind, low, high), as callbacks/records/untrusted.py's `field` takes
it; a reader keeps only these and checks each (the report: app/report/reading.py; the
decision: app/report/decision/inputs.py, DECISION_FIELDS, a probe's PROBE_FIELDS among them).
tests/test_console.py checks that a training run writes every RUN field, and
tests/callbacks/records/test_summary_fields.py that the report asks a summary for no
field outside this table and that the campaigns write theirs.

Pure Python, no framework.
"""

TEXT = ("text", None, None)
SPEED = {"images_per_sec": ("number", 0, 1e12), "step_time_ms": ("number", 0, 1e9),
         "step_time_stderr_ms": ("number", 0, 1e9), "mfu": ("number", 0, 1e3),
         "global_batch_size": ("integer", 1, 1 << 40)}
# A benchmark point's spread (--repeats): its lowest and highest window (the min-max,
# callbacks/figures/spread.py).
SPREAD = {"images_per_sec_min": SPEED["images_per_sec"],
          "images_per_sec_max": SPEED["images_per_sec"], "repeats": ("integer", 1, 1000)}

# A training run's summary.json (app/run/summary.py): its scalar fields ...
RUN_FIELDS = {
    **{name: TEXT for name in ("model", "dataset", "backend", "precision", "accelerator",
                               "device_kind", "machine", "pricing", "input_pipeline",
                               "preprocessing", "status")},
    **SPEED,
    "image_size": ("integer", 1, 1 << 20), "num_replicas": ("integer", 1, 1 << 24),
    "num_processes": ("integer", 1, 1 << 24), "validation_examples": ("integer", 1, 1 << 40),
    "epochs_completed": ("integer", 0, 1 << 40), "epochs": ("integer", 0, 1 << 40),
    "price_per_hour_usd": ("number", 0, 1e9), "best_val_top1": ("number", 0, 1),
    "peak_tflops_per_device": ("number", 0, 1e7),
    "cost_usd": ("number", 0, 1e12),
}
# ... its lists, each item's fields ...
RUN_LISTS = {"targets": {"target_top1": ("number", 0, 1)},
             "attempts": {"started_at": ("number", 0, 4e9)}}  # 4e9 s: the year 2096
# ... and its objects, each read by its own reader: {pricing: $/h}, {library: version},
# the profile's step breakdown (callbacks/profiling/difference.py's `checked`; null
# where the run was not profiled).
RUN_OBJECTS = ("price_per_hour_usd_by_pricing", "versions", "profile")

# What a probe's summary.json adds (app/modes/probe.py; its breakdown at the top, read
# apart): its start-up, from empty compile caches where its own start found them warm,
# whether it did, and its timed windows' spread.
PROBE_FIELDS = {"startup_seconds": ("number", 0, 1e7), "startup_cold_seconds": ("number", 0, 1e7),
                "compile_cache": TEXT, **SPREAD}
# ... and its objects: the recipe it measured, its step breakdown, its machine's state
# before and after.
PROBE_OBJECTS = ("recipe", "breakdown", "machine_snapshots")
# The work a run's or a probe's step does, which the device model predicts other
# machines from: the epoch's steps, the MFU count, the batch a device, the weights and
# what an image keeps.
WORK_FIELDS = {"steps_per_epoch": ("integer", 1, 1 << 40),
               "train_flops_per_image": ("number", 0, 1e18),
               "per_replica_batch_size": ("integer", 1, 1 << 40),
               "parameters": ("integer", 0, 1 << 50),
               "kept_bytes_per_image": ("integer", 0, 1 << 50)}
# What the decision reads of a run's or a probe's summary.json (app/report/decision/inputs.py).
DECISION_FIELDS = {name: {**RUN_FIELDS, **PROBE_FIELDS, **WORK_FIELDS}[name] for name in (
    "model", "dataset", "precision", "backend", "accelerator", "device_kind", "machine",
    "pricing", "image_size", "global_batch_size", "num_replicas", "num_processes",
    "images_per_sec", "epochs", *PROBE_FIELDS, *WORK_FIELDS)}
# ... and the objects it reads, each by a reader of its own: a probe's, the run's
# attempts, prices and profile, its start-up timeline and machine state.
DECISION_OBJECTS = PROBE_OBJECTS + ("attempts", "price_per_hour_usd_by_pricing", "profile",
                                    "startup", "machine_state")

# What a sweep's or a ladder's summary.json adds (app/modes/sweep.py, ladder.py): its
# mode, its rows (a sweep's points, the ladder's rungs: the rung's name first) and a
# sweep's best point (SPEED's fields).
CAMPAIGN_FIELDS = {"mode": TEXT}
CAMPAIGN_LISTS = {
    "sweep": {"global_batch_size": ("integer", 1, 1 << 40), **SPEED, **SPREAD},
    "ladder": {"rung": TEXT, "status": TEXT, "images_per_sec": SPEED["images_per_sec"],
               "gain_over_previous": ("number", 0, 1e6),
               "gain_over_first": ("number", 0, 1e6), **SPREAD},
}
CAMPAIGN_OBJECTS = ("best",)

# Every field of the table: what a reader of summary.json may read, and no more (the
# texts first, as a reader's notes name them).
FIELDS = {**{k: v for k, v in RUN_FIELDS.items() if v is TEXT}, **CAMPAIGN_FIELDS,
          **{k: v for k, v in RUN_FIELDS.items() if v is not TEXT}}
LISTS = {**RUN_LISTS, **CAMPAIGN_LISTS}
OBJECTS = RUN_OBJECTS + CAMPAIGN_OBJECTS
NAMES = (frozenset(FIELDS) | frozenset(LISTS) | frozenset(OBJECTS) | frozenset(DECISION_FIELDS)
         | frozenset(DECISION_OBJECTS))
