#!/usr/bin/env python3
"""Summary table of a Vulkan bench phase (phase_vkalloc.sh, phase_vkbusy.sh): one row per bench_ops case of every
run in OUT/runs.txt, then the nvidia-smi clocks seen during each run. Usage: vk_phase_summary.py OUT_DIR"""
import json, os, sys, datetime
out = sys.argv[1]
runs = []
for line in open(os.path.join(out, "runs.txt")) if os.path.exists(os.path.join(out, "runs.txt")) else []:
    name, s, e, rc = line.split()
    runs.append((name, float(s), float(e), rc))
smi = []
if os.path.exists(os.path.join(out, "smi.csv")):
    for line in open(os.path.join(out, "smi.csv")):
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            smi.append((t, f[1], f[2], f[3], f[4], f[6] if len(f) > 6 else ""))
        except Exception:
            pass
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
