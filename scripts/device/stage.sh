#!/usr/bin/env bash
# Builds the binaries for the accelerator machine (device tool) and packs what a run there needs into
# .stage/sg.tar.xz: Release build in build-dev with libstdc++/libgcc linked statically (the machine there has
# another distribution's libraries), the few shared libraries it lacks, and the datasets at their Debian paths.
# The GL/Vulkan loader packages travel separately in .gl/ (the device README's recipe).
# Usage: scripts/device/stage.sh [TARGET...]   (default: the CLI, bench_ops and the GPU test binaries)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.stage/' "$exclude" 2>/dev/null || echo '/.stage/' >> "$exclude"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(shadergrad bench_ops test_gles_ops test_gles_backend)
mkdir -p build-dev
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DSG_BUILD_EXAMPLES=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" > build-dev/configure.log 2>&1 ||
  { cat build-dev/configure.log; exit 1; }
present=()
known=$(ninja -C build-dev -t targets all 2>/dev/null)
for t in "${targets[@]}"; do
  if grep -q "^$t: phony" <<<"$known"; then present+=("$t"); else echo "stage: no target $t (skipped)"; fi
done
[ ${#present[@]} -gt 0 ] || { echo "stage: none of the targets exists" >&2; exit 1; }
cmake --build build-dev --target "${present[@]}"
rm -rf .stage && mkdir -p .stage/pkg/bin .stage/pkg/lib .stage/pkg/data
for t in "${present[@]}"; do strip -o ".stage/pkg/bin/$t" "build-dev/bin/$t"; done
for l in libfmt.so.9 libtinfo.so.6 libpng16.so.16 libcpp-httplib.so.0.11 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do cp -L "/usr/lib/x86_64-linux-gnu/$l" .stage/pkg/lib/; done
cp -r /usr/share/datasets/fashion-mnist .stage/pkg/data/
cp /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz .stage/pkg/data/
cp -L /usr/share/dict/words .stage/pkg/data/words  # wamerican: the charlm/lstm word list
tar -C .stage -cJf .stage/sg.tar.xz pkg && rm -rf .stage/pkg
ls -la .stage/sg.tar.xz
