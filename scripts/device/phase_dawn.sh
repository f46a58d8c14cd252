#!/usr/bin/env bash
# Device phase (issue 17, seed 000's bar of 200 train steps/s): our web runtime on WebGPU through Dawn in Node
# (bench/web_node_bench.mjs), TF.js 4.22 webgpu and jax-js 0.1.25 webgpu beside it in the same process: NOT a
# browser (the H200 machine has no Chromium; Dawn is Chromium's WebGPU implementation, here over NVIDIA's Vulkan).
# Needs .stage_node/sg_node.tar.xz (scripts/device/stage_node.sh) and the GL/Vulkan loader debs in .gl/ (unpacked
# here when no libvulkan.so.1 is known, as scripts/device/h200_prelude.sh does). Node (built on Debian 12, glibc
# 2.36) runs on the host's loader and glibc when it starts there (the H200 image's glibc is newer: its driver
# libraries, e.g. libX11 under NVIDIA's Vulkan ICD, need GLIBC_2.38, so the staged libc must not be in front of
# them), else on the staged Debian loader and libraries: `lib/ld-linux-x86-64.so.2 --library-path lib:... bin/node`
# (a host older than Debian 12).
# Usage: OUT=$OUT bash scripts/device/phase_dawn.sh   (with or without the prelude sourced before)
# Runs, each under its own `timeout`, in this order: (1) bench_BACKEND: every case but charlm_b32 (the readback floor,
# MLP/CNN/digits train steps, SGEMM), ours and both peers, at most 160 s; (2) bench_BACKEND_charlm (issue 37):
# --only charlm_b32, ours (picked and gpu plan) against jax-js 0.1.25 webgpu's CharTransformer step on the same word
# rows (resident and uploaded inputs; TF.js has no charlm: a 'not measured' row), SG_DAWN_LM_COUNTS warm-up,timed
# steps (default 10,50), at most SG_DAWN_LM_SECS s (default 100; each measurement under --case-timeout 45 s);
# (3) bench_BACKEND_ours2: ours again without the peers (no charlm), in what time is left.
# Env: SG_DAWN_BACKENDS (default "vulkan opengles": the first that gives an adapter is timed), SG_NODE_LOADERS
# (default "host staged", host only when `bin/node --version` runs there: the first loader on which a backend gives
# an adapter is used), SG_DAWN_BUDGET
# (seconds for the whole phase, default 230: no run starts after it, each run is under `timeout`), SG_DAWN_LM_COUNTS,
# SG_DAWN_LM_SECS (run 2; SG_DAWN_LM_SECS=0 skips it).
# Writes only under $OUT/dawn/: smi.txt, adapter_BACKEND_LOADER.log, bench_*.log, bench_*.json, summary.txt (printed at the end).
set -uo pipefail
t0=$(date +%s)
budget=${SG_DAWN_BUDGET:-230}
out=${OUT:?OUT must be set}/dawn
mkdir -p "$out"
left() { echo $((budget - ($(date +%s) - t0))); }
tarball=${SG_NODE_TAR:-.stage_node/sg_node.tar.xz}
dest=${SG_NODE_DIR:-/tmp/sg_node_phase}
[ -f "$tarball" ] || { echo "phase_dawn: $tarball is missing (scripts/device/stage_node.sh, carry .stage_node)" | tee "$out/summary.txt"; exit 2; }
rm -rf "$dest" && mkdir -p "$dest" && tar -C "$dest" -xJf "$tarball"
n=$dest/sgnode
# the scripts of the carried checkout replace the staged copies (the tarball's node_modules, node and bundles stay)
if [ "${SG_NODE_OVERLAY:-1}" = 1 ]; then
  for f in bench/web_node_bench.mjs bench/web/bench_models.js bench/web/package.json tests/dawn_node.mjs; do
    [ -f "$f" ] && cp "$f" "$n/tree/$f"
  done
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
  if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
fi
for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
           /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/icd.d/nvidia_icd.json; do
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
done
# On the staged loader, Dawn dlopens libvulkan.so.1 / libEGL.so.1 and the driver's libraries from the staged lib/
# first (glibc), then the host's directories (the loader also reads the host's ld.so.cache)
libpath=$n/lib:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/lib64
staged=("$n/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$n/bin/node")
nodecmd=("${staged[@]}")
{
  echo "phase_dawn $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs; VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv 2>&1 || echo "no nvidia-smi"
  echo "node: $("${staged[@]}" --version 2>&1) (staged, Debian's loader)"
} | tee "$out/smi.txt"

bench=$n/tree/bench/web_node_bench.mjs
# the first backend that gives an adapter, with node on the host's loader (when it runs there), else on the staged
# Debian loader (SG_NODE_LOADERS)
chosen=""
host_ok=no; "$n/bin/node" --version > /dev/null 2>&1 && host_ok=yes
echo "node on the host's loader: $host_ok" | tee -a "$out/smi.txt"
for loader in ${SG_NODE_LOADERS:-host staged}; do
  if [ "$loader" = host ] && [ $host_ok = no ]; then continue; fi
  if [ "$loader" = staged ]; then nodecmd=("${staged[@]}"); else nodecmd=("$n/bin/node"); fi
  for b in ${SG_DAWN_BACKENDS:-vulkan opengles}; do
    echo "--- adapter probe: Dawn $b backend, node on the $loader loader"
    timeout 30 env EGL_PLATFORM=${EGL_PLATFORM:-surfaceless} "${nodecmd[@]}" "$bench" --adapter-only --dawn-backend "$b" \
      > "$out/adapter_${b}_$loader.log" 2>&1
    rc=$?
    grep -v '^Warning: max' "$out/adapter_${b}_$loader.log" | cut -c1-600
    echo "(rc $rc)"
    if [ $rc = 0 ]; then chosen=$b; break 2; fi
  done
done
echo "chosen: Dawn ${chosen:-none} backend, node on the ${loader} loader" | tee -a "$out/smi.txt"
summary() {
  {
    echo "=== phase_dawn summary ($(($(date +%s) - t0)) s): Node + Dawn on this machine, NOT a browser"
    head -3 "$out/smi.txt"
    tail -1 "$out/smi.txt"
    grep -h '^Dawn adapter' "$out"/adapter_*.log | cut -c1-400
    for log in "$out"/bench_*.log; do
      [ -f "$log" ] || continue
      echo "--- $(basename "$log") ($(grep -h "^rc " "$log" || echo "no rc"); 124 = cut at its timeout, the table holds what it measured)"
      grep -h 'cannot load' "$log" | cut -c1-300
      if ! { [ -f "${log%.log}.json" ] && timeout 20 "${nodecmd[@]}" "$bench" --table-from "${log%.log}.json" > "$out/table.tmp" 2>&1; }; then
        cat "$out/table.tmp" 2>/dev/null; echo "(no table from the JSON: the log's measurement lines)"
        grep -E '^[a-z0-9_]+ +(shadergrad|tfjs|jax|dawn)' "$log" > "$out/table.tmp"
      fi
      cut -c1-400 "$out/table.tmp"; rm -f "$out/table.tmp"
    done
  } | tee "$out/summary.txt"
}
if [ -z "$chosen" ]; then echo "phase_dawn: no Dawn backend gave an adapter"; summary; exit 1; fi

# run 1: every case but charlm_b32, ours (picked plan; the gpu plan when the pick is another) and both peers
run() {  # NAME SECONDS ARGS...
  local name=$1 secs=$2; shift 2
  [ "$secs" -gt 20 ] || { echo "phase_dawn: no time left for $name"; return; }
  echo "--- $name: timeout $secs s: web_node_bench.mjs --dawn-backend $chosen $*"
  timeout -k 5 "$secs" env EGL_PLATFORM=${EGL_PLATFORM:-surfaceless} "${nodecmd[@]}" "$bench" --bundles "$n/bundles" --dawn-backend "$chosen" --json "$out/$name.json" "$@" 2>&1 |
    grep --line-buffered -v '^Warning: max' | tee "$out/$name.log"
  echo "rc ${PIPESTATUS[0]}" | tee -a "$out/$name.log"
}
run "bench_${chosen}" $(( $(left) > 160 ? 160 : $(left) ))
# run 2: issue 37's charlm train step, ours and jax-js (its bundle and word rows are in the tarball's bundles/)
lm_secs=${SG_DAWN_LM_SECS:-100}
if [ "$lm_secs" -gt 0 ]; then
  run "bench_${chosen}_charlm" $(( $(left) - 5 > lm_secs ? lm_secs : $(left) - 5 )) --only charlm_b32 \
    --lm-counts "${SG_DAWN_LM_COUNTS:-10,50}" --case-timeout 45
fi
# run 3 (what time is left): ours again without the peers, for the spread between runs
run "bench_${chosen}_ours2" $(( $(left) - 5 )) --no-peers --plans auto
summary
