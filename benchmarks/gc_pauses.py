"""Python's full garbage collections while a run trained, from gpu_stages.py's timeline.

    python benchmarks/gc_pauses.py RUN.stages.json [...]

(a run with TIMELINE=1 GC_LOG=1). Prints, per file, the generation-2 collections
after the training step's compile ended (so during the steps), with their pauses,
and the seconds from that compile's end to the last batch fit took.
"""

import json
import sys


def full_collections(stages: dict) -> dict | None:
    """{"training_seconds", "full_collections": [[s after the compile, ms], ...],
    "pause_ms"}, or None without a train_step compile or batches in the timeline."""
    timeline = stages["timeline"]
    compiles = [e for e in timeline if str(e[3]).startswith("compile jit(train_step)")]
    takes = [e for e in timeline if e[3] == "getitem"]
    if not compiles or not takes:
        return None
    start, end = compiles[0][0], takes[-1][0] + takes[-1][1]  # a compile's entry: its end
    full = [[round(e[0] - start, 2), round(e[1] * 1000)] for e in timeline
            if e[3] == "gc 2" and start <= e[0] <= end]
    return {"training_seconds": round(end - start, 1), "full_collections": full,
            "pause_ms": sum(ms for _, ms in full)}


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as f:
            found = full_collections(json.load(f))
        print(f"{path}: " + ("no train_step compile or no batches in the timeline"
                             if found is None else
                             f"{found['training_seconds']} s of training after the compile, "
                             f"{len(found['full_collections'])} full collections (s after it, "
                             f"ms): {found['full_collections']}, {found['pause_ms']} ms in all"))
