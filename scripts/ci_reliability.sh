#!/usr/bin/env bash
# CI's reliability stage (called by .ci/run after the main test run; docs/RELIABILITY.md):
#  1. one clang-14 build dir, build-san, with AddressSanitizer + UndefinedBehaviorSanitizer (-DSG_SANITIZE=ON) and
#     the libFuzzer targets (-DSG_FUZZ=ON);
#  2. the sanitizer subset of the test suite: the checkpoint and dataset parsers, the DSL's shape and scalar
#     rules, the kernel IR walks and the CPU reference's numeric semantics and feed validation — the code that
#     handles untrusted input and the semantics every backend follows; GL-driven test cases are excluded (Mesa's
#     llvmpipe is not instrumented; the whole suite under ASan does not fit CI's budget, docs/RELIABILITY.md);
#  3. every fuzz target: replay of its committed seed corpus, then SG_FUZZ_SECONDS (default 5) s of fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
# (session 6's five, then session 7's CPU-path suites, each run clean under clang-14 + ASan + UBSan here on
# 2026-12-01: images (PNG, PGM, resize, colormaps), autodiff against PyTorch golden files and finite differences,
# losses, nn, the debugger's CPU cases, compression; docs/RELIABILITY.md "Sanitizers". Next: test_ops,
# test_schedule, test_train, test_shader_compiler, not yet run under the sanitizers)
TESTS=(test_safetensors test_datasets test_dsl test_kernel_ir test_numerics
       test_image test_autodiff test_losses test_nn test_debug test_compress)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DSG_SANITIZE=ON -DSG_FUZZ=ON -DSG_BUILD_EXAMPLES=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_FUZZ_SECONDS="${SG_FUZZ_SECONDS:-5}"
targets=("${TESTS[@]}")
for f in tests/fuzz/fuzz_*.cpp; do t=${f##*/}; targets+=("${t%.cpp}"); done
cmake --build build-san --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# each executable directly, without the cases tagged [gles] or [cli] or naming GLES in their title
for t in "${TESTS[@]}"; do
  echo "== $t (ASan + UBSan)"
  t0=$SECONDS
  SG_SOURCE_DIR="$PWD" "build-san/bin/$t" "~[gles]" "~*GLES*" "~[cli]"
  echo "== $t: $((SECONDS - t0)) s"
done
ctest --test-dir build-san -L fuzz --output-on-failure
