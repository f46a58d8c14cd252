#!/usr/bin/env python3
"""Summary table of a Vulkan bench phase (phase_vkalloc.sh, phase_vkbusy.sh): one row per bench_ops case of every
run in OUT/runs.txt, then the nvidia-smi clocks seen during each run. Usage: vk_phase_summary.py OUT_DIR"""
import json, os, sys
from phase_logs import read_runs, read_smi
out = sys.argv[1]
runs = read_runs(out)
smi = [(t, f[0], f[1], f[2], f[3], f[5] if len(f) > 5 else "") for t, f in read_smi(out) if len(f) >= 4]
def clocks(s, e):
    w = [x for x in smi if s <= x[0] <= e]
    if not w: return "-"
    sm = sorted({x[1] for x in w}); mem = sorted({x[2] for x in w}); ps = sorted({x[3] for x in w}); thr = sorted({x[5] for x in w})
    return "sm %s; mem %s; %s; throttle %s (%d samples)" % ("/".join(sm), "/".join(mem), "/".join(ps), "/".join(thr), len(w))
print("| run | rc | case | wall median ms | kernel ms | memory objects (dedicated) | check |")
print("|---|---|---|---|---|---|---|")
for name, s, e, rc in runs:
    try: rows = json.load(open(os.path.join(out, name + ".json"))).get("results", [])
    except Exception: rows = []
    for r in rows:
        m = r.get("vk_memory", {})
        km = r.get("kernel_ms", r.get("reduce_kernel_ms"))
        print("| %s | %s | %s | %.3f | %s | %s (%s) | %s |" % (name, rc, r.get("key"), r.get("median_ms", 0),
              "-" if km is None else "%.4f" % km, m.get("memory_objects", "-"), m.get("dedicated", "-"),
              (r.get("check", "") + " " + ",".join(r.get("strategies", [])) if isinstance(r.get("strategies"), list) else r.get("check", ""))[:90]))
print("\nClocks per run (nvidia-smi every 250 ms):")
for name, s, e, rc in runs:
    print("  %-20s %5.1f s  %s" % (name, e - s, clocks(s, e)))
