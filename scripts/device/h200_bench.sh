#!/usr/bin/env bash
# One device-tool run on the accelerator machine: GPU tests on the real driver, bench_ops against the PyTorch /
# JAX peers in the same run, and the main job per backend. Writes logs and JSON under $OUT; prints a summary.
# Usage there (after scripts/device/stage.sh here): bash scripts/device/h200_bench.sh [BACKENDS] [SGEMM_SIZES]
set -uo pipefail
backends=${1:-vulkan,gles}
sizes=${2:-1024,2048,4096}
. scripts/device/h200_prelude.sh
out=${OUT:-/tmp/out}
mkdir -p "$out"
shadergrad info > "$out/info.txt" 2>&1; head -40 "$out/info.txt"
for t in test_vulkan_device test_vulkan_backend test_compute_ops test_compute_backend; do
  [ -x "/opt/sg/pkg/bin/$t" ] || continue
  SG_VULKAN_VALIDATION=1 timeout 240 "$t" > "$out/$t.log" 2>&1
  echo "$t rc=$? $(tail -2 "$out/$t.log" | tr '\n' ' ')"
done
timeout 300 bench_ops --backend "$backends" --sgemm "$sizes" --only sgemm,mlp,cnn,profile --max-seconds 4 \
  --json "$out/ours.json" > "$out/ours.log" 2>&1; echo "bench_ops rc=$?"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/peers.py --device cuda --sgemm "$sizes" --max-seconds 4 \
  --json "$out/peers.json" > "$out/peers.log" 2>&1; echo "peers rc=$?"
for b in ${backends//,/ }; do
  t0=$(date +%s%N)
  timeout 120 shadergrad train --backend "$b" > "$out/train_$b.log" 2>&1
  echo "main job --backend $b: rc=$? $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"; tail -3 "$out/train_$b.log"
done
grep -E '^\|' "$out/ours.log" | cut -c1-150
grep -E '^\|' "$out/peers.log" | cut -c1-150
python3 bench/peers.py --join "$out/ours.json" "$out/peers.json" 2>&1 | tail -25
