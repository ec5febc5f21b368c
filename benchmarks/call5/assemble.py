"""One-off (device call 5, 2026-12-06, one H100): rebuilds the models recipe's folder
from what came back (8 of its 39 files, models.console, the run folders' summaries and
kernels in b5.tgz, fetched from the same warm machine) so that benchmarks/collect.py
reads it. Lines are copied from the console, never typed: each NAME.log is the
console's lines from "NAME exit" to the next run's, exits.txt its "exit" lines,
vit_b_16.busy.json its busy_time.py line. run.json: the call's command, commit and
the first run's start (its summary's process_started_at)."""
import datetime, json, os, re, shutil, sys, tarfile

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
models = os.path.join(out, "models")
os.makedirs(models, exist_ok=True)
for name in os.listdir(os.path.join(here, "device_models")):
    shutil.copy(os.path.join(here, "device_models", name), models)
with tarfile.open(os.path.join(here, "b5.tgz")) as tar:
    tar.extractall(out, filter="data")
for run in os.listdir(os.path.join(out, "b")):
    folder = os.path.join(out, "b", run)
    for src, dst in (("summary.json", ".json"), ("kernels.json", ".kernels.json"),
                     ("metrics.jsonl", ".metrics.jsonl"), ("autotune.textproto", ".autotune.textproto")):
        if os.path.exists(os.path.join(folder, src)) and not os.path.exists(os.path.join(models, run + dst)):
            shutil.copy(os.path.join(folder, src), os.path.join(models, run + dst))
lines = open(os.path.join(here, "models.console")).read().splitlines()
starts = [(i, m.group(1), m.group(2)) for i, l in enumerate(lines)
          if (m := re.fullmatch(r"(\S+) exit (\d+)", l))]
with open(os.path.join(models, "exits.txt"), "w") as f:
    f.writelines(f"{name} {code}\n" for _, name, code in starts)
for k, (i, name, _) in enumerate(starts):
    end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
    path = os.path.join(models, f"{name}.log")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("\n".join(lines[i + 1:end]) + "\n")
for l in lines:
    m = re.fullmatch(r"(\d+) executions of jit_train_step: median ([\d.]+) ms on the device, "
                     r"([\d.]+) ms of it busy", l)
    if m and not os.path.exists(os.path.join(models, "vit_b_16.busy.json")) and "75.62" in l:
        json.dump({"median_ms": float(m.group(2)), "median_busy_ms": float(m.group(3)),
                   "executions": int(m.group(1)), "from": "models.console"},
                  open(os.path.join(models, "vit_b_16.busy.json"), "w"))
gpu = open(os.path.join(here, "gpu.csv")).read().strip().splitlines()[1]
first = json.load(open(os.path.join(models, "convnext_tiny.json")))
started = first.get("startup", {}).get("process_started_at")
with open(os.path.join(models, "machine.txt"), "w") as f:
    f.write(gpu + "\ncores: 16\n")
json.dump({"recipe": "models", "gpus": 1,
           "command": "FAMILIES='convnext_tiny vit_b_16' PROFILE='convnext_tiny vit_b_16' "
                      "REPEATS=2 TWINS=0 bash benchmarks/device_run.sh models",
           "date": datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
                   .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": "45a3260"}, open(os.path.join(models, "run.json"), "w"))
