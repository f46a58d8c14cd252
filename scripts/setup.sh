#!/usr/bin/env bash
# Installs every Debian package shadergrad's build, tests, data and examples need.
# Idempotent; run as root on Debian 12 (bookworm). Usage: sudo scripts/setup.sh
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (apt-get install needs it)" >&2
  exit 1
fi
PKGS=(
  # build
  cmake ninja-build g++ ccache pkg-config
  # core libraries
  llvm-14-dev librange-v3-dev catch2 libcli11-dev nlohmann-json3-dev libfmt-dev libpng-dev zlib1g-dev
  # SHA-256 of checkpoint data (linked statically)
  nettle-dev
  # static file server of `shadergrad serve` (tools/serve_cmd.cpp)
  libcpp-httplib-dev
  # HTTP client of the serve test (tests/test_web_app.cpp)
  curl
  # fuzzing (tests/fuzz, scripts/fuzz.sh) and the sanitizer build: clang with libFuzzer
  clang-14 libfuzzer-14-dev
  # the wasm plan of web bundles (issue 39): clang-14 --target=wasm32-wasi compiles the C kernels against WASI's libc
  # and libm (<math.h>: C99 Annex F special cases, as natively), compiler-rt's wasm32 builtins, lld-14's wasm-ld
  lld-14 wasi-libc libclang-rt-14-dev-wasm32
  # shader toolchain
  glslang-dev glslang-tools spirv-cross libspirv-cross-c-shared-dev spirv-tools
  # headless GL / Vulkan (Mesa llvmpipe / lavapipe)
  libegl-dev libgles-dev libegl-mesa0 libgl1-mesa-dri libgbm-dev mesa-vulkan-drivers libvulkan-dev
  # Vulkan validation layer (tests assert zero messages) and vulkaninfo
  vulkan-validationlayers vulkan-tools
  # data: Fashion-MNIST (IDX), the English word list /usr/share/dict/words (charlm, lstm) and sklearn's 8x8 digits CSV
  dataset-fashion-mnist wamerican python3-sklearn
  # reference peer for golden files and benchmarks
  python3-torch python3-numpy libopenblas0-pthread
  # headless browser for the debug report test (tests/debug_report_check.mjs, npm playwright-core)
  chromium
  # node for the browser and WebGPU (Dawn) tests; npm is checked below (nodesource's nodejs ships its own)
  nodejs
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#PKGS[@]} packages already installed"
else
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
command -v npm >/dev/null || apt-get install -y -q --no-install-recommends npm
# npm packages of the tests (playwright-core, webgpu = Dawn for Node, typescript for the runtime's types), versions
# pinned in tests/package-lock.json; the tests also run this when tests/node_modules is missing
tests_dir="$(cd "$(dirname "$0")/../tests" && pwd)"
for p in webgpu playwright-core typescript; do
  if [ ! -f "$tests_dir/node_modules/$p/package.json" ]; then
    (cd "$tests_dir" && npm ci --no-audit --no-fund)
    break
  fi
done
