// Lesson 6: backends — the same Program on the GPU and on the CPU reference.
//
// A Program is what a backend runs: named outputs that are read back after each run, and updates of
// persistent values (parameters, optimizer state) that stay on the device. `Backend::compile` schedules the
// program into kernels, generates and compiles their shaders and returns an Executable; `run` feeds the
// inputs, executes every kernel and returns the outputs.
//
// Backends: "gles" (GLSL ES 3.00 fragment shaders on headless EGL: Mesa's llvmpipe on a machine without a
// GPU, the vendor's driver where there is one — tensors live in RGBA32F textures, WebGL2-style), "gles-compute"
// (GLES 3.1 compute shaders over storage buffers in the same EGL context), "vulkan" (the same compute kernels as
// SPIR-V, one recorded command buffer per step), "cpu-simd" (the same kernels printed as C and compiled for the
// host CPU by the system C compiler) and "cpu" (the f64-accumulating reference executor, the ground truth every
// other backend is tested against). "auto" tries them in their measured order of speed for the device (on a GPU
// vulkan, gles-compute, gles; where the GPU APIs run on a CPU implementation such as Mesa's, cpu-simd, then gles)
// and tells you in `note` why it skipped each one before it.
//
//   cmake --build build --target lesson_06_backends && build/bin/lesson_06_backends
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

int main() {
  // A layer with a parameter, and one SGD step on it, as a Program with one output ("y").
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> w0(5 * 3), xs(7 * 5);
  for (auto& v : w0) v = d(rng);
  for (auto& v : xs) v = d(rng);
  sg::Tensor x = sg::input("x", {7, 5});
  sg::Tensor w = sg::param("w", {5, 3}, w0);
  sg::Tensor y = sg::tanh(sg::matmul(x, w));
  sg::Tensor loss = sg::mean(y * y);
  auto sgd = sg::make_sgd({.lr = 0.5});
  sg::Program step = sg::make_train_step(loss, {w}, *sgd, {{"y", y}});

  // The reference first. Every backend keeps its own copy of the persistent values (here w).
  auto cpu = sg::make_backend({.kind = "cpu"}).backend;
  auto cpu_exe = cpu->compile(step);

  // Then "auto": Vulkan on a GPU; on a machine without one, the C kernels of cpu-simd.
  sg::BackendChoice gpu = sg::make_backend({.kind = "auto"});  // "gpu": whatever runs the generated kernels
  std::printf("auto chose '%s' on %s%s%s\n", gpu.backend->name().c_str(), gpu.backend->device().c_str(),
              gpu.note.empty() ? "" : "; note: ", gpu.note.c_str());
  auto gpu_exe = gpu.backend->compile(step);
  std::printf("the program runs as %d launches per step on %s\n", gpu_exe->kernels_per_step(),
              gpu.backend->name().c_str());

  // Run three steps on both and compare what comes back: the outputs of each run and, at the end, the
  // parameter after three updates (read() copies a persistent value back from the device).
  double worst = 0;
  for (int s = 0; s < 3; ++s) {
    auto a = cpu_exe->run({{"x", &xs}});
    auto b = gpu_exe->run({{"x", &xs}});
    for (size_t o = 0; o < a.size(); ++o)
      for (size_t i = 0; i < a[o].size(); ++i)
        worst = std::max(worst, std::abs(a[o][i] - b[o][i]) / (1e-6 + std::abs(a[o][i])));
    std::printf("step %d: loss cpu %.7f, %s %.7f\n", s, a[0][0], gpu.backend->name().c_str(), b[0][0]);
  }
  std::vector<float> wc = cpu->read(w), wg = gpu.backend->read(w);
  for (size_t i = 0; i < wc.size(); ++i) worst = std::max(worst, std::abs(wc[i] - wg[i]) / (1e-6 + std::abs(wc[i])));
  expect(worst < 1e-4, "outputs and the updated parameter agree with the CPU reference (rel < 1e-4)");

  // The parameter really moved: three SGD steps changed w on the device, and only there.
  bool moved = false;
  for (size_t i = 0; i < wc.size(); ++i) moved |= wc[i] != w0[i];
  expect(moved, "three SGD steps updated w (persistent values stay on the backend between runs)");

  // A feed of the wrong size is an error naming the input, not garbage.
  std::vector<float> short_x(3);
  bool named = false;
  try {
    gpu_exe->run({{"x", &short_x}});
  } catch (const sg::ValueError& e) {
    named = std::string(e.what()).find("x") != std::string::npos;
    std::printf("a short feed: %s\n", e.what());
  }
  expect(named, "run() refuses a mis-sized feed with a ValueError naming it");
  std::printf("lesson 6 done\n");
  return 0;
}
