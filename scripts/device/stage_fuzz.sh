#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan + libFuzzer, the build-san dir of scripts/ci_reliability.sh,
# configured the same way) and packs them for the accelerator machine as .stage_fuzz/fuzz.tar.xz (beside, not in,
# .stage/, which stage.sh empties): the binaries without debug info (their symbol tables stay, so a crash's stack
# names functions; build-san/bin keeps the full binaries for addr2line), and the shared libraries they need that
# the machine there lacks (it runs another distribution: Debian's libstdc++/libgcc_s travel with them; clang links
# the sanitizer runtimes statically; the GL/Vulkan loaders come from .gl/ as for stage.sh). A library the binaries
# name but never call (LLVM's config adds libz3, 23 MB, to every link) travels as an empty stub of that soname.
# phase_fuzz.sh needs only .stage_fuzz and .gl (about 9 MB in all), nothing of .stage/.
# Usage: scripts/device/stage_fuzz.sh [TARGET...]   (default: idx digits image debugger, the targets short of 10^6
#        executions; any of tests/fuzz/fuzz_*.cpp); then, on the device with .stage_fuzz and .gl carried,
#        scripts/device/phase_fuzz.sh runs them there (docs/RELIABILITY.md, "Fuzzing").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
ex=$(git rev-parse --git-path info/exclude); grep -qx "/.stage_fuzz/" "$ex" 2>/dev/null || echo "/.stage_fuzz/" >> "$ex"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(idx digits image debugger)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DSG_SANITIZE=ON -DSG_FUZZ=ON -DSG_BUILD_EXAMPLES=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_FUZZ_SECONDS="${SG_FUZZ_SECONDS:-5}" > /dev/null
nice -n 10 cmake --build build-san --target "${targets[@]/#/fuzz_}"
st=.stage_fuzz
rm -rf "$st" && mkdir -p "$st/fuzz/bin" "$st/fuzz/lib"
for t in "${targets[@]}"; do strip --strip-debug -o "$st/fuzz/bin/fuzz_$t" "build-san/bin/fuzz_$t"; done
# every NEEDED library outside glibc and the GL/Vulkan loaders (those come from .gl/)
libs=$(for b in "$st"/fuzz/bin/*; do ldd "$b"; done | awk '$2 == "=>" {print $1 " " $3}' | sort -u |
       grep -vE '^(libc|libm|libdl|libpthread|librt|ld-linux[^ ]*|linux-vdso)\.so|^lib(EGL|GLESv2|OpenGL|GLdispatch|GLX|GL|vulkan)\.so' || true)
while read -r name path; do
  [ -n "$name" ] || continue
  used=0
  for b in "$st"/fuzz/bin/*; do
    unused=$(ldd -u "$b" || true)  # (exit status 1 when it lists any)
    readelf -d "$b" | grep -q "Shared library: \[$name\]" && ! grep -q "/$name\$" <<<"$unused" && used=1
  done
  if [ $used = 1 ]; then cp -L "$path" "$st/fuzz/lib/$name"
  else printf '' | clang-14 -shared -x c - -o "$st/fuzz/lib/$name" -Wl,-soname,"$name"; echo "stub: $name (not called)"; fi
done <<<"$libs"
ls -la "$st/fuzz/lib"
XZ_OPT="-T2 -6" nice -n 10 tar -C "$st" -cJf "$st/fuzz.tar.xz" fuzz && rm -rf "$st/fuzz"
ls -la "$st/fuzz.tar.xz"
