// The op cases of the GPU backend tests: every DSL op forward and backward against the CPU reference backend.
//
// Each case builds loss_i = sum(op(inputs) * R_i) with a fixed random R_i, takes sg::grad w.r.t. every float
// input, and puts the op's output and the gradients into one Program per case list. Suite::check compiles the same
// Program on the CPU backend (f64 reference) and on every backend of a list of BackendOptions. Tolerances:
// |gpu - cpu| <= atol + rtol*|cpu| with rtol 1e-5 for elementwise/movement ops, 1e-4 for reductions/matmul/conv/
// pool/losses. A backend that cannot be created fails the test (make_backend throws BackendError).
//
// SG_OP_CASE_TESTS(NAME, TAG, TARGETS, LONG_TARGETS) defines one TEST_CASE per case list, named NAME + the list's
// description; TARGETS (and, for reductions longer than 65535 iterations, LONG_TARGETS) are expressions giving the
// std::vector<BackendOptions> to run on. tests/test_gles_ops.cpp uses it for the fragment backend, tests/
// test_compute_ops.cpp for the compute backends (one line per backend kind).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "edge_cases.h"
#include "golden_util.h"
#include "sg/backend.h"
#include "vulkan_test_util.h"
#include "sg/sg.h"

namespace sg::op_cases {


struct Tol {
  double rtol, atol;
};
inline constexpr Tol kElem{1e-5, 1e-6};    // elementwise and movement ops
inline constexpr Tol kReduce{1e-4, 1e-5};  // reductions, matmul, conv, pools, softmax and losses
inline constexpr Tol kExact{0, 0};         // integer-valued results (argmax, one_hot, comparisons of exact values)
inline constexpr Tol kGolden{1e-4, 1e-5};  // f32 results against torch's float64 values (golden files)


// ------------------------------------------------------------------------------------------------
// Input data
// ------------------------------------------------------------------------------------------------

inline std::vector<float> uniform(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(g));
  return v;
}

/// |x| in [lo, hi] with a random sign: away from 0 (relu, abs, sign, division, leaky_relu kinks).
inline std::vector<float> signed_away(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::bernoulli_distribution s(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(s(g) ? d(g) : -d(g));
  return v;
}

/// Distinct values (a shuffled arithmetic sequence, exact in f32): no ties for max/min/argmax/max_pool.
inline std::vector<float> distinct(int64_t n, uint32_t seed, double step = 0.0625) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.f);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (auto& x : v) x = static_cast<float>((x - static_cast<double>(n) / 2) * step);
  return v;
}

/// k + f with f in [0.1, 0.4] or [0.6, 0.9], and every 5th value an exact half (k + 0.5): floor is away
/// from its jumps; round meets exact halves (ties to even on both backends).
inline std::vector<float> fractional(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> k(-4, 3);
  std::uniform_real_distribution<double> f(0.1, 0.4);
  std::bernoulli_distribution hi(0.5);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    double frac = i % 5 == 0 ? 0.5 : (hi(g) ? 0.5 + f(g) : f(g));
    v[i] = static_cast<float>(k(g) + frac);
  }
  return v;
}

/// Multiples of 0.5 in [-2, 2]: exactly equal values occur often (comparisons, ties of maximum/minimum).
inline std::vector<float> coarse(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> k(-4, 4);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(k(g) * 0.5);
  return v;
}

inline std::vector<float> labels(int64_t n, int64_t classes, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> d(0, classes - 1);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(g));
  return v;
}

// ------------------------------------------------------------------------------------------------
// Comparison
// ------------------------------------------------------------------------------------------------

struct Diff {
  bool ok = true;
  int64_t worst = -1;
  double ratio = 0;  ///< |a-b| / (atol + rtol*|b|) at the worst element (> 1 fails)
  std::string why;
};

/// Elementwise |got - want| <= atol + rtol*|want|; NaN must meet NaN, infinities must match exactly.
inline Diff compare(const std::vector<float>& got, const std::vector<float>& want, Tol tol) {
  Diff d;
  if (got.size() != want.size()) {
    d.ok = false;
    d.why = "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    return d;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    double a = got[i], b = want[i], r;
    if (std::isnan(a) || std::isnan(b))
      r = std::isnan(a) && std::isnan(b) ? 0 : INFINITY;
    else if (std::isinf(a) || std::isinf(b))
      r = a == b ? 0 : INFINITY;
    else if (a == b)
      r = 0;
    else
      r = std::fabs(a - b) / (tol.atol + tol.rtol * std::fabs(b));
    if (r > d.ratio || (d.worst < 0 && r > 0)) d.ratio = r, d.worst = static_cast<int64_t>(i);
  }
  d.ok = d.ratio <= 1.0;
  return d;
}

// ------------------------------------------------------------------------------------------------
// Suite: a Program of many op cases (outputs + gradients), fed inputs, compared GLES vs CPU
// ------------------------------------------------------------------------------------------------

class Suite {
 public:
  /// A fed Input leaf with its data (f32 inputs are differentiable, i32 inputs are labels).
  Tensor in(const std::string& name, ShapeRef shape, std::vector<float> data, DType dtype = DType::f32) {
    REQUIRE(static_cast<int64_t>(data.size()) == sg::numel(shape));
    Tensor t = input(name, shape, dtype);
    data_.push_back(std::move(data));
    leaves_.push_back(t);
    return t;
  }

  /// Adds op output `out` and the gradients of sum(out * R) w.r.t. each of `wrt` (R fixed, random).
  void add(const std::string& name, const Tensor& out, const std::vector<Tensor>& wrt, Tol tol) {
    output(name, out, tol);
    if (wrt.empty()) return;
    Tensor r = constant(out.shape(), uniform(out.numel(), seed_++, -1.0, 1.0));
    Tensor loss = sum(out * r);
    std::vector<Tensor> gs = grad(loss, wrt);
    for (size_t i = 0; i < wrt.size(); ++i)
      output(name + " d/d" + wrt[i].name(), gs[i], tol, true);
  }
  /// As add, with a given R (row-major, out's shape) and torch's values of the output and of the gradient w.r.t.
  /// each of `wrt` (a golden case of tests/golden/): check() and the web harnesses (op_bundles.h) compare every
  /// backend, the CPU reference included, with torch's values too (kGolden).
  void add_golden(const std::string& name, const Tensor& out, const std::vector<Tensor>& wrt, std::vector<float> r_data,
                  std::vector<float> want_out, std::vector<std::vector<float>> want_grads, Tol tol) {
    REQUIRE(want_grads.size() == wrt.size());
    output(name, out, tol);
    golden_.back() = std::move(want_out);
    if (wrt.empty()) return;
    Tensor r = constant(out.shape(), std::move(r_data));
    std::vector<Tensor> gs = grad(sum(out * r), wrt);
    for (size_t i = 0; i < wrt.size(); ++i) {
      output(name + " d/d" + wrt[i].name(), gs[i], tol, true);
      golden_.back() = std::move(want_grads[i]);
    }
  }
  /// Adds a forward-only output.
  void output(const std::string& name, const Tensor& out, Tol tol, bool is_grad = false) {
    prog_.add_output(name, out);
    tols_.push_back(tol);
    grad_.push_back(is_grad);
    golden_.emplace_back();
  }
  /// Torch's values of output i (golden cases), or empty.
  const std::vector<float>& golden(size_t i) const { return golden_.at(i); }

  const Program& program() const { return prog_; }
  /// The tolerance of each program output, in output order (for harnesses that judge outputs elsewhere).
  const std::vector<Tol>& tolerances() const { return tols_; }

  std::vector<Feed> feeds() const {
    std::vector<Feed> f;
    for (size_t i = 0; i < leaves_.size(); ++i) f.push_back({leaves_[i].name(), &data_[i]});
    return f;
  }

  /// Runs the program on the CPU backend and on each backend of `targets`; compares every output.
  void check(const std::vector<BackendOptions>& targets) const {
    auto cpu = make_cpu_backend();
    auto want = cpu->compile(prog_)->run(feeds());
    REQUIRE(want.size() == prog_.outputs.size());
    // the reference must be meaningful: finite everywhere, and not all zero unless the output is a gradient
    // through a piecewise-constant op (exact tolerance)
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("cpu output '" << prog_.output_names[i] << "'");
      CHECK(std::all_of(want[i].begin(), want[i].end(), [](float v) { return std::isfinite(v); }));
      if (!grad_[i] || tols_[i].rtol > 0)
        CHECK(std::any_of(want[i].begin(), want[i].end(), [](float v) { return v != 0.f; }));
      check_golden(i, want[i], "cpu");
    }
    for (const BackendOptions& bo : targets) {
      auto gpu = make_backend(bo).backend;  // BackendError here fails the test: CI has llvmpipe and lavapipe
      REQUIRE(gpu->name() == bo.kind);
      auto exe = gpu->compile(prog_);
      auto got = exe->run(feeds());
      if (bo.kind == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*gpu));
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        Diff d = compare(got[i], want[i], tols_[i]);
        std::ostringstream worst;
        if (d.worst >= 0)
          worst << "; worst element " << d.worst << ": " << bo.kind << " " << got[i][d.worst] << " cpu "
                << want[i][d.worst] << " (error/tolerance " << d.ratio << ")";
        INFO("output '" << prog_.output_names[i] << "' " << shape_str(prog_.outputs[i]->shape) << ", backend "
                        << bo.kind << ", max_texture_width " << bo.max_texture_width.value_or(0) << ", gpu_tiles " << (bo.gpu_tiles ? (*bo.gpu_tiles ? "yes" : "no") : "auto")
                        << (d.why.empty() ? "" : ": " + d.why) << worst.str());
        CHECK(d.ok);
        check_golden(i, got[i], bo.kind);
      }
    }
  }

  /// CHECKs output i against torch's values when it has them (kGolden); `backend` names the values in the message.
  void check_golden(size_t i, const std::vector<float>& got, const std::string& backend) const {
    if (golden_[i].empty()) return;
    const Diff d = compare(got, golden_[i], kGolden);
    INFO("output '" << prog_.output_names[i] << "' against torch, backend " << backend << " " << d.why
                    << (d.worst >= 0 ? fmt::format("; worst element {}: {} torch {} (error/tolerance {})", d.worst,
                                                   got[d.worst], golden_[i][d.worst], d.ratio)
                                     : std::string()));
    CHECK(d.ok);
  }

 private:
  Program prog_;
  std::vector<Tol> tols_;
  std::vector<std::vector<float>> golden_;  // torch's values per output (golden cases), else empty
  std::vector<bool> grad_;
  std::vector<Tensor> leaves_;
  std::vector<std::vector<float>> data_;
  uint32_t seed_ = 1000;
};

// ------------------------------------------------------------------------------------------------
// The case lists
// ------------------------------------------------------------------------------------------------

inline void unary_cases(Suite& s) {
  // 3x7x13 = 273 elements (not a multiple of 4), 1 element, 5 elements
  const Shape sh = {3, 7, 13};
  const int64_t n = sg::numel(sh);
  Tensor a = s.in("a", sh, uniform(n, 1, -3, 3));
  Tensor nz = s.in("nz", sh, signed_away(n, 2, 0.05, 3));
  Tensor pos = s.in("pos", sh, uniform(n, 3, 0.05, 5));
  Tensor fr = s.in("fr", sh, fractional(n, 4));
  Tensor one = s.in("one", {1}, {0.7f});
  Tensor five = s.in("five", {5}, {-1.3f, 0.2f, 2.5f, -0.4f, 1.1f});

  s.add("neg", -a, {a}, kElem);
  s.add("neg()", neg(a), {a}, kElem);
  s.add("abs", abs(nz), {nz}, kElem);
  s.add("exp", exp(a), {a}, kElem);
  s.add("log", log(pos), {pos}, kElem);
  s.add("sqrt", sqrt(pos), {pos}, kElem);
  s.add("rsqrt", rsqrt(pos), {pos}, kElem);
  s.add("sin", sin(a), {a}, kElem);
  s.add("cos", cos(a), {a}, kElem);
  s.add("tanh", tanh(a), {a}, kElem);
  s.add("sigmoid", sigmoid(a * 2.0), {a}, kElem);
  s.add("relu", relu(nz), {nz}, kElem);
  s.add("leaky_relu", leaky_relu(nz, 0.1), {nz}, kElem);
  s.add("softplus", softplus(a * 3.0), {a}, kElem);
  s.add("sign", sign(nz), {nz}, kExact);
  s.add("floor", floor(fr), {fr}, kExact);
  s.add("round", round(fr), {fr}, kExact);
  s.add("reciprocal", reciprocal(nz), {nz}, kElem);
  s.add("one exp", exp(one), {one}, kElem);
  s.add("five tanh", tanh(five), {five}, kElem);
  s.add("five sigmoid chain", sigmoid(exp(five) - five * 0.5) * five, {five}, kElem);
  // custom elementwise layers: SiLU; a lambda of two arguments with where/pow/max; broadcasting map
  s.add("map silu", map([](auto x) { return x * sg::sigmoid(x); }, a), {a}, kElem);
  s.add("map 2-arg",
        map([](auto x, auto p) { return sg::where(x > 0.0, sg::pow(p, 1.5) * x, sg::max(x, -p) + 1.0); }, nz, pos),
        {nz, pos}, kElem);
  Tensor row = s.in("row", {13}, uniform(13, 5, -1, 1));
  s.add("map broadcast", map([](auto x, auto y) { return sg::exp(x * 0.3) * y - sg::tanh(y); }, a, row), {a, row},
        kElem);
}

inline void binary_cases(Suite& s) {
  const Shape sh = {3, 7, 13};
  const int64_t n = sg::numel(sh);
  Tensor a = s.in("a", sh, uniform(n, 11, -2, 2));
  Tensor b = s.in("b", sh, uniform(n, 12, -2, 2));
  Tensor col = s.in("col", {7, 1}, signed_away(7, 13, 0.3, 2));    // broadcasts against (3,7,13)
  Tensor c3 = s.in("c3", {3, 1, 13}, uniform(39, 14, -2, 2));      // (3,1,13) op (7,1) -> (3,7,13)
  Tensor base = s.in("base", sh, uniform(n, 15, 0.1, 3));          // pow base > 0
  Tensor ex = s.in("ex", {7, 13}, uniform(91, 16, -2, 2));         // pow exponent, broadcast
  Tensor qa = s.in("qa", sh, coarse(n, 17));                       // many exact ties with qb
  Tensor qb = s.in("qb", {7, 13}, coarse(91, 18));
  Tensor cond = s.in("cond", {3, 1, 13}, coarse(39, 19));          // zero and non-zero conditions
  Tensor s0 = s.in("s0", {}, {1.75f});                             // rank-0 tensor
  Tensor s1 = s.in("s1", {1}, {-0.625f});                          // one element

  s.add("add", a + b, {a, b}, kElem);
  s.add("add broadcast (7,1)", a + col, {a, col}, kElem);
  s.add("sub broadcast both sides", c3 - col, {c3, col}, kElem);
  s.add("sub number", 3.0 - a, {a}, kElem);
  s.add("mul", a * b, {a, b}, kElem);
  s.add("mul rank-0", a * s0, {a, s0}, kElem);
  s.add("mul (1)", s1 * c3, {s1, c3}, kElem);
  s.add("div", a / col, {a, col}, kElem);
  s.add("div number", 2.5 / col + a / 4.0, {col, a}, kElem);
  s.add("pow", pow(base, ex), {base, ex}, kElem);
  s.add("pow negative base, integer exponent", pow(a, 3.0), {a}, kElem);
  s.add("pow number base", pow(2.0, a), {a}, kElem);
  s.add("maximum (ties split the gradient)", maximum(qa, qb), {qa, qb}, kElem);
  s.add("minimum (ties split the gradient)", minimum(qa, qb), {qa, qb}, kElem);
  s.add("maximum", maximum(a, b), {a, b}, kElem);
  s.add("minimum number", minimum(a, 0.3), {a}, kElem);
  s.add("lt", lt(qa, qb), {qa, qb}, kExact);
  s.add("le", le(qa, qb), {qa, qb}, kExact);
  s.add("gt", gt(qa, qb), {qa, qb}, kExact);
  s.add("ge", ge(qa, qb), {qa, qb}, kExact);
  s.add("eq", eq(qa, qb), {qa, qb}, kExact);
  s.add("ne", ne(qa, qb), {qa, qb}, kExact);
  s.add("operators < <= > >=", (qa < qb) + (qa <= 0.5) * 2.0 + (qb > qa) * 4.0 + (qa >= qb) * 8.0, {qa, qb}, kExact);
  s.add("where", where(cond, a, b), {a, b}, kElem);
  s.add("where number", where(cond, a * col, 0.5), {a, col}, kElem);
  s.add("where comparison", where(a > col, a * b, -a), {a, b}, kElem);
}

inline void reductions_cases(Suite& s) {
  const Shape sh = {3, 7, 13};
  const int64_t n = sg::numel(sh);
  // distinct values (no ties) shifted positive so sums do not cancel, plus jitter so sums are not exact
  std::vector<float> xv = distinct(n, 21), jit = uniform(n, 22, -0.02, 0.02);
  for (int64_t i = 0; i < n; ++i) xv[i] += 9.f + jit[i];
  Tensor x = s.in("x", sh, xv);
  Tensor y = s.in("y", {1, 7, 1}, uniform(7, 23, 0.5, 2));
  Tensor t = s.in("ties", {5, 11}, coarse(55, 24));  // ties in max/min: the gradient is split evenly
  const std::vector<std::vector<int>> axes = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, -1}, {0, 1, 2}};
  for (auto& ax : axes)
    for (bool keep : {false, true}) {
      std::string suffix = " axes {";
      for (int v : ax) suffix += std::to_string(v) + ",";
      suffix += keep ? "} keepdims" : "}";
      s.add("sum" + suffix, sum(x, ax, keep), {x}, kReduce);
      s.add("mean" + suffix, mean(x, ax, keep), {x}, kReduce);
      s.add("max" + suffix, max(x, ax, keep), {x}, kReduce);
      s.add("min" + suffix, min(x, ax, keep), {x}, kReduce);
    }
  for (int axis : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      std::string suffix = " axis " + std::to_string(axis) + (keep ? " keepdims" : "");
      s.output("argmax" + suffix, argmax(x, axis, keep), kExact);
      s.output("argmax of -x" + suffix, argmax(-x, axis, keep), kExact);
    }
  s.add("sum over size-1 axes", sum(y, {0, 2}), {y}, kReduce);
  s.add("sum with elementwise prologue", sum(exp(x * 0.1) * y, {1}), {x, y}, kReduce);
  s.add("mean with epilogue", sqrt(mean(x * x, {2}, true)) + 1.0, {x}, kReduce);
  s.add("max with ties", max(t, {1}), {t}, kReduce);
  s.add("min with ties, keepdims", min(t, {0}, true), {t}, kReduce);
  s.output("argmax with ties (first wins)", argmax(t, 1), kExact);
}

inline void matmul_cases(Suite& s) {
  Tensor a = s.in("a", {7, 13}, uniform(91, 31, -1, 1));
  Tensor b = s.in("b", {13, 5}, uniform(65, 32, -1, 1));
  Tensor bias = s.in("bias", {5}, uniform(5, 33, -1, 1));
  Tensor r1 = s.in("r1", {1, 3}, uniform(3, 34, -1, 1));
  Tensor c1 = s.in("c1", {3, 1}, uniform(3, 35, -1, 1));
  Tensor ba = s.in("ba", {2, 1, 7, 13}, uniform(182, 36, -1, 1));
  Tensor bb = s.in("bb", {3, 13, 5}, uniform(195, 37, -1, 1));
  Tensor p = s.in("p", {5, 3, 4}, uniform(60, 38, -1, 1));
  Tensor q = s.in("q", {5, 4, 3}, uniform(60, 39, -1, 1));
  Tensor longk_a = s.in("long_a", {3, 301}, uniform(903, 40, -1, 1));
  Tensor longk_b = s.in("long_b", {301, 2}, uniform(602, 41, -1, 1));

  s.add("matmul 7x13 @ 13x5", matmul(a, b), {a, b}, kReduce);
  s.add("matmul 1x3 @ 3x1", matmul(r1, c1), {r1, c1}, kReduce);
  s.add("matmul 3x1 @ 1x3", matmul(c1, r1), {c1, r1}, kReduce);
  s.add("matmul batched broadcast 2x1x7x13 @ 3x13x5", matmul(ba, bb), {ba, bb}, kReduce);
  s.add("matmul batched 5x3x4 @ 5x4x3", matmul(p, q), {p, q}, kReduce);
  s.add("matmul batched @ 2-D", matmul(ba, b), {ba, b}, kReduce);
  s.add("matmul K=301", matmul(longk_a, longk_b), {longk_a, longk_b}, kReduce);
  s.add("matmul + bias + tanh epilogue", tanh(matmul(a, b) + bias), {a, b, bias}, kReduce);
  s.add("matmul of transposes", matmul(transpose(b), transpose(a)), {a, b}, kReduce);
  s.add("matmul with prologue", matmul(a * 2.0 - 1.0, sigmoid(b)), {a, b}, kReduce);
  // tile mode (output row and loop length multiples of 4: 4 lanes x 4 iterations per step, shared texel
  // fetches), including loads at offsets that are not multiples of 4 and padded (out-of-range) reads
  Tensor t6 = s.in("t6", {6, 12}, uniform(72, 42, -1, 1));
  Tensor t12 = s.in("t12", {12, 8}, uniform(96, 43, -1, 1));
  Tensor w8 = s.in("w8", {8, 16}, uniform(128, 44, -1, 1));
  Tensor x16 = s.in("x16", {5, 16}, uniform(80, 45, -1, 1));
  Tensor bt = s.in("bt", {2, 3, 20}, uniform(120, 46, -1, 1));
  Tensor bu = s.in("bu", {2, 20, 8}, uniform(320, 47, -1, 1));
  Tensor a11 = s.in("a11", {6, 11}, uniform(66, 48, -1, 1));
  Tensor b8 = s.in("b8", {8}, uniform(8, 49, -1, 1));
  s.add("matmul tile 6x12 @ 12x8", matmul(t6, t12), {t6, t12}, kReduce);
  s.add("matmul tile x.W^T + bias", matmul(x16, transpose(w8)) + b8, {x16, w8, b8}, kReduce);
  s.add("matmul tile batched 2x3x20 @ 2x20x8", matmul(bt, bu), {bt, bu}, kReduce);
  s.add("matmul tile of a slice at column offset 2", matmul(slice(x16, 1, 2, 14), t12), {x16, t12}, kReduce);
  s.add("matmul tile of a left-padded operand", matmul(pad(a11, {0, 1}, {0, 0}), t12), {a11, t12}, kReduce);
}

/// Contractions the compute targets tile (emit_tiled.cpp) at shapes that are multiples of neither the tiles nor 4:
/// tiny, one tile, many tile rows (grouped tile order), fused bias + relu epilogues and prologues, batched, and conv2d
/// whose forward, grad-input and grad-weight (1152 outputs over 198 products: not a tree reduction) are contractions;
/// a long x.W^T (K = 260).
inline void contraction_cases(Suite& s) {
  Tensor a = s.in("a", {37, 53}, uniform(37 * 53, 111, -1, 1));
  Tensor b = s.in("b", {53, 29}, uniform(53 * 29, 112, -1, 1));
  Tensor bias = s.in("bias", {29}, uniform(29, 113, -1, 1));
  Tensor t1 = s.in("t1", {2, 5}, uniform(10, 114, -1, 1));
  Tensor t2 = s.in("t2", {5, 3}, uniform(15, 115, -1, 1));
  Tensor big_a = s.in("big_a", {150, 257}, uniform(150 * 257, 116, -1, 1));
  Tensor big_b = s.in("big_b", {257, 67}, uniform(257 * 67, 117, -1, 1));
  Tensor x = s.in("x", {45, 70}, uniform(45 * 70, 118, -1, 1));
  Tensor w = s.in("w", {33, 70}, uniform(33 * 70, 119, -1, 1));
  Tensor wb = s.in("wb", {33}, uniform(33, 120, -1, 1));
  Tensor p = s.in("p", {3, 19, 23}, uniform(3 * 19 * 23, 121, -1, 1));
  Tensor q = s.in("q", {3, 23, 17}, uniform(3 * 23 * 17, 122, -1, 1));
  Tensor cx = s.in("cx", {2, 8, 9, 11}, uniform(2 * 8 * 9 * 11, 123, -1, 1));
  Tensor cw = s.in("cw", {16, 8, 3, 3}, uniform(16 * 8 * 9, 124, -0.5, 0.5));
  Tensor cb = s.in("cb", {16}, uniform(16, 125, -0.5, 0.5));
  Tensor lx = s.in("lx", {21, 260}, uniform(21 * 260, 126, -1, 1));
  Tensor lw = s.in("lw", {19, 260}, uniform(19 * 260, 127, -1, 1));
  Tensor lb = s.in("lb", {19}, uniform(19, 128, -1, 1));
  s.add("tiled matmul 37x53 @ 53x29 + bias + relu", relu(matmul(a, b) + bias), {a, b, bias}, kReduce);
  s.add("tiled matmul 2x5 @ 5x3", matmul(t1, t2), {t1, t2}, kReduce);
  s.add("tiled matmul 150x257 @ 257x67", matmul(big_a, big_b), {big_a, big_b}, kReduce);
  s.add("tiled x.W^T + b, relu, prologue", relu(matmul(sigmoid(x), transpose(w)) + wb), {x, w, wb}, kReduce);
  s.add("tiled batched 3x19x23 @ 3x23x17", matmul(p, q), {p, q}, kReduce);
  s.add("tiled conv2d 2x8x9x11 * 16x8x3x3 padding 1 + bias + relu", relu(conv2d(cx, cw, cb, {.padding = {1, 1}})),
        {cx, cw, cb}, kReduce);
  // K = 260, a multiple of 4 over 256 like the MLP's x.W1^T (K = 784): the cpu plans' register tiles take 4 steps of
  // k per iteration
  s.add("tiled x.W^T K=260 + b, relu", relu(matmul(lx, transpose(lw)) + lb), {lx, lw, lb}, kReduce);
}

inline void movement_cases(Suite& s) {
  Tensor x = s.in("x", {3, 7, 13}, uniform(273, 51, -2, 2));
  Tensor x4 = s.in("x4", {2, 3, 5, 7}, uniform(210, 52, -2, 2));
  Tensor v = s.in("v", {7, 1}, uniform(7, 53, -2, 2));
  Tensor one = s.in("one", {1}, {1.25f});
  Tensor y = s.in("y", {3, 2, 13}, uniform(78, 54, -2, 2));
  Tensor z = s.in("z", {3, 5, 13}, uniform(195, 55, -2, 2));
  Tensor w = s.in("w", {1, 7, 13}, uniform(91, 56, -2, 2));
  // fed labels must be class indices (run() refuses others, sg/feeds.h); labels computed in the graph may fall
  // outside [0, classes): lab - 1 holds 7 and -1, which one_hot turns into zero rows on every backend
  Tensor lab1 = s.in("lab", {11}, {1, 7, 4, 4, 2, 6, 3, 5, 8, 0, 7}, DType::i32);
  Tensor lab = lab1 - 1.0;
  Tensor m = s.in("m", {11, 7}, uniform(77, 57, -2, 2));

  s.add("reshape 21x13", reshape(x, Shape{21, 13}), {x}, kElem);
  s.add("reshape 13x-1", reshape(x, Shape{13, -1}), {x}, kElem);
  s.add("reshape 1-D and back", reshape(reshape(x, Shape{273}) * 2.0, Shape{7, 39}), {x}, kElem);
  s.add("flatten 1", flatten(x4, 1), {x4}, kElem);
  s.add("flatten 0", flatten(x4, 0), {x4}, kElem);
  s.add("flatten 2", flatten(x4, 2), {x4}, kElem);
  s.add("transpose", transpose(x), {x}, kElem);
  s.add("transpose 0 2", transpose(x, 0, 2), {x}, kElem);
  s.add("permute 2 0 1", permute(x, {2, 0, 1}), {x}, kElem);
  s.add("permute 3 1 0 2", permute(x4, {3, 1, 0, 2}), {x4}, kElem);
  s.add("broadcast_to 7x1 -> 3x7x13", broadcast_to(v, Shape{3, 7, 13}), {v}, kElem);
  s.add("broadcast_to 1 -> 5x3", broadcast_to(one, Shape{5, 3}), {one}, kElem);
  s.add("slice step 3", slice(x, 2, 1, 12, 3), {x}, kElem);
  s.add("slice negative bounds", slice(x, 1, -5, -1), {x}, kElem);
  s.add("slice one row", slice(x, 0, 1, 2), {x}, kElem);
  s.add("slice step 2 of 4-D", slice(x4, 3, 0, 7, 2), {x4}, kElem);
  s.add("pad", pad(x, Shape{0, 1, 2}, Shape{1, 0, 3}, 0.5), {x}, kElem);
  s.add("pad 4-D zero", pad(x4, Shape{1, 0, 2, 1}, Shape{0, 2, 1, 3}), {x4}, kElem);
  s.add("concat axis 1", concat({x, y, z}, 1), {x, y, z}, kElem);
  s.add("concat axis 0", concat({x, w, x * 0.5}, 0), {x, w}, kElem);
  s.add("concat axis -1", concat({x, exp(x)}, -1), {x}, kElem);
  s.output("one_hot (out-of-range labels give zeros)", one_hot(lab, 7), kExact);
  s.output("one_hot 1 class", one_hot(lab, 1), kExact);
  s.add("one_hot times x", one_hot(lab, 7) * m, {m}, kElem);
  s.add("movement chain", slice(transpose(reshape(x, Shape{21, 13}) * 3.0), 0, 2, 11, 4), {x}, kElem);
}

/// gather / take (embedding lookup): fed indices lie in the axis (run() refuses others, sg/feeds.h); indices repeat
/// (their gradients add up) and miss rows (zero gradient); a computed index (argmax) is read on the GPU too.
inline void gather_cases(Suite& s) {
  Tensor x = s.in("x", {5, 7}, uniform(35, 151, -2, 2));
  Tensor i1 = s.in("i1", {5, 9}, labels(45, 7, 152), DType::i32);
  Tensor x3 = s.in("x3", {4, 6, 3}, uniform(72, 153, -2, 2));
  Tensor i0 = s.in("i0", {7, 5, 2}, labels(70, 4, 154), DType::i32);  // smaller than x3 outside axis 0
  Tensor i2 = s.in("i2", {4, 6, 5}, labels(120, 3, 155), DType::i32);
  Tensor table = s.in("table", {11, 6}, uniform(66, 156, -1, 1));
  Tensor tok = s.in("tok", {3, 8}, labels(24, 11, 157), DType::i32);
  Tensor sel = s.in("sel", {5}, {5, 0, 5, 2, 1}, DType::i32);
  Tensor big = s.in("big", {300, 40}, uniform(12000, 158, -1, 1));
  Tensor btok = s.in("btok", {2, 70}, labels(140, 300, 159), DType::i32);
  s.add("gather axis 1 (torch.gather)", gather(x, 1, i1), {x}, kReduce);
  s.add("gather axis 0, index smaller than x outside the axis", gather(x3, 0, i0), {x3}, kReduce);
  s.add("gather axis -1 of 3-D", gather(x3, -1, i2), {x3}, kReduce);
  s.add("take axis 0 (embedding lookup) 11x6 by 3x8", take(table, tok), {table}, kReduce);
  s.add("take axis 1 (index_select) with repeats", take(x3, sel, 1), {x3}, kReduce);
  s.add("take axis -1 by 5x9", take(x, i1, -1), {x}, kReduce);
  s.add("take then relu * 2 (consumer)", relu(take(table, tok)) * 2.0, {table}, kReduce);
  s.add("take of a computed table tanh(table) * 3", take(tanh(table) * 3.0, tok), {table}, kReduce);
  s.add("take by argmax indices (computed in the graph)", take(table, argmax(x, 1)), {table}, kReduce);
  s.add("embedding 300x40 by 2x70 (gradient sums 140 positions)", take(big, btok), {big}, kReduce);
}

/// Index masks and flip (issue 36): iota / arange computed in the kernels (alone, in arithmetic, as a gather index),
/// tril / triu over the last two dimensions with batch dimensions and diagonals above, on and below the main one (a
/// causal mask before a matmul and inside a softmax without host constants), flip along one, two and the last axis
/// (texels read backwards), into a matmul's prologue and twice (the identity).
inline void masks_cases(Suite& s) {
  Tensor x = s.in("x", {3, 7, 13}, uniform(273, 161, -2, 2));
  Tensor sq = s.in("sq", {9, 9}, uniform(81, 162, -2, 2));
  Tensor v = s.in("v", {9, 6}, uniform(54, 163, -1, 1));
  Tensor w16 = s.in("w16", {5, 16}, uniform(80, 164, -2, 2));
  Tensor b = s.in("b", {16, 3}, uniform(48, 165, -1, 1));
  Tensor table = s.in("table", {11, 6}, uniform(66, 166, -1, 1));
  s.output("iota 3x7x13 axis 1", sg::iota({3, 7, 13}, 1), kExact);
  s.output("iota 5x4 axis -1 (i32)", sg::iota({5, 4}, -1, DType::i32), kExact);
  s.add("x * iota axis 2 (a ramp)", x * sg::iota({3, 7, 13}, 2), {x}, kElem);
  s.add("x + arange(13) * 0.5", x + arange(13) * 0.5, {x}, kElem);
  s.add("take by an i32 iota (rows 0..4 twice)", take(table, sg::iota({2, 5}, 1, DType::i32)), {table}, kReduce);
  s.add("tril", tril(x), {x}, kElem);
  s.add("tril diagonal 3", tril(x, 3), {x}, kElem);
  s.add("triu diagonal -2", triu(x, -2), {x}, kElem);
  s.add("triu diagonal 1 of 9x9", triu(sq, 1), {sq}, kElem);
  s.add("tril of a product (fused)", tril(sq * sq - 1.0, -1), {sq}, kElem);
  s.add("tril then matmul (causal prefix sums)", matmul(tril(sq), v), {sq, v}, kReduce);
  const Tensor rows = sg::iota({9, 9}, 0), cols = sg::iota({9, 9}, 1);
  s.add("causal softmax (masked_fill -inf above the diagonal)",
        softmax(where(cols > rows, -std::numeric_limits<double>::infinity(), sq * 2.0)), {sq}, kReduce);
  s.add("flip axis 1", flip(x, {1}), {x}, kElem);
  s.add("flip axes 0, 2", flip(x, {0, 2}), {x}, kElem);
  s.add("flip last axis of 5x16 (texels backwards)", flip(w16, {-1}), {w16}, kElem);
  s.add("flip of a strided slice", flip(slice(x, 2, 1, 13, 3), {2, 0}), {x}, kElem);
  s.add("flip into a matmul prologue", matmul(flip(w16, {1}), b), {w16, b}, kReduce);
  s.add("flip of a reduction", flip(sum(x, {2}), {0, 1}) * 2.0, {x}, kReduce);
  s.add("flip twice (identity)", flip(flip(x, {1}), {1}) + flip(x, {2}), {x}, kElem);
}

/// The layers of issue 36 as torch golden cases (tests/golden/layers.json: F.layer_norm, the RMSNorm formula), fed
/// with the golden inputs and R, so every backend's output and gradients are compared with torch's values as well as
/// with the CPU backend's (Suite::add_golden).
/// `only`: the names of the cases to add (empty: all).
inline void layers_cases_of(Suite& s, const std::vector<std::string>& only) {
  const golden::json j = golden::load("layers.json");
  int c = 0;
  for (const golden::json& cj : j.at("cases")) {
    if (!only.empty() && std::find(only.begin(), only.end(), cj.at("name").get<std::string>()) == only.end()) continue;
    std::vector<Tensor> ins, wrt;
    std::vector<std::vector<float>> want_grads;
    for (const golden::json& ij : cj.at("inputs")) {
      const golden::GTensor t = golden::tensor(ij);
      const bool is_int = ij.at("dtype") == "i32", grad = ij.at("grad").get<bool>();
      std::vector<float> g = grad ? golden::tensor(cj.at("grads").at(ij.at("name").get<std::string>())).floats()
                                  : std::vector<float>{};
      // an input the output does not depend on (the attention weights do not read value or out_proj): a constant
      // (a bundle refuses a feed its program does not read); its zero gradient is test_autodiff's
      if (grad && std::none_of(g.begin(), g.end(), [](float v) { return v != 0.f; })) {
        ins.push_back(constant(t.shape, t.floats()));
        continue;
      }
      ins.push_back(s.in(fmt::format("c{}_{}", c, ij.at("name").get<std::string>()), t.shape, t.floats(),
                         is_int ? DType::i32 : DType::f32));
      if (!grad) continue;
      wrt.push_back(ins.back());
      want_grads.push_back(std::move(g));
    }
    const Tensor out = golden::build_op(cj.at("op"), cj.at("attrs"), ins);
    s.add_golden(cj.at("name").get<std::string>(), out, wrt, golden::tensor(cj.at("R")).floats(),
                 golden::tensor(cj.at("output")).floats(), std::move(want_grads), kReduce);
    ++c;
  }
}

inline void layers_cases(Suite& s) { layers_cases_of(s, {}); }

/// A subset of the layers' golden cases for headless Chromium, where every kernel is a WebGL2 shader compiled by
/// SwiftShader (the whole list took 51 s of a browser run here, this one a fraction): LayerNorm over one and two
/// dimensions, RMSNorm, causal self-attention, cross-attention with key padding and its averaged weights, and a
/// pre-norm TransformerEncoderLayer with key padding. The whole list runs on WebGPU in Node (test_webgpu_ops).
inline void layers_browser_cases(Suite& s) {
  layers_cases_of(s, {"layer_norm_4x8", "layer_norm_2x3x5_last2", "rms_norm_4x8", "attention_self_causal_2x6x8_h2",
                      "attention_key_padding_2x3_2x5_e6_h3", "attention_weights_averaged",
                      "transformer_encoder_layer_pre_norm_gelu_key_padding"});
}

inline void conv_cases(Suite& s) {
  Tensor x = s.in("x", {2, 3, 9, 11}, uniform(594, 61, -1, 1));
  Tensor w = s.in("w", {5, 3, 3, 3}, uniform(135, 62, -0.5, 0.5));
  Tensor bias = s.in("bias", {5}, uniform(5, 63, -0.5, 0.5));
  Tensor w1 = s.in("w1", {4, 3, 1, 1}, uniform(12, 64, -0.5, 0.5));
  Tensor wt = s.in("wt", {3, 4, 3, 3}, uniform(108, 168, -0.5, 0.5));  // conv_transpose2d: (C_in, C_out, KH, KW)
  Tensor bt = s.in("bt", {4}, uniform(4, 169, -0.5, 0.5));
  Tensor w25 = s.in("w25", {2, 3, 2, 5}, uniform(60, 65, -0.5, 0.5));
  Tensor xd = s.in("xd", {2, 3, 9, 11}, distinct(594, 66));   // no ties for max pooling
  Tensor xt = s.in("xt", {1, 2, 7, 5}, coarse(70, 67));        // ties: the first maximum gets the gradient
  Tensor xs = s.in("xs", {1, 1, 1, 1}, {0.375f});
  Tensor w5 = s.in("w5", {2, 5, 2, 2}, uniform(40, 68, -0.5, 0.5));
  // 4x4 planes (16 outputs per channel): the fragment emitter reads a weight once for the 4 outputs of a texel
  // (lane-uniform loads), with odd channel counts and batch
  Tensor x44 = s.in("x44", {3, 5, 4, 4}, uniform(240, 69, -1, 1));
  Tensor w75 = s.in("w75", {7, 5, 3, 3}, uniform(315, 70, -0.5, 0.5));
  Tensor b7 = s.in("b7", {7}, uniform(7, 71, -0.5, 0.5));

  s.add("conv2d stride 2 padding 1 dilation 2 bias", conv2d(x, w, bias, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}}),
        {x, w, bias}, kReduce);
  s.add("conv2d stride (2,1) padding (0,2) dilation (1,2)",
        conv2d(x, w, Tensor(), {.stride = {2, 1}, .padding = {0, 2}, .dilation = {1, 2}}), {x, w}, kReduce);
  s.add("conv2d 1x1", conv2d(x, w1), {x, w1}, kReduce);
  s.add("conv_transpose2d stride 2 padding 1 output_padding 1 + bias (the adjoint of conv2d)",
        conv_transpose2d(x, wt, bt, {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}}), {x, wt, bt},
        kReduce);
  s.add("conv_transpose2d stride (1,3) dilation 2 padding (2,0) + relu",
        relu(conv_transpose2d(x, wt, Tensor(), {.stride = {1, 3}, .padding = {2, 0}, .dilation = {2, 2}})), {x, wt},
        kReduce);
  s.add("upsample_nearest2d x2 then conv2d (a decoder's block)", conv2d(upsample_nearest2d(x, 2, 2), w, bias),
        {x, w, bias}, kReduce);
  s.add("upsample_nearest2d (3, 1)", upsample_nearest2d(x, 3, 1), {x}, kReduce);
  // grouped and depthwise convolutions (groups), conv_transpose2d with groups, bilinear interpolation
  Tensor x4c = s.in("x4c", {2, 4, 7, 6}, uniform(336, 901, -1, 1));
  Tensor wg = s.in("wg", {6, 2, 3, 3}, uniform(108, 902, -0.5, 0.5));   // groups 2: (O, C/2, KH, KW)
  Tensor bg = s.in("bg", {6}, uniform(6, 903, -0.5, 0.5));
  Tensor wdw = s.in("wdw", {3, 1, 3, 3}, uniform(27, 904, -0.5, 0.5));  // depthwise on x's 3 channels
  Tensor wdm = s.in("wdm", {6, 1, 2, 3}, uniform(36, 905, -0.5, 0.5));  // depthwise, channel multiplier 2
  Tensor wtg = s.in("wtg", {4, 3, 3, 3}, uniform(108, 906, -0.5, 0.5)); // conv_transpose2d groups 2: 6 out
  s.add("conv2d groups 2 padding 1 + bias", conv2d(x4c, wg, bg, {.padding = {1, 1}, .groups = 2}), {x4c, wg, bg},
        kReduce);
  s.add("conv2d depthwise stride 2 padding 1 dilation (1,2)",
        conv2d(x, wdw, Tensor(), {.stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 2}, .groups = 3}), {x, wdw},
        kReduce);
  s.add("conv2d depthwise channel multiplier 2 + relu",
        relu(conv2d(x, wdm, Tensor(), {.padding = {0, 1}, .groups = 3})), {x, wdm}, kReduce);
  s.add("conv2d groups 2 then depthwise (a separable block)",
        conv2d(conv2d(x4c, wg, Tensor(), {.groups = 2}), wdm, Tensor(), {.padding = {1, 1}, .groups = 6}),
        {x4c, wg, wdm}, kReduce);
  s.add("conv_transpose2d groups 2 stride 2 padding 1 output_padding 1",
        conv_transpose2d(x4c, wtg, Tensor(), {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1},
                                              .groups = 2}), {x4c, wtg}, kReduce);
  s.add("upsample_bilinear2d size (13, 17)", upsample_bilinear2d(x, {.size = {{13, 17}}}), {x}, kReduce);
  s.add("upsample_bilinear2d scale (1.5, 2.5) align_corners",
        upsample_bilinear2d(x, {.scale_factor = {{1.5, 2.5}}, .align_corners = true}), {x}, kReduce);
  s.add("upsample_bilinear2d down to (4, 5)", upsample_bilinear2d(x4c, {.size = {{4, 5}}}), {x4c}, kReduce);
  s.add("upsample_bilinear2d x2 then conv2d (a decoder's block)",
        conv2d(upsample_bilinear2d(x, {.scale_factor = {{2.0, 2.0}}}), w, bias, {.padding = {1, 1}}), {x, w, bias},
        kReduce);

  s.add("conv2d 2x5 stride 3 padding (1,2) + relu", relu(conv2d(x, w25, Tensor(), {.stride = {3, 3}, .padding = {1, 2}})),
        {x, w25}, kReduce);
  s.add("conv2d default + bias", conv2d(x, w, bias), {x, w, bias}, kReduce);
  s.add("conv2d 4x4 planes padding 1 + bias", conv2d(x44, w75, b7, {.padding = {1, 1}}), {x44, w75, b7}, kReduce);
  s.add("conv2d 4x4 planes stride 2 padding 1 (2x2 outputs)", conv2d(x44, w75, Tensor(), {.stride = {2, 2}, .padding = {1, 1}}),
        {x44, w75}, kReduce);
  s.add("max_pool2d k3 s2 p1", max_pool2d(xd, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}), {xd}, kReduce);
  s.add("max_pool2d k(2,3) s(1,2) p(1,1)", max_pool2d(xd, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}),
        {xd}, kReduce);
  s.add("max_pool2d default 2x2 (odd sizes drop the tail)", max_pool2d(xd), {xd}, kReduce);
  s.add("max_pool2d with ties", max_pool2d(xt, {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}}), {xt}, kReduce);
  s.add("max_pool2d 1x1 input", max_pool2d(xs, {.kernel = {1, 1}}), {xs}, kReduce);
  // windows that do not overlap along a dimension (stride >= kernel): the gradient reads one window there
  s.add("max_pool2d k2 s3 p1 (gaps between windows)", max_pool2d(xd, {.kernel = {2, 2}, .stride = {3, 3}, .padding = {1, 1}}),
        {xd}, kReduce);
  s.add("max_pool2d k(2,3) s(2,1) p(0,1) (one dimension overlaps)",
        max_pool2d(xd, {.kernel = {2, 3}, .stride = {2, 1}, .padding = {0, 1}}), {xd}, kReduce);
  s.add("max_pool2d 2x2 with ties", max_pool2d(xt), {xt}, kReduce);
  s.add("avg_pool2d k2 s3 p1 (gaps between windows)", avg_pool2d(x, {.kernel = {2, 2}, .stride = {3, 3}, .padding = {1, 1}}),
        {x}, kReduce);
  s.add("avg_pool2d k3 s2 p1", avg_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}), {x}, kReduce);
  s.add("avg_pool2d k(2,3) s(3,1) p(0,1)", avg_pool2d(x, {.kernel = {2, 3}, .stride = {3, 1}, .padding = {0, 1}}),
        {x}, kReduce);
  s.add("avg_pool2d default", avg_pool2d(x), {x}, kReduce);
  s.add("conv -> max_pool -> conv",
        conv2d(max_pool2d(conv2d(xd, w, bias, {.padding = {1, 1}}), {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}),
               w5, Tensor(), {.padding = {1, 0}}),
        {xd, w, bias, w5}, kReduce);
  // 2x2 windows tiling a 6x8 image: the webgpu cpu plan computes the gradient one invocation per window (window
  // blocks: the window's argmax once); ties inside windows (the first maximum gets dy), alone and behind a ReLU (its
  // mask fused into the same kernel); and windows overlapping along one dimension (a loop over the windows holding an
  // element there: one invocation per element). NaN and -inf inside such windows: edge_input_cases.
  Tensor x68 = s.in("x68", {2, 3, 6, 8}, coarse(2 * 3 * 6 * 8, 76));
  s.add("max_pool2d 2x2 over 6x8 with ties", max_pool2d(x68), {x68}, kReduce);
  s.add("relu -> max_pool2d 2x2 over 6x8 with ties", max_pool2d(relu(x68)), {x68}, kReduce);
  s.add("max_pool2d k(2,3) s(2,1) p(0,1) over 6x8 with ties (overlapping along one dimension)",
        max_pool2d(x68, {.kernel = {2, 3}, .stride = {2, 1}, .padding = {0, 1}}), {x68}, kReduce);
}

inline void losses_cases(Suite& s) {
  Tensor z = s.in("z", {7, 13}, uniform(91, 71, -3, 3));
  Tensor z3 = s.in("z3", {3, 5, 2}, uniform(30, 72, -3, 3));
  Tensor lab = s.in("labels", {7}, labels(7, 13, 73), DType::i32);
  Tensor a = s.in("a", {3, 7, 13}, uniform(273, 74, -2, 2));
  Tensor b = s.in("b", {3, 7, 13}, uniform(273, 75, -2, 2));
  // target probabilities with exact zeros (0 * log 0 = 0)
  std::vector<float> tv = uniform(91, 76, 0, 1);
  for (int64_t i = 0; i < 7; ++i) {
    tv[i * 13 + (i % 13)] = 0.f;
    tv[i * 13 + ((i * 5 + 3) % 13)] = 0.f;
    float total = 0;
    for (int64_t j = 0; j < 13; ++j) total += tv[i * 13 + j];
    for (int64_t j = 0; j < 13; ++j) tv[i * 13 + j] /= total;
  }
  Tensor target = s.in("target", {7, 13}, tv);
  Tensor big = s.in("big", {2, 5}, {80.f, 79.f, -80.f, 0.f, 85.f, -3.f, 1e3f, 999.f, 0.5f, -1e3f});  // stability

  s.add("softmax axis -1", softmax(z), {z}, kReduce);
  s.add("softmax axis 0", softmax(z, 0), {z}, kReduce);
  s.add("softmax 3-D axis 1", softmax(z3, 1), {z3}, kReduce);
  s.add("log_softmax axis -1", log_softmax(z), {z}, kReduce);
  s.add("log_softmax axis 0", log_softmax(z, 0), {z}, kReduce);
  s.add("softmax large logits", softmax(big), {big}, kReduce);
  s.add("log_softmax large logits", log_softmax(big), {big}, kReduce);
  s.add("cross_entropy", cross_entropy(z, lab), {z}, kReduce);
  s.add("mse_loss", mse_loss(a, b), {a, b}, kReduce);
  s.add("kl_div", kl_div(log_softmax(z), target), {z, target}, kReduce);
}

/// The layers' math (issue 36): erf, erfc, gelu (exact and tanh), alone, in a custom map and as a matmul's
/// epilogue; logsumexp, var and std over axes (keepdims, unbiased or not) and a LayerNorm-like normalisation. Inputs over [-6, 6] cross every range of the erf helper (0.875, 2, 3.925); the tails against the CPU's
/// relative precision are the edge list's (tests/edge_cases.h).
inline void math_cases(Suite& s) {
  const Shape sh = {3, 7, 13};
  const int64_t n = sg::numel(sh);
  Tensor a = s.in("a", sh, uniform(n, 81, -3, 3));
  Tensor w = s.in("w", sh, uniform(n, 82, -6, 6));
  Tensor five = s.in("five", {5}, {-1.3f, 0.2f, 2.5f, -0.4f, 1.1f});
  s.add("erf", erf(a), {a}, kElem);
  s.add("erf over [-6, 6]", erf(w), {w}, kElem);
  s.add("erfc over [-6, 6]", erfc(w), {w}, kElem);
  s.add("gelu", gelu(a), {a}, kElem);
  s.add("gelu over [-6, 6]", gelu(w), {w}, kElem);
  s.add("gelu tanh", gelu(a, "tanh"), {a}, kElem);
  s.add("gelu tanh over [-6, 6]", gelu(w, "tanh"), {w}, kElem);
  s.add("five erf", erf(five), {five}, kElem);
  Tensor row = s.in("row", {13}, uniform(13, 86, -2, 2));
  s.add("map erf(x) * erfc(y) (broadcast)", map([](auto x, auto y) { return sg::erf(x * 1.5) * sg::erfc(y); }, a, row),
        {a, row}, kElem);
  Tensor x = s.in("x", {9, 13}, uniform(117, 83, -1, 1));
  Tensor m = s.in("m", {13, 11}, uniform(143, 84, -1, 1));
  Tensor bias = s.in("bias", {11}, uniform(11, 85, -1, 1));
  s.add("matmul + bias + gelu epilogue", gelu(matmul(x, m) + bias), {x, m, bias}, kReduce);
  s.add("matmul + bias + gelu tanh epilogue", gelu(matmul(x, m) + bias, "tanh"), {x, m, bias}, kReduce);
  // logsumexp, var, std: axes, keepdims, unbiased; large logits (exp(90) overflows f32 without the shift)
  Tensor z = s.in("z", {7, 13}, uniform(91, 87, -4, 4));
  Tensor big = s.in("big", {2, 5}, {90.f, 88.f, -90.f, 0.f, 85.f, -3.f, 1e3f, 999.f, 0.5f, -1e3f});
  s.add("logsumexp axis -1", logsumexp(z, {-1}), {z}, kReduce);
  s.add("logsumexp axis 0 keepdims", logsumexp(z, {0}, true), {z}, kReduce);
  s.add("logsumexp all", logsumexp(a), {a}, kReduce);
  s.add("logsumexp axes 0, 2", logsumexp(a, {0, 2}), {a}, kReduce);
  s.add("logsumexp large logits", logsumexp(big, {1}), {big}, kReduce);
  s.add("var axis -1 (unbiased)", var(z, {-1}), {z}, kReduce);
  s.add("var axis 0 biased keepdims", var(z, {0}, false, true), {z}, kReduce);
  s.add("var all", var(a), {a}, kReduce);
  s.add("std axes 0, 2", sg::std(a, {0, 2}), {a}, kReduce);
  s.add("std axis 1 biased", sg::std(z, {1}, false), {z}, kReduce);
  s.add("layer-norm-like (x - mean) / sqrt(var + eps)",
        (z - mean(z, {1}, true)) * rsqrt(var(z, {1}, false, true) + 1e-5), {z}, kReduce);
}

/// Random numbers inside kernels (issue 36): random_uniform, bernoulli and dropout with a fed step, alone (odd
/// shapes, a 0-d tensor, the largest step 2^24 and a 64-bit seed, 19200 elements: rows wrap on narrow textures), in
/// consumers (a map, a reduction, a matmul's epilogue and prologue, a transpose) and with their gradients: the same
/// bits as the CPU reference on every backend (exact, except where a sum or matmul adds up in another order).
inline void random_cases(Suite& s) {
  const Shape sh = {3, 7, 13};
  const int64_t n = sg::numel(sh);
  Tensor step = s.in("step", {}, {3.f});
  Tensor last = s.in("last step", {1}, {16777216.f});  // 2^24
  Tensor x = s.in("x", sh, signed_away(n, 171, 0.1, 2));
  Tensor p = s.in("p", sh, uniform(n, 172, 0, 1));
  Tensor a = s.in("a", {9, 13}, uniform(117, 173, -1, 1));
  Tensor w = s.in("w", {13, 11}, uniform(143, 174, -1, 1));
  Tensor b = s.in("b", {11}, uniform(11, 175, -1, 1));
  s.output("random_uniform 3x7x13", random_uniform(sh, 1234, step, 0), kExact);
  s.output("random_uniform 5 at step 2^24, seed 2^64 - 1, stream 2^32 - 1",
           random_uniform({5}, 0xFFFFFFFFFFFFFFFFull, last, 0xFFFFFFFFu), kExact);
  s.output("random_uniform 0-d", random_uniform({}, 5, step, 2), kExact);
  s.output("random_uniform 64x300", random_uniform({64, 300}, 77, step, 1), kExact);
  s.add("random_uniform * x", random_uniform(sh, 9, step, 3) * x, {x}, kExact);
  s.add("sum over axis 1 of random_uniform * x", sum(random_uniform(sh, 9, step, 4) * x, {1}), {x}, kReduce);
  s.add("sum over axis 2 of random_uniform 3x7x64 (a reduction of 64)", sum(random_uniform({3, 7, 64}, 10, step, 0), {2}),
        {}, kReduce);
  s.output("bernoulli(p)", bernoulli(p, 11, step), kExact);
  s.add("dropout p 0.3", dropout(x, 0.3, 21, step), {x}, kExact);
  s.add("dropout p 0.9 of a transpose", dropout(transpose(x, 0, 2), 0.9, 24, step), {x}, kExact);
  s.add("dropout p 0.5 of matmul + bias (epilogue)", dropout(matmul(a, w) + b, 0.5, 22, step), {a, w, b}, kReduce);
  s.add("matmul of dropout p 0.2 (prologue)", matmul(dropout(a, 0.2, 23, step), w), {a, w}, kReduce);
  s.add("two dropouts of one seed (two streams)", dropout(x, 0.5, 26, step) - dropout(x, 0.5, 26, step) * 0.5, {x},
        kElem);
  // dropout at torch's sites inside the layers: the attention weights (after the softmax, before the product with
  // v; need_weights returns them after dropout), a TransformerEncoderLayer's four sites (self_attn, dropout,
  // dropout1, dropout2) and the dropout between an LSTM's and a GRU's layers; the layers' masks take their State
  // step counters (0 in this one run), the functional's the fed step
  Tensor q = s.in("q", {2, 5, 8}, uniform(80, 176, -1, 1));
  Tensor kv = s.in("kv", {2, 7, 8}, uniform(112, 177, -1, 1));
  Tensor w_in = s.in("w_in", {24, 8}, uniform(192, 178, -0.5, 0.5));
  Tensor b_in = s.in("b_in", {24}, uniform(24, 179, -0.2, 0.2));
  Tensor w_out = s.in("w_out", {8, 8}, uniform(64, 180, -0.5, 0.5));
  Tensor b_out = s.in("b_out", {8}, uniform(8, 181, -0.2, 0.2));
  nn::AttentionOptions causal;
  causal.is_causal = true;
  s.add("multi_head_attention causal self-attention with dropout p 0.3 on the weights",
        nn::multi_head_attention_forward(q, q, q, 2, w_in, b_in, w_out, b_out, causal, true,
                                         {.p = 0.3, .seed = 31, .step = step})
            .output,
        {q, w_in, b_in, w_out}, kReduce);
  nn::AttentionOptions per_head;
  per_head.need_weights = true;
  per_head.average_attn_weights = false;
  s.add("multi_head_attention cross-attention weights per head after dropout p 0.5",
        nn::multi_head_attention_forward(q, kv, kv, 2, w_in, b_in, w_out, b_out, per_head, true,
                                         {.p = 0.5, .seed = 32, .step = step})
            .weights,
        {q, kv}, kReduce);
  {
    nn::Rng rng(33);
    nn::TransformerEncoderLayer layer(8, 2, 16, 0.25, "gelu", 1e-5, true, true);
    layer.build("random_cases.encoder.", rng);
    s.add("TransformerEncoderLayer pre-norm gelu with dropout 0.25 at its four sites", layer(q), {q}, kReduce);
    nn::LSTM lstm(8, 6, 2, true, true, 0.5);
    lstm.build("random_cases.lstm.", rng);
    s.add("LSTM of 2 layers with dropout 0.5 between them", lstm(q), {q}, kReduce);
    nn::GRU gru(8, 6, 3, true, false, 0.3);
    gru.build("random_cases.gru.", rng);
    s.add("GRU of 3 layers with dropout 0.3 between them, h_n", gru.forward_state(kv).h_n, {kv}, kReduce);
  }
}

inline void large_cases(Suite& s) {
  // 3x137x163 = 66993 elements = 16749 texels: more than one row even at llvmpipe's MAX_TEXTURE_SIZE 16384,
  // 2393 rows at width 7, 4188 at width 4; 66993 is odd so the last texel is partly padding.
  const Shape sh = {3, 137, 163};
  const int64_t n = sg::numel(sh);
  REQUIRE((n + 3) / 4 > 16384);
  Tensor x = s.in("x", sh, uniform(n, 81, -1, 1));
  Tensor y = s.in("y", {137, 163}, uniform(137 * 163, 82, -1, 1));
  Tensor w = s.in("w", {163, 5}, uniform(815, 83, -1, 1));
  s.add("elementwise broadcast", exp(x * 0.5) * y - sin(x), {x, y}, kElem);
  s.add("sum axis 1 keepdims", sum(x, {1}, true), {x}, kReduce);
  s.add("max axis 2", max(x, {2}), {x}, kReduce);
  s.add("mean axis 2", mean(x * y, {2}), {x, y}, kReduce);
  s.add("matmul", matmul(x, w), {x, w}, kReduce);
  s.add("transpose + slice", slice(transpose(x, 0, 2), 0, 5, 160, 7), {x}, kElem);
}

inline void long_cases(Suite& s) {
  // llvmpipe stops every loop of a shader invocation after 65535 iterations in total (gallivm's
  // LP_MAX_TGSI_LOOP_ITERATIONS, shared by all loops), silently truncating long reductions; a fragment
  // computes 4 outputs, so 4 x the reduction length counts. The scheduler must split such reductions.
  const Shape big = {3, 137, 163};  // 66993 elements in three nested loops
  Tensor x = s.in("x", big, uniform(sg::numel(big), 101, -1, 1));
  Tensor y = s.in("y", {137, 163}, uniform(137 * 163, 102, -1, 1));
  Tensor rows = s.in("rows", {4, 70000}, uniform(280000, 103, 0, 1));
  Tensor flat = s.in("flat", {70000}, distinct(70000, 104, 1.0 / 1024));
  Tensor a = s.in("a", {4, 20000}, uniform(80000, 105, -1, 1));
  Tensor b = s.in("b", {20000, 3}, uniform(60000, 106, -1, 1));
  s.add("mean over 66993 elements (3 loops)", mean(x * y), {x, y}, kReduce);
  s.add("sum over axis 1 of 4x70000", sum(rows, {1}), {rows}, kReduce);
  s.add("max over 70000 elements", max(flat), {flat}, kReduce);
  s.add("min over axis 1 of 4x70000", min(rows, {1}, true), {rows}, kReduce);
  s.add("matmul K=20000", matmul(a, b), {a, b}, kReduce);
  s.add("softmax over 70000", softmax(rows * 10.0), {rows}, kReduce);
}

/// Programs wider than one kernel's bindings (16 samplers on GLES, 7 input storage buffers of 8 on WebGPU, 15 of 16
/// on Vulkan/GLES compute): the scheduler splits them into kernels that fit (issue 35), never refuses them. One
/// expression of 12 distinct inputs (one Map node of 12 arguments), chains over 33 and 100 distinct inputs
/// (broadcast), the concat of 20 slices of one tensor (its gradient sums 20 padded adjoints) and of 20 tensors.
inline void bindings_cases(Suite& s) {
  auto name = [](const char* p, int i) { return std::string(p) + std::to_string(i); };
  std::vector<Tensor> x;
  for (int i = 0; i < 12; ++i) x.push_back(s.in(name("w12_", i), {3, 5}, uniform(15, 300 + i, -1, 1)));
  s.add("12 distinct inputs in one expression",
        x[0] * x[1] + x[2] - x[3] * x[4] + sin(x[5]) + x[6] * x[7] - x[8] + exp(x[9]) * x[10] + x[11], x, kElem);
  std::vector<Tensor> y;
  Tensor acc;
  for (int i = 0; i < 33; ++i) {
    y.push_back(s.in(name("w33_", i), i % 3 ? Shape{4, 5} : Shape{5}, uniform(i % 3 ? 20 : 5, 400 + i, -1, 1)));
    acc = i == 0 ? y[0] : i % 2 ? Tensor(acc + y[i] * 0.5) : Tensor(acc - tanh(y[i]));
  }
  s.add("33 distinct inputs in a chain (broadcast)", acc, y, kElem);
  std::vector<Tensor> z;
  for (int i = 0; i < 100; ++i) {
    z.push_back(s.in(name("w100_", i), {6}, uniform(6, 500 + i, -1, 1)));
    acc = i == 0 ? z[0] : Tensor(acc + z[i] * (1.0 + i % 5));
  }
  s.add("100 distinct inputs summed", acc, z, kReduce);
  Tensor w = s.in("w20", {20, 6}, uniform(120, 600, -1, 1));
  std::vector<Tensor> slices, parts;
  for (int i = 0; i < 20; ++i) slices.push_back(slice(w, 0, 19 - i, 20 - i) * (1.0 + i));
  s.add("concat of 20 slices of one tensor", concat(slices, 0), {w}, kElem);
  for (int i = 0; i < 20; ++i) parts.push_back(s.in(name("c20_", i), {2, i % 4 + 1}, uniform(2 * (i % 4 + 1), 700 + i, -1, 1)));
  s.add("concat of 20 tensors", concat(parts, 1), parts, kElem);
}

/// The edge inputs of tests/edge_cases.h as a forward-only case list, for harnesses that judge a Suite's outputs
/// elsewhere (the WebGPU test): each case's inputs fed with its values, its output with edge_cases::agrees'
/// tolerance (rel 1e-5 + FLT_MIN, NaN with NaN, infinities exactly; argmax exactly).
/// Outputs edge_input_cases adds after edge_cases::all()'s (one each): the two max-pool cases with their gradients.
constexpr size_t kEdgePoolGradientOutputs = 4;

inline void edge_input_cases(Suite& s) {
  const std::vector<edge_cases::EdgeCase> cases = edge_cases::all();
  for (size_t i = 0; i < cases.size(); ++i) {
    const edge_cases::EdgeCase& c = cases[i];
    std::vector<Tensor> ins;
    for (size_t j = 0; j < c.shapes.size(); ++j)
      ins.push_back(s.in("e" + std::to_string(i) + "_" + std::to_string(j), c.shapes[j], c.inputs[j]));
    s.output(c.name, c.f(ins), c.exact ? kExact : Tol{1e-5, FLT_MIN});
  }
  // max-pool gradients over 2x2 windows tiling a 6x8 image with NaN (the first NaN is the window's maximum and gets
  // dy), -inf and ties inside windows, alone and behind a ReLU: the webgpu cpu plan's window blocks (one invocation
  // per window) against the CPU reference
  std::vector<float> nv = coarse(2 * 3 * 6 * 8, 76);
  for (size_t i = 0; i < nv.size(); i += 13) nv[i] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 5; i < nv.size(); i += 17) nv[i] = -std::numeric_limits<float>::infinity();
  Tensor xn = s.in("xn", {2, 3, 6, 8}, nv);
  s.add("max_pool2d 2x2 over 6x8 with NaN, -inf and ties", max_pool2d(xn), {xn}, Tol{1e-5, FLT_MIN});
  s.add("relu -> max_pool2d 2x2 over 6x8 with NaN, -inf and ties", max_pool2d(relu(xn)), {xn}, Tol{1e-5, FLT_MIN});
}

/// The edge inputs of tests/edge_cases.h (NaN, infinities, x/0, pow's special cases, precision at large |x|, NaN in
/// reductions, pools and argmax) on each backend of `targets` against the CPU reference, value by value
/// (edge_cases::agrees: rel 1e-5 + FLT_MIN, NaN with NaN, infinities exactly). One CHECK per case, naming every
/// disagreeing input with both values.
inline void check_edge_cases(const std::vector<BackendOptions>& targets) {
  const std::vector<edge_cases::EdgeCase> cases = edge_cases::all();
  const edge_cases::EdgeProgram ep = edge_cases::build(cases);
  const auto want = make_cpu_backend()->compile(ep.program)->run(ep.feeds());
  REQUIRE(want.size() == cases.size());
  for (const BackendOptions& bo : targets) {
    auto gpu = make_backend(bo).backend;
    REQUIRE(gpu->name() == bo.kind);
    const auto got = gpu->compile(ep.program)->run(ep.feeds());
    if (bo.kind == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*gpu));
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const edge_cases::EdgeCase& c = cases[i];
      REQUIRE(got[i].size() == want[i].size());
      std::ostringstream bad;
      for (size_t k = 0; k < want[i].size(); ++k)
        if (!edge_cases::agrees(got[i][k], want[i][k], c.exact)) {
          bad << "\n  element " << k;
          if (c.inputs[0].size() == want[i].size()) {
            bad << " (input " << c.inputs[0][k];
            if (c.inputs.size() > 1) bad << ", " << c.inputs[1][k];
            bad << ")";
          }
          bad << ": " << bo.kind << " " << got[i][k] << ", cpu " << want[i][k];
        }
      INFO("edge case '" << c.name << "', backend " << bo.kind << ", gpu_tiles "
                         << (bo.gpu_tiles ? (*bo.gpu_tiles ? "yes" : "no") : "auto") << bad.str());
      CHECK(bad.str().empty());
    }
  }
}

}  // namespace sg::op_cases

#define SG_OP_CASE_TESTS(NAME, TAG, TARGETS, LONG_TARGETS) \
  TEST_CASE(NAME " unary elementwise ops and their gradients equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::unary_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " binary elementwise ops, comparisons and where (with broadcasting) equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::binary_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " reductions (sum/mean/max/min/argmax, axes, keepdims) equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::reductions_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " matmul (2-D, batched, broadcast batch dims, epilogues) equals the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::matmul_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " movement ops (reshape, flatten, transpose, permute, broadcast_to, slice, pad, concat, one_hot) equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::movement_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " gather and take (torch.gather, index_select, embedding lookup) and their scatter-add gradients equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::gather_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " index masks and flip (iota, arange, tril, triu, flip) and their gradients equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::masks_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " layers (layer_norm, rms_norm, attention) forward and backward equal torch's goldens and the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::layers_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " conv2d (stride, padding, dilation, bias) and pools equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::conv_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " softmax, log_softmax, cross_entropy, mse_loss and kl_div equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::losses_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " erf, erfc, gelu and gelu tanh (alone, in a map, as a matmul epilogue), logsumexp, var and std and their gradients equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::math_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " random_uniform, bernoulli and dropout (alone, fused into maps, reductions and matmuls) and dropout's gradients equal the CPU backend bit for bit", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::random_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " ops on a tensor of more than 16384 texels (rows wrap at every width) equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::large_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " programs wider than a kernel's bindings (12, 33 and 100 inputs, concat of 20) equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::bindings_cases(s); \
    s.check(TARGETS); \
  } \
  TEST_CASE(NAME " edge inputs (NaN, inf, x/0, pow's special cases, accuracy at large |x|) equal the CPU backend", TAG) { \
    ::sg::op_cases::check_edge_cases(TARGETS); \
  } \
  TEST_CASE(NAME " reductions longer than llvmpipe's 65535 loop iterations per fragment equal the CPU backend", TAG) { \
    ::sg::op_cases::Suite s; \
    ::sg::op_cases::long_cases(s); \
    s.check(LONG_TARGETS); \
  }
