#!/usr/bin/env bash
# Device phase "vkalloc" (issue 15, session 8): is the order effect of docs/perf-log/12b.md (SGEMM N=4096
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
. "$(dirname "$0")/vk_phase_lib.sh"
vk_phase_begin vkalloc 185 250

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
vk_phase_end
