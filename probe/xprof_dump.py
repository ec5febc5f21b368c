import sys, glob, os
from xprof.convert import raw_to_tool_data as r
run, out = sys.argv[1:3]
paths = glob.glob(run + "/plugins/profile/*/*.xplane.pb")
os.makedirs(out, exist_ok=True)
print(paths, [os.path.getsize(p) for p in paths])
print(r.xspace_to_tool_names(paths))
for tool in ("hlo_stats", "op_profile", "overview_page", "kernel_stats", "framework_op_stats", "roofline_model"):
    try:
        data, ctype = r.xspace_to_tool_data(paths, tool, {})
        if data is None:
            print(tool, "none"); continue
        with open(os.path.join(out, tool + ".json"), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        print(tool, ctype, len(data))
    except Exception as e:
        print(tool, "failed", repr(e)[:300])
