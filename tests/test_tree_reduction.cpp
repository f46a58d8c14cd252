// GPU tree reductions of the compute emitter (codegen/src/emit_tiled.cpp) on lavapipe and llvmpipe with the GPU
// tiles forced (BackendOptions::gpu_tiles): a scalar made of several reductions (global-norm clipping's shape: one
// sum of squares per tensor) folds every reduction in one strided loop and one workgroup tree, and a reduction of a
// few thousand outputs takes several adjacent elements per workgroup. The values are checked against sums computed
// here in double precision, and the kernels' strategy and source against the layout the test means to exercise.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "tanh_mlp.h"
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
  // a: 3000 products (the main reduction), b: 129, c: 1320, d, e, f: 40, 30, 20: all folded beside it, in one strided
  // loop over the six iteration spaces end to end (positions 0..2999 a, 3000..3128 b, ...)
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
    CHECK(r.source.find("k < 4539;") != std::string::npos);  // one loop over all 4539 positions
    CHECK(r.source.find("if (k < 3000) { acc = acc + body(elem, k); } else if (k < 3129) { fold1 = fold1 + "
                        "body1(elem, k - 3000); }") != std::string::npos);
    CHECK(r.source.find("fold5 = fold5 + body5(elem, k - 4519);") != std::string::npos);  // f (20 iterations) too
    CHECK(r.source.find("// sum over") == std::string::npos);  // nothing left to the storing invocation
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

namespace {

/// Vulkan (with and without subgroup arithmetic) and GLES compute with GPU tiles and the two-stage tree forced on
/// (off by default on lavapipe and llvmpipe, whose loop budget splits long loops another way).
std::vector<BackendOptions> two_stage_backends() {
  std::vector<BackendOptions> out;
  for (bool sub : {true, false}) {
    BackendOptions vk = sg::testing::vulkan_options();
    vk.gpu_tiles = true;
    vk.reduce_tree = true;
    vk.vulkan.subgroups = sub;
    out.push_back(vk);
  }
  BackendOptions gc;
  gc.kind = "gles-compute";
  gc.gpu_tiles = true;
  gc.reduce_tree = true;
  out.push_back(gc);
  return out;
}

}  // namespace

TEST_CASE("compute tree reduction on GPU tiles: a scalar adding many sums (global-norm clipping) is two stages, stage 1 "
          "chunks of every sum in each partial, stage 2 the partials alone: equals f64 sums, NaN and Inf propagate",
          "[compute][tree][vulkan]") {
  // 6 sums of 29796 products in all: P = 29796 / 2048 = 14 partials, each chunk p of every sum (a's 20000 in chunks of
  // 1429, f's 5 in the first 5 partials); stage 2 adds the 14 partials. Before: stage 1 split only a (9 chunks) and
  // stage 2 did the other 9796 products in one workgroup.
  const std::vector<int64_t> lens = {20000, 9000, 700, 64, 27, 5};
  const int special = GENERATE(0, 1, 2);  // none, a NaN in b, an Inf in c
  INFO("special " << special);
  std::vector<std::vector<float>> xs;
  for (size_t j = 0; j < lens.size(); ++j) xs.push_back(uniform(lens[j], 31 + static_cast<int>(j), -1, 1));
  if (special == 1) xs[1][4321] = NAN;
  if (special == 2) xs[2][699] = -INFINITY;
  Tensor a = input("a", {100, 200}), b = input("b", {9000}), c = input("c", {35, 20}), d = input("d", {64}),
         e = input("e", {27}), f = input("f", {5});
  Tensor total = sum(a * a) + sum(b * b) + sum(c * c) + sum(d * d) + sum(e * e) + sum(f * f);
  Program p;
  p.add_output("scale", 1.0f / (sqrt(total) + 1e-6f));  // clip's shape: a map over the added sums
  std::vector<Feed> feeds;
  const char* names[] = {"a", "b", "c", "d", "e", "f"};
  for (size_t j = 0; j < lens.size(); ++j) feeds.push_back({names[j], &xs[j]});
  double ss = 0;
  for (auto& v : xs)
    for (float x : v) ss += double{x} * x;
  const double want = 1.0 / (std::sqrt(ss) + 1e-6);
  for (const BackendOptions& bo : two_stage_backends()) {
    INFO("backend " << bo.kind << " subgroups " << bo.vulkan.subgroups.value_or(true));
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    const auto got = exe->run(feeds);
    REQUIRE(got.size() == 1);
    if (special == 1) CHECK(std::isnan(got[0][0]));
    if (special == 2) CHECK(got[0][0] == 0.0f);  // 1 / (inf + eps)
    if (special == 0) CHECK(std::fabs(got[0][0] - want) <= 1e-5 * want);
    const Plan& plan = *exe->plan();
    REQUIRE(plan.kernels.size() == 2);
    const Kernel& k1 = plan.kernels[0];
    const Kernel& k2 = plan.kernels[1];
    INFO(k1.notes << k2.notes);
    CHECK(k1.notes.find("partial sums: 14 chunks of each of 6 added sums") != std::string::npos);
    CHECK(plan.values[k1.output()].node->shape == Shape{14});
    CHECK(k2.notes.find("final sum over 14 partial results of 6 added sums") != std::string::npos);
    CHECK(k2.inputs.size() == 1);  // stage 2 reads the partials alone
    const auto& ck = (*exe->compute_kernels())[0];
    INFO(ck.source.substr(0, 600));
    CHECK(ck.strategy.rfind("tree-reduction", 0) == 0);
    CHECK(ck.workgroups[0] * ck.workgroups[1] * ck.workgroups[2] == 14);
    CHECK(ck.source.find("fold5 = fold5 + body5(elem, k - ") != std::string::npos);  // all six in the loop
  }
}

TEST_CASE("compute tree reduction on GPU tiles: clip_grad_norm in an AdamW train step with the two-stage tree equals "
          "the CPU backend", "[compute][tree][vulkan][clip]") {
  // 4 Linear layers: the norm adds 8 sums of squares (the weights' 4096 to 16384 products, the biases' 10 to 128),
  // 41k products: 20 partials of chunks of all 8 sums
  const std::vector<int64_t> widths = {32, 128, 128, 64, 10};
  const int64_t batch = 16;
  const sg::testing::TanhMlp mlp = sg::testing::tanh_mlp(widths, batch, 800, 900, 0.15f);
  const std::vector<Tensor>& params = mlp.params;
  const Tensor& h = mlp.logits;
  const Tensor& labels = mlp.labels;
  auto opt = make_adamw({.lr = 0.01, .eps = 1e-4});
  Program p = make_train_step(cross_entropy(h, labels), params, *opt,
                              TrainStepOptions{.clip_grad_norm = 0.25, .output_grad_norm = true});
  const std::vector<float> xv = sg::testing::randn(batch * widths[0], 77);
  std::vector<float> lv(batch);
  for (int64_t i = 0; i < batch; ++i) lv[i] = static_cast<float>((i * 3) % 10);
  const std::vector<Feed> feeds = {{"x", &xv}, {"labels", &lv}};
  auto cpu = make_cpu_backend();
  auto want_exe = cpu->compile(p);
  std::vector<std::vector<std::vector<float>>> want;
  for (int s = 0; s < 2; ++s) want.push_back(want_exe->run(feeds));
  CHECK(want[0][1][0] > 0.25f);  // the clipping is active
  for (const BackendOptions& bo : two_stage_backends()) {
    INFO("backend " << bo.kind << " subgroups " << bo.vulkan.subgroups.value_or(true));
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    bool two_stage = false;
    for (const Kernel& k : exe->plan()->kernels)
      two_stage = two_stage || k.notes.find("of each of 8 added sums") != std::string::npos;
    CHECK(two_stage);
    for (int s = 0; s < 2; ++s) {
      INFO("step " << s);
      const auto got = exe->run(feeds);
      REQUIRE(got.size() == want[s].size());
      for (size_t o = 0; o < got.size(); ++o) {
        INFO("output " << p.output_names[o]);
        CHECK(got[o][0] == Approx(want[s][o][0]).epsilon(1e-5));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << params[i].name());
      const std::vector<float> g = be->read(params[i]), w = cpu->read(params[i]);
      int bad = 0;
      for (size_t e = 0; e < g.size(); ++e)
        if (!(std::fabs(g[e] - w[e]) <= 1e-5 + 1e-4 * std::fabs(w[e]))) ++bad;
      CHECK(bad == 0);
    }
  }
}

namespace {

/// Vulkan with GPU tiles, subgroup arithmetic on (the subgroup-rows strategy) or off (one invocation per element).
BackendOptions rows_backend(bool subgroups) {
  BackendOptions vk = sg::testing::vulkan_options();
  vk.gpu_tiles = true;
  vk.vulkan.subgroups = subgroups;
  return vk;
}

/// The strategy of the kernel computing program output `o`.
std::string strategy_of(const Executable& exe, int o) {
  const Plan& plan = *exe.plan();
  for (size_t k = 0; k < plan.kernels.size(); ++k)
    for (int v : plan.kernels[k].outputs)
      if (v == plan.output_values[static_cast<size_t>(o)]) return (*exe.compute_kernels())[k].strategy;
  return "";
}

}  // namespace

TEST_CASE("compute subgroup rows on GPU tiles: LayerNorm-like dependent row sums and row max/min (rows of 64, 100 and "
          "37) equal f64 with one subgroup per row, NaN and Inf rows propagate",
          "[compute][tree][vulkan][subgroups]") {
  const int64_t R = 300;
  const int64_t C = GENERATE(64, 100, 37);
  const bool subgroups = GENERATE(true, false);
  INFO("C " << C << " subgroups " << subgroups);
  std::vector<float> x = uniform(R * C, 41, -2, 2), g = uniform(R * C, 42, -1, 1);
  x[5 * C + 7] = NAN;         // row 5: NaN everywhere it is read
  x[9 * C + C - 1] = INFINITY;  // row 9: +inf (the variance NaN: inf - inf)
  g[11 * C] = -INFINITY;      // row 11: the g sum -inf, the rest finite
  Tensor tx = input("x", {R, C}), tg = input("g", {R, C});
  // LayerNorm backward's shape: the mean, then sums that depend on it, in one kernel per row
  Tensor mu = mean(tx, {1}, true);
  Tensor xc = tx - mu;
  Tensor var = mean(xc * xc, {1}, true);
  Tensor dx = (sum(tg * xc, {1}, true) * rsqrt(var + 1e-5f) + sum(tg, {1}, true)) * (1.0f / static_cast<float>(C));
  Program p;
  p.add_output("dx", dx);
  p.add_output("range", max(tx, {1}) - min(tg, {1}));
  std::vector<double> want_dx(R), want_range(R);
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0, sg = 0, sgx = 0, mx = -INFINITY, mn = INFINITY;
    bool nan_x = false, nan_g = false;
    for (int64_t c = 0; c < C; ++c) m += x[r * C + c];
    m /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const double xv = x[r * C + c], gv = g[r * C + c];
      v += (xv - m) * (xv - m), sg += gv, sgx += gv * (xv - m);
      nan_x = nan_x || std::isnan(xv), nan_g = nan_g || std::isnan(gv);
      mx = std::max(mx, xv), mn = std::min(mn, gv);
    }
    v /= static_cast<double>(C);
    want_dx[r] = (sgx / std::sqrt(v + 1e-5) + sg) / static_cast<double>(C);
    want_range[r] = (nan_x ? NAN : mx) - (nan_g ? NAN : mn);
  }
  auto be = make_backend(rows_backend(subgroups)).backend;
  auto exe = be->compile(p);
  const auto got = exe->run({{"x", &x}, {"g", &g}});
  REQUIRE(got.size() == 2);
  int bad = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int o = 0; o < 2; ++o) {
      const double w = o == 0 ? want_dx[r] : want_range[r], y = got[o][r];
      const bool same = std::isnan(w) ? std::isnan(y) : std::isinf(w) ? y == w : std::fabs(y - w) <= 1e-4 * (1 + std::fabs(w));
      if (!same) {
        if (bad++ < 5) UNSCOPED_INFO("row " << r << " output " << o << ": got " << y << ", want " << w);
      }
    }
  CHECK(bad == 0);
  CHECK(std::isnan(got[0][5]));
  CHECK(std::isnan(got[1][5]));
  CHECK(got[1][9] == INFINITY);
  CHECK(!std::isfinite(got[0][11]));  // -inf, or NaN where -inf * (x - mean) is +inf
  const char* want = subgroups ? "subgroup-rows" : "per-element";
  CHECK(strategy_of(*exe, 0) == want);
  CHECK(strategy_of(*exe, 1) == want);
}

TEST_CASE("compute subgroup rows on GPU tiles: a sum over two axes per element strides the lanes over the flat "
          "iteration space, and a column sum (coalesced one invocation per element) stays per-element",
          "[compute][tree][vulkan][subgroups]") {
  const auto x = uniform(40 * 6 * 7, 51, -1, 1), y = uniform(48 * 3000, 52, -1, 1);
  Tensor tx = input("x", {40, 6, 7}), ty = input("y", {48, 3000});
  Program p;
  p.add_output("sq", sum(tx * tx, {1, 2}));
  p.add_output("cols", sum(ty, {0}) * 2.0f);
  auto be = make_backend(rows_backend(true)).backend;
  auto exe = be->compile(p);
  const auto got = exe->run({{"x", &x}, {"y", &y}});
  REQUIRE(got.size() == 2);
  int bad = 0;
  for (int64_t i = 0; i < 40; ++i) {
    double s = 0;
    for (int64_t j = 0; j < 42; ++j) s += double{x[i * 42 + j]} * x[i * 42 + j];
    if (!(std::fabs(got[0][i] - s) <= 1e-5 * (1 + s))) ++bad;
  }
  for (int64_t c = 0; c < 3000; ++c) {
    double s = 0, a = 0;
    for (int64_t r = 0; r < 48; ++r) s += y[r * 3000 + c], a += std::fabs(y[r * 3000 + c]);
    if (!(std::fabs(got[1][c] - 2 * s) <= 1e-5 * (1 + 2 * a))) ++bad;
  }
  CHECK(bad == 0);
  CHECK(strategy_of(*exe, 0) == "subgroup-rows");
  CHECK(strategy_of(*exe, 1) == "per-element");
}
