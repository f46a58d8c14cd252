#!/usr/bin/env bash
# Device phase "tune" (issue 15, session 7): what the SGEMM heuristic and the autotuner should be, measured.
# On the accelerator machine, after `. scripts/device/h200_prelude.sh`, from the staged tree (targets: bench_ops,
# shadergrad):  OUT=$OUT bash scripts/device/phase_tune.sh      (about 3 minutes; every command under a timeout)
# Writes $OUT/tune/: sgemm_<config>.json/.log (bench_ops SGEMM N=1024,2048,3072,4096 kernel-only with the heuristic
# and with SG_TILE_CONFIG forced to each candidate below), tuned.json/.log (--autotune 1: SGEMM + MLP/CNN steps +
# per-kernel profiles, the tuner's records), steps_heuristic.json/.log (the same steps and profiles, --autotune 0),
# steps_nosplit.json/.log (the same without split-K, --min-parallel 0),
# train_*.log (the main job both ways), summary.txt (the tables printed at the end).
# Locally: SG_LOCAL_BIN=build/bin SG_TUNE_SIZES=128,192 SG_TUNE_CONFIGS=16x16.8x4.k8.g8.v4.pf \
#   SG_TUNE_TRAIN_ARGS="--epochs 1 --train-limit 1024 --test-limit 500" bash scripts/device/phase_tune.sh  (lavapipe)
set -uo pipefail
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
elif [ -z "${SG_SOURCE_DIR:-}" ]; then
  . scripts/device/h200_prelude.sh
fi
out=${OUT:-/tmp/out}/tune
mkdir -p "$out"
sizes=${SG_TUNE_SIZES:-1024,2048,3072,4096}
log() { echo "$@" | tee -a "$out/phase.log"; }
log "phase_tune $(date -u +%FT%TZ) sizes $sizes"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | tee -a "$out/phase.log"

# 1. SGEMM per tile configuration (a fresh process each: the heuristic, then forced candidates). The candidates test
#    the explanations of the N=4096 collapse of 16x16.8x8 (Run 11c: 21.4 ms, while 16x16.8x4.g8 ran 3.55 ms):
#    register tile 8x4 / 4x8 / 4x4 (registers, occupancy), no prefetch (fewer registers), 128 invocations of 8x8,
#    chunks of 16, k rotation and no grouping (the order of L2 / DRAM partition accesses).
configs=(heuristic
  16x16.8x8.k8.g8.v4.pf 16x16.8x4.k8.g8.v4.pf 16x16.4x8.k8.g8.v4.pf 16x16.4x4.k8.g8.v4.pf
  16x16.8x8.k8.g8.v4 16x16.8x4.k8.g8.v4 16x8.8x8.k8.g8.v4.pf 16x16.8x8.k16.g8.v4.pf
  16x16.8x8.k8.g8.v4.pf.kr 16x16.8x8.k8.g1.v4.pf)
[ -n "${SG_TUNE_CONFIGS:-}" ] && read -r -a configs <<<"heuristic ${SG_TUNE_CONFIGS//,/ }"
t0=$(date +%s)
for c in "${configs[@]}"; do
  if [ "$c" = heuristic ]; then unset SG_TILE_CONFIG; else export SG_TILE_CONFIG=$c; fi
  timeout 60 bench_ops --backend vulkan --sgemm "$sizes" --only sgemm --max-seconds 1 --repeats 7 --warmup 3 \
    --autotune 0 --json "$out/sgemm_$c.json" > "$out/sgemm_$c.log" 2>&1
  log "== sgemm $c: rc=$? ($(( $(date +%s) - t0 )) s since start)"
done
unset SG_TILE_CONFIG

# 2. The train steps and per-kernel profiles with the heuristic, then everything with the autotuner (records in a
#    fresh kernel cache, listed afterwards), each in its own process.
export SG_KERNEL_CACHE="$out/kernel-cache"
rm -rf "$SG_KERNEL_CACHE"
timeout 90 bench_ops --backend vulkan --only mlp,cnn,profile --max-seconds 2 --autotune 0 \
  --json "$out/steps_heuristic.json" > "$out/steps_heuristic.log" 2>&1
log "== steps heuristic: rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 90 bench_ops --backend vulkan --only mlp,cnn,profile --max-seconds 2 --autotune 0 --min-parallel 0 \
  --json "$out/steps_nosplit.json" > "$out/steps_nosplit.log" 2>&1
log "== steps heuristic without split-K (--min-parallel 0): rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 200 bench_ops --backend vulkan --sgemm "$sizes" --only mlp,cnn,sgemm,profile --max-seconds 2 --autotune 1 \
  --json "$out/tuned.json" > "$out/tuned.log" 2>&1
log "== tuned (steps, then SGEMM): rc=$? ($(( $(date +%s) - t0 )) s)"
for f in "$SG_KERNEL_CACHE"/*.tune; do [ -f "$f" ] && { echo "--- $(basename "$f")"; cat "$f"; }; done > "$out/tune_records.txt"

# 3. The main job both ways (the tuning now happens before the timed steps and is reported in the log).
for mode in heuristic autotune; do
  flag=$([ $mode = autotune ] && echo --autotune || true)
  t1=$(date +%s%N)
  timeout 60 shadergrad train --backend vulkan $flag ${SG_TUNE_TRAIN_ARGS:-} > "$out/train_$mode.log" 2>&1
  log "== main job $mode: rc=$? $(( ($(date +%s%N) - t1) / 1000000 )) ms wall; $(grep -E '^compiled|^test accuracy' "$out/train_$mode.log" | tr '\n' ' ')"
done

# 4. Summary tables (python3: the image has it for bench/peers.py)
python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import json, glob, os, sys
out = sys.argv[1]
def rows(path):
    try: return json.load(open(path)).get("results", [])
    except Exception as e: return []
print("SGEMM kernel-only ms (TFLOP/s) per tile configuration; 'config' = what the kernel ran after fitting")
table = {}
for f in sorted(glob.glob(os.path.join(out, "sgemm_*.json"))) + [os.path.join(out, "tuned.json")]:
    name = os.path.basename(f)[6:-5] if "sgemm_" in f else "autotune"
    for r in rows(f):
        if not r.get("key", "").startswith("sgemm_"): continue
        x = r
        ms = x.get("kernel_ms")
        n = x.get("n")
        cell = "n/a" if ms is None else "%.3f (%.1f) %s%s" % (ms, 2 * n**3 / ms / 1e9, x.get("config", "?"),
                                                            "" if r.get("ok", True) else " FAIL")
        table.setdefault(name, {})[n] = cell
ns = sorted({n for v in table.values() for n in v})
print("| config | " + " | ".join("N=%d" % n for n in ns) + " |")
for name, v in table.items():
    print("| %s | " % name + " | ".join(v.get(n, "-") for n in ns) + " |")
print("\nTrain steps, median ms (kernels per step)")
for f in ["steps_heuristic.json", "steps_nosplit.json", "tuned.json"]:
    for r in rows(os.path.join(out, f)):
        if "_step_" in r.get("key", ""):
            print("| %s | %s | %.3f | %s | %s |" % (f[:-5], r["key"], r["median_ms"], r.get("kernels"),
                                                    r.get("check", "")))
EOF
grep -hE "^\|.*(train step|k[0-9][0-9]_)|autotuned|total" "$out/steps_heuristic.log" "$out/steps_nosplit.log" "$out/tuned.log" 2>/dev/null | cut -c1-220 | head -80 >> "$out/summary.txt"
log "phase_tune done in $(( $(date +%s) - t0 )) s; results in $out (summary.txt)"
