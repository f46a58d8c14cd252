#!/usr/bin/env bash
# Device phase "fusedopt" (issue 15, session 8, branch fusedopt): the two compute-target schedule rules of that
# branch, each on and off in the same phase.
#  - union-domains on compute targets: small independent kernels (the Adam updates of biases and small layers, with
#    their gradients) are one dispatch whose workgroups are partitioned among the blocks (--union-domains 1|0);
#  - the two-stage tree: a reduction to a few outputs over a long axis is many workgroups of partial reductions of
#    contiguous chunks, then one workgroup per output (--reduce-tree 1|0).
# On the accelerator machine, after `. scripts/device/h200_prelude.sh`, from the staged tree (target: bench_ops):
#   OUT=$OUT bash scripts/device/phase_fusedopt.sh      (about 2-3 minutes; every command under a timeout)
# Runs (one bench_ops process each, --backend vulkan --autotune 0 --vk-repeats 20 so the GPU clock stays up):
#   steps_union1, steps_union0, steps_union1b   --only mlp,cnn (MLP b=32, b=128, CNN b=64 train steps) with the
#                                               union rule on, off, on again (the order effect of Run 13)
#   reduce_tree1, reduce_tree0                  --only reduce with the two-stage tree on / off
# and nvidia-smi sampling every 250 ms (smi.csv). No new run starts after 150 s. Writes only under $OUT/fusedopt/:
# <run>.json/.log, smi.csv, phase.log, runs.txt, summary.txt (printed at the end: kernels per step, ms, GB/s
# against the device's nominal bandwidth).
# Locally (lavapipe): SG_LOCAL_BIN=build/bin SG_VKALLOC_REDUCE_ROWS=250 SG_FUSEDOPT_REPEATS=2 \
#   bash scripts/device/phase_fusedopt.sh
set -uo pipefail
. "$(dirname "$0")/vk_phase_lib.sh"
vk_phase_begin fusedopt 150 220

reps=${SG_FUSEDOPT_REPEATS:-20}
run steps_union1 dedicated 45 --only mlp,cnn --vk-repeats "$reps" --union-domains 1
run steps_union0 dedicated 45 --only mlp,cnn --vk-repeats "$reps" --union-domains 0
run steps_union1b dedicated 45 --only mlp,cnn --vk-repeats "$reps" --union-domains 1
rr=()
[ -n "$reduce_rows" ] && rr=(--reduce-rows "$reduce_rows")
run reduce_tree1 dedicated 45 --only reduce --vk-repeats "$reps" --reduce-tree 1 "${rr[@]}"
run reduce_tree0 dedicated 45 --only reduce --vk-repeats "$reps" --reduce-tree 0 "${rr[@]}"
[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null
rm -rf "$SG_KERNEL_CACHE"
python3 "$(dirname "$0")/phase_fusedopt_summary.py" "$out" | tee "$out/summary.txt"
log "phase_fusedopt done in $(( $(date +%s) - t0 )) s; results in $out (summary.txt)"
