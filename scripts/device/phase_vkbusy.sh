#!/usr/bin/env bash
# Device phase "vkbusy" (issue 15, session 8): Run 13 (phase_vkalloc) found the order effect of Run 12b to be the
# NVIDIA clock governor (SM clock 1980 -> 345 MHz while bench_ops' SGEMM loop left the GPU idle ~95 % of the time
# between readbacks), not buffer placement. This phase checks the measurement fix: bench_ops --vk-repeats R
# dispatches each run()'s kernels R times back to back before its one readback (VulkanOptions::repeat_dispatches).
# On the accelerator machine, after `. scripts/device/h200_prelude.sh`, from the staged tree (target: bench_ops):
#   OUT=$OUT bash scripts/device/phase_vkbusy.sh      (at most 3 minutes; every command under a timeout)
# Runs (one bench_ops process each; the policy is SG_VULKAN_MEMORY):
#   order_r1        --only mlp,cnn,sgemm --sgemm 1024,2048,4096 --vk-repeats 1   (the slow order, as in Run 13)
#   order_r20       the same with --vk-repeats 20; order_r20_blocks under the old placement
#   desc_r20        --only sgemm --sgemm 4096,2048,1024 --vk-repeats 20          (N=1024 after the larger sizes)
#   alone_r20       --only sgemm --sgemm 4096 --vk-repeats 20
#   reduce_r20_sub1/_sub0  --only reduce --vk-repeats 20 with SG_VULKAN_SUBGROUPS=1 / 0
# and nvidia-smi sampling every 250 ms (smi.csv). Writes only under $OUT/vkbusy/: <run>.json/.log, smi.csv,
# phase.log, summary.txt (printed at the end).
# Locally (lavapipe): SG_LOCAL_BIN=build/bin SG_VKALLOC_SIZES=128,256 SG_VKALLOC_ALONE=256 SG_VKALLOC_REDUCE_ROWS=250 \
#   bash scripts/device/phase_vkbusy.sh
set -uo pipefail
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
elif [ -z "${SG_SOURCE_DIR:-}" ]; then
  . scripts/device/h200_prelude.sh
fi
out=${OUT:-/tmp/out}/vkbusy
mkdir -p "$out"
sizes=${SG_VKALLOC_SIZES:-1024,2048,4096}
alone=${SG_VKALLOC_ALONE:-4096}
desc=$(echo "$sizes" | tr ',' '\n' | sort -rn | paste -sd, -)
reduce_rows=${SG_VKALLOC_REDUCE_ROWS:-}
budget=${SG_VKALLOC_BUDGET_S:-130}  # no new run starts after this many seconds (the phase stays under 3 minutes)
log() { echo "$@" | tee -a "$out/phase.log"; }
# the kernel cache and the VkPipelineCache file live here (written only under $out; warm after the first run, and
# order_blocks_again repeats the first run with it warm)
export SG_KERNEL_CACHE="$out/kernel-cache"
rm -rf "$SG_KERNEL_CACHE"
t0=$(date +%s)
log "phase_vkbusy $(date -u +%FT%TZ) sizes $sizes alone $alone"
smi_pid=
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,pstate \
    --format=csv,noheader 2>/dev/null | tee -a "$out/phase.log"
  timeout 190 nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu,clocks_throttle_reasons.active \
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

reps=${SG_VKBUSY_REPEATS:-20}
run order_r1 dedicated 40 --only mlp,cnn,sgemm --sgemm "$sizes" --vk-repeats 1
run order_r20 dedicated 40 --only mlp,cnn,sgemm --sgemm "$sizes" --vk-repeats "$reps"
run order_r20_blocks blocks 40 --only mlp,cnn,sgemm --sgemm "$sizes" --vk-repeats "$reps"
run desc_r20 dedicated 30 --only sgemm --sgemm "$desc" --vk-repeats "$reps"
run alone_r20 dedicated 20 --only sgemm --sgemm "$alone" --vk-repeats "$reps"
rr=()
[ -n "$reduce_rows" ] && rr=(--reduce-rows "$reduce_rows")
SG_VULKAN_SUBGROUPS=1 run reduce_r20_sub1 dedicated 30 --only reduce --vk-repeats "$reps" "${rr[@]}"
SG_VULKAN_SUBGROUPS=0 run reduce_r20_sub0 dedicated 30 --only reduce --vk-repeats "$reps" "${rr[@]}"
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
log "phase_vkbusy done in $(( $(date +%s) - t0 )) s; results in $out (summary.txt)"
