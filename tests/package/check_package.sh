#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds the README's first C++ block as a user would:
# (1) a standalone CMake project with find_package(shadergrad) (tests/package/CMakeLists.txt), (2) g++ and (3)
# clang++-14 with pkg-config's flags and -Wall -Wextra -Werror; runs all three. Then every public header compiles on
# its own under both compilers with -Wall -Wextra -Werror, and the install and the program stay within size bounds.
# Usage: tests/package/check_package.sh BUILD_DIR   (ctest runs it: package_install)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
work="$build/package-test"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"

# the README's first ```cpp block, exactly as written
awk '/^```cpp/{f=1; next} /^```/{if(f) exit} f' "$root/README.md" > "$work/readme_example.cpp"
[ -s "$work/readme_example.cpp" ] || { echo "check_package: README.md has no \`\`\`cpp block" >&2; exit 1; }

echo "== CMake: find_package(shadergrad) from $work/prefix"
cmake -S "$root/tests/package" -B "$work/cmake-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DSNIPPET="$work/readme_example.cpp" > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/cmake-build/readme_example" | tee "$work/cmake-run.txt"

echo "== pkg-config: g++ readme_example.cpp \$(pkg-config --cflags --libs shadergrad)"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -O1 -Wall -Wextra -Werror "$work/readme_example.cpp" -o "$work/readme_example_pc" $(pkg-config --cflags --libs shadergrad)
"$work/readme_example_pc" | tee "$work/pc-run.txt"

echo "== clang++-14: the same program, linked against the GCC-built libraries"
# shellcheck disable=SC2046
clang++-14 -O1 -Wall -Wextra -Werror "$work/readme_example.cpp" -o "$work/readme_example_clang" \
  $(pkg-config --cflags --libs shadergrad)
"$work/readme_example_clang" | tee "$work/clang-run.txt"

echo "== every public header on its own, -Wall -Wextra -Werror, g++ and clang++-14"
# one translation unit per header and compiler, four at a time (about a second each)
check_header() {  # CXX HEADER
  local tu="$work/headers/$1.${2%.h}.cpp"
  printf '#include "sg/%s"\n' "$2" > "$tu"
  # shellcheck disable=SC2046
  "$1" -std=c++20 -Wall -Wextra -Werror -fsyntax-only "$tu" $(pkg-config --cflags shadergrad) ||
    { echo "check_package: sg/$2 does not compile on its own with $1 -Wall -Wextra -Werror" >&2; return 1; }
}
export -f check_header
export work
mkdir -p "$work/headers"
for h in "$work"/prefix/include/sg/*.h; do printf '%s %s\n' g++ "${h##*/}" clang++-14 "${h##*/}"; done |
  xargs -P 4 -L 1 bash -c 'check_header "$@"' _

# sizes: the installed archives carry no DWARF (cmake/Install.cmake); with it the install took 333 MB and the
# program 67 MB
install_mb=$(du -sm "$work/prefix" | cut -f1)
program_mb=$(( $(stat -c %s "$work/readme_example_pc") / 1048576 ))
echo "== sizes: install ${install_mb} MB, the README program ${program_mb} MB"
[ "$install_mb" -le 60 ] || { echo "check_package: the install takes ${install_mb} MB (bound 60)" >&2; exit 1; }
[ "$program_mb" -le 25 ] || { echo "check_package: the README program takes ${program_mb} MB (bound 25)" >&2; exit 1; }

# both builds train: the gradient check passes and the loss falls over the 5 steps
for f in "$work/cmake-run.txt" "$work/pc-run.txt" "$work/clang-run.txt"; do
  grep -q '^gradient check: ok' "$f" || { echo "check_package: gradient check did not pass ($f)" >&2; exit 1; }
  first=$(sed -n 's/.* step 0: loss //p' "$f"); last=$(sed -n 's/.* step 4: loss //p' "$f")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    { echo "check_package: loss did not fall ($first -> $last, $f)" >&2; exit 1; }
done
echo "check_package: ok"
