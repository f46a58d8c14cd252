#!/usr/bin/env bash
# Byte-stable generated shaders across compilers (docs/RELIABILITY.md "Sanitizers", issue 19): dumps the same models
# with two builds of the CLI (in CI: build/bin/shadergrad, GCC, and build-san/bin/shadergrad, clang-14) and compares
# every file byte for byte: the kernels (GLSL 450, SPIR-V, GLSL ES fragment and compute, WGSL for WebGPU's default
# and compatibility limits) and plan.json of the MLP and the CNN, and the GLES schedule of a hardware GPU (--gpu).
# A difference means the code generator depends on something a compiler may choose, e.g. the evaluation order of a
# call's arguments when two of them name temporaries (f(print(a), print(b)): sequence them into named locals).
# Usage: scripts/compare_dumps.sh CLI_A CLI_B [WORKDIR]     exit status 1 with the differing files and their diffs
set -euo pipefail
a=${1:?usage: compare_dumps.sh CLI_A CLI_B [WORKDIR]} b=${2:?usage: compare_dumps.sh CLI_A CLI_B [WORKDIR]}
work=${3:-$(mktemp -d "${TMPDIR:-/tmp}/sg_compare_dumps.XXXXXX")}
mkdir -p "$work"
status=0 files=0
for model in mlp cnn; do
  for target in all --gpu glsl-es-compute spirv-vulkan wgsl wgsl-compat; do
    args=(--model "$model" --target "$target")
    [[ $target == --gpu ]] && args=(--model "$model" --target all --gpu)
    name="$model${target//-/_}"
    for side in a b; do
      cli=$a; [[ $side == b ]] && cli=$b
      rm -rf "$work/$side/$name"
      "$cli" dump "${args[@]}" --out "$work/$side/$name" > "$work/$side.$name.log" 2>&1 || {
        echo "compare_dumps: '$cli dump ${args[*]}' failed:"; cat "$work/$side.$name.log"; exit 1; }
    done
    n=$(find "$work/a/$name" -type f | wc -l)
    files=$((files + n))
    if ! diff -rq "$work/a/$name" "$work/b/$name" > "$work/$name.diff"; then
      status=1
      echo "compare_dumps: dump ${args[*]}: files differ between $a and $b:"
      cat "$work/$name.diff"
      diff -r "$work/a/$name" "$work/b/$name" | head -n 40 || true
    else
      echo "compare_dumps: dump ${args[*]}: $n files identical"
    fi
  done
done
echo "compare_dumps: $files files compared, $([[ $status == 0 ]] && echo 'all identical' || echo 'DIFFERENCES above')"
[[ -z ${3:-} ]] && rm -rf "$work"
exit $status
