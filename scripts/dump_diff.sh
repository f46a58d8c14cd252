#!/usr/bin/env bash
# Dumps every generated kernel of the mlp and cnn train steps (with and without --gpu; .glsl, .spv, .spvasm, .frag,
# .comp and plan.json) and diffs them against the same dump made by the shadergrad of a reference commit: the proof
# that a restructuring of codegen changed no generated shader.
#
#   scripts/dump_diff.sh [COMMIT]            diff build/bin/shadergrad against COMMIT (default: main)
#   scripts/dump_diff.sh --dump BIN DIR      only dump, with BIN, into DIR
#
# The reference dump is kept in $SG_DUMP_REF_ROOT/dump-ref-<short commit> (default root: build/), built once from a
# detached worktree of COMMIT (ccache makes that a warm build); a later run reuses it. Exit status: 0 when every file
# is byte-identical, 1 with the diff otherwise.
set -euo pipefail

dump_all() {  # BIN DIR
  local bin=$1 dir=$2
  rm -rf "$dir"
  mkdir -p "$dir"
  for model in mlp cnn; do
    for gpu in "" --gpu; do
      local d="$dir/$model${gpu:+-gpu}"
      "$bin" dump --model "$model" $gpu --out "$d/all" >"$d.stdout"
      "$bin" dump --model "$model" $gpu --target glsl-es-compute --out "$d/compute" >>"$d.stdout"
    done
    # the C kernels of the cpu-simd backend (one schedule whatever --gpu says); a reference binary older than the
    # target dumps none (the diff then lists the new files)
    "$bin" dump --model "$model" --target cpu-simd --out "$dir/$model/cpu-simd" >>"$dir/$model.stdout" 2>/dev/null ||
      rm -rf "$dir/$model/cpu-simd"
  done
  "$bin" dump --model mlp --unfused --out "$dir/mlp-unfused/all" >"$dir/mlp-unfused.stdout"
  "$bin" dump --model cnn --gpu --no-union --max-outputs 4 --out "$dir/cnn-gpu-nounion-4/all" >"$dir/cnn-gpu-nounion-4.stdout"
  sed -i "s|$dir/||g" "$dir"/*.stdout  # the summaries without the output directory
}

if [[ ${1:-} == --dump ]]; then
  dump_all "$2" "$3"
  exit 0
fi

repo=$(git rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --short "${1:-main}")
root=${SG_DUMP_REF_ROOT:-$repo/build}
ref="$root/dump-ref-$commit"
if [[ ! -d $ref ]]; then
  # beside this checkout (same path depth: with CCACHE_BASEDIR set, files unchanged since COMMIT are cache hits)
  src="$repo-ref-$commit"
  git -C "$repo" worktree add --detach "$src" "$commit" >/dev/null
  cmake -S "$src" -B "$src/build" -G Ninja >/dev/null
  cmake --build "$src/build" --target shadergrad -j2 >/dev/null
  dump_all "$src/build/bin/shadergrad" "$ref.tmp"
  mv "$ref.tmp" "$ref"
  git -C "$repo" worktree remove --force "$src"
fi
cur="$repo/build/dump-cur"
dump_all "$repo/build/bin/shadergrad" "$cur"
if diff -r "$ref" "$cur"; then
  echo "dump_diff: generated shaders and plans byte-identical to $commit ($(find "$cur" -type f | wc -l) files)"
else
  echo "dump_diff: DIFFERENT from $commit (reference $ref, current $cur)" >&2
  exit 1
fi
