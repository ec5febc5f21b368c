"""The app's energy figures against nvidia-smi's power readings, in one call on a GPU.

Trains the app (ResNet-50 v1.5, synthetic data, JAX, --accelerator=gpu) in a
subprocess while `nvidia-smi ... -lms 100` samples the same GPU's board power in
parallel. Then, over the app's own timed windows (summary.json `energy_windows`:
each epoch's steady-state steps, start and end in Unix time), it compares the
app's `power_watts` and `joules_per_image` with nvidia-smi's mean power over the
same seconds. Prints one JSON object (and writes it with --out); exit 0 when the
comparison was made, 1 when it could not be.

On the GPU machine, from the repository root, the energy recipe of the device runner
runs it (keras from .whl/; `python benchmarks/collect.py energy $OUT RESULT.json` after):

    bash benchmarks/device_run.sh energy

nvidia-smi's `power.draw` is, on Ampere and newer GPUs, an average over the last
second; `power.draw.instant` (where the driver has it) is not. Both are reported.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from results_io import emit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("power.draw", "power.draw.instant")


def smi_fields(gpu: str) -> list[str]:
    """The power fields this driver answers (power.draw.instant is recent)."""
    for fields in (FIELDS, FIELDS[:1]):
        probe = subprocess.run(["nvidia-smi", f"--query-gpu=timestamp,{','.join(fields)}",
                                "--format=csv,noheader,nounits", "-i", gpu],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and "[N/A]" not in probe.stdout and probe.stdout.strip():
            return list(fields)
    raise RuntimeError(f"nvidia-smi cannot report power.draw: {probe.stdout} {probe.stderr}")


class Sampler:
    """nvidia-smi every 100 ms in the background: [(unix time, {field: watts})]."""

    def __init__(self, gpu: str, fields: list[str]):
        self.fields, self.samples, self.pipe_delays = fields, [], []
        self.process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu=timestamp,{','.join(fields)}",
             "--format=csv,noheader,nounits", "-lms", "100", "-i", gpu],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.stdout:
            received = time.time()
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 1 + len(self.fields):
                continue
            try:  # nvidia-smi stamps each line in local time, to the millisecond
                stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.pipe_delays.append(received - stamp)
            except ValueError:
                stamp = received
            values = {}
            for field, text in zip(self.fields, parts[1:]):
                try:
                    values[field] = float(text)
                except ValueError:  # [N/A], [Unknown Error]
                    pass
            self.samples.append((stamp, values))

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.thread.join(timeout=10)


def train(args, logdir: str) -> tuple[int, str]:
    command = [sys.executable, os.path.join(ROOT, "app", "main.py"), "--accelerator=gpu",
               "--backend=jax", "--model=resnet50", "--dataset=synthetic", "--num_devices=1",
               f"--global_batch_size={args.batch}", f"--epochs={args.epochs}",
               f"--steps_per_epoch={args.steps}", "--validation_steps=-1", "--verbose=2",
               f"--logdir={logdir}", "--fresh"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": args.gpu, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), ROOT) if p)
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=args.timeout)
        return done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as error:
        return 124, f"timed out after {args.timeout}s: {str(error.stdout or '')[-2000:]}"


def compare(summary: dict, samples: list, fields: list[str]) -> dict:
    """nvidia-smi's mean power in each of the app's windows, and the totals."""
    windows, totals = [], {"seconds": 0.0, "images": 0, "app_joules": 0.0,
                           **{f: 0.0 for f in fields}}
    for window in summary["energy_windows"]:
        start, end = window["start_unix"], window["end_unix"]
        inside = [values for stamp, values in samples if start <= stamp <= end]
        row = {"epoch": window["epoch"], "seconds": round(end - start, 3),
               "images": window["images"], "samples": len(inside),
               "app_watts": round(window["joules"] / (end - start), 1)}
        for field in fields:
            readings = [v[field] for v in inside if field in v]
            row[f"smi_{field}_watts"] = round(sum(readings) / len(readings), 1) if readings else None
            if readings:
                totals[field] += sum(readings) / len(readings) * (end - start)
        windows.append(row)
        totals["seconds"] += end - start
        totals["images"] += window["images"]
        totals["app_joules"] += window["joules"]
    result = {"windows": windows}
    app_watts = totals["app_joules"] / totals["seconds"]
    for field in fields:
        if totals[field]:
            watts = totals[field] / totals["seconds"]
            result[field] = {"mean_watts": round(watts, 1),
                             "joules_per_image": round(totals[field] / totals["images"], 5),
                             "app_over_smi": round(app_watts / watts, 4)}
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="0", help="the GPU (nvidia-smi / CUDA index)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=600, help="training steps per epoch")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=480, help="seconds for the training")
    parser.add_argument("--logdir", default="/tmp/energy_check")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    result = {"check": "app energy vs nvidia-smi", "batch": args.batch, "steps": args.steps,
              "epochs": args.epochs, "gpu": args.gpu}
    if shutil.which("nvidia-smi") is None:
        result["error"] = "nvidia-smi is not on PATH: run this on the GPU machine"
        emit(result, args.out)
        return 1
    try:
        fields = smi_fields(args.gpu)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        result["error"] = str(error)
        emit(result, args.out)
        return 1
    sampler = Sampler(args.gpu, fields)
    time.sleep(1.0)  # a few idle readings first
    started = time.time()
    code, log = train(args, args.logdir)
    time.sleep(1.5)  # power.draw is a 1-second average: let it cover the last steps
    sampler.stop()
    result.update({"app_exit_code": code, "train_seconds": round(time.time() - started, 1),
                   "smi_samples": len(sampler.samples), "smi_fields": fields})
    if sampler.pipe_delays:
        delays = sorted(sampler.pipe_delays)
        result["smi_median_pipe_delay_seconds"] = round(delays[len(delays) // 2], 3)
    summary_path = os.path.join(args.logdir, "summary.json")
    summary = None
    if code == 0 and os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    if not summary or not summary.get("energy_windows"):
        result["error"] = "the app measured no energy window (see log_tail)"
        result["log_tail"] = log
        emit(result, args.out)
        return 1
    result["app"] = {key: summary.get(key) for key in (
        "device_kind", "energy_method", "power_watts", "joules_per_image", "kwh_per_epoch",
        "images_per_sec", "images_per_sec_wall", "step_time_ms")}
    result.update(compare(summary, sampler.samples, fields))
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
