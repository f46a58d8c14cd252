#!/bin/sh
# WebGPU soak (docs/RELIABILITY.md "Soak"): exports the MLP 784-128-10 (Adam, batch 32, webgpu target) as a web
# bundle, installs npm webgpu in tests/ when missing (npm ci from tests/package-lock.json), and runs
# tests/webgpu_soak.mjs on it: STEPS train steps with the web runtime on Dawn for Node, object counts / JS heap /
# RSS flat, every loss finite (exit status 1 otherwise).
# Usage: sh bench/webgpu_soak.sh PATH/TO/shadergrad [STEPS] [PLAN]   (default 10000 steps; PLAN auto | gpu | cpu, the
#        webgpu plan, default auto: the runtime picks; the ctest test soak_webgpu)
set -eu
cli=${1:?usage: webgpu_soak.sh PATH/TO/shadergrad [STEPS]}
steps=${2:-10000}
plan=${3:-auto}
tests=$(cd "$(dirname "$0")/../tests" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/sg_webgpu_soak.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$cli" export --model mlp --batch 32 --targets webgpu --out "$dir/mlp" > "$dir/export.log" 2>&1 || {
  cat "$dir/export.log"; exit 1; }
(cd "$tests" && flock /tmp/shadergrad-npm-ci.lock sh -c \
  'test -f node_modules/webgpu/package.json || npm ci --no-audit --no-fund') >&2
node --expose-gc "$tests/webgpu_soak.mjs" "$dir/mlp" "$steps" "$plan"
