// The cpu plan's schedule (the plan of the cpu-simd backend, the wasm plan and the WGSL plan for CPU implementations of
// WebGPU: ComputeLimits::register_tiles) on the pattern of issue 37's charlm train step: two transformer MLP blocks
// whose weight gradients have one shape. The register-tiled strategy (codegen/src/emit_regtile.cpp) tiles one
// contraction of a kernel; any other reduction of the kernel is summed in its store, one output at a time, with its
// inlined producers recomputed for every product. Two such gradients in one kernel (multi-output fusion of values of
// one domain) made the second one a serial per-output loop: charlm's two GELU weight gradients side by side took
// 290 ms of a 704 ms cpu-simd step (docs/perf-log/P37.md). Values are checked against the CPU reference backend.
#include "test_util.h"
#include "kernel_util.h"

#include <functional>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/schedule.h"
#include "sg/sg.h"
#include "sg/target.h"

using namespace sg;

namespace {

using sg::testing::expect_close;
using sg::testing::randn;

constexpr int64_t kRows = 512, kModel = 32, kHidden = 128;  // K = 512 rows: a long reduction (>= 256 iterations)

/// Two pre-activation MLP blocks with residuals, h + gelu(h W1) W2 (W1 kModel x kHidden, W2 kHidden x kModel), and a
/// mean-square loss; SGD on the four weights.
struct TwoBlocks {
  Tensor x = input("x", {kRows, kModel});
  std::vector<Tensor> w = {param("w1a", {kModel, kHidden}, randn(kModel * kHidden, 1, 0.15f)),
                           param("w2a", {kHidden, kModel}, randn(kHidden * kModel, 2, 0.08f)),
                           param("w1b", {kModel, kHidden}, randn(kModel * kHidden, 3, 0.15f)),
                           param("w2b", {kHidden, kModel}, randn(kHidden * kModel, 4, 0.08f))};
  Program step() const {
    Tensor h = x + matmul(gelu(matmul(x, w[0])), w[1]);
    Tensor h2 = h + matmul(gelu(matmul(h, w[2])), w[3]);
    auto sgd = make_sgd({.lr = 0.05});
    return make_train_step(mean(h2 * h2), w, *sgd);
  }
};

using sg::testing::long_reductions;

/// The longest loop the C source sums one output at a time ("// sum over r1<512" comments of the emitter), 0 if none.
int64_t longest_serial_sum(const std::string& c) {
  static const std::regex sum_over(R"(// (sum|max|min) over r\d+<(\d+))");
  int64_t most = 0;
  for (auto it = std::sregex_iterator(c.begin(), c.end(), sum_over); it != std::sregex_iterator(); ++it)
    most = std::max<int64_t>(most, std::stoll((*it)[2].str()));
  return most;
}

/// The math-library calls (sg_exp, sg_erfc, ...: "sg_NAME(" of the C math helpers other than the cheap ones) inside
/// the register-tiled factors of a C kernel ("..._factor_a" / "..._factor_b" functions): evaluated once per tile.
int calls_in_factors(const std::string& c) {
  static const std::regex factor(R"(_factor_[ab]\(const sg_inv\* sg[^)]*\) \{[^]*?\n\})");
  static const std::regex call(R"(sg_(exp|log|log1p|pow|sin|cos|tanh|sigmoid|erf|erfc)\()");
  int calls = 0;
  for (auto it = std::sregex_iterator(c.begin(), c.end(), factor); it != std::sregex_iterator(); ++it) {
    const std::string body = it->str();
    calls += static_cast<int>(std::distance(std::sregex_iterator(body.begin(), body.end(), call), std::sregex_iterator()));
  }
  return calls;
}

}  // namespace

TEST_CASE("schedule rule math-call-cost (cpu plan): the GELU between two matmuls is stored once, not recomputed in the "
          "register tiles of the matmuls reading it (issue 37)",
          "[schedule][rule][cpu-simd]") {
  TwoBlocks m;
  const Program step = m.step();
  const Target t = make_target(TargetName::CpuSimd, preset_caps("cpu-simd"));
  ScheduleOptions so = schedule_options(t, {});
  CHECK(so.math_call_cost >= so.inline_cost_limit);
  for (double cost : {so.math_call_cost, 1.0}) {
    INFO("math_call_cost " << cost);
    so.math_call_cost = cost;
    const Plan plan = schedule(step, so);
    int calls = 0, tiled = 0;
    for (const Kernel& k : plan.kernels) {
      const ComputeKernel ck = emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C);
      if (ck.strategy != "register-tiled") continue;
      ++tiled;
      calls += calls_in_factors(ck.source);
    }
    CHECK(tiled >= 6);  // 2 forward matmuls per block, their input and weight gradients
    if (cost > 1) CHECK(calls == 0);
    else CHECK(calls > 0);  // erfc of gelu(x W1) in the factors of gelu(..) W2 and of W2's gradient
  }
}

TEST_CASE("schedule rule guarded-reads (cpu plan): a concat read by matmuls is stored once, its zero-padding reads not "
          "branched on in register-tiled factors, and the train step equals the CPU reference (issue 37)",
          "[schedule][rule][cpu-simd]") {
  // the pattern of the transformer's q/k/v gradients concatenated before the in_proj gradients: concat(3 x (512 x 32))
  // as a factor of the forward matmul and of the weight gradient
  auto make_step = [](std::vector<Tensor>& params) {
    Tensor x = input("x", {kRows, kModel});
    Tensor w = param("w", {3 * kModel, kModel}, randn(3 * kModel * kModel, 7, 0.1f));
    params = {w};
    Tensor y = matmul(concat({relu(x), x * x, x * -0.5f}, 1), w);
    auto sgd = make_sgd({.lr = 0.05});
    return make_train_step(mean(y * y), {w}, *sgd);
  };
  std::vector<Tensor> params;
  const Program step = make_step(params);
  const Target t = make_target(TargetName::CpuSimd, preset_caps("cpu-simd"));
  ScheduleOptions so = schedule_options(t, {});
  CHECK(so.max_guarded_reads > 0);
  // `((j >= 0) && (j < 32)) ? value : 0.0f`: a zero-padded read
  static const std::regex guarded(R"(\(\w+ < \d+\)\) \? )");
  for (int limit : {so.max_guarded_reads, 0}) {
    INFO("max_guarded_reads " << limit);
    so.max_guarded_reads = limit;
    const Plan plan = schedule(step, so);
    int most = 0, tiled = 0;
    for (const Kernel& k : plan.kernels) {
      const ComputeKernel ck = emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C);
      if (ck.strategy != "register-tiled") continue;
      ++tiled;
      static const std::regex factor(R"(_factor_[ab]\(const sg_inv\* sg[^)]*\) \{[^]*?\n\})");
      for (auto it = std::sregex_iterator(ck.source.begin(), ck.source.end(), factor); it != std::sregex_iterator();
           ++it) {
        const std::string body = it->str();
        most = std::max(most, static_cast<int>(std::distance(
                                  std::sregex_iterator(body.begin(), body.end(), guarded), std::sregex_iterator())));
      }
    }
    CHECK(tiled >= 2);  // the forward matmul and the weight gradient
    if (limit > 0) CHECK(most <= 1);
    else CHECK(most == 3);  // without the limit each factor element branches on the concat's three operands
  }
  // values: three SGD steps on cpu-simd against the CPU reference
  auto run_steps = [&](const BackendOptions& bo) {
    std::vector<Tensor> ps;
    const Program p = make_step(ps);
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) {
      std::vector<float> xs = randn(kRows * kModel, 40 + s);
      losses.push_back(exe->run({{"x", &xs}})[0][0]);
    }
    return std::make_pair(losses, be->read(ps[0]));
  };
  const auto cpu = run_steps({.kind = "cpu"});
  const auto got = run_steps({.kind = "cpu-simd"});
  expect_close(got.first, cpu.first, 1e-4, 1e-6, "losses");
  expect_close(got.second, cpu.second, 1e-4, 1e-6, "w");
}

TEST_CASE("schedule rule one-long-reduction (cpu plan): two MLP blocks' weight gradients of one shape are separate "
          "register-tiled kernels, none summed per output in another's store (issue 37)",
          "[schedule][rule][cpu-simd]") {
  TwoBlocks m;
  const Program step = m.step();
  const Target t = make_target(TargetName::CpuSimd, preset_caps("cpu-simd"));
  REQUIRE(t.compute.register_tiles);
  ScheduleOptions so = schedule_options(t, {});
  CHECK(so.one_long_reduction);
  for (bool rule : {true, false}) {
    INFO("one_long_reduction " << rule);
    so.one_long_reduction = rule;
    const Plan plan = schedule(step, so);
    size_t most = 0, tiled_gradients = 0;
    int64_t serial_in_tiled = 0;
    for (const Kernel& k : plan.kernels) {
      most = std::max(most, long_reductions(k));
      const ComputeKernel ck = emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C);
      if (ck.strategy == "register-tiled") {
        serial_in_tiled = std::max(serial_in_tiled, longest_serial_sum(ck.source));
        for (const NodePtr& n : k.nodes)
          if (n->op == Op::MatMul && (n->shape == Shape{kModel, kHidden} || n->shape == Shape{kHidden, kModel}))
            ++tiled_gradients;
      }
    }
    if (rule) {
      CHECK(most == 1);
      CHECK(serial_in_tiled < 256);  // no long contraction summed one output at a time
      CHECK(tiled_gradients == 4);   // dW1a, dW2a, dW1b, dW2b each in a register-tiled kernel
    } else {
      // without the rule the same-shape gradients share kernels, one of each pair summed serially in the store
      CHECK(most == 2);
      CHECK(serial_in_tiled >= kRows);
    }
  }
}

TEST_CASE("cpu plan: two MLP blocks' train steps on cpu-simd (one thread and two) equal the CPU reference",
          "[cpu-simd][backend]") {
  auto run_steps = [](const BackendOptions& bo) {
    TwoBlocks m;
    auto be = make_backend(bo).backend;
    REQUIRE(be->name() == bo.kind);
    auto exe = be->compile(m.step());
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) {
      std::vector<float> xs = randn(kRows * kModel, 20 + s);
      losses.push_back(exe->run({{"x", &xs}})[0][0]);
    }
    std::vector<std::vector<float>> params;
    for (const Tensor& w : m.w) params.push_back(be->read(w));
    return std::make_pair(losses, params);
  };
  const auto cpu = run_steps({.kind = "cpu"});
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    BackendOptions bo{.kind = "cpu-simd"};
    bo.cpu_simd.threads = threads;
    const auto got = run_steps(bo);
    expect_close(got.first, cpu.first, 1e-4, 1e-6, "losses");
    for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(got.second[i], cpu.second[i], 1e-4, 1e-6, "param");
  }
}
