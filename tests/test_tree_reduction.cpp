// GPU tree reductions of the compute emitter (codegen/src/emit_tiled.cpp) on lavapipe and llvmpipe with the GPU
// tiles forced (BackendOptions::gpu_tiles): a scalar made of several reductions (global-norm clipping's shape: one
// sum of squares per tensor) folds every reduction in one strided loop and one workgroup tree, and a reduction of a
// few thousand outputs takes several adjacent elements per workgroup. The values are checked against sums computed
// here in double precision, and the kernels' strategy and source against the layout the test means to exercise.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/sg.h"

using namespace sg;

namespace {

using sg::testing::uniform;

std::vector<BackendOptions> gpu_plan_backends() {
  BackendOptions vk = sg::testing::vulkan_options();
  vk.gpu_tiles = true;
  BackendOptions gc;
  gc.kind = "gles-compute";
  gc.gpu_tiles = true;
  return {vk, gc};
}

/// The kernel computing program output 0 (its strategy and source), with the plan's outputs.
struct Ran {
  std::vector<std::vector<float>> out;
  std::string strategy, source;
};

Ran run_on(const BackendOptions& bo, const Program& p, const std::vector<Feed>& feeds) {
  auto be = make_backend(bo).backend;
  auto exe = be->compile(p);
  Ran r;
  r.out = exe->run(feeds);
  const Plan* plan = exe->plan();
  const auto* cks = exe->compute_kernels();
  REQUIRE(plan);
  REQUIRE(cks);
  for (size_t k = 0; k < plan->kernels.size(); ++k)
    for (int o : plan->kernels[k].outputs)
      if (o == plan->output_values[0]) r.strategy = (*cks)[k].strategy, r.source = (*cks)[k].source;
  return r;
}

}  // namespace

TEST_CASE("compute tree reduction on GPU tiles: a scalar of several sums of squares (gradient clipping's norm) and of "
          "maxima folds them all in one workgroup and equals f64 sums",
          "[compute][tree]") {
  // a: 3000 products (the main reduction), b: 129, c: 1320 (folded beside it), d, e, f: 40, 30, 20 (short: left to
  // the storing invocation, whose printed sums must not clash with the folded accumulators' names)
  const auto a = uniform(60 * 50, 11, -1, 1), b = uniform(129, 12, -2, 2), c = uniform(40 * 33, 13, -1, 1),
             d = uniform(40, 14, -3, 3), e = uniform(30, 15, -1, 1), f = uniform(20, 16, -1, 1);
  Tensor ta = input("a", {60, 50}), tb = input("b", {129}), tc = input("c", {40, 33}), td = input("d", {40}),
         te = input("e", {30}), tf = input("f", {20});
  Tensor total = sum(ta * ta) + sum(tb * tb) * 2.0f + sum(tc * tc) + sum(td * td) + sum(te * te) + sum(tf * tf);
  Program p;
  p.add_output("norm", sqrt(total));
  p.add_output("peak", max(ta) + max(tc) - max(tb));
  const std::vector<Feed> feeds{{"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}, {"e", &e}, {"f", &f}};
  double ss = 0, ma = -1e30, mb = -1e30, mc = -1e30;
  for (float x : a) ss += double{x} * x, ma = std::max<double>(ma, x);
  for (float x : b) ss += 2.0 * x * x, mb = std::max<double>(mb, x);
  for (float x : c) ss += double{x} * x, mc = std::max<double>(mc, x);
  for (const auto* v : {&d, &e, &f})
    for (float x : *v) ss += double{x} * x;
  for (const BackendOptions& bo : gpu_plan_backends()) {
    INFO("backend " << bo.kind);
    Ran r = run_on(bo, p, feeds);
    REQUIRE(r.out.size() == 2);
    CHECK(std::fabs(r.out[0][0] - std::sqrt(ss)) <= 1e-5 * std::sqrt(ss));
    CHECK(r.out[1][0] == (static_cast<float>(ma) + static_cast<float>(mc)) - static_cast<float>(mb));  // exact maxima
    INFO(r.source.substr(0, 400));
    CHECK(r.strategy.rfind("tree-reduction", 0) == 0);
    CHECK(r.source.find("body1(elem, k)") != std::string::npos);  // b and c folded in the loop
    CHECK(r.source.find("body2(elem, k)") != std::string::npos);
    CHECK(r.source.find("body3(elem, k)") == std::string::npos);  // d (40 iterations) is not
  }
}

TEST_CASE("compute tree reduction on GPU tiles: a weight gradient of a few thousand outputs takes several adjacent "
          "outputs per workgroup and equals f64 sums",
          "[compute][tree]") {
  // dW = x^T y: 41 x 71 = 2911 outputs (odd: the last workgroup's elements past the end store nothing) over 600 rows
  const int64_t K = 600, M = 41, N = 71;
  const auto x = uniform(K * M, 21, -1, 1), y = uniform(K * N, 22, -1, 1);
  Tensor tx = input("x", {K, M}), ty = input("y", {K, N});
  Program p;
  p.add_output("dw", matmul(transpose(tx), ty) * 0.5f + 1.0f);
  const std::vector<Feed> feeds{{"x", &x}, {"y", &y}};
  std::vector<double> want(static_cast<size_t>(M * N), 0.0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) want[m * N + n] += double{x[k * M + m]} * y[k * N + n];
  for (const BackendOptions& bo : gpu_plan_backends()) {
    INFO("backend " << bo.kind);
    Ran r = run_on(bo, p, feeds);
    REQUIRE(r.out.size() == 1);
    REQUIRE(r.out[0].size() == want.size());
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      double sabs = 0;  // the error scale: sum |x y| over k
      for (int64_t k = 0; k < K; ++k) sabs += std::fabs(double{x[k * M + i / N]} * y[k * N + i % N]);
      if (!(std::fabs(r.out[0][i] - (want[i] * 0.5 + 1.0)) <= 1e-5 * (1 + sabs))) ++bad;
    }
    CHECK(bad == 0);
    INFO(r.source.substr(0, 600));
    CHECK(r.strategy == "tree-reduction");
    CHECK(r.source.find("8 element(s)") != std::string::npos);
  }
}
