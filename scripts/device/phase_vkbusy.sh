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
. "$(dirname "$0")/vk_phase_lib.sh"
vk_phase_begin vkbusy 130 190

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
vk_phase_end
