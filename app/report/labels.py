"""What the runs are: the aspects that differ between them (device, backend, batch,
precision), each run's label, the report's title and the warning where the runs did
not do the same work."""

from __future__ import annotations

import re

from app.report.reading import one_line

MODEL_NAMES = {"small_resnet": "small ResNet", "resnet18": "ResNet-18",
               "resnet34": "ResNet-34", "resnet50": "ResNet-50"}
DATASET_NAMES = {"imagenet2012": "ImageNet 2012", "digits": "handwritten digits",
                 "synthetic": "synthetic images"}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
# What may differ between runs, and how each is named in titles and labels.
ASPECTS = {
    "device": lambda s: f"{s.get('num_replicas', '?')} x {s.get('device_kind') or '?'}",
    "backend": lambda s: BACKEND_NAMES.get(s.get("backend"), s.get("backend") or "?"),
    "batch": lambda s: (f"batches {s['sweep'][0]['global_batch_size']}-"
                        f"{s['sweep'][-1]['global_batch_size']}" if s.get("sweep")
                        else f"batch {s.get('global_batch_size')}"),
    "precision": lambda s: s.get("precision") or "?",
}
# What must be equal for runs to be ranked against each other.
SAME_WORK = {"model": "model", "dataset": "dataset", "image_size": "image size"}
DEFAULT_FOLDER = re.compile(r".+-[0-9a-f]{8}(\.old-\d{8}-\d{6})?")  # flags/config.py's logdir


# ------------------------------------------------------------ what the runs are
def differing(runs: list[dict]) -> list[str]:
    """The ASPECTS whose values differ between the runs."""
    return [name for name, of in ASPECTS.items()
            if len({of(run["summary"]) for run in runs}) > 1]


# Settings named in labels, most telling first; the config keys each ASPECT shows.
SETTINGS_FIRST = ("accelerator", "num_devices", "backend", "model", "dataset", "precision",
                  "global_batch_size", "image_size", "epochs", "optimizer",
                  "base_learning_rate", "input_pipeline", "preprocessing")
ASPECT_SETTINGS = {"device": ("accelerator", "num_devices"), "backend": ("backend",),
                   "batch": ("global_batch_size", "sweep_batch_sizes"),
                   "precision": ("precision",)}


def settings_of(run: dict) -> dict:
    """What the run was asked to do: config.json's settings over summary.json's."""
    summary = {k: run["summary"].get(k) for k in SETTINGS_FIRST if k in run["summary"]}
    return {**{k: v for k, v in summary.items() if v is not None}, **run["config"]}


def differing_settings(runs: list[dict], leave_out=()) -> list[str]:
    """The settings whose values differ between the runs, most telling first."""
    settings = [settings_of(run) for run in runs]
    names = {name for s in settings for name in s} - set(leave_out)
    differ = [n for n in names if len({repr(s.get(n)) for s in settings}) > 1]
    return sorted(differ, key=lambda n: (SETTINGS_FIRST.index(n) if n in SETTINGS_FIRST
                                         else len(SETTINGS_FIRST), n))


def labels_of(runs: list[dict]) -> list[str]:
    """Short, distinct names: what differs ("8 x TPU v2", "JAX, batch 256"); where
    that is not enough, the folder's name, or, where the folders have the app's
    hashed default names (small_resnet-digits-jax-1a2b3c4d), the settings that differ
    ("precision mixed_bfloat16, batch 512"; SETTING_NAMES)."""
    aspects = differing(runs)
    labels = [", ".join(ASPECTS[a](run["summary"]) for a in aspects) for run in runs]
    names = [run["name"] for run in runs]
    if aspects and len(set(labels)) == len(labels):
        return labels
    if all(DEFAULT_FOLDER.fullmatch(n) for n in names) or len(set(names)) < len(names):
        keys = differing_settings(runs, [k for a in aspects for k in ASPECT_SETTINGS[a]])
        settings = [settings_of(run) for run in runs]
        for count in range(1, len(keys) + 1):  # the fewest settings that tell them apart
            extra = [", ".join(f"{setting_name(k)} {_setting(s.get(k))}" for k in keys[:count])
                     for s in settings]
            if len(set(zip(labels, extra))) == len(runs):
                break
        else:
            extra = names
        labels = [", ".join(filter(None, pair)) for pair in zip(labels, extra)]
    else:
        labels = [f"{label} [{n}]" if label else n for label, n in zip(labels, names)]
    # The same settings twice (a folder given twice): numbered, so that each label
    # names one run (the findings look rows up by label).
    repeated = {label for label in labels if labels.count(label) > 1}
    seen = {}
    for index, label in enumerate(labels):
        if label in repeated:
            seen[label] = seen.get(label, 0) + 1
            labels[index] = f"{label} ({seen[label]})"
    return labels


# How a setting is named in a label where its flag's name says it less plainly; any
# other is its flag's name with spaces ("label_smoothing" -> "label smoothing").
SETTING_NAMES = {"global_batch_size": "batch", "base_learning_rate": "learning rate",
                 "num_devices": "devices", "sweep_batch_sizes": "batches"}


def setting_name(key: str) -> str:
    return SETTING_NAMES.get(key, key.replace("_", " "))


def _setting(value) -> str:
    return "?" if value is None else one_line(value)


def _work(summary: dict) -> str:
    model = MODEL_NAMES.get(summary.get("model"), summary.get("model") or "?")
    dataset = summary.get("dataset") or "?"
    dataset = DATASET_NAMES.get(dataset, dataset)
    size = f", {summary['image_size']} px" if summary.get("image_size") else ""
    return f"{model} on {dataset}{size}"


def title_of(runs: list[dict]) -> str:
    """E.g. "8 x TPU v2 vs 4 x GPU V100: ResNet-50 on ImageNet 2012, 224 px"."""
    parts = []
    for aspect in differing(runs) or ["device", "backend"]:
        values = list(dict.fromkeys(ASPECTS[aspect](run["summary"]) for run in runs))
        parts.append(" vs ".join(values))
    works = list(dict.fromkeys(_work(run["summary"]) for run in runs))
    return f"{', '.join(parts)}: {works[0] if len(works) == 1 else 'different work'}"


def comparability_warning(runs: list[dict]) -> str | None:
    """Why the runs should not be ranked against each other, or None."""
    differences = []
    for key, name in SAME_WORK.items():
        values = list(dict.fromkeys(str(run["summary"].get(key)) for run in runs))
        if len(values) > 1:
            differences.append(f"{name} ({' vs '.join(values)})")
    if not differences:
        return None
    return ("These runs did not do the same work: they differ in " + ", ".join(differences)
            + ". Their speeds, prices and accuracies are shown side by side, but the "
              "rankings compare unlike things.")
