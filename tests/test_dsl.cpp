// The DSL front end: expression templates fuse into one Map node, scalar-expression folding and identities,
// leaves are never merged, sg::map with generic lambdas, recorded source locations, deterministic topo order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "sg/cpu_reference.h"
#include "sg/sg.h"

using namespace sg;

namespace {

std::vector<double> eval1(const Tensor& t, const cpu::LeafValues& feeds = {}) {
  return cpu::evaluate({t.node()}, feeds)[0];
}

std::vector<uint64_t> ids(const std::vector<NodePtr>& order) {
  std::vector<uint64_t> r;
  for (auto& n : order) r.push_back(n->id);
  return r;
}

}  // namespace

TEST_CASE("relu(x*w+b) materialises to ONE Map node over the three tensors", "[dsl]") {
  Tensor x = param("x", {2, 3}, {1, -2, 3, -4, 5, -6});
  Tensor w = param("w", {3}, {1, 2, 3});
  Tensor b = param("b", {2, 1}, {0.5f, -0.5f});
  Tensor y = relu(x * w + b);
  const Node& n = *y.node();
  CHECK(n.op == Op::Map);
  REQUIRE(n.inputs.size() == 3);
  CHECK(n.inputs[0] == x.node());  // Arg k = k-th distinct tensor in expression order
  CHECK(n.inputs[1] == w.node());
  CHECK(n.inputs[2] == b.node());
  CHECK(sexpr_str(n.body) == "relu(((a0 * a1) + a2))");
  CHECK(shape_str(n.shape) == "2x3");
  // no intermediate nodes: the graph is the three leaves and the Map
  CHECK(topo_order({y.node()}).size() == 4);
  // value: relu(x*w + b) by hand
  CHECK(eval1(y) == std::vector<double>{1.5, 0, 9.5, 0, 9.5, 0});
}

TEST_CASE("a tensor read several times in one expression is one Map argument", "[dsl]") {
  Tensor x = param("x", {3}, {1, 2, 3});
  Tensor y = x * x + sg::exp(x) - x;
  REQUIRE(y.node()->op == Op::Map);
  CHECK(y.node()->inputs.size() == 1);
  CHECK(sexpr_str(y.node()->body) == "(((a0 * a0) + exp(a0)) - a0)");
  auto v = eval1(y);
  for (int i = 0; i < 3; ++i) CHECK(v[i] == Approx((i + 1.0) * (i + 1.0) + std::exp(i + 1.0) - (i + 1.0)));
}

TEST_CASE("non-elementwise ops end the expression: their inputs are materialised Maps", "[dsl]") {
  Tensor a = param("a", {2, 2}, {1, 2, 3, 4});
  Tensor b = param("b", {2, 2}, {1, 0, 0, 1});
  Tensor m = matmul(a * 2.0, sigmoid(b));
  CHECK(m.node()->op == Op::MatMul);
  REQUIRE(m.node()->inputs.size() == 2);
  CHECK(m.node()->inputs[0]->op == Op::Map);
  CHECK(m.node()->inputs[1]->op == Op::Map);
  CHECK(sexpr_str(m.node()->inputs[0]->body) == "(a0 * 2)");
}

TEST_CASE("scalar expressions fold constants and apply identities", "[dsl]") {
  CHECK(is_const(sbinary(SOp::Add, sconst(2), sconst(3)), 5));
  CHECK(is_const(sunary(SOp::Exp, sconst(0)), 1));
  // x*0 and 0/x are not folded: they are NaN for NaN or infinite x (IEEE, torch)
  CHECK(sexpr_str(sbinary(SOp::Mul, sarg(0), sconst(0))) == "(a0 * 0)");
  CHECK(sexpr_str(sbinary(SOp::Div, sconst(0), sarg(0))) == "(0 / a0)");
  CHECK(std::isnan(seval(*sbinary(SOp::Mul, sarg(0), sconst(0)), {std::numeric_limits<double>::infinity()})));
  CHECK(std::isnan(seval(*sbinary(SOp::Div, sconst(0), sarg(0)), {0.0})));
  CHECK(sexpr_str(sbinary(SOp::Mul, sarg(0), sconst(1))) == "a0");
  CHECK(sexpr_str(sbinary(SOp::Add, sconst(0), sarg(1))) == "a1");
  CHECK(sexpr_str(sbinary(SOp::Sub, sarg(0), sconst(0))) == "a0");
  CHECK(sexpr_str(sbinary(SOp::Div, sarg(0), sconst(1))) == "a0");
  CHECK(sexpr_str(sunary(SOp::Neg, sunary(SOp::Neg, sarg(2)))) == "a2");
  CHECK(sexpr_str(sbinary(SOp::Sub, sconst(0), sarg(0))) == "-a0");
  CHECK(sexpr_str(sselect(sconst(1), sarg(0), sarg(1))) == "a0");
  CHECK(sexpr_str(sselect(sarg(2), sconst(4), sconst(4))) == "4");
  // folding inside a DSL expression: the constant subexpression becomes one literal
  Tensor x = param("x", {2}, {1, 2});
  Tensor y = map([](auto v) { return v * (Scalar(2.0) + Scalar(3.0)) + sg::exp(Scalar(0.0)); }, x);
  CHECK(sexpr_str(y.node()->body) == "((a0 * 5) + 1)");
  CHECK(eval1(y) == std::vector<double>{6, 11});
  // a fully constant body over a tensor still has the tensor's shape
  Tensor z = map([](auto) { return Scalar(0.0); }, x);
  CHECK(shape_str(z.shape()) == "2");
  CHECK(eval1(z) == std::vector<double>{0, 0});
}

TEST_CASE("x*1 and x+0 return the same node", "[dsl]") {
  Tensor x = param("x", {3}, {1, 2, 3});
  CHECK(Tensor(x * 1.0).node() == x.node());
  CHECK(Tensor(x + 0.0).node() == x.node());
  CHECK(Tensor(1.0 * x).node() == x.node());
  CHECK(Tensor(0.0 + x).node() == x.node());
  CHECK(Tensor(x - 0.0).node() == x.node());
  CHECK(Tensor(x / 1.0).node() == x.node());
  CHECK(Tensor((x + 0.0) * 1.0).node() == x.node());
  CHECK(Tensor(-(-x)).node() == x.node());
  // but an identity that broadcasts is a real node (its shape differs)
  Tensor big = zeros({2, 3});
  Tensor xb = x + big;
  CHECK(xb.node() != x.node());
  CHECK(shape_str(xb.shape()) == "2x3");
  // shape-preserving movement no-ops return the input too
  CHECK(reshape(x, {3}).node() == x.node());
  CHECK(permute(x, {0}).node() == x.node());
  CHECK(broadcast_to(x, {3}).node() == x.node());
  CHECK(slice(x, 0, 0, 3).node() == x.node());
}

TEST_CASE("leaves are never merged by value", "[dsl]") {
  Tensor w1 = param("w1", {}, {3.0f});
  Tensor w2 = param("w2", {}, {3.0f});
  CHECK(w1.node() != w2.node());
  CHECK(w1.node()->id != w2.node()->id);
  Tensor s = w1 + w2;
  REQUIRE(s.node()->op == Op::Map);
  CHECK(s.node()->inputs.size() == 2);
  CHECK(sexpr_str(s.node()->body) == "(a0 + a1)");
  // same name, same value: still two leaves
  Tensor c1 = constant({2}, {3, 3});
  Tensor c2 = constant({2}, {3, 3});
  CHECK(c1.node() != c2.node());
  CHECK(Tensor(c1 * c2).node()->inputs.size() == 2);
  Tensor p1 = param("p", {1}, {3});
  Tensor p2 = param("p", {1}, {3});
  CHECK(p1.node() != p2.node());
  CHECK(topo_order({Tensor(p1 + p2).node()}).size() == 3);
  CHECK(eval1(Tensor(p1 + p2)) == std::vector<double>{6});
}

TEST_CASE("sg::map with a generic lambda builds the right body", "[dsl]") {
  Tensor x = param("x", {4}, {-2, -0.5f, 0.5f, 2});
  Tensor silu = map([](auto v) { return v * sg::sigmoid(v); }, x);
  REQUIRE(silu.node()->op == Op::Map);
  CHECK(silu.node()->inputs.size() == 1);
  CHECK(sexpr_str(silu.node()->body) == "(a0 * sigmoid(a0))");
  auto v = eval1(silu);
  std::vector<double> xs = {-2, -0.5, 0.5, 2};
  for (int i = 0; i < 4; ++i) CHECK(v[i] == Approx(xs[i] / (1 + std::exp(-xs[i]))).epsilon(1e-6));
  // two arguments with broadcasting, comparisons and where
  Tensor y = param("y", {2, 1}, {0, 1});
  Tensor z = map([](auto a, auto b) { return sg::where(a > b, a - b, sg::max(a, b) * 2.0); }, x, y);
  CHECK(sexpr_str(z.node()->body) == "where((a0 > a1), (a0 - a1), (max(a0, a1) * 2))");
  CHECK(shape_str(z.shape()) == "2x4");
  CHECK(eval1(z) == std::vector<double>{0, 0, 0.5, 2, 2, 2, 2, 1});
  // three arguments
  Tensor w = map([](auto a, auto b, auto c) { return a * b + c; }, x, y, scalar(1.0));
  CHECK(w.node()->inputs.size() == 3);
  CHECK(eval1(w) == std::vector<double>{1, 1, 1, 1, -1, 0.5, 1.5, 3});
  // leaky_relu / softplus are maps too
  CHECK(sexpr_str(leaky_relu(x, 0.25).node()->body) == "where((a0 > 0), a0, (a0 * 0.25))");
}

TEST_CASE("the user's source location is recorded on nodes", "[dsl]") {
  Tensor x = param("x", {2}, {1, 2});
  const int lx = __LINE__ - 1;
  CHECK(x.node()->loc.file == "test_dsl.cpp");
  CHECK(x.node()->loc.line == static_cast<uint32_t>(lx));
  Tensor y = relu(x * 2.0);
  const int ly = __LINE__ - 1;
  CHECK(y.node()->loc.file == "test_dsl.cpp");
  CHECK(y.node()->loc.line == static_cast<uint32_t>(ly));
  Tensor m = matmul(reshape(x, {1, 2}), reshape(x, {2, 1}));
  const int lm = __LINE__ - 1;
  CHECK(m.node()->loc.line == static_cast<uint32_t>(lm));
  CHECK(m.node()->loc.str() == "test_dsl.cpp:" + std::to_string(lm));
  CHECK(m.node()->describe().find("at test_dsl.cpp:" + std::to_string(lm)) != std::string::npos);
  CHECK_FALSE(m.node()->loc.function.empty());  // the enclosing function's name
}

TEST_CASE("topo_order is deterministic: inputs first, creation order among ready nodes", "[dsl]") {
  Tensor a = param("a", {2}, {1, 2});
  Tensor b = param("b", {2}, {3, 4});
  Tensor c = param("c", {2}, {5, 6});
  Tensor s1 = sum(a * b);
  Tensor s2 = sum(exp(c));
  Tensor u = s2 + s1;
  Tensor v = sum(b + c);
  std::vector<NodePtr> o1 = topo_order({u.node(), v.node()});
  std::vector<NodePtr> o2 = topo_order({v.node(), u.node()});
  std::vector<NodePtr> o3 = topo_order({u.node(), v.node(), u.node(), a.node()});
  CHECK(ids(o1) == ids(o2));
  CHECK(ids(o1) == ids(o3));
  // every node after its inputs, each node once
  std::set<const Node*> seen;
  for (auto& n : o1) {
    for (auto& in : n->inputs) CHECK(seen.count(in.get()) == 1);
    CHECK(seen.insert(n.get()).second);
  }
  CHECK(o1.size() == 3 + 2 + 2 + 1 + 2);  // leaves, a*b & exp(c), their sums, u, b+c & v
  // with no dependencies between them, the smallest id comes first: exactly ascending ids here
  std::vector<uint64_t> sorted = ids(o1);
  std::sort(sorted.begin(), sorted.end());
  CHECK(ids(o1) == sorted);
  // among ready nodes the earlier-created one goes first: a2 (created before `late`) precedes it
  Tensor a2 = a * 2.0;
  Tensor late = param("late", {2}, {0, 0});
  Tensor w = a2 + late;
  auto o4 = topo_order({w.node()});
  REQUIRE(o4.size() == 4);
  CHECK(o4[0] == a.node());
  CHECK(o4[1] == a2.node());
  CHECK(o4[2] == late.node());
  CHECK(o4[3] == w.node());
}

TEST_CASE("shapes: broadcasting rules and helpers", "[dsl]") {
  Shape out;
  CHECK(broadcast_shapes(Shape{7, 1, 5}, Shape{3, 1}, out));
  CHECK(shape_str(out) == "7x3x5");
  CHECK_FALSE(broadcast_shapes(Shape{3, 4}, Shape{5}, out));
  CHECK(shape_str(Shape{}) == "scalar");
  CHECK(numel(Shape{}) == 1);
  CHECK(contiguous_strides(Shape{2, 3, 4}) == Shape{12, 4, 1});
  CHECK(normalize_axis(-1, 3) == 2);
  CHECK(normalize_axis(3, 3) == -1);
  Tensor x = param("x", {7, 1, 5}, std::vector<float>(35, 1.0f));
  Tensor y = param("y", {3, 1}, {1, 2, 3});
  CHECK(shape_str(Tensor(x + y).shape()) == "7x3x5");
  CHECK(x.dim(-1) == 5);
  CHECK_THROWS_AS(x.dim(3), ShapeError);
}

TEST_CASE("shapes whose element count overflows int64 are ValueErrors naming the op, shape and line", "[dsl]") {
  // issue 19: `dump --batch 9e18` built an input of 9e18 x 784 elements and printed a negative count
  const int64_t big = 9000000000000000000;
  try {
    (void)input("x", {big, 1, 28, 28});
    FAIL("no ValueError");
  } catch (const ValueError& e) {
    CHECK_THAT(e.what(), Catch::Contains("input") && Catch::Contains("9000000000000000000x1x28x28") &&
                             Catch::Contains("2^63-1") && Catch::Contains("test_dsl.cpp"));
  }
  Tensor a = input("a", {1LL << 40, 1}), b = input("b", {1, 1LL << 40});
  CHECK_THROWS_AS(Tensor(a + b), ValueError);  // the broadcast shape has 2^80 elements
  CHECK_THROWS_AS(reshape(a, {-1, 1LL << 62, 8}), ValueError);
  CHECK(checked_mul(3, 5, "t") == 15);
  CHECK_THROWS_WITH(checked_mul(1LL << 62, 4, "batch x features"), Catch::Contains("batch x features"));
  CHECK_THROWS_AS(checked_add(std::numeric_limits<int64_t>::max(), 1, "n"), ValueError);
  CHECK(numel(Shape{2, 3, 4}) == 24);
}
