// Compile time of deep graphs (issue 35): a train step through a chain of 300 maps is differentiated, scheduled and
// emitted for every target, and compiled and run on lavapipe, within a generous bound. Every layer reads its input
// several times (softplus reads it twice), so the chain's expression DAG has 2^300 root-to-leaf paths: any pass that
// walks it as a tree (autodiff of Map bodies, the schedule's lowering and cost queries, the emitters, the kernel IR
// analyses) never finishes, and one that is quadratic in the depth shows up in the bound. Kernels stay small
// (ScheduleOptions::max_kernel_size) and the chain's segments share their code (kernel_code_key), which keeps the
// driver's compile time bounded. A single map whose lambda loops over layers has such a body DAG itself (sg::diff,
// the body's queries, lowering and the CPU reference walk it per node). bench/bench_compile_depth.cpp times the
// phases of the chain up to depth 3000.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include <catch2/catch.hpp>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/emit.h"
#include "sg/sg.h"
#include "sg/target.h"
#include "vulkan_test_util.h"

using namespace sg;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The time bounds below guard against exponential or quadratic passes, not raw speed: AddressSanitizer and
// UBSan (scripts/ci_reliability.sh) run this code several times slower, so their build gets 4x the bound.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowdown = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSlowdown = 4;
#else
constexpr double kSlowdown = 1;
#endif
#else
constexpr double kSlowdown = 1;
#endif

/// loss = mean(layers(x @ w)), each layer residual so that the gradient reaches w undamped: v + 0.05 tanh(softplus(v) - 0.5).
struct DeepStep {
  Tensor w;
  Program program;
};
DeepStep deep_train_step(int depth) {
  Tensor x = input("x", {3, 3});
  Tensor w = param("w", {3, 3}, {0.5f, -0.25f, 0.125f, 0.75f, 0.f, -0.5f, 0.25f, 1.f, -1.f});
  Tensor y = matmul(x, w);
  for (int i = 0; i < depth; ++i) y = map([](auto v) { return v + 0.05 * tanh(softplus(v) - 0.5); }, y);
  auto sgd = make_sgd({.lr = 0.5});
  return {w, make_train_step(mean(y), {w}, *sgd)};
}

const std::vector<float> kXs = {-3.f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 2.f, 4.f, 9.f};

}  // namespace

TEST_CASE("compile time: a train step through 300 chained maps schedules and emits for every target, and runs on "
          "lavapipe, within seconds") {
  const auto t0 = Clock::now();
  const DeepStep step = deep_train_step(300);
  struct Case {
    const char* what;
    TargetName name;
    const char* preset;
    ComputeLanguage language;
  };
  const Case cases[] = {
      {"glsl-es-fragment on llvmpipe", TargetName::GlslEsFragment, "llvmpipe", ComputeLanguage::Glsl450},
      {"glsl-es-fragment on a GPU", TargetName::GlslEsFragment, "gpu", ComputeLanguage::Glsl450},
      {"glsl-es-compute on llvmpipe", TargetName::GlslEsCompute, "llvmpipe", ComputeLanguage::Glsl450},
      {"spirv-vulkan on lavapipe", TargetName::SpirvVulkan, "llvmpipe", ComputeLanguage::Glsl450},
      {"spirv-vulkan on a GPU", TargetName::SpirvVulkan, "gpu", ComputeLanguage::Glsl450},
      {"wgsl", TargetName::Wgsl, "webgpu", ComputeLanguage::Wgsl},
      {"wgsl (compatibility mode)", TargetName::Wgsl, "webgpu-compat", ComputeLanguage::Wgsl},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const Target target = make_target(c.name, preset_caps(c.preset));
    const ScheduleOptions so = schedule_options(target, {});
    Plan plan = schedule(step.program, so);
    const bool compute = target.stage == TargetStage::Compute;
    auto emit = [&](const Kernel& k) {
      return compute ? emit_compute_kernel(plan, k, target.compute, c.language).source
                     : emit_glsl450(plan, k, ShaderStage::Fragment);
    };
    std::set<std::string> codes;
    size_t bytes = 0;
    for (const Kernel& k : plan.kernels) {
      bytes += emit(k).size();
      codes.insert(kernel_code_key(plan, k, [&] { return emit(k); }));
      // bounded kernels: a multi-output group or a union of blocks within max_kernel_size (a single node's inlined
      // chain is bounded by max_inline_chain_cost instead)
      if (k.exprs.size() > 1) CHECK(kcode_size(k.exprs) <= so.max_kernel_size);
    }
    // the chain's kernels are a few codes repeated: what a backend compiles does not grow with the depth
    CHECK(plan.kernels.size() > 20);
    CHECK(codes.size() <= 16);
    CHECK(bytes < 4u << 20);
  }
  const double schedule_s = seconds_since(t0);

  // compiled and run on lavapipe (no validation layer: the driver's compile time is what is bounded here)
  const auto t1 = Clock::now();
  BackendOptions bo = testing::vulkan_options();
  bo.vulkan.validation = false;
  auto be = make_backend(bo).backend;
  auto exe = be->compile(step.program);
  const float loss = exe->run({{"x", &kXs}})[0][0];
  const std::vector<float> w = be->read(step.w);
  const double compile_run_s = seconds_since(t1);

  auto cpu = make_cpu_backend();
  const float loss_cpu = cpu->compile(step.program)->run({{"x", &kXs}})[0][0];
  const std::vector<float> w_cpu = cpu->read(step.w);
  CHECK(loss == Approx(loss_cpu).epsilon(1e-5));
  REQUIRE(w.size() == w_cpu.size());
  for (size_t i = 0; i < w.size(); ++i) CHECK(w[i] == Approx(w_cpu[i]).epsilon(1e-4).margin(1e-6));
  // the gradient reaches w (residual layers): the update is not a no-op
  const std::vector<float> w0 = *step.w.node()->data;
  double moved = 0;
  for (size_t i = 0; i < w.size(); ++i) moved = std::max(moved, std::fabs(double(w_cpu[i]) - double(w0[i])));
  CHECK(moved > 1e-3);

  // generous bounds (about 10x the time on a 2-vCPU VM): an exponential or quadratic pass fails them
  INFO("autodiff + schedule + emission for 7 targets: " << schedule_s << " s; vulkan compile + first run: "
                                                        << compile_run_s << " s");
  CHECK(schedule_s < 5 * kSlowdown);
  CHECK(schedule_s + compile_run_s < 10 * kSlowdown);
}

TEST_CASE("compile time: kernels sharing a compiled program (kernel_code_key) each bind their own values, on gles "
          "and gles-compute") {
  // depth 60: the chain's segments are many kernels of a few codes; each kernel that reuses another's program binds
  // its samplers (gles: by the first kernel's names, in binding order) or buffers (by binding number) by position
  const DeepStep step = deep_train_step(60);
  auto cpu = make_cpu_backend();
  const float loss_cpu = cpu->compile(step.program)->run({{"x", &kXs}})[0][0];
  const std::vector<float> w_cpu = cpu->read(step.w);
  for (const char* kind : {"gles", "gles-compute"}) {
    INFO(kind);
    auto be = make_backend({.kind = kind}).backend;
    auto exe = be->compile(step.program);
    REQUIRE(exe->plan() != nullptr);
    Plan plan = *exe->plan();
    std::set<std::string> codes;
    for (const Kernel& k : plan.kernels)
      codes.insert(kernel_code_key(plan, k, [&] {
        return std::string(kind) == "gles" ? emit_glsl450(plan, k, ShaderStage::Fragment)
                                           : emit_compute_kernel(plan, k, ComputeLimits{}).source;
      }));
    CHECK(codes.size() * 2 < plan.kernels.size());  // most kernels run another kernel's program
    // two steps: the second reads the first one's update (the ping-ponged w) through shared programs too
    for (int s = 0; s < 2; ++s) {
      const float loss = exe->run({{"x", &kXs}})[0][0];
      const float want = s == 0 ? loss_cpu : cpu->compile(step.program)->run({{"x", &kXs}})[0][0];
      CHECK(loss == Approx(want).epsilon(1e-5));
    }
    const std::vector<float> w = be->read(step.w), w2_cpu = cpu->read(step.w);
    for (size_t i = 0; i < w.size(); ++i) CHECK(w[i] == Approx(w2_cpu[i]).epsilon(1e-4).margin(1e-6));
    cpu = make_cpu_backend();  // the next backend starts from the initial w again
    REQUIRE(cpu->compile(step.program)->run({{"x", &kXs}})[0][0] == loss_cpu);
    REQUIRE(cpu->read(step.w) == w_cpu);
  }
}

TEST_CASE("compile time: one map whose lambda loops over 40 layers (a body of 2^40 paths) is differentiated, "
          "printed, scheduled and run in linear time") {
  const int depth = 40;
  auto layers = [](Scalar v) {
    for (int i = 0; i < depth; ++i) v = tanh(softplus(v) - 0.5);
    return v;
  };
  // the body's queries walk its distinct nodes, not its tree view
  const SExprPtr body = layers(Scalar(sarg(0))).e;
  CHECK(sexpr_size(body) == std::numeric_limits<int>::max());  // the tree view's ~2^40 nodes, saturated
  CHECK(sarg_count(body) == 1);
  CHECK(sexpr_str(body, 100).size() == 103);  // cut at 100 characters, then "..."
  CHECK(sexpr_equal(body, layers(Scalar(sarg(0))).e));
  const SExprPtr d = diff(body, 0);
  CHECK(sexpr_size(d) == std::numeric_limits<int>::max());
  const SExprPtr shifted = ssubstitute(d, {sarg(1)});  // keeps the sharing (a tree would not fit in memory)
  CHECK(sarg_count(shifted) == 2);

  Tensor x = input("x", {3, 3});
  Tensor w = param("w", {3, 3}, {0.5f, -0.25f, 0.125f, 0.75f, 0.f, -0.5f, 0.25f, 1.f, -1.f});
  auto sgd = make_sgd({.lr = 0.5});
  const auto t0 = Clock::now();
  const Program p = make_train_step(mean(map(layers, matmul(x, w))), {w}, *sgd);
  for (TargetName name : {TargetName::GlslEsFragment, TargetName::SpirvVulkan}) {
    const Target target = make_target(name, preset_caps("llvmpipe"));
    Plan plan = schedule(p, schedule_options(target, {}));
    size_t bytes = 0;
    for (const Kernel& k : plan.kernels)
      bytes += target.stage == TargetStage::Compute ? emit_compute_kernel(plan, k, target.compute).source.size()
                                                    : emit_glsl450(plan, k, ShaderStage::Fragment).size();
    CHECK(bytes < 1u << 20);  // each layer printed once per kernel, not once per path
  }
  auto cpu = make_cpu_backend();
  const float loss_cpu = cpu->compile(p)->run({{"x", &kXs}})[0][0];
  BackendOptions bo = testing::vulkan_options();
  bo.vulkan.validation = false;
  auto be = make_backend(bo).backend;
  const float loss = be->compile(p)->run({{"x", &kXs}})[0][0];
  CHECK(loss == Approx(loss_cpu).epsilon(1e-5));
  const std::vector<float> w1 = be->read(w), w1_cpu = cpu->read(w);
  for (size_t i = 0; i < w1.size(); ++i) CHECK(w1[i] == Approx(w1_cpu[i]).epsilon(1e-4).margin(1e-6));
  INFO("autodiff, schedule and emission for 2 targets, CPU and vulkan runs: " << seconds_since(t0) << " s");
  CHECK(seconds_since(t0) < 10 * kSlowdown);
}

TEST_CASE("schedule rule kernel-size: multi-output groups and union-domain kernels stay within max_kernel_size") {
  const DeepStep step = deep_train_step(60);
  for (TargetName name : {TargetName::GlslEsFragment, TargetName::SpirvVulkan}) {
    // the GPU presets: union-domain kernels on both targets
    const Target target = make_target(name, preset_caps("gpu"));
    ScheduleOptions so = schedule_options(target, {});
    REQUIRE(so.max_kernel_size == 256);
    const Plan bounded = schedule(step.program, so);
    so.max_kernel_size = 1e9;
    const Plan unbounded = schedule(step.program, so);
    double largest = 0, largest_unbounded = 0;
    for (const Kernel& k : bounded.kernels)
      if (k.exprs.size() > 1) largest = std::max(largest, kcode_size(k.exprs));
    for (const Kernel& k : unbounded.kernels) largest_unbounded = std::max(largest_unbounded, kcode_size(k.exprs));
    CHECK(largest <= 256);
    CHECK(largest_unbounded > 1000);  // without the bound, 8 members of the chain (each its backward) in one kernel
    CHECK(bounded.kernels.size() > unbounded.kernels.size());
  }
}
