#!/usr/bin/env python3
"""Summary of phase_fusedopt.sh: per run and case the kernels per step, the wall median, the kernel-only time, GB/s
(reductions) against the device's nominal memory bandwidth, the check; then the nvidia-smi clocks per run.
Usage: phase_fusedopt_summary.py OUT_DIR   (env SG_PEAK_GBPS: the bandwidth; default 4800, the H200 SXM's HBM3e)"""
import json, os, sys
from phase_logs import read_runs, read_smi
out = sys.argv[1]
peak = float(os.environ.get("SG_PEAK_GBPS", "4800"))
runs = read_runs(out)
smi = [(t, f[0]) for t, f in read_smi(out) if f]
print("| run | rc | case | kernels | wall median ms | per dispatch round ms | kernel ms | GB/s (kernel) | of %.0f GB/s | check |" % peak)
print("|---|---|---|---|---|---|---|---|---|---|")
for name, s, e, rc in runs:
    try:
        doc = json.load(open(os.path.join(out, name + ".json")))
        rows, R = doc.get("results", []), max(1, int(doc.get("meta", {}).get("vulkan_dispatch_repeats", 1)))
    except Exception:
        rows, R = [], 1
    for r in rows:
        km = r.get("kernel_ms", r.get("reduce_kernel_ms"))
        gb = r.get("kernel_gbps")
        st = r.get("strategies")
        strategies = ",".join(st) if isinstance(st, list) else ",".join("%s:%s" % kv for kv in st.items()) if isinstance(st, dict) else ""
        print("| %s | %s | %s | %s | %.4f | %.4f | %s | %s | %s | %s |" % (
            name, rc, r.get("key"), r.get("kernels", "-"), r.get("median_ms", 0), r.get("median_ms", 0) / R,
            "-" if km is None else "%.4f" % km,
            "-" if gb is None else "%.1f" % gb, "-" if gb is None else "%.3f" % (gb / peak),
            (r.get("check", "") + " " + strategies)[:100]))
print("\nSM clock per run (nvidia-smi every 250 ms):")
for name, s, e, rc in runs:
    w = sorted({x[1] for x in smi if s <= x[0] <= e})
    print("  %-16s %5.1f s  %s" % (name, e - s, "/".join(w) if w else "-"))
