#!/usr/bin/env bash
# Device phase "vkalloc" (issue 15, session 8): is the order effect of docs/PERFORMANCE.md Run 12b (SGEMM N=4096
# 3.55 ms alone, 15.5 ms after the train steps in one bench_ops process; N=1024 0.225 ms after larger sizes vs 0.078
# first) buffer placement? And what subgroup operations in tree reductions change.
# On the accelerator machine, after `. scripts/device/h200_prelude.sh`, from the staged tree (target: bench_ops):
#   OUT=$OUT bash scripts/device/phase_vkalloc.sh      (at most 4 minutes; every command under a timeout)
# Runs (one bench_ops process each, SG_VULKAN_MEMORY=blocks = the old placement, dedicated = the new one;
# SG_VULKAN_MEMORY_LOG=1 writes every placement into the .log):
#   order_<policy>       --only mlp,cnn,sgemm --sgemm 1024,2048,4096  (the slow order: train steps first)
#   fresh_<policy>       the same with --fresh-vulkan (new VkInstance/VkDevice per case: process-level vs our state)
#   alone_<policy>       --only sgemm --sgemm 4096
#   desc_<policy>        --only sgemm --sgemm 4096,2048,1024          (N=1024 after the larger sizes)
#   reduce_sub1/_sub0    --only reduce with SG_VULKAN_SUBGROUPS=1 / 0 (sum/max/min/mean over rows and all)
# and nvidia-smi sampling SM/memory clocks, P-state, power and throttle reasons every 250 ms (smi.csv).
# Writes only under $OUT/vkalloc/: <run>.json/.log, smi.csv, phase.log, summary.txt (printed at the end).
# Locally (lavapipe; small sizes): SG_LOCAL_BIN=build/bin SG_VKALLOC_SIZES=128,256 SG_VKALLOC_ALONE=256 \
#   SG_VKALLOC_REDUCE_ROWS=250 bash scripts/device/phase_vkalloc.sh
set -uo pipefail
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
elif [ -z "${SG_SOURCE_DIR:-}" ]; then
  . scripts/device/h200_prelude.sh
fi
out=${OUT:-/tmp/out}/vkalloc
mkdir -p "$out"
sizes=${SG_VKALLOC_SIZES:-1024,2048,4096}
alone=${SG_VKALLOC_ALONE:-4096}
desc=$(echo "$sizes" | tr ',' '\n' | sort -rn | paste -sd, -)
reduce_rows=${SG_VKALLOC_REDUCE_ROWS:-}
budget=${SG_VKALLOC_BUDGET_S:-185}  # no new run starts after this many seconds (the phase stays under 4 minutes)
log() { echo "$@" | tee -a "$out/phase.log"; }
# the kernel cache and the VkPipelineCache file live here (written only under $out; warm after the first run, and
# order_blocks_again repeats the first run with it warm)
export SG_KERNEL_CACHE="$out/kernel-cache"
rm -rf "$SG_KERNEL_CACHE"
t0=$(date +%s)
log "phase_vkalloc $(date -u +%FT%TZ) sizes $sizes alone $alone"
smi_pid=
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,pstate \
    --format=csv,noheader 2>/dev/null | tee -a "$out/phase.log"
  timeout 250 nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 250 > "$out/smi.csv" 2>/dev/null &
  smi_pid=$!
fi

# one bench_ops process: run NAME POLICY SECONDS ARGS...; its start/end (epoch s) go to runs.txt
run() {
  local name=$1 policy=$2 limit=$3
  shift 3
  if [ $(( $(date +%s) - t0 )) -gt "$budget" ]; then log "== $name: skipped (phase budget of $budget s spent)"; return; fi
  local s=$(date +%s.%N)
  SG_VULKAN_MEMORY=$policy SG_VULKAN_MEMORY_LOG=1 timeout "$limit" bench_ops --backend vulkan --autotune 0 \
    --repeats 10 --warmup 2 --max-seconds 1 "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name $s $(date +%s.%N) $rc" >> "$out/runs.txt"
  log "== $name ($policy): rc=$rc ($(( $(date +%s) - t0 )) s since start)"
}

# The most telling runs first (the budget may cut the last ones); both policies of a pair back to back.
run order_blocks blocks 40 --only mlp,cnn,sgemm --sgemm "$sizes"
run order_dedicated dedicated 40 --only mlp,cnn,sgemm --sgemm "$sizes"
run alone_blocks blocks 20 --only sgemm --sgemm "$alone"
run alone_dedicated dedicated 20 --only sgemm --sgemm "$alone"
run fresh_blocks blocks 40 --only mlp,cnn,sgemm --sgemm "$sizes" --fresh-vulkan
run desc_blocks blocks 30 --only sgemm --sgemm "$desc"
run desc_dedicated dedicated 30 --only sgemm --sgemm "$desc"
rr=()
[ -n "$reduce_rows" ] && rr=(--reduce-rows "$reduce_rows")
SG_VULKAN_SUBGROUPS=1 run reduce_sub1 dedicated 30 --only reduce "${rr[@]}"
SG_VULKAN_SUBGROUPS=0 run reduce_sub0 dedicated 30 --only reduce "${rr[@]}"
run fresh_dedicated dedicated 40 --only mlp,cnn,sgemm --sgemm "$sizes" --fresh-vulkan
run order_blocks_again blocks 40 --only mlp,cnn,sgemm --sgemm "$sizes"
[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null
rm -rf "$SG_KERNEL_CACHE"  # SPIR-V and pipeline-cache files: not results (keeps what comes back small)

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
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
EOF
log "phase_vkalloc done in $(( $(date +%s) - t0 )) s; results in $out (summary.txt)"
