#!/usr/bin/env python3
"""Per-kernel times of a dumped cpu plan (the C kernels of `SG_DUMP=DIR shadergrad train --backend cpu-simd ...` or
`shadergrad dump --target cpu-simd`), outside the runtime: every kernel's C compiled as the cpu-simd backend compiles
it (cc -std=c11 -O2 -march=native -ffp-contract=off -fno-math-errno), run on one thread over buffers of its bindings'
sizes filled with values in [0.05, 1) (timings only: the values are not the program's), each kernel `--repeats`
times after one warm-up; the median and minimum per kernel, sorted by median, with the strategy and the contraction
line of its header.

    python3 bench/cpu_kernel_times.py DIR/program00 [--repeats 7] [--only k68,k72] [--cc cc]

Made for issue 37 (docs/perf-log/P37.md): the profile of `shadergrad train --profile` is one step's times, which a
loaded 2-core VM makes unreliable kernel by kernel; this takes the median of several runs of each kernel.
"""
import argparse
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile

DRIVER = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
typedef void (*entry_fn)(float* const*, int64_t, int64_t);
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
/* runs entry over workgroups [0, groups) `repeats` times, writing each run's ms to out */
void sg_bench_run(void* entry, float* const* buf, int64_t groups, int repeats, double* out) {
  entry_fn f = (entry_fn)entry;
  f(buf, 0, groups);
  for (int r = 0; r < repeats; ++r) { double t = now_ms(); f(buf, 0, groups); out[r] = now_ms() - t; }
}
"""


def parse_kernel(path):
    src = open(path).read()
    m = re.search(r"SG_EXPORT void (sg_\w+)\(", src)
    g = re.search(r"workgroups \[begin, end\) of the (\d+)x(\d+)x(\d+) grid", src)
    if not m or not g:
        return None
    groups = int(g.group(1)) * int(g.group(2)) * int(g.group(3))
    bufs = {}
    for b in re.finditer(r"return sg->buf\[(\d+)\]; \}  // (.*)", src):
        shape = b.group(2).split()[-1]
        n = 1
        for d in shape.split("x"):
            n *= int(d) if d.isdigit() else 1  # "scalar"
        bufs[int(b.group(1))] = max(bufs.get(int(b.group(1)), 0), n)
    strategy = re.search(r"// shadergrad compute kernel \S+ \(([^)]*)\)", src)
    contraction = re.search(r"// contraction: .*?M = (\d+), N = (\d+), K = (\d+), batch (\d+)", src)
    return {"entry": m.group(1), "groups": groups, "bufs": bufs, "strategy": strategy.group(1) if strategy else "?",
            "mnkb": tuple(int(x) for x in contraction.groups()) if contraction else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated kernel name prefixes (k68,k72)")
    ap.add_argument("--cc", default=os.environ.get("SG_CC", "cc"))
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "k*.c")))
    if a.only:
        pre = a.only.split(",")
        files = [f for f in files if any(os.path.basename(f).startswith(p + "_") or os.path.basename(f) == p + ".c"
                                         for p in pre)]
    kernels = [(f, parse_kernel(f)) for f in files]
    kernels = [(f, k) for f, k in kernels if k]
    tmp = tempfile.mkdtemp(prefix="sg_kt_")
    tu = os.path.join(tmp, "all.c")
    with open(tu, "w") as out:
        out.write(DRIVER)
        for f, _ in kernels:
            out.write(open(f).read() + "\n")
    lib = os.path.join(tmp, "all.so")
    flags = ["-std=c11", "-O2", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-w"]
    subprocess.run([a.cc, *flags, tu, "-o", lib, "-lm"], check=True)
    so = ctypes.CDLL(lib)
    run = so.sg_bench_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]
    rows, total = [], 0.0
    for f, k in kernels:
        nb = max(k["bufs"]) + 1 if k["bufs"] else 0
        arrays = []
        for i in range(nb):
            n = k["bufs"].get(i, 1)
            arr = (ctypes.c_float * n)()
            for j in range(n):
                arr[j] = 0.05 + ((j * 2654435761) % 1000) / 1052.6
            arrays.append(arr)
        ptrs = (ctypes.c_void_p * max(nb, 1))(*[ctypes.addressof(x) for x in arrays])
        times = (ctypes.c_double * a.repeats)()
        run(ctypes.cast(getattr(so, k["entry"]), ctypes.c_void_p), ptrs, k["groups"], a.repeats, times)
        ts = sorted(times[:a.repeats])
        med = ts[len(ts) // 2]
        total += med
        flop = ""
        if k["mnkb"]:
            m, n, kk, b = k["mnkb"]
            gf = 2.0 * m * n * kk * b / (med * 1e-3) / 1e9
            flop = f"M={m} N={n} K={kk} b={b}: {gf:.2f} GFLOP/s"
        rows.append((med, ts[0], os.path.basename(f)[:-2], k["strategy"], flop))
    rows.sort(reverse=True)
    print(f"{len(rows)} kernels, {a.repeats} runs each (1 thread), sum of medians {total:.2f} ms")
    for med, mn, name, strat, flop in rows[:a.top]:
        print(f"  {name:<44} {med:9.3f} ms (min {mn:8.3f}) {100 * med / total:5.1f}%  {strat:<16} {flop}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
