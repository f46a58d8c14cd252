#!/usr/bin/env bash
# Packs what bench/web_node_bench.mjs needs on the accelerator machine (which has no Node and another distribution's
# libraries) into .stage_node/sg_node.tar.xz (not .stage/: scripts/device/stage.sh empties that), for scripts/device/phase_dawn.sh:
#   sgnode/bin/node                  this machine's Node (/usr/bin/node, stripped)
#   sgnode/lib/                      Debian's dynamic loader, libc, libm, libstdc++, libgcc_s, libdl, libpthread,
#                                    librt: node runs as `lib/ld-linux-x86-64.so.2 --library-path lib:... bin/node`,
#                                    independent of the host's glibc
#   sgnode/tree/                     the scripts (bench/web_node_bench.mjs, bench/web/bench_models.js,
#                                    tests/dawn_node.mjs) and only the node_modules files they load: npm webgpu's
#                                    index.js + dist/linux-x64/dawn.node (tests/), jax-js's dist/*.js, TF.js's
#                                    tf.min.js and tf-backend-webgpu.min.js (bench/web/)
#   sgnode/bundles/                  the exported bundles (bench/web_node_bench.mjs --export-to, with --cli/--exporter):
#                                    every case's, charlm_b32's (issue 37) with its word rows (charlm_rows.json)
# The GL/Vulkan loader packages travel separately in .gl/ (the device README's recipe; scripts/device/h200_prelude.sh
# unpacks them). Usage: scripts/device/stage_node.sh [path/to/shadergrad [path/to/bench_web_export]]
# (default build/bin/...; `npm ci` in tests/ and bench/web/ first). Prints the tarball's size (it must stay well under
# the 64 MiB a device call carries, with .gl).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cli=${1:-build/bin/shadergrad}
exporter=${2:-build/bin/bench_web_export}
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.stage_node/' "$exclude" 2>/dev/null || echo '/.stage_node/' >> "$exclude"
for f in tests/node_modules/webgpu/dist/linux-x64/dawn.node bench/web/node_modules/@jax-js/jax/dist/index.js \
         bench/web/node_modules/@tensorflow/tfjs/dist/tf.min.js "$cli" "$exporter"; do
  [ -e "$f" ] || { echo "stage_node: $f is missing (npm ci in tests/ and bench/web/; build shadergrad, bench_web_export)" >&2; exit 2; }
done
s=.stage_node/sgnode
rm -rf "$s" .stage_node/sg_node.tar.xz && mkdir -p "$s/bin" "$s/lib" "$s/tree"
strip -o "$s/bin/node" "$(readlink -f "$(command -v node)")"
for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libdl.so.2 libpthread.so.0 librt.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$s/lib/"
done
# every library node or dawn.node needs must be in lib/ (a host library would need the host's glibc)
for b in "$s/bin/node" tests/node_modules/webgpu/dist/linux-x64/dawn.node; do
  for need in $(objdump -p "$b" | awk '/NEEDED/ {print $2}'); do
    [ -e "$s/lib/$need" ] || { echo "stage_node: $b needs $need, not staged" >&2; exit 1; }
  done
done
copy() { mkdir -p "$s/tree/$(dirname "$1")" && cp "$1" "$s/tree/$1"; }
for f in bench/web_node_bench.mjs bench/web/bench_models.js bench/web/package.json tests/dawn_node.mjs \
         tests/node_modules/webgpu/index.js tests/node_modules/webgpu/package.json \
         tests/node_modules/webgpu/dist/linux-x64/dawn.node \
         bench/web/node_modules/@jax-js/jax/package.json \
         bench/web/node_modules/@tensorflow/tfjs/dist/tf.min.js \
         bench/web/node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js; do
  copy "$f"
done
for f in bench/web/node_modules/@jax-js/jax/dist/*.js; do copy "$f"; done
"$s/lib/ld-linux-x86-64.so.2" --library-path "$s/lib" "$s/bin/node" bench/web_node_bench.mjs \
  --export-to "$s/bundles" --cli "$cli" --exporter "$exporter"
[ -f "$s/bundles/charlm_b32/bundle.json" ] && [ -f "$s/bundles/charlm_b32/charlm_rows.json" ] ||
  { echo "stage_node: the charlm_b32 bundle or its charlm_rows.json was not exported" >&2; exit 1; }
du -sh "$s/bundles"/*; du -sh "$s/bundles"
tar -C .stage_node -cf - sgnode | xz -T2 -6 > .stage_node/sg_node.tar.xz
rm -rf "$s"
ls -la .stage_node/sg_node.tar.xz
