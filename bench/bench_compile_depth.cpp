// bench_compile_depth — compile time against the depth of a chain of elementwise layers.
//
// Usage: bench_compile_depth [--backend gles|gles-compute|vulkan|cpu|none] [N ...]   (default depths 8 16 24 30 64 128 256 512 1000)
//
// The graph (issue 19): x (3x3) -> N times sg::map(tanh(softplus(v) - 0.5)) -> sum. softplus reads its input
// twice, so the N chained Map nodes inline into one kernel whose expression DAG has ~N distinct nodes but 2^N
// root-to-leaf paths: any walk of the tree view is exponential. Rows: schedule() alone (fusion decisions, kernel
// IR lowering, cost and loop-budget queries), GLSL 4.50 emission of every kernel (and its size) for the fragment
// target and for the compute target (schedule with compute_schedule_options + emit_compute_kernel, default
// ComputeLimits), and
// Backend::compile (schedule + emission + glslang -> SPIR-V -> SPIRV-Cross + GL compile/link), plus the result of
// one run checked against the CPU reference.
// Timings are printed, never asserted (tests/test_kernel_ir.cpp asserts the walks' node visits instead).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/emit.h"
#include "sg/schedule.h"
#include "sg/sg.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

sg::Program chain(int n) {
  sg::Tensor x = sg::input("x", {3, 3});
  sg::Tensor y = x;
  for (int i = 0; i < n; ++i) y = sg::map([](auto v) { return sg::tanh(sg::softplus(v) - 0.5); }, y);
  sg::Program p;
  p.add_output("sum", sg::sum(y));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "gles";
  std::vector<int> depths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else {
      int v = std::atoi(a.c_str());
      if (v < 1) {
        fmt::print(stderr, "usage: bench_compile_depth [--backend gles|gles-compute|vulkan|cpu|none] [N ...]\n");
        return 2;
      }
      depths.push_back(v);
    }
  }
  if (depths.empty()) depths = {8, 16, 24, 30, 64, 128, 256, 512, 1000};
  std::unique_ptr<sg::Backend> be, cpu = sg::make_cpu_backend();
  if (backend != "none") {
    auto choice = sg::make_backend({.kind = backend});
    if (!choice.note.empty()) fmt::print("{}\n", choice.note);
    be = std::move(choice.backend);
  }
  fmt::print("bench_compile_depth: x(3x3) -> N x map(tanh(softplus(v) - 0.5)) -> sum; backend {}\n\n",
             be ? be->device() : "none");
  fmt::print("| {:>5} | {:>7} | {:>12} | {:>9} | {:>11} | {:>17} | {:>13} | {:>12} | {:>14} | {:>14} |\n", "N", "kernels",
             "schedule ms", "emit ms", "GLSL bytes", "compute sched+emit", "compute bytes", "compile ms", "result",
             "cpu reference");
  fmt::print("|{:-<7}|{:-<9}|{:-<14}|{:-<11}|{:-<13}|{:-<19}|{:-<15}|{:-<14}|{:-<16}|{:-<16}|\n", "", "", "", "", "", "",
             "", "", "", "");
  const sg::ComputeLimits limits;
  std::vector<float> xs = {-3.f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 2.f, 4.f, 9.f};
  for (int n : depths) {
    sg::Program p = chain(n);
    auto t0 = Clock::now();
    sg::Plan plan = sg::schedule(p);
    double sched_ms = ms_since(t0);
    t0 = Clock::now();
    size_t glsl_bytes = 0;
    for (const sg::Kernel& k : plan.kernels) glsl_bytes += sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment).size();
    double emit_ms = ms_since(t0);
    t0 = Clock::now();
    sg::Plan cplan = sg::schedule(p, sg::compute_schedule_options(limits));
    size_t compute_bytes = 0;
    for (const sg::Kernel& k : cplan.kernels) compute_bytes += sg::emit_compute_kernel(cplan, k, limits).source.size();
    double compute_ms = ms_since(t0);
    double compile_ms = 0;
    float got = NAN;
    if (be) {
      t0 = Clock::now();
      auto exe = be->compile(p);
      compile_ms = ms_since(t0);
      got = exe->run({{"x", &xs}})[0][0];
    }
    float want = cpu->compile(p)->run({{"x", &xs}})[0][0];
    fmt::print("| {:>5} | {:>7} | {:>12.2f} | {:>9.2f} | {:>11} | {:>17.2f} | {:>13} | {:>12.2f} | {:>14.7g} | {:>14.7g} |\n",
               n, plan.kernels.size(), sched_ms, emit_ms, glsl_bytes, compute_ms, compute_bytes, compile_ms, got, want);
  }
  return 0;
}
