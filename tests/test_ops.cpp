// Every DSL op's forward value against PyTorch golden files (tests/golden/*.json, written by
// tests/golden/gen_golden.py) and against hand-computed cases; numerically extreme softmax/cross-entropy;
// the text of shape errors; ValueErrors for bad inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "golden_util.h"

using namespace sg;
using namespace sg::golden;

namespace {

const std::set<std::string> kElementwise = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "leaky_relu",
    "softplus", "sign", "floor", "round", "reciprocal", "erf", "erfc", "gelu", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "lt", "le", "gt", "ge", "eq", "ne", "where", "relu_xw_plus_b",
    // movement ops copy values: they must be exact, the elementwise tolerance is plenty
    "reshape", "flatten", "transpose", "permute", "broadcast_to", "slice", "pad", "concat", "one_hot", "gather", "take",
    "embedding", "iota", "arange", "gather_iota", "tril", "triu", "flip"};

/// Tolerances: rel 1e-5 for elementwise/movement ops, 1e-4 for reductions, matmul, conv, pools, losses.
std::pair<double, double> tolerance(const std::string& op) {
  if (kElementwise.count(op)) return {1e-5, 1e-7};
  // the row mean is stored as f32 (the CPU reference's f32_storage, as a GPU stores it): x - mean carries up to
  // |mean| 2^-24 of rounding, 3e-6 in the case with a mean offset of 50
  if (op == "layer_norm" || op == "rms_norm") return {1e-4, 1e-5};
  // attention: a chain of f32-stored values (projections, scores, softmax, heads, output projection)
  if (op == "multi_head_attention" || op == "transformer_encoder_layer") return {1e-4, 1e-5};
  return {1e-4, 1e-6};
}

std::vector<double> eval1(const Tensor& t, const cpu::LeafValues& feeds = {}) {
  return cpu::evaluate({t.node()}, feeds)[0];
}

/// Evaluates every case of a golden file and compares with PyTorch's output; returns the ops it covered.
std::set<std::string> check_forward_file(const std::string& file) {
  json j = load(file);
  std::set<std::string> ops;
  int n = 0;
  for (auto& c : j.at("cases")) {
    Case k = build_case(c);
    INFO(file << " case " << k.name << " (op " << k.op << ")");
    CHECK(shape_str(k.out.shape()) == shape_str(k.output.shape));
    if (k.int_output) CHECK(k.out.dtype() == DType::i32);
    auto [rtol, atol] = tolerance(k.op);
    Comparison r = compare(eval1(k.out, k.feeds), k.output, rtol, atol);
    INFO(r.report());
    CHECK(r.ok);
    ops.insert(k.op);
    ++n;
  }
  CHECK(n > 0);
  return ops;
}

void check_values(const Tensor& t, const std::vector<double>& expected, double rtol = 1e-6, double atol = 1e-7,
                  const cpu::LeafValues& feeds = {}) {
  Comparison r = compare(eval1(t, feeds), expected, rtol, atol);
  INFO(t.node()->describe() << ": " << r.report());
  CHECK(r.ok);
}

std::vector<float> counting(int n, float start = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Golden files
// ------------------------------------------------------------------------------------------------

TEST_CASE("golden: elementwise unary and binary ops match PyTorch", "[ops][golden]") {
  auto ops = check_forward_file("elementwise.json");
  for (const char* op : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
                         "leaky_relu", "softplus", "sign", "floor", "round", "add", "sub", "mul", "div", "pow",
                         "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne", "where"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: erf, erfc, gelu (exact and tanh), logsumexp, var and std (unbiased or not) match PyTorch",
          "[ops][golden]") {
  auto ops = check_forward_file("math.json");
  for (const char* op : {"erf", "erfc", "gelu", "logsumexp", "var", "std"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("erf, erfc and gelu at IEEE special values follow C99 and torch", "[ops]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = param("x", {5}, {static_cast<float>(-inf), static_cast<float>(inf), static_cast<float>(nan), -0.f, 0.f});
  auto vals = [](const Tensor& t) { return cpu::evaluate({t.node()}, {})[0]; };
  auto e = vals(erf(x)), c = vals(erfc(x)), g = vals(gelu(x)), gt = vals(gelu(x, "tanh"));
  CHECK(e[0] == -1.0);
  CHECK(e[1] == 1.0);
  CHECK(std::isnan(e[2]));
  CHECK((e[3] == 0.0 && std::signbit(e[3])));  // erf(-0) = -0
  CHECK((e[4] == 0.0 && !std::signbit(e[4])));
  CHECK(c[0] == 2.0);
  CHECK(c[1] == 0.0);
  CHECK(std::isnan(c[2]));
  CHECK(c[3] == 1.0);
  for (const auto& v : {g, gt}) {  // torch: gelu(-inf) = NaN (-inf * 0), gelu(inf) = inf, NaN propagates
    CHECK(std::isnan(v[0]));
    CHECK(v[1] == inf);
    CHECK(std::isnan(v[2]));
    CHECK(v[3] == 0.0);
  }
  // the negative tail without cancellation: x/2 erfc(-x/sqrt 2), where torch's 1 + erf rounds to 0 even in f64
  Tensor far = param("far", {2}, {-10.f, -20.f});
  auto gf = vals(gelu(far));
  CHECK(gf[0] == Approx(-10.0 / 2 * std::erfc(10.0 / std::sqrt(2.0))).epsilon(1e-6));  // stored as f32
  CHECK(gf[0] < -7e-23);
  CHECK(gf[1] == 0.0);  // about -5e-88: underflows f32
}

TEST_CASE("logsumexp of rows with -inf, +inf and NaN, and var/std of one element, follow torch", "[ops]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // torch.logsumexp(x, 1) of these rows (torch 1.13): -inf, inf, nan, 0, 1e4 + log 3
  Tensor x = param("x", {5, 3}, {-inf, -inf, -inf, 1.f, inf, 2.f, 1.f, nan, 3.f, -inf, 0.f, -inf, 1e4f, 1e4f, 1e4f});
  auto l = cpu::evaluate({logsumexp(x, {1}).node()}, {})[0];
  REQUIRE(l.size() == 5);
  CHECK(l[0] == -std::numeric_limits<double>::infinity());
  CHECK(l[1] == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(l[2]));
  CHECK(l[3] == 0.0);
  CHECK(l[4] == Approx(1e4 + std::log(3.0)).epsilon(1e-7));
  CHECK(shape_str(logsumexp(x, {1}, true).shape()) == shape_str(Shape{5, 1}));
  CHECK(shape_str(logsumexp(x).shape()) == shape_str(Shape{}));
  // one element: the unbiased variance is 0/0 = NaN, the biased one 0 (torch.var(x, 1) / unbiased=False)
  Tensor one = param("one", {2, 1}, {3.f, -1.f});
  auto v = cpu::evaluate({var(one, {1}).node(), var(one, {1}, false).node(), sg::std(one, {1}, false).node()}, {});
  CHECK((std::isnan(v[0][0]) && std::isnan(v[0][1])));
  CHECK(v[1] == std::vector<double>{0.0, 0.0});
  CHECK(v[2] == std::vector<double>{0.0, 0.0});
  CHECK_THROWS_AS(logsumexp(x, {2}), ShapeError);
  CHECK_THROWS_AS(var(x, {-3}), ShapeError);
}

TEST_CASE("gelu refuses an approximate other than 'none' and 'tanh', naming it and the line", "[ops]") {
  Tensor x = param("x", {3}, {1, 2, 3});
  try {
    (void)gelu(x, "erf");
    FAIL("no ValueError");
  } catch (const ValueError& e) {
    std::string m = e.what();
    INFO(m);
    CHECK(m.find("gelu") != std::string::npos);
    CHECK(m.find("'erf'") != std::string::npos);
    CHECK(m.find("test_ops.cpp") != std::string::npos);
  }
}

TEST_CASE("golden: reductions, argmax and matmul match PyTorch", "[ops][golden]") {
  auto ops = check_forward_file("reduce.json");
  for (const char* op : {"sum", "mean", "max", "min", "argmax", "matmul"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: movement ops and one_hot match PyTorch", "[ops][golden]") {
  auto ops = check_forward_file("movement.json");
  for (const char* op :
       {"reshape", "flatten", "transpose", "permute", "broadcast_to", "slice", "pad", "concat", "one_hot"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: gather, take (index_select, embedding lookup) match PyTorch", "[ops][golden][gather]") {
  auto ops = check_forward_file("gather.json");
  for (const char* op : {"gather", "take", "embedding"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: conv_transpose2d and upsample_nearest2d match PyTorch", "[ops][golden][conv_transpose][upsample]") {
  auto ops = check_forward_file("conv_transpose.json");
  for (const char* op : {"conv_transpose2d", "upsample_nearest2d"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: iota, arange, tril, triu and flip match PyTorch", "[ops][golden][iota][tril][flip]") {
  auto ops = check_forward_file("masks.json");
  for (const char* op : {"iota", "arange", "gather_iota", "tril", "triu", "flip"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("iota, arange, tril, triu and flip refuse bad arguments naming the op and the caller's line",
          "[ops][iota][tril][flip]") {
  using Catch::Matchers::Contains;
  const std::string here = "test_ops.cpp:";
  CHECK_THROWS_WITH(sg::iota({3, 4}, 2), Contains("iota: axis 2 out of range") && Contains(here));
  CHECK_THROWS_AS(sg::iota({3, 4}, 2), ShapeError);
  CHECK_THROWS_WITH(sg::iota({}, 0), Contains("iota: a 0-D shape") && Contains(here));
  CHECK_THROWS_WITH(sg::iota({3, -1}, 0), Contains("iota: negative size") && Contains(here));
  CHECK_THROWS_AS(sg::iota({(int64_t{1} << 24) + 1}, 0), ValueError);
  CHECK_THROWS_WITH(arange(-2), Contains("arange: n must be >= 0") && Contains(here));
  Tensor v = input("v", {5});
  CHECK_THROWS_WITH(tril(v), Contains("tril: input must have at least 2 dimensions") && Contains(here));
  CHECK_THROWS_AS(triu(v, 1), ShapeError);
  CHECK_THROWS_WITH(triu(Tensor()), Contains("triu: input is an empty Tensor"));
  Tensor m = input("m", {3, 4});
  CHECK_THROWS_WITH(flip(m, {2}), Contains("flip: axis 2 out of range") && Contains(here));
  CHECK_THROWS_WITH(flip(m, {1, -1}), Contains("flip: axis 1 appears more than once") && Contains(here));
  // dtypes: iota i32 is an index, tril keeps its input's dtype, flip too
  CHECK(sg::iota({3, 4}, 1, DType::i32).dtype() == DType::i32);
  CHECK(arange(4).dtype() == DType::f32);
  Tensor idx = input("idx", {3, 4}, DType::i32);
  CHECK(tril(idx).dtype() == DType::i32);
  CHECK(flip(idx, {0}).dtype() == DType::i32);
  // nothing to reverse or mask: the input itself
  CHECK(flip(m, {}).node() == m.node());
  CHECK(flip(input("r", {1, 4}), {0}).node()->op == Op::Input);
}

TEST_CASE("golden: layer_norm, rms_norm, multi_head_attention and transformer_encoder_layer (the layers of issue 36) "
          "match PyTorch", "[ops][golden][layer_norm][attention]") {
  auto ops = check_forward_file("layers.json");
  for (const char* op : {"layer_norm", "rms_norm", "multi_head_attention", "transformer_encoder_layer"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: grouped and depthwise conv2d, conv_transpose2d with groups, upsample_bilinear2d match PyTorch",
          "[ops][golden][conv_groups][upsample_bilinear2d]") {
  auto ops = check_forward_file("conv_groups.json");
  for (const char* op : {"conv2d", "conv_transpose2d", "upsample_bilinear2d"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

TEST_CASE("golden: conv2d, pools, softmax and losses match PyTorch", "[ops][golden]") {
  auto ops = check_forward_file("nn.json");
  for (const char* op : {"conv2d", "max_pool2d", "avg_pool2d", "softmax", "log_softmax", "cross_entropy",
                         "mse_loss", "kl_div"}) {
    INFO("golden case missing for op " << op);
    CHECK(ops.count(op));
  }
}

// ------------------------------------------------------------------------------------------------
// Hand-computed cases
// ------------------------------------------------------------------------------------------------

TEST_CASE("hand-computed elementwise values", "[ops]") {
  Tensor x = param("x", {6}, {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.f});
  check_values(round(x), {-2, -0.0, 0, 2, 2, 0});  // half to even
  check_values(floor(x), {-3, -1, 0, 1, 2, 0});
  check_values(sign(x), {-1, -1, 1, 1, 1, 0});
  check_values(relu(x), {0, 0, 0.5, 1.5, 2.5, 0});
  check_values(leaky_relu(x, 0.1), {-0.25, -0.05, 0.5, 1.5, 2.5, 0});
  check_values(abs(x) * 2.0 + 1.0, {6, 2, 2, 4, 6, 1});
  Tensor a = param("a", {3}, {1, 2, 3});
  Tensor b = param("b", {3}, {3, 2, 1});
  check_values(pow(a, b), {1, 4, 3});
  check_values(maximum(a, b), {3, 2, 3});
  check_values(minimum(a, b), {1, 2, 1});
  check_values(lt(a, b), {1, 0, 0});
  check_values(le(a, b), {1, 1, 0});
  check_values(eq(a, b), {0, 1, 0});
  check_values(ne(a, b), {1, 0, 1});
  check_values(where(gt(a, b), a, b * 10.0), {30, 20, 3});
  check_values(a / b - 1.0, {1.0 / 3 - 1, 0, 2});
  check_values(sigmoid(a - a), {0.5, 0.5, 0.5});
  check_values(exp(log(a)), {1, 2, 3});
  check_values(softplus(a - a), {std::log(2.0), std::log(2.0), std::log(2.0)});
  check_values(rsqrt(a * a), {1, 0.5, 1.0 / 3});
  check_values(reciprocal(b), {1.0 / 3, 0.5, 1});
  // broadcasting (3,1) with (2,): out[i][j] = col[i] * 10 + row[j]
  Tensor col = param("col", {3, 1}, {1, 2, 3});
  Tensor row = param("row", {2}, {4, 5});
  check_values(col * 10.0 + row, {14, 15, 24, 25, 34, 35});
}

TEST_CASE("hand-computed reductions, matmul and movement", "[ops]") {
  Tensor x = param("x", {2, 3}, counting(6));  // [[0,1,2],[3,4,5]]
  check_values(sum(x), {15});
  check_values(sum(x, {0}), {3, 5, 7});
  check_values(sum(x, {1}, true), {3, 12});
  CHECK(shape_str(sum(x, {1}, true).shape()) == "2x1");
  check_values(mean(x, {1}), {1, 4});
  check_values(max(x, {0}), {3, 4, 5});
  check_values(min(x, {-1}), {0, 3});
  check_values(argmax(x, 1), {2, 2});
  check_values(argmax(x, 0), {1, 1, 1});
  Tensor a = param("a", {2, 2}, {1, 2, 3, 4});
  Tensor b = param("b", {2, 2}, {5, 6, 7, 8});
  check_values(matmul(a, b), {19, 22, 43, 50});
  check_values(transpose(x), {0, 3, 1, 4, 2, 5});
  check_values(reshape(x, {3, 2}), {0, 1, 2, 3, 4, 5});
  check_values(permute(reshape(x, {1, 2, 3}), {2, 0, 1}), {0, 3, 1, 4, 2, 5});
  check_values(broadcast_to(param("r", {3}, {7, 8, 9}), {2, 3}), {7, 8, 9, 7, 8, 9});
  Tensor v = param("v", {10}, counting(10));
  check_values(slice(v, 0, 1, 8, 3), {1, 4, 7});
  check_values(slice(v, 0, -3, 100), {7, 8, 9});
  check_values(pad(param("p", {2}, {1, 2}), {1}, {2}, 9.0), {9, 1, 2, 9, 9});
  check_values(concat({param("c0", {1, 2}, {1, 2}), param("c1", {1, 1}, {3})}, 1), {1, 2, 3});
  check_values(flatten(param("f", {2, 1, 2}, {1, 2, 3, 4})), {1, 2, 3, 4});
  CHECK(shape_str(flatten(param("f2", {2, 1, 2}, {1, 2, 3, 4})).shape()) == "2x2");
  // one_hot: out-of-range and negative labels give all-zero rows
  Tensor labels = input("labels", {4}, DType::i32);
  cpu::LeafValues lv;
  lv[labels.node().get()] = {2, 0, 5, -1};
  check_values(one_hot(labels, 3), {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0, lv);
}

TEST_CASE("hand-computed conv2d and pools", "[ops]") {
  Tensor x = param("x", {1, 1, 3, 3}, counting(9, 1));  // 1..9
  Tensor w = param("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor bias = param("bias", {1}, {1});
  check_values(conv2d(x, w), {12, 16, 24, 28});
  check_values(conv2d(x, w, bias), {13, 17, 25, 29});
  Conv2dOptions o;
  o.padding = {1, 1};
  o.stride = {2, 2};
  // padded 5x5 input, windows at rows/cols 0,2: [1], [2+3], [4+7], [5+6+8+9]
  check_values(conv2d(x, w, Tensor(), o), {1, 5, 11, 28});
  Conv2dOptions d;
  d.dilation = {2, 2};
  check_values(conv2d(x, w, Tensor(), d), {1 + 3 + 7 + 9});
  Tensor y = param("y", {1, 1, 4, 4}, counting(16));
  check_values(max_pool2d(y), {5, 7, 13, 15});
  check_values(avg_pool2d(y), {2.5, 4.5, 10.5, 12.5});
  Pool2dOptions p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  check_values(max_pool2d(y), {5, 7, 13, 15});
  check_values(max_pool2d(y, p), {5, 7, 13, 15});
  // avg with count_include_pad: window at (0,0) covers 0,1,4,5 of 9 cells
  check_values(avg_pool2d(y, p), {10.0 / 9, 24.0 / 9, 51.0 / 9, 90.0 / 9});
}

TEST_CASE("hand-computed softmax and losses", "[ops]") {
  Tensor x = param("x", {1, 3}, {0.f, static_cast<float>(std::log(2.0)), static_cast<float>(std::log(3.0))});
  check_values(softmax(x), {1.0 / 6, 2.0 / 6, 3.0 / 6}, 1e-6);
  check_values(log_softmax(x), {std::log(1.0 / 6), std::log(2.0 / 6), std::log(3.0 / 6)}, 1e-6);
  Tensor logits = param("logits", {2, 2}, {0, 0, 1, 1});
  Tensor labels = input("labels", {2}, DType::i32);
  cpu::LeafValues lv;
  lv[labels.node().get()] = {0, 1};
  check_values(cross_entropy(logits, labels), {std::log(2.0)}, 1e-6, 0, lv);
  check_values(mse_loss(param("a", {2}, {1, 2}), param("b", {2}, {3, 5})), {6.5});
  Tensor lp = param("lp", {1, 2}, {static_cast<float>(std::log(0.5)), static_cast<float>(std::log(0.5))});
  check_values(kl_div(lp, param("t", {1, 2}, {1, 0})), {std::log(2.0)}, 1e-6);
}

TEST_CASE("softmax, log_softmax and cross_entropy at logits of +-1000 are finite and correct", "[ops]") {
  Tensor x = param("x", {2, 3}, {1000, -1000, 0, -1000, -1000, 1000});
  std::vector<double> sm = eval1(softmax(x));
  std::vector<double> lsm = eval1(log_softmax(x));
  for (double v : sm) CHECK(std::isfinite(v));
  for (double v : lsm) CHECK(std::isfinite(v));
  check_values(softmax(x), {1, 0, 0, 0, 0, 1}, 0, 1e-30);
  check_values(log_softmax(x), {0, -2000, -1000, -2000, -2000, 0}, 1e-7, 1e-6);
  Tensor labels = input("labels", {2}, DType::i32);
  cpu::LeafValues lv;
  lv[labels.node().get()] = {1, 2};
  std::vector<double> ce = eval1(cross_entropy(x, labels), lv);
  REQUIRE(ce.size() == 1);
  CHECK(std::isfinite(ce[0]));
  CHECK(ce[0] == Approx(1000.0).epsilon(1e-7));  // (2000 + 0) / 2
  lv[labels.node().get()] = {0, 2};
  check_values(cross_entropy(x, labels), {0}, 0, 1e-6, lv);
  // +-1000 with a near-tie: log(1 + e^-1)
  Tensor y = param("y", {1, 2}, {1000, 999});
  Tensor l1 = input("l1", {1}, DType::i32);
  cpu::LeafValues lv1;
  lv1[l1.node().get()] = {0};
  check_values(cross_entropy(y, l1), {std::log1p(std::exp(-1.0))}, 1e-6, 0, lv1);
}

// ------------------------------------------------------------------------------------------------
// Error messages
// ------------------------------------------------------------------------------------------------

/// Runs `expr` (on ONE source line with the macro) and checks it throws EX with message exactly
/// "<prefix> at test_ops.cpp:<that line>".
#define SG_CHECK_ERROR_AT(EX, expr, prefix)                                                        \
  do {                                                                                             \
    const int line_ = __LINE__;                                                                    \
    std::string msg_ = "<no exception>";                                                           \
    try {                                                                                          \
      (void)(expr);                                                                                \
    } catch (const EX& e_) {                                                                       \
      msg_ = e_.what();                                                                            \
    }                                                                                              \
    CHECK(msg_ == fmt::format("{} at test_ops.cpp:{}", prefix, line_));                            \
  } while (0)

TEST_CASE("shape errors name the op, the shapes and the user's file:line", "[ops][errors]") {
  Tensor a = input("a", {32, 784});
  Tensor b = input("b", {100, 10});
  SG_CHECK_ERROR_AT(ShapeError, matmul(a, b), "matmul: inner dimensions differ (32x784 @ 100x10)");
  // spelled out without the macro as well
  int line = 0;
  std::string msg;
  try {
    line = __LINE__; (void)matmul(a, b);  // NOLINT
  } catch (const ShapeError& e) {
    msg = e.what();
  }
  CHECK(msg == "matmul: inner dimensions differ (32x784 @ 100x10) at test_ops.cpp:" + std::to_string(line));
  CHECK(line > 0);

  Tensor x = input("x", {3, 4});
  Tensor y = input("y", {5});
  SG_CHECK_ERROR_AT(ShapeError, Tensor(x + y), "map: operands do not broadcast (3x4, 5) in (a0 + a1)");
  SG_CHECK_ERROR_AT(ShapeError, reshape(x, {5, 3}), "reshape: element count differs (3x4 has 12, 5x3 has 15)");
  SG_CHECK_ERROR_AT(ShapeError, sum(x, {2}), "sum: axis 2 out of range for rank 2");
  SG_CHECK_ERROR_AT(ShapeError, broadcast_to(x, {4, 3}), "broadcast_to: 3x4 does not broadcast to 4x3");
  SG_CHECK_ERROR_AT(ShapeError, matmul(input("p", {2, 3, 4}), input("q", {3, 4, 5})),
                    "matmul: batch dimensions do not broadcast (2x3x4 @ 3x4x5)");
  SG_CHECK_ERROR_AT(ShapeError, matmul(input("v", {4}), x), "matmul: operands must have rank >= 2 (4 @ 3x4); reshape 1-D operands first");
  SG_CHECK_ERROR_AT(ShapeError, conv2d(input("img", {1, 3, 8, 8}), input("k", {4, 2, 3, 3})), "conv2d: input channels differ: x 1x3x8x8 has C=3, w 4x2x3x3 has C=2");
  SG_CHECK_ERROR_AT(ShapeError, concat({x, y}), "concat: shapes 3x4 and 5 differ outside axis 0");
  SG_CHECK_ERROR_AT(ShapeError, mse_loss(x, input("t", {4, 3})), "mse_loss: input 3x4 and target 4x3 differ");
  SG_CHECK_ERROR_AT(ShapeError, cross_entropy(x, input("lab", {4}, DType::i32)), "cross_entropy: expects logits (N,C) and labels (N), got 3x4 and 4");
  SG_CHECK_ERROR_AT(ShapeError, max_pool2d(x), "max_pool2d: expects (N,C,H,W), got 3x4");
  SG_CHECK_ERROR_AT(ShapeError, permute(x, {0, 0}), "permute: perm is not a permutation of the axes");
}

TEST_CASE("bad inputs give ValueError", "[ops][errors]") {
  Tensor x = input("x", {3, 4});
  SG_CHECK_ERROR_AT(ValueError, matmul(Tensor(), x), "matmul: left operand is an empty Tensor (default-constructed)");
  SG_CHECK_ERROR_AT(ValueError, sum(Tensor()), "sum: input is an empty Tensor (default-constructed)");
  SG_CHECK_ERROR_AT(ValueError, Tensor(relu(Tensor())), "map: argument 0 is an empty Tensor");
  SG_CHECK_ERROR_AT(ValueError, param("w", {2, 3}, {1, 2, 3}), "param: 'w' has shape 2x3 (6 elements) but 3 values were given");
  SG_CHECK_ERROR_AT(ValueError, input("neg", {2, -1}), "input: negative size in shape 2x-1");
  SG_CHECK_ERROR_AT(ValueError, one_hot(input("l", {3}, DType::i32), 0), "one_hot: num_classes must be >= 1 (got 0)");
  SG_CHECK_ERROR_AT(ValueError, slice(x, 0, 0, 2, 0), "slice: step must be >= 1 (got 0)");
  SG_CHECK_ERROR_AT(ValueError, concat({}), "concat: needs at least one tensor");

  // a missing feed names the input and where it was created
  Tensor fed = input("images", {2, 2});
  const int created = __LINE__ - 1;
  Tensor y = relu(fed) + 1.0;
  std::string msg = "<no exception>";
  try {
    cpu::evaluate({y.node()}, {});
  } catch (const ValueError& e) {
    msg = e.what();
  }
  CHECK(msg == fmt::format("cpu: no value fed for input 'images' (shape 2x2) created at test_ops.cpp:{}", created));
  // a feed of the wrong size
  cpu::LeafValues lv;
  lv[fed.node().get()] = {1, 2, 3};
  CHECK_THROWS_AS(cpu::evaluate({y.node()}, lv), ValueError);
  lv[fed.node().get()] = {1, -2, 3, -4};
  check_values(y, {2, 1, 4, 1}, 0, 0, lv);
  // every sg error is an sg::Error
  CHECK_THROWS_AS(matmul(input("m", {2, 3}), input("n", {2, 3})), sg::Error);
}
