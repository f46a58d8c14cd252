#!/usr/bin/env bash
# CI's reliability stage (called by .ci/run after the main test run; docs/RELIABILITY.md):
#  1. one clang-14 build dir, build-san, with AddressSanitizer + UndefinedBehaviorSanitizer (-DSG_SANITIZE=ON) and
#     the libFuzzer targets (-DSG_FUZZ=ON);
#  2. the sanitizer subset of the test suite: the parsers (safetensors, IDX/digits, images), the DSL, autodiff,
#     kernel IR and the CPU reference (ops, numerics, losses, nn), debugger and checkpoints on the CPU backend —
#     the code that handles untrusted input and the semantics every backend follows; GL-driven test cases are
#     excluded (Mesa's llvmpipe is not instrumented, and the whole suite under ASan does not fit CI's budget);
#  3. every fuzz target: replay of its committed seed corpus, then SG_FUZZ_SECONDS (default 5) s of fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(test_safetensors test_datasets test_image test_dsl test_autodiff test_kernel_ir test_numerics test_ops
       test_losses test_nn test_debug)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DSG_SANITIZE=ON -DSG_FUZZ=ON -DSG_BUILD_EXAMPLES=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_FUZZ_SECONDS="${SG_FUZZ_SECONDS:-5}"
targets=("${TESTS[@]}")
for f in tests/fuzz/fuzz_*.cpp; do t=${f##*/}; targets+=("${t%.cpp}"); done
cmake --build build-san --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# each executable directly (one Catch2 filter: not tagged [gles]/[cli] and not naming GLES in its title)
for t in "${TESTS[@]}"; do
  echo "== $t (ASan + UBSan)"
  SG_SOURCE_DIR="$PWD" "build-san/bin/$t" "~[gles] ~*GLES* ~*gles* ~[cli]"
done
ctest --test-dir build-san -L fuzz --output-on-failure
