#!/usr/bin/env bash
# Device-tool runs on the accelerator machine (after scripts/device/stage.sh here), one phase per call so each
# stays inside a call's 10 minutes; logs and JSON under $OUT, a summary on stdout.
#   bash scripts/device/h200_bench.sh bench [BACKENDS] [SGEMM_SIZES]  bench_ops vs the PyTorch/JAX peers, same run
#   bash scripts/device/h200_bench.sh jobs  [BACKENDS]                the main job per backend, then GPU test suites
set -uo pipefail
phase=${1:-bench}
backends=${2:-vulkan,gles-compute,gles}
sizes=${3:-1024,2048,4096}
. scripts/device/h200_prelude.sh
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ "$phase" = bench ]; then
  shadergrad info > "$out/info.txt" 2>&1; grep -iE 'renderer|vulkan|device|version' "$out/info.txt" | head -12
  timeout 280 bench_ops --backend "$backends" --sgemm "$sizes" --only sgemm,mlp,cnn --max-seconds 3 \
    --json "$out/ours.json" > "$out/ours.log" 2>&1; echo "bench_ops rc=$?"
  PYTHONUNBUFFERED=1 timeout 220 python3 bench/peers.py --device cuda --sgemm "$sizes" --max-seconds 3 \
    --json "$out/peers.json" > "$out/peers.log" 2>&1; echo "peers rc=$?"
  grep -E '^\|' "$out/ours.log" | cut -c1-140
  grep -E '^\|' "$out/peers.log" | cut -c1-140
  python3 bench/peers.py --join "$out/ours.json" "$out/peers.json" 2>&1 | tail -25
else
  for b in ${backends//,/ }; do
    t0=$(date +%s%N)
    timeout 100 shadergrad train --backend "$b" > "$out/train_$b.log" 2>&1
    echo "main job --backend $b: rc=$? $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"; tail -2 "$out/train_$b.log"
  done
  for t in test_vulkan_backend test_compute_ops test_compute_backend; do
    [ -x "/opt/sg/pkg/bin/$t" ] || continue
    SG_VULKAN_VALIDATION=1 timeout 120 "$t" > "$out/$t.log" 2>&1
    echo "$t rc=$? $(tail -3 "$out/$t.log" | tr '\n' ' ' | cut -c1-300)"
  done
fi
