// Edge inputs of the float ops (issue 19): NaN, infinities, signed zeros, division by zero, pow's special cases,
// arguments where the usual GPU formulas lose precision (tanh near 0, softplus and sigmoid' at large |x|, sin at
// large |x|, exp near its overflow, log near 1), and NaN inside reductions, pools and argmax.
//
// One list for three users: tests/op_cases.h runs it on every GPU backend of the op-case tests against the CPU
// reference backend (f64, torch's semantics: docs/RELIABILITY.md), tests/test_webgpu_ops.cpp on WebGPU (Dawn; the
// list as op_cases::edge_input_cases), and bench/bench_numerics prints it as a table per backend (the record of a
// machine's drivers). No Catch2 here.
//
// Tolerance: |got - want| <= 1e-5 |want| + FLT_MIN (the project's elementwise rtol; FLT_MIN because GPUs may flush
// subnormal results to zero, which GLSL allows), NaN only against NaN, an infinity only against the same one;
// integer results (argmax) exactly.
#pragma once

#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/sg.h"

namespace sg::edge_cases {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

struct EdgeCase {
  std::string name;
  std::vector<Shape> shapes;                // of the inputs
  std::vector<std::vector<float>> inputs;   // one per shape
  std::function<Tensor(const std::vector<Tensor>&)> f;
  bool exact = false;                       // integer-valued result (argmax)
};

/// Elementwise case of one argument over `xs` (a 1-D input).
inline EdgeCase unary(std::string name, std::vector<float> xs, std::function<Tensor(const Tensor&)> f) {
  Shape s{static_cast<int64_t>(xs.size())};
  return {std::move(name), {s}, {std::move(xs)}, [f](const std::vector<Tensor>& t) { return f(t[0]); }};
}
/// Elementwise case of two arguments over the pairs (as[i], bs[i]).
inline EdgeCase binary(std::string name, std::vector<float> as, std::vector<float> bs,
                       std::function<Tensor(const Tensor&, const Tensor&)> f) {
  Shape s{static_cast<int64_t>(as.size())};
  return {std::move(name), {s, s}, {std::move(as), std::move(bs)}, [f](const std::vector<Tensor>& t) { return f(t[0], t[1]); }};
}

/// The gradient of sum(f(x)) w.r.t. x.
inline Tensor derivative(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  return grad(sum(f(x)), {x})[0];
}

/// A row of 300 values (long enough for the compute backends' tree reductions) with a NaN at `nan_at` (or none).
inline std::vector<float> long_row(int nan_at) {
  std::vector<float> v(300);
  for (int i = 0; i < 300; ++i) v[i] = static_cast<float>((i * 37) % 101) * 0.25f - 10.f;
  if (nan_at >= 0) v[nan_at] = kNaN;
  return v;
}

/// pow(x, y) over bases near 1 and far from it and exponents |y| up to 1e4, the pairs whose result is a normal
/// float with some margin (|y ln x| <= 85): GLSL's pow, exp2(y log2 x), was 7.5e-4 off at (1.0001, 1e4) on the H200.
inline EdgeCase pow_sweep() {
  const std::vector<float> xs = {1e-3f, 0.1f, 0.5f, 0.9f, 0.99f, 0.999f, 0.9999f, 0.99999f, 1.00001f, 1.0001f, 1.001f,
                                 1.01f, 1.1f, 1.5f, 2.f, 3.f, 7.5f, 10.f, 100.f, 12345.f};
  const std::vector<float> ys = {1e4f, -1e4f, 5000.f, -5000.f, 1234.5f, -1234.5f, 300.f, -300.f, 100.f, -100.f, 37.f,
                                 -37.f, 10.5f, -10.5f, 3.f, -3.f, 0.5f, -0.5f, 0.1f, 1e-3f};
  std::vector<float> as, bs;
  for (float x : xs)
    for (float y : ys)
      if (std::fabs(static_cast<double>(y) * std::log(static_cast<double>(x))) <= 85.0) as.push_back(x), bs.push_back(y);
  return binary("pow sweep (|y| <= 1e4, normal results)", std::move(as), std::move(bs),
                [](const Tensor& a, const Tensor& b) { return pow(a, b); });
}

inline std::vector<EdgeCase> all() {
  const float nan = kNaN, inf = kInf;
  std::vector<EdgeCase> c;
  // --- select-like ops: NaN propagates (torch) -------------------------------------------------------------------
  c.push_back(unary("relu", {nan, -nan, inf, -inf, 0.f, -1.f, 2.f}, [](const Tensor& x) { return relu(x); }));
  c.push_back(unary("sign", {nan, inf, -inf, 0.f, -3.f, 3.f}, [](const Tensor& x) { return sign(x); }));
  c.push_back(binary("maximum", {nan, 1.f, nan, inf, -inf, 2.f}, {1.f, nan, nan, 1.f, 1.f, -3.f},
                     [](const Tensor& a, const Tensor& b) { return maximum(a, b); }));
  c.push_back(binary("minimum", {nan, 1.f, nan, inf, -inf, 2.f}, {1.f, nan, nan, 1.f, 1.f, -3.f},
                     [](const Tensor& a, const Tensor& b) { return minimum(a, b); }));
  c.push_back(unary("maximum(x, 0.5)", {nan, 0.f, 1.f, -inf}, [](const Tensor& x) { return maximum(x, 0.5); }));
  c.push_back(unary("leaky_relu", {nan, -inf, inf, -2.f, 2.f}, [](const Tensor& x) { return leaky_relu(x, 0.1); }));
  // --- division and pow: IEEE / C99 values, no folding of literal zeros ----------------------------------------
  c.push_back(unary("x / 0.0", {1.f, -1.f, 0.f, nan, inf, -inf}, [](const Tensor& x) { return x / 0.0; }));
  c.push_back(unary("x / -0.0", {1.f, -1.f, 0.f}, [](const Tensor& x) { return x / -0.0; }));
  c.push_back(unary("0.0 / x", {0.f, -0.f, 1.f, nan, inf}, [](const Tensor& x) { return 0.0 / x; }));
  c.push_back(unary("x * 0.0", {nan, inf, -inf, 2.f}, [](const Tensor& x) { return x * 0.0; }));
  c.push_back(binary("x / y", {1.f, -1.f, 0.f, 1.f, inf, inf, 6.f}, {0.f, 0.f, 0.f, -0.f, inf, 2.f, 3.f},
                     [](const Tensor& a, const Tensor& b) { return a / b; }));
  c.push_back(unary("reciprocal", {0.f, -0.f, inf, -inf, nan, 4.f}, [](const Tensor& x) { return reciprocal(x); }));
  c.push_back(binary("pow",
                     {0.f, -0.f, 0.f, 0.f, nan, 1.f, -8.f, -2.f, -2.f, 0.f, -0.f, inf, -inf, -inf, 0.5f, 2.f, -1.f, 2.f,
                      0.5f, nan, 2.f, 10.f, 1.0001f, 3.f, -inf, -0.5f},
                     {-1.f, -1.f, -2.f, 0.f, 0.f, nan, 1.f / 3.f, 3.f, 2.f, 0.5f, 3.f, -1.f, 3.f, 2.f, inf, inf, inf, -inf,
                      -inf, 1.f, nan, 30.f, 1e4f, -2.f, -3.f, -inf},
                     [](const Tensor& a, const Tensor& b) { return pow(a, b); }));
  c.push_back(pow_sweep());
  c.push_back(unary("pow(x, -1.0)", {0.f, -0.f, 2.f, inf}, [](const Tensor& x) { return pow(x, -1.0); }));
  c.push_back(unary("pow(x, 0.5)", {0.f, -1.f, 4.f, inf}, [](const Tensor& x) { return pow(x, 0.5); }));
  // --- exp, log, sqrt: special values and accuracy ----------------------------------------------------------------
  c.push_back(unary("exp", {nan, inf, -inf, 0.f, 1e-4f, -1e-4f, 1.f, -1.f, 20.f, -20.f, 80.f, -80.f, 88.f, -87.f, 89.f,
                            -104.f, 1e4f, -1e4f},
                    [](const Tensor& x) { return exp(x); }));
  c.push_back(unary("log", {nan, inf, -inf, 0.f, -0.f, -1.f, 1e-30f, 1e-4f, 0.5f, 0.9f, 0.9999f, 1.f, 1.0001f, 1.2f,
                            2.f, 100.f, 1e4f, 3e38f},
                    [](const Tensor& x) { return log(x); }));
  c.push_back(unary("log1p", {nan, inf, -1.f, -2.f, -0.5f, -1e-4f, 1e-7f, 1e-4f, 0.2f, 1.f, 100.f, 1e4f},
                    [](const Tensor& x) { return log1p(x); }));
  c.push_back(unary("sqrt", {nan, inf, -1.f, 0.f, -0.f, 1e-4f, 2.f, 1e4f}, [](const Tensor& x) { return sqrt(x); }));
  c.push_back(unary("rsqrt", {nan, inf, -1.f, 0.f, -0.f, 1e-4f, 2.f, 1e4f}, [](const Tensor& x) { return rsqrt(x); }));
  // --- transcendental accuracy: tolerance rel 1e-5 for |x| up to 1e4 ---------------------------------------------
  const std::vector<float> trig = {nan, inf, -inf, 0.f, 1e-4f, -1e-4f, 0.5f, 1.f, 3.f, 3.14159274f, 1.57079637f, 20.f,
                                   100.f, -100.f, 1000.f, 1e4f, -1e4f, 12345.678f};
  c.push_back(unary("sin", trig, [](const Tensor& x) { return sin(x); }));
  c.push_back(unary("cos", trig, [](const Tensor& x) { return cos(x); }));
  const std::vector<float> wide = {nan, inf, -inf, 0.f, 1e-4f, -1e-4f, 1e-2f, 0.3f, 0.54f, 0.56f, 1.f, -1.f, 5.f, -10.f,
                                   20.f, -20.f, 50.f, -50.f, 87.f, -87.f, 100.f, -100.f, 1e4f, -1e4f};
  c.push_back(unary("tanh", wide, [](const Tensor& x) { return tanh(x); }));
  c.push_back(unary("sigmoid", wide, [](const Tensor& x) { return sigmoid(x); }));
  c.push_back(unary("softplus", wide, [](const Tensor& x) { return softplus(x); }));
  c.push_back(unary("sigmoid'", wide, [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return sigmoid(v); }); }));
  c.push_back(unary("softplus'", wide, [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return softplus(v); }); }));
  // --- erf, erfc, gelu (issue 36): C99/torch values at +-inf, -0, NaN; every range of the erf helper (0.875, 2,
  // 3.925, 10.06); erfc and gelu relative to their value out to their tails. Exact gelu's argument x/sqrt(2) rounds
  // in f32, and exp(-x^2/2) amplifies that to ~x^2 6e-8 relative (6e-6 at -10): the list stops at -10; the tanh
  // form's exponent likewise (~|u| 1.2e-7, u = 1.6 (x + 0.045 x^3)): it stops at -6.
  c.push_back(unary("erf", {nan, inf, -inf, 0.f, -0.f, 1e-30f, 1e-4f, -1e-4f, 0.5f, 0.874f, 0.875f, -0.88f, 1.4375f,
                            1.99f, 2.f, -2.5f, 3.9f, 3.93f, -5.f, 10.f, 1e4f},
                    [](const Tensor& x) { return erf(x); }));
  c.push_back(unary("erfc", {nan, inf, -inf, 0.f, -0.f, -1e-4f, 0.3f, 0.874f, 0.876f, -0.9f, 1.4375f, 1.999f, 2.f,
                             -2.f, 3.f, 3.925f, 5.f, -5.f, 7.f, 9.f, 9.3f, 10.f, 10.05f, 10.1f, 1e4f, -1e4f},
                    [](const Tensor& x) { return erfc(x); }));
  const std::vector<float> gelu_x = {nan, inf, -inf, 0.f, -0.f, 1e-4f, -1e-4f, 0.5f, -0.5f, 1.f, -1.f, 3.f, -3.f,
                                     -5.f, -6.f, 10.f, 1e4f, -1e4f};
  std::vector<float> gelu_far = gelu_x;
  gelu_far.insert(gelu_far.end(), {-7.f, -8.5f, -10.f});
  c.push_back(unary("gelu", gelu_far, [](const Tensor& x) { return gelu(x); }));
  c.push_back(unary("gelu tanh", gelu_x, [](const Tensor& x) { return gelu(x, "tanh"); }));
  const std::vector<float> dx = {0.f, -0.f, 1e-4f, 0.5f, -0.9f, 1.5f, -2.2f, 3.f, 5.f, -7.f, 9.f, inf, -inf, nan};
  c.push_back(unary("erf'", dx, [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return erf(v); }); }));
  c.push_back(unary("erfc'", dx, [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return erfc(v); }); }));
  c.push_back(unary("gelu'", gelu_far, [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return gelu(v); }); }));
  c.push_back(unary("gelu tanh'", gelu_x,
                    [](const Tensor& x) { return derivative(x, [](const Tensor& v) { return gelu(v, "tanh"); }); }));
  // logsumexp (torch: a row of -inf gives -inf, a +inf gives +inf, NaN propagates; the shift keeps exp(90) finite),
  // var/std (one element: unbiased NaN; a constant row: 0; an infinity: NaN)
  const std::vector<float> lse = {-inf, -inf, -inf, 1.f, inf, 2.f, 1.f, nan, 3.f, -inf, 0.f, -inf, 90.f, 88.f, -90.f,
                                  -1e4f, -1e4f, -1e4f, 3e38f, 1e38f, -3e38f, -inf, inf, 0.f};
  c.push_back({"logsumexp rows with -inf, inf, NaN, large", {Shape{8, 3}}, {lse},
               [](const std::vector<Tensor>& t) { return logsumexp(t[0], {1}); }});
  const std::vector<float> vs = {2.5f, 2.5f, 2.5f, 1.f, inf, 2.f, 1.f, nan, 3.f, 1e4f, 1e4f + 1.f, 1e4f + 2.f};
  c.push_back({"var rows (constant, inf, NaN, offset 1e4)", {Shape{4, 3}}, {vs},
               [](const std::vector<Tensor>& t) { return var(t[0], {1}); }});
  c.push_back({"std rows (constant, inf, NaN, offset 1e4)", {Shape{4, 3}}, {vs},
               [](const std::vector<Tensor>& t) { return sg::std(t[0], {1}); }});
  c.push_back({"var of one element (unbiased: NaN)", {Shape{2, 1}}, {{3.f, -1.f}},
               [](const std::vector<Tensor>& t) { return var(t[0], {1}); }});
  // clip_grad_norm (torch.nn.utils.clip_grad_norm_ with error_if_nonfinite=False, max_norm 1): the clipped gradients
  // and the total norm as one vector. An infinity makes the norm inf and clip_coef 0: finite elements become 0 (-0
  // for negative ones), infinite ones NaN; a NaN makes everything NaN; zeros stay zeros (no 0/0); the max norm too
  auto clipped = [](double norm_type) {
    return [norm_type](const std::vector<Tensor>& t) {
      ClippedGrads r = clip_grad_norm({t[0], t[1]}, 1.0, norm_type);
      return concat({r.grads[0], r.grads[1], reshape(r.total_norm, {1})});
    };
  };
  const std::vector<Shape> two = {Shape{4}, Shape{3}};
  c.push_back({"clip_grad_norm with inf and -0 (2-norm)", two, {{1.f, -2.f, inf, 0.f}, {3.f, -0.5f, -0.f}}, clipped(2.0)});
  c.push_back({"clip_grad_norm with NaN (2-norm)", two, {{1.f, nan, 2.f, -1.f}, {3.f, 4.f, 0.f}}, clipped(2.0)});
  c.push_back({"clip_grad_norm of zeros (2-norm)", two, {{0.f, 0.f, -0.f, 0.f}, {0.f, -0.f, 0.f}}, clipped(2.0)});
  c.push_back({"clip_grad_norm with -inf (max norm)", two, {{1.f, -5.f, 2.f, 0.f}, {-inf, 0.5f, -0.f}},
               clipped(std::numeric_limits<double>::infinity())});
  // --- reductions, pools, argmax with NaN (the reproduction, and rows long enough for tree reductions) ----
  const Shape m{3, 4};
  const std::vector<float> mv = {1.f, nan, 3.f, 2.f, 5.f, 6.f, nan, 8.f, 1.f, 4.f, 2.f, -inf};
  auto matrix = [&](std::string name, std::function<Tensor(const Tensor&)> f, bool exact = false) {
    return EdgeCase{std::move(name), {m}, {mv}, [f](const std::vector<Tensor>& t) { return f(t[0]); }, exact};
  };
  c.push_back(matrix("max axis 1", [](const Tensor& x) { return max(x, {1}); }));
  c.push_back(matrix("min axis 1", [](const Tensor& x) { return min(x, {1}); }));
  c.push_back(matrix("max axis 0", [](const Tensor& x) { return max(x, {0}); }));
  c.push_back(matrix("max all", [](const Tensor& x) { return max(x); }));
  c.push_back(matrix("sum axis 1", [](const Tensor& x) { return sum(x, {1}); }));
  c.push_back(matrix("argmax axis 1", [](const Tensor& x) { return argmax(x, 1); }, true));
  c.push_back(matrix("argmax axis 0", [](const Tensor& x) { return argmax(x, 0); }, true));
  c.push_back(matrix("argmin axis 1 (argmax of -x)", [](const Tensor& x) { return argmax(-x, 1); }, true));
  // ties (torch: the first), signed zeros (equal), infinities, a NaN with the sign bit set, huge values
  const Shape t{7, 3};
  const std::vector<float> tv = {-0.f, 0.f, -1.f, 0.f, -0.f, 0.f, -inf, -inf, -inf, -nan, 1.f, nan, inf, 2.f, nan,
                                 -3.f, -2.f, -2.f, 1e38f, 3e38f, inf};
  auto ties = [&](std::string name, std::function<Tensor(const Tensor&)> f) {
    return EdgeCase{std::move(name), {t}, {tv}, [f](const std::vector<Tensor>& in) { return f(in[0]); }, true};
  };
  c.push_back(ties("argmax ties, zeros, infinities, -NaN", [](const Tensor& x) { return argmax(x, 1); }));
  c.push_back(ties("argmin ties, zeros, infinities, -NaN (argmax of -x)", [](const Tensor& x) { return argmax(-x, 1); }));
  const Shape rows{3, 300};
  std::vector<float> rv = long_row(-1), r1 = long_row(7), r2 = long_row(299);
  rv.insert(rv.end(), r1.begin(), r1.end());
  rv.insert(rv.end(), r2.begin(), r2.end());
  auto long_rows = [&](std::string name, std::function<Tensor(const Tensor&)> f, bool exact = false) {
    return EdgeCase{std::move(name), {rows}, {rv}, [f](const std::vector<Tensor>& t) { return f(t[0]); }, exact};
  };
  c.push_back(long_rows("max of 300 (NaN at 7, 299)", [](const Tensor& x) { return max(x, {1}); }));
  c.push_back(long_rows("min of 300 (NaN at 7, 299)", [](const Tensor& x) { return min(x, {1}); }));
  c.push_back(long_rows("argmax of 300 (NaN at 7, 299)", [](const Tensor& x) { return argmax(x, 1); }, true));
  c.push_back(long_rows("softmax of 300 (NaN at 7, 299)", [](const Tensor& x) { return softmax(x); }));
  const Shape img{1, 1, 4, 4};
  const std::vector<float> iv = {1.f, 2.f, 3.f, 4.f, nan, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f, 12.f, 13.f, 14.f, -inf, nan};
  c.push_back({"max_pool2d 2x2", {img}, {iv}, [](const std::vector<Tensor>& t) { return max_pool2d(t[0]); }});
  c.push_back({"avg_pool2d 2x2", {img}, {iv}, [](const std::vector<Tensor>& t) { return avg_pool2d(t[0]); }});
  // take (gather): NaN, infinities and -0 are copied as they are; the scatter-add gradient of a NaN or infinite
  // adjoint reaches only the rows it was gathered from (a select, not a product with a 0/1 mask: rows 1 and 2 get 0)
  const Shape tab{4, 3};
  const std::vector<float> tabv = {nan, 1.f, -0.f, inf, -inf, 2.f, 3.f, -0.f, nan, 4.f, 5.f, 6.f};
  auto picks = [] { return argmax(constant({3, 4}, {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1}), 1); };  // [3, 0, 3]
  c.push_back({"take of rows holding NaN, inf, -0", {tab}, {tabv},
               [picks](const std::vector<Tensor>& t) { return take(t[0], picks()); }});
  // (the adjoint is the input, so the case reads it: a table's gradient does not depend on the table's values)
  c.push_back({"take's gradient of NaN and inf adjoints", {Shape{3, 3}}, {{nan, 1.f, inf, -inf, 2.f, 0.f, 1.f, 1.f, 1.f}},
               [picks](const std::vector<Tensor>& t) {
                 Tensor table = constant({4, 3}, std::vector<float>(12, 0.5f));
                 return grad(sum(Tensor(take(table, picks()) * t[0])), {table})[0];
               }});
  // dropout (torch: x * mask / (1 - p) as x * noise): a dropped NaN or infinity is NaN, a dropped -x is -0, a kept one
  // is scaled; p = 1 is x * 0; its gradient is the adjoint times the same noise (an infinite adjoint dropped: NaN).
  // 8 of each value, so that both a kept and a dropped one occur (step 1, seed 41, the same stream everywhere)
  std::vector<float> specials;
  for (int r = 0; r < 8; ++r)
    for (float v : {nan, inf, -inf, -0.f, 0.f, -2.5f, 3.f}) specials.push_back(v);
  auto step = [] { return constant({}, {1.f}); };
  c.push_back(unary("dropout p 0.5 of NaN, +-inf, +-0 (dropped: NaN, NaN, NaN, -0, 0)", specials,
                    [step](const Tensor& x) { return dropout(x, 0.5, 41, step(), true); }));
  c.push_back(unary("dropout p 1 of NaN, +-inf, +-0 (x * 0)", specials,
                    [step](const Tensor& x) { return dropout(x, 1.0, 41, step(), true); }));
  c.push_back({"dropout's gradient of NaN and inf adjoints (dropped: NaN)", {Shape{56}}, {specials},
               [step](const std::vector<Tensor>& t) {
                 Tensor x = constant({56}, std::vector<float>(56, 0.5f));
                 return grad(sum(Tensor(dropout(x, 0.5, 41, step(), true) * t[0])), {x})[0];
               }});
  // tril/triu (a select on iota coordinates, torch's masked copy): NaN, inf and -0 inside the triangle are copied,
  // outside it they become +0; the gradient of NaN/inf adjoints is the same triangle of them (zeros elsewhere, not
  // NaN * 0); flip copies NaN, inf and -0 to their mirrored places
  const Shape sq{3, 3};
  const std::vector<float> sqv = {nan, inf, -0.f, -inf, -0.f, nan, 1.f, nan, inf};
  c.push_back({"tril of NaN, inf, -0", {sq}, {sqv}, [](const std::vector<Tensor>& t) { return tril(t[0]); }});
  c.push_back({"triu diagonal 1 of NaN, inf, -0", {sq}, {sqv}, [](const std::vector<Tensor>& t) { return triu(t[0], 1); }});
  c.push_back({"triu's gradient of NaN and inf adjoints", {sq}, {sqv}, [](const std::vector<Tensor>& t) {
                 Tensor m = constant({3, 3}, std::vector<float>(9, 0.5f));
                 return grad(sum(Tensor(triu(m, 1) * t[0])), {m})[0];
               }});
  c.push_back({"flip of NaN, inf, -0", {sq}, {sqv}, [](const std::vector<Tensor>& t) { return flip(t[0], {0, 1}); }});
  // layer_norm and rms_norm rows (no affine): a constant row has variance 0 (output 0, not NaN: eps > 0); a row
  // holding inf or NaN is NaN throughout (its mean is inf or NaN, as torch); a zero row of rms_norm stays (signed)
  // zero, a row with inf gives 0 for its finite entries (rsqrt(inf) = 0) and NaN for the inf (inf * 0)
  c.push_back({"layer_norm of a constant row, rows with inf and NaN", {Shape{3, 4}},
               {{1.5f, 1.5f, 1.5f, 1.5f, inf, 1.f, 2.f, 3.f, nan, 0.f, -0.f, 2.f}},
               [](const std::vector<Tensor>& t) { return layer_norm(t[0], {4}); }});
  c.push_back({"rms_norm of a zero row and a row with inf", {Shape{2, 4}}, {{0.f, -0.f, 0.f, -0.f, inf, 1.f, -2.f, 3.f}},
               [](const std::vector<Tensor>& t) { return rms_norm(t[0], {4}); }});
  // bilinear interpolation (torch's four taps always, weights included when 0): a NaN or infinity reaches exactly
  // the outputs whose taps include it (inf * 0 = NaN where its weight is 0, e.g. the identity's zero-weight taps);
  // the gradient (the transposed interpolation, a masked gather-sum) carries NaN/inf adjoints only to the inputs they
  // are weighted onto (times a zero weight: NaN), never to the others
  c.push_back({"upsample_bilinear2d of NaN, inf, -inf (2x3 -> 3x5 and the same size)", {Shape{1, 1, 2, 3}},
               {{nan, 1.f, 2.f, 3.f, inf, -inf}}, [](const std::vector<Tensor>& t) {
                 return concat({reshape(upsample_bilinear2d(t[0], {.size = {{3, 5}}}), Shape{15}),
                                reshape(upsample_bilinear2d(t[0], {.size = {{2, 3}}}), Shape{6}),
                                reshape(upsample_bilinear2d(t[0], {.size = {{3, 5}}, .align_corners = true}), Shape{15})},
                               0);
               }});
  c.push_back({"upsample_bilinear2d's gradient of NaN and inf adjoints", {Shape{1, 1, 4, 5}},
               {{nan, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, inf, 8.f, 9.f, 10.f, 11.f, 12.f, -inf, 14.f, 15.f, 16.f, 17.f, 18.f,
                 19.f}},
               [](const std::vector<Tensor>& t) {
                 Tensor x = constant({1, 1, 2, 3}, std::vector<float>(6, 0.5f));
                 return grad(sum(Tensor(upsample_bilinear2d(x, {.size = {{4, 5}}}) * t[0])), {x})[0];
               }});
  c.push_back({"mean of inf and -inf", {Shape{2}}, {{inf, -inf}}, [](const std::vector<Tensor>& t) { return mean(t[0]); }});
  c.push_back({"mean of an empty tensor", {Shape{0}}, {{}}, [](const std::vector<Tensor>& t) { return mean(t[0]); }});
  c.push_back({"sum of an empty tensor", {Shape{0}}, {{}}, [](const std::vector<Tensor>& t) { return sum(t[0]); }});
  c.push_back({"mean over an empty axis", {Shape{2, 0}}, {{}}, [](const std::vector<Tensor>& t) { return mean(t[0], {1}); }});
  return c;
}

/// |got - want| <= 1e-5 |want| + FLT_MIN; NaN meets NaN, an infinity the same infinity; `exact`: equality.
inline bool agrees(float got, float want, bool exact) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got) || exact) return got == want;
  return std::fabs(static_cast<double>(got) - want) <= 1e-5 * std::fabs(static_cast<double>(want)) + FLT_MIN;
}

/// All cases as one Program (output i is case i) with its feeds (inputs "e<i>_<j>").
struct EdgeProgram {
  Program program;
  std::vector<std::string> input_names;
  std::vector<const std::vector<float>*> input_data;
  std::vector<Feed> feeds() const {
    std::vector<Feed> f;
    for (size_t i = 0; i < input_names.size(); ++i) f.push_back({input_names[i], input_data[i]});
    return f;
  }
};

inline EdgeProgram build(const std::vector<EdgeCase>& cases) {
  EdgeProgram p;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<Tensor> ins;
    for (size_t j = 0; j < cases[i].shapes.size(); ++j) {
      p.input_names.push_back("e" + std::to_string(i) + "_" + std::to_string(j));
      p.input_data.push_back(&cases[i].inputs[j]);
      ins.push_back(input(p.input_names.back(), cases[i].shapes[j]));
    }
    p.program.add_output(cases[i].name, cases[i].f(ins));
  }
  return p;
}

}  // namespace sg::edge_cases
