#!/usr/bin/env bash
# Device-tool runs on the accelerator machine (after scripts/device/stage.sh here), one phase per call so each
# stays inside a call's 10 minutes; logs and JSON under $OUT, a summary on stdout.
#   bash scripts/device/h200_bench.sh bench [BACKENDS] [SGEMM_SIZES]  bench_ops vs the PyTorch/JAX peers, same run
#   bash scripts/device/h200_bench.sh jobs  [BACKENDS]                the main job per backend, then GPU test suites
#   bash scripts/device/h200_bench.sh tune  [BACKENDS] [SGEMM_SIZES]  Vulkan SGEMM + MLP/CNN steps with the heuristic
#        tiles, then with --autotune (the winners per kernel, roofline lines, per-kernel profiles), the main job with
#        --autotune, then the peers; under 8 minutes on the H200 (timeouts 120 + 200 + 40 + 120 s). BACKENDS: vulkan.
# Locally (no device): SG_LOCAL_BIN=build/bin [SG_PEERS_DEVICE=cpu|none] bash scripts/device/h200_bench.sh tune vulkan 128,256
#   runs the same phase with the binaries of a build directory on this machine's devices (lavapipe).
set -uo pipefail
phase=${1:-bench}
backends=${2:-vulkan,gles-compute,gles}
sizes=${3:-1024,2048,4096}
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
  peers_device=${SG_PEERS_DEVICE:-none}
else
  . scripts/device/h200_prelude.sh
  peers_device=${SG_PEERS_DEVICE:-cuda}
fi
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ "$phase" = tune ]; then
  export SG_KERNEL_CACHE="$out/kernel-cache"  # tuning records shared by the runs of this call
  rm -rf "$SG_KERNEL_CACHE"
  vulkaninfo --summary 2>/dev/null | grep -iE 'deviceName|driverInfo' | head -4
  for mode in 0 1; do
    name=$([ $mode = 1 ] && echo tuned || echo heuristic)
    t0=$(date +%s)
    timeout $([ $mode = 1 ] && echo 200 || echo 120) bench_ops --backend "$backends" --sgemm "$sizes" \
      --only sgemm,mlp,cnn,roofline,profile --max-seconds 2 --autotune $mode --json "$out/$name.json" \
      > "$out/$name.log" 2>&1
    echo "== bench_ops $name (--autotune $mode): rc=$? $(( $(date +%s) - t0 )) s"
    grep -E '^\||^Vulkan|^\(|^autotune' "$out/$name.log" | cut -c1-200
  done
  t0=$(date +%s%N)
  timeout 40 shadergrad train --backend vulkan --autotune > "$out/train_tuned.log" 2>&1
  echo "== main job --backend vulkan --autotune: rc=$? $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"
  tail -1 "$out/train_tuned.log"
  if [ "$peers_device" != none ]; then
    PYTHONUNBUFFERED=1 timeout 120 python3 bench/peers.py --device "$peers_device" --sgemm "$sizes" --max-seconds 2 \
      --json "$out/peers.json" > "$out/peers.log" 2>&1; echo "== peers rc=$?"
    grep -E '^\|' "$out/peers.log" | cut -c1-140
    for name in heuristic tuned; do
      echo "== joined: $name"; python3 bench/peers.py --join "$out/$name.json" "$out/peers.json" 2>&1 | tail -25
    done
  fi
  ls "$SG_KERNEL_CACHE"/*.tune 2>/dev/null | wc -l | sed 's/^/tuning records: /'
elif [ "$phase" = bench ]; then
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
