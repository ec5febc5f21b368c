"""Where a profiled stretch of training lost GPU time: a report from one xplane.pb.

    python benchmarks/trace_report.py RUN/plugins/profile/<time>/<host>.xplane.pb

(a trace from the app's --profile_steps). It prints, for the busiest GPU stream (XLA's
compute stream):
- its busy time against the stretch, and the XLA modules that ran (train steps, the
  JPEG pipeline's crop/resize steps), each with its duration;
- the other streams' work (nvJPEG's conversion kernels, copies) by name: total, count;
- the GPU's idle time and, sampled every 0.1 ms of it, what the training thread
  (the one that dispatches train_step) was doing;
- the CUDA driver calls and copies by total time, with their longest (a device-wide
  synchronizing call such as cuMemFree shows here);
- each host launch of a step's CUDA graph that blocked for over 3 ms, and the CUDA calls
  and copies other threads were in meanwhile (summed over threads);
- how long GPU work waited between its launch on the host and its start on the GPU,
  for XLA's compute stream and for every other stream (the decoder's), by kernel or
  copy name: work on a stream that shares a hardware queue with XLA's waits behind
  the training step's queued kernels (CUDA_DEVICE_MAX_CONNECTIONS).
Needs xprof (installed with tensorboard-plugin-profile). A benchmark tool.
"""

from __future__ import annotations

import collections
import gzip
import json
import sys


def load(path: str):
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer@", {})
    if isinstance(data, bytes):
        try:
            data = gzip.decompress(data)
        except OSError:
            pass
        data = data.decode()
    events = json.loads(data)["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        e["thread"] = threads.get((e["pid"], e["tid"]), "")
        e["end"] = e["ts"] + e.get("dur", 0)
    return spans


def report(spans) -> None:
    streams = collections.Counter()
    for e in spans:
        if e["thread"].startswith("Stream #"):
            streams[e["thread"]] += e.get("dur", 0)
    if not streams:
        raise SystemExit("no GPU streams in this trace")
    compute = streams.most_common(1)[0][0]
    gpu = sorted((e["ts"], e["end"]) for e in spans if e["thread"] == compute)
    modules = sorted((e for e in spans if e["thread"].startswith("XLA Modules")),
                     key=lambda e: e["ts"])
    span = gpu[-1][1] - gpu[0][0]
    print(f"{compute}: busy {streams[compute] / 1e3:.1f} ms of {span / 1e3:.1f} ms")
    print("modules:", ", ".join(f"{e['name'].split('(')[0]} {e['dur'] / 1e3:.1f}"
                                for e in modules))
    others = sum(v for k, v in streams.items() if k != compute)
    print(f"other streams busy {others / 1e3:.1f} ms; their work by name:")
    work, count = collections.Counter(), collections.Counter()
    for e in spans:
        if e["thread"].startswith("Stream #") and e["thread"] != compute:
            work[e["name"][:70]] += e.get("dur", 0)
            count[e["name"][:70]] += 1
    for name, total in work.most_common(8):
        print(f"  {total / 1e3:8.2f} ms {count[name]:6d} x {total / count[name]:7.1f} us  {name}")

    idle, reach = [], gpu[0][1]
    for start, end in gpu:
        if start > reach + 200:
            idle.append((reach, start))
        reach = max(reach, end)
    print(f"\nGPU idle (gaps over 0.2 ms): {sum(b - a for a, b in idle) / 1e3:.1f} ms in "
          f"{len(idle)} gaps; the training thread meanwhile:")
    dispatches = collections.Counter(e["tid"] for e in spans if "train_step" in e["name"]
                                     and e["name"].startswith("PjitFunction"))
    main = sorted((e for e in spans if dispatches and e["tid"] == dispatches.most_common(1)[0][0]
                   and not e["thread"].startswith(("Stream", "XLA", "Steps"))),
                  key=lambda e: e["ts"])
    doing = collections.Counter()
    for start, end in idle:
        t = start
        while t < end:
            inner = [e for e in main if e["ts"] <= t <= e["end"]]
            doing[min(inner, key=lambda e: e.get("dur", 0))["name"][:90] if inner
                  else "(not traced)"] += 1
            t += 100
    for name, samples in doing.most_common(8):
        print(f"  {samples / 10:7.1f} ms  {name}")

    calls, counts, longest = collections.Counter(), collections.Counter(), collections.Counter()
    for e in spans:
        name = e["name"][:60]
        if name.startswith("cu") or "Memcpy" in name:
            calls[name] += e.get("dur", 0)
            counts[name] += 1
            longest[name] = max(longest[name], e.get("dur", 0))
    print("\nCUDA calls and copies by total time:")
    for name, total in calls.most_common(8):
        print(f"  {total / 1e3:8.1f} ms {counts[name]:6d} calls, longest "
              f"{longest[name] / 1e3:6.1f} ms  {name}")

    print("\nstep launches blocked over 3 ms, and the other threads meanwhile:")
    for launch in (e for e in spans if e["name"].startswith("cuGraphLaunch")
                   and e.get("dur", 0) > 3000):
        print(f"  {launch['name']} blocked {launch['dur'] / 1e3:.1f} ms")
        meanwhile = collections.Counter()
        for e in spans:
            if (e["tid"] != launch["tid"] and e["ts"] < launch["end"] and e["end"] > launch["ts"]
                    and (e["name"].startswith("cu") or "Memcpy" in e["name"])
                    and not e["thread"].startswith(("Stream", "XLA", "Steps"))):
                meanwhile[e["name"][:70]] += min(e["end"], launch["end"]) - max(
                    e["ts"], launch["ts"])
        for name, overlap in meanwhile.most_common(5):
            print(f"      {overlap / 1e3:7.1f} ms  {name}")

    print("\nGPU work from launch to start (ms), by stream and name:")
    launches = {e["bind_id"]: e for e in spans if e.get("bind_id") and e.get("flow_out")
                and not e["thread"].startswith("Stream")}
    delays = collections.defaultdict(list)
    for e in spans:
        launch = launches.get(e.get("bind_id")) if e["thread"].startswith("Stream") else None
        if launch is not None:
            where = "XLA's compute stream" if e["thread"] == compute else "other streams"
            delays[(where, e["name"][:50])].append((e["ts"] - launch["ts"]) / 1e3)
    for (where, name), waits in sorted(delays.items(), key=lambda kv: -len(kv[1]))[:8]:
        waits.sort()
        print(f"  {where:22s} {len(waits):6d}  p50 {waits[len(waits) // 2]:6.2f}  p90 "
              f"{waits[int(len(waits) * 0.9)]:6.2f}  max {waits[-1]:6.2f}  {name}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        raise SystemExit(__doc__)
    report(load(sys.argv[1]))
