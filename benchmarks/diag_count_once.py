"""One-off (issue 48's FLOP count, call 4's HLO): the FLOPs of every op of the profiled
training step counted once, against the app's MFU count of the same batch.

On the H100 the breakdown counted ViT-B/16's step at 56,269 GFLOP and ConvNeXt-T's at
10,999 (2.1x and 1.6x the MFU count): an op run as several kernels had its work counted
per kernel (fixed in callbacks/profiling/breakdown.py). This reads the compiled programs
the profiled runs traced (benchmarks/diag4/**/*.train_step.hlo_proto.pb.gz) and sums,
with the breakdown's own cost counter, the FLOPs of each top-level op once.

    PYTHONPATH=$PWD python benchmarks/diag_count_once.py
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from google.protobuf import text_format  # noqa: E402
from tensorflow.compiler.xla.service import hlo_pb2  # noqa: E402

from callbacks.profiling import hlo_cost, hlo_text  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "diag4")
# Ops whose called computations are their bodies (not separately launched work).
CALLING = {"fusion", "reduce", "reduce-window", "scatter", "select-and-scatter", "sort",
           "map", "all-reduce", "reduce-scatter"}

for name in ("vit/models/vit_b_16", "models/convnext_tiny"):
    proto = hlo_pb2.HloProto()
    with gzip.open(os.path.join(HERE, name + ".train_step.hlo_proto.pb.gz")) as f:
        proto.ParseFromString(f.read())
    module = hlo_text.computations(text_format.MessageToString(proto))
    costs = hlo_cost.Costs(module)
    bodies = {called for items in module.values() for item in items
              if hlo_text.first(item, "opcode") in CALLING for called in hlo_text.calls(item)}
    counted = sum(costs.flops(item) or 0 for computation, items in module.items()
                  if computation not in bodies for item in items)
    summary = json.load(open(os.path.join(HERE, name + ".profiled.json")))
    mfu = summary["train_gflops_per_image"] * summary["global_batch_size"]
    print(json.dumps({"model": os.path.basename(name), "counted_once_gflop": round(counted / 1e9, 1),
                      "mfu_gflop": round(mfu, 1), "counted_over_mfu": round(counted / 1e9 / mfu, 4),
                      "breakdown_gflop_then": summary["profile"]["breakdown"]["gflop"]}))
