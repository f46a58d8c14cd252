#!/usr/bin/env bash
# Device phase of issue 37's charlm step: a previous binary ("base", .stage_base/sg.tar.xz: bench_ops, its libraries
# and the word list only) against the staged one ("new", .stage/sg.tar.xz), interleaved, then the new binary's
# per-kernel Vulkan profile of the charlm step, optionally the same with --autotune, and the torch peers (eager,
# CUDA graph) in the same call. Logs and JSON under $OUT, a summary on stdout.
# Usage there (carry .gl .stage .stage_base):
#   . scripts/device/h200_prelude.sh; bash scripts/device/phase_charlm.sh [ROUNDS] [CASES] [AUTOTUNE 0|1]
# Env: SG_PROFILE_STEPS (default charlm:32: the --profile-steps list), SG_PEER_CASES (default charlm: peers.py --only).
# Making .stage_base: an earlier .stage/sg.tar.xz unpacked, pkg/bin/shadergrad and pkg/data (but words) removed,
# packed again as .stage_base/sg.tar.xz (5 MB instead of 40, so both fit the device tool's 64 MiB carry).
set -uo pipefail
rounds=${1:-3}
cases=${2:-charlm}
tune=${3:-0}
out=${OUT:?OUT must be set}
mkdir -p /opt/sgbase && tar -C /opt/sgbase -xJf .stage_base/sg.tar.xz
base=/opt/sgbase/pkg/bin/bench_ops
new=$(command -v bench_ops)
export SG_KERNEL_CACHE=/tmp/sg-kc-phase-charlm
rm -rf "$SG_KERNEL_CACHE"
summ() {  # LOG: the step rows' backend, median, min-max and check
  grep -E '^\| [a-zA-Z]' "$1" | grep -v '^| case' | awk -F'|' '{gsub(/ +/," ");print $2 "|" $4 "|" $5 "|" $6 "|" $10}' |
    sed -E 's/\(d_model[^)]*\)//; s/train step //' | cut -c1-160
}
for r in $(seq 1 "$rounds"); do
  for v in base new; do
    bin=$base
    [ "$v" = new ] && bin=$new
    timeout 120 "$bin" --backend vulkan --only "$cases" --warmup 20 --repeats 100 --max-seconds 1 \
      --json "$out/${v}_r$r.json" > "$out/${v}_r$r.log" 2>&1
    echo "== $v round $r rc=$?"
    summ "$out/${v}_r$r.log"
  done
done
timeout 90 "$new" --backend vulkan --only profile --profile-steps "${SG_PROFILE_STEPS:-charlm:32}" --warmup 20 \
  --repeats 10 > "$out/new_profile.log" 2>&1
echo "== new profile rc=$?"
grep -E 'sum of kernels|whole run' "$out/new_profile.log"
if [ "$tune" = 1 ]; then
  timeout 150 "$new" --backend vulkan --only charlm,profile --profile-steps charlm:32 --autotune 1 --warmup 20 \
    --repeats 100 --max-seconds 1 > "$out/tuned.log" 2>&1
  echo "== new --autotune 1 rc=$?"
  summ "$out/tuned.log"
  grep -E 'sum of kernels|whole run' "$out/tuned.log"
fi
PYTHONUNBUFFERED=1 timeout 150 python3 bench/peers.py --device cuda --only "${SG_PEER_CASES:-charlm}" --variants eager,graph --warmup 20 \
  --repeats 100 --max-seconds 3 --json "$out/peers.json" > "$out/peers.log" 2>&1
echo "== peers rc=$?"
summ "$out/peers.log"
