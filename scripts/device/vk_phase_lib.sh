#!/usr/bin/env bash
# Shared steps of the Vulkan bench phases (phase_vkalloc.sh, phase_vkbusy.sh), sourced by them:
#   vk_phase_begin NAME BUDGET_S SMI_S   output dir $OUT/NAME, the sizes (SG_VKALLOC_SIZES/_ALONE/_REDUCE_ROWS),
#                                        a kernel cache under it, nvidia-smi sampling every 250 ms for SMI_S seconds
#   run NAME POLICY LIMIT_S ARGS...      one bench_ops process (SG_VULKAN_MEMORY=POLICY) under `timeout`; none starts
#                                        after BUDGET_S (SG_VKALLOC_BUDGET_S overrides); start/end/rc in runs.txt
#   vk_phase_end                         stops sampling, drops the kernel cache, prints summary.txt
# SG_LOCAL_BIN=build/bin runs it locally (lavapipe) instead of from the staged tree.
vk_phase_begin() {
  phase=$1
  if [ -n "${SG_LOCAL_BIN:-}" ]; then
    export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
  elif [ -z "${SG_SOURCE_DIR:-}" ]; then
    . scripts/device/h200_prelude.sh
  fi
  out=${OUT:-/tmp/out}/$phase
  mkdir -p "$out"
  sizes=${SG_VKALLOC_SIZES:-1024,2048,4096}
  alone=${SG_VKALLOC_ALONE:-4096}
  desc=$(echo "$sizes" | tr ',' '\n' | sort -rn | paste -sd, -)
  reduce_rows=${SG_VKALLOC_REDUCE_ROWS:-}
  budget=${SG_VKALLOC_BUDGET_S:-$2}  # no new run starts after this many seconds
  # the kernel cache and the VkPipelineCache file live here (written only under $out; warm after the first run)
  export SG_KERNEL_CACHE="$out/kernel-cache"
  rm -rf "$SG_KERNEL_CACHE"
  t0=$(date +%s)
  log "phase_$phase $(date -u +%FT%TZ) sizes $sizes alone $alone"
  smi_pid=
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,pstate \
      --format=csv,noheader 2>/dev/null | tee -a "$out/phase.log"
    timeout "$3" nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu,clocks_throttle_reasons.active \
      --format=csv,noheader -lms 250 > "$out/smi.csv" 2>/dev/null &
    smi_pid=$!
  fi
}
log() { echo "$@" | tee -a "$out/phase.log"; }
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
vk_phase_end() {
  [ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null
  rm -rf "$SG_KERNEL_CACHE"  # SPIR-V and pipeline-cache files: not results (keeps what comes back small)
  python3 "$(dirname "${BASH_SOURCE[0]}")/vk_phase_summary.py" "$out" | tee "$out/summary.txt"
  log "phase_$phase done in $(( $(date +%s) - t0 )) s; results in $out (summary.txt)"
}
