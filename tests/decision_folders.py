"""Run folders for the decision's tests, written as the app writes them: a training
run's summary.json and metrics.jsonl, a probe's summary.json; and price catalogs of a
few rows in prices.csv's columns."""

import json

from app.pricing import catalog

COLUMNS = catalog.COLUMNS


def write_run(folder, *, rate=320.0, startup=10.0, epoch_s=2.5, top1=(0.5, 0.7, 0.85, 0.91,
              0.95), attempts=None, extra_seconds=None, device_kind="Slow Y", **fields):
    """A training run's folder: per-epoch billed hours of a `startup` then `epoch_s` an
    epoch (plus `extra_seconds` {epoch: s}), top-1 per epoch, the ledger's attempts."""
    folder.mkdir(parents=True)
    summary = {"model": "small_resnet", "dataset": "digits", "image_size": 8,
               "global_batch_size": 64, "precision": "float32", "backend": "tensorflow",
               "accelerator": "gpu", "device_kind": device_kind, "num_replicas": 1,
               "num_processes": 1, "images_per_sec": rate, "steps_per_epoch": 10,
               "epochs": len(top1), "machine": "slow", "status": "completed",
               "attempts": attempts or [{"started_at": 1.8e9, "last_seen": 1.8e9 + 60,
                                         "resumed_from": {"epoch": 0, "step": 0}}], **fields}
    (folder / "summary.json").write_text(json.dumps(summary))
    seconds, lines = startup, []
    for epoch, value in enumerate(top1, 1):
        seconds += epoch_s + (extra_seconds or {}).get(epoch, 0.0)
        lines.append(json.dumps({"epoch": epoch, "val_top1": value,
                                 "billed_hours": seconds / 3600}))
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return str(folder)


def write_probe(folder, *, rate=640.0, startup=6.0, device_kind="Fast X", **fields):
    folder.mkdir(parents=True)
    summary = {"mode": "probe", "model": "small_resnet", "dataset": "digits", "image_size": 8,
               "global_batch_size": 64, "precision": "float32", "backend": "jax",
               "accelerator": "gpu", "device_kind": device_kind, "num_replicas": 1,
               "num_processes": 1, "images_per_sec": rate, "startup_seconds": startup,
               "machine": "fast", "epochs": 5, **fields}
    (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder)


def row(machine, pattern, prices, devices=1, date="2026-12-01", provider="gcp"):
    values = {c: "" for c in COLUMNS}
    values.update(machine=machine, accelerator=machine, device=machine,
                  devices_per_machine=str(devices), device_kind_pattern=pattern,
                  provider=provider, region="r", pricing_page="https://example.com/p",
                  source="https://example.com/p", date=date)
    for option, price in prices.items():
        values[catalog.PRICE_COLUMNS[option]] = str(price)
    return values


def table_of(*rows):
    text = ",".join(COLUMNS) + "\n" + "".join(
        ",".join(r[c] for c in COLUMNS) + "\n" for r in rows)
    return catalog.parse_catalog(text, "test.csv")
