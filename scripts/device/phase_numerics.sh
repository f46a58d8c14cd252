#!/usr/bin/env bash
# Device phase (accelerator machine, after scripts/device/stage.sh with bench_numerics): the edge-value table of
# bench_numerics (tests/edge_cases.h against the f64 CPU reference) on the NVIDIA drivers' gles, gles-compute and
# vulkan backends, then the argmax probe: each formulation of argmax's comparison (SG_ARGMAX_FORM, see
# codegen/src/glsl_argmax.cpp) on the argmax cases, with the GLSL ES the driver compiled for each (SG_DUMP).
# Writes under $OUT/numerics/: default.txt (every case, every value), argmax_FORM.txt, dump/FORM/BACKEND/ (the
# kernels of "argmax axis 1": .glsl = GLSL 4.50, .frag/.comp = the GLSL ES SPIRV-Cross made of it), summary.txt.
# Usage there: bash scripts/device/phase_numerics.sh [BACKENDS]   (default gles,gles-compute,vulkan; ~2 min)
# Locally (no device): SG_LOCAL_BIN=build/bin bash scripts/device/phase_numerics.sh
set -uo pipefail
backends=${1:-gles,gles-compute,vulkan}
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
else
  . scripts/device/h200_prelude.sh
fi
out=${OUT:-/tmp/out}/numerics
mkdir -p "$out"
forms=(or ugt branch arith maxbits intkey)
{
  echo "phase_numerics: $(date -u +%FT%TZ), backends $backends"
  t0=$(date +%s)
  SG_ARGMAX_FORM= timeout 240 bench_numerics --backend "$backends" --all > "$out/default.txt" 2>&1
  echo "default forms (argmax intkey, pow in two floats): rc=$? $(( $(date +%s) - t0 )) s"
  grep -E -- '^backend|^argmax form|-- [0-9]+ disagreement|^summary' "$out/default.txt" | cut -c1-240
  grep -E '^pow' "$out/default.txt" | cut -c1-240
  for f in "${forms[@]}"; do
    SG_ARGMAX_FORM=$f timeout 120 bench_numerics --backend "$backends" --all --only argmax > "$out/argmax_$f.txt" 2>&1
    echo "argmax form $f: rc=$? $(grep -E '^summary' "$out/argmax_$f.txt")"
    grep -E -- '-- [0-9]+ disagreement' "$out/argmax_$f.txt" | sed 's/^/    /'
    for b in ${backends//,/ }; do
      SG_ARGMAX_FORM=$f SG_DUMP="$out/dump/$f/$b" timeout 60 bench_numerics --backend "$b" --only "argmax axis 1" \
        > /dev/null 2>&1 || true
    done
  done
} 2>&1 | tee "$out/summary.txt"
