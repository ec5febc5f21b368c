"""One line for a run of benchmarks/gpu_stages.py: `python stages_line.py LOGS NAME RC`
prints images/sec, step time and input wait from LOGS/NAME.json (the app's summary)
and, from LOGS/NAME.stages.json, the seconds each decoding lane spent in its decode
calls and the shadow stream's batches."""

import json
import sys


def main(logs: str, name: str, rc: str) -> None:
    try:
        with open(f"{logs}/{name}.json") as f:
            summary = json.load(f)
        with open(f"{logs}/{name}.stages.json") as f:
            stages = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{name:20s} exit {rc} no summary ({e})", flush=True)
        return
    fills = {k: v for k, v in stages["seconds"].items() if k.endswith("/fill")}
    calls = {k: v for k, v in stages["calls"].items() if k.endswith("/fill")}
    rate = summary.get("images_per_sec")  # None: stopped before a measured step
    print(f"{name:20s} exit {rc} {rate if rate is not None else '-':>9} img/s  step "
          f"{summary.get('step_time_ms')} ms  wait {summary.get('input_wait_seconds')}  "
          f"fill {fills} calls {calls}  shadow batches "
          f"{stages['calls'].get('shadow/batches')}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
