// Kernel IR queries on shared DAGs: each walk visits a node once (issue 19: a chain of 30 maps did not compile
// within a minute because kloop_iterations walked the DAG as a tree). The values are checked against closed
// forms of the tree view; before the memoised walks these cases ran for 2^depth steps (hours at depth 48).
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/emit.h"
#include "sg/kernel_ir.h"
#include "sg/schedule.h"
#include "sg/sg.h"

using namespace sg;

namespace {

/// x_{k+1} = x_k * x_k + load(x_k index): `depth` levels, each reading the previous level twice.
KExprPtr doubling_chain(int depth, KExprPtr leaf) {
  KExprPtr x = std::move(leaf);
  for (int k = 0; k < depth; ++k) x = kmath(SOp::Add, kmath(SOp::Mul, x, x), kfloat(1.0 + k));
  return x;
}

}  // namespace

TEST_CASE("kernel IR: cost and loop counts of a deep shared DAG are the tree view's, computed linearly") {
  const int depth = 48;
  // tree view: T(k+1) = 1 (add) + 1 (mul) + 2 T(k) + 1 (const)  =>  T(k) = 2^k (T(0) + 3) - 3
  KExprPtr load = kload(0, kvar("i0"));  // T(0) = 2 (the load and its index)
  KExprPtr top = doubling_chain(depth, load);
  CHECK(kcost(top) == std::ldexp(2.0 + 3.0, depth) - 3.0);
  // the code printed for it: its distinct nodes (load, i0, and per level add, mul and a constant)
  CHECK(kcode_size({top}) == 2 + 3 * depth);
  CHECK(kcode_size({kmath(SOp::Tanh, top), top}) == 2 + 3 * depth + kHelperCallSize);  // a math-helper call
  CHECK_FALSE(kcontains_reduce(top));
  CHECK_FALSE(khas_unrollable_sum(top));

  // the same chain inside a sum over 16 elements: 16 (loop) + 16 x (loads of the body); the leaf reads r0
  KExprPtr body = doubling_chain(depth, kload(0, kvar("r0")));
  KExprPtr red = kreduce(ReduceKind::Sum, {"r0"}, {16}, body);
  KExprPtr outer = doubling_chain(depth, red);  // the reduction is read 2^depth times in the tree view
  CHECK(kloop_iterations(red) == 16.0);
  CHECK(kloop_iterations(outer) == std::ldexp(16.0, depth));       // tree view: every path evaluates the sum
  CHECK(kloop_iterations(std::vector<KExprPtr>{outer}) == 16.0);   // as emitted: the shared sum once
  CHECK(kcontains_reduce(outer));
  CHECK(khas_unrollable_sum(outer));
  CHECK(kcost(red) == 1 + 16 * (std::ldexp(5.0, depth) - 3.0));
}

TEST_CASE("kernel IR: kequal compares shared DAGs without walking every path") {
  const int depth = 60;
  KExprPtr a = doubling_chain(depth, kload(0, kvar("i0")));
  KExprPtr b = doubling_chain(depth, kload(0, kvar("i0")));  // equal structure, no pointer shared with a
  KExprPtr c = doubling_chain(depth, kload(1, kvar("i0")));  // differs at the leaf only
  CHECK(a != b);
  CHECK(kequal(a, b));
  CHECK_FALSE(kequal(a, c));
  // krewrite keeps the sharing: substituting the leaf's index variable rebuilds depth-many nodes, not 2^depth
  KExprPtr d = ksubstitute(a, {{"i0", kint(3)}});
  CHECK(kequal(d, doubling_chain(depth, kload(0, kint(3)))));
}

TEST_CASE("schedule: a chain of 200 maps reading their input twice schedules with its value") {
  // issue 19's reproduction: tanh(softplus(v) - 0.5) applied N times to a 3x3 tensor (N = 30 took > 60 s)
  Tensor x = input("x", {3, 3});
  Tensor y = x;
  const int n = 200;
  for (int i = 0; i < n; ++i) y = map([](auto v) { return tanh(softplus(v) - 0.5); }, y);
  Program p;
  p.add_output("sum", sum(y));
  Plan plan = schedule(p);
  CHECK(plan.kernels.size() >= 1);
  // the value, on the CPU reference and in double here
  std::vector<float> xs = {-3.f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 2.f, 4.f, 9.f};
  double want = 0;
  for (float v0 : xs) {
    double v = v0;
    for (int i = 0; i < n; ++i) v = std::tanh(std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))) - 0.5);
    want += v;
  }
  auto cpu = make_cpu_backend();
  CHECK(cpu->compile(p)->run({{"x", &xs}})[0][0] == Approx(want).epsilon(1e-5));
}

namespace {

Program map_chain(int n) {
  Tensor x = input("x", {3, 3});
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = map([](auto v) { return tanh(softplus(v) - 0.5); }, y);
  Program p;
  p.add_output("sum", sum(y));
  return p;
}

/// Bytes of GLSL of every kernel of the chain's plan, fragment target and compute target (default limits), and
/// how many times the tanh helper is defined in them.
struct Emitted {
  size_t fragment = 0, compute = 0;          // all kernels
  size_t largest_fragment = 0, largest_compute = 0;
  size_t kernels = 0;                        // fragment plan
  int tanh_defs = 0;
};
Emitted emit_chain(int n) {
  Emitted r;
  auto count = [&](const std::string& s) {
    for (size_t pos = s.find("float sg_tanh(float x)"); pos != std::string::npos; pos = s.find("float sg_tanh(float x)", pos + 1))
      ++r.tanh_defs;
  };
  const Program p = map_chain(n);
  const Plan plan = schedule(p);
  r.kernels = plan.kernels.size();
  for (const Kernel& k : plan.kernels) {
    std::string s = emit_glsl450(plan, k, ShaderStage::Fragment);
    r.fragment += s.size();
    r.largest_fragment = std::max(r.largest_fragment, s.size());
    count(s);
  }
  const ComputeLimits limits;
  const Plan cplan = schedule(p, compute_schedule_options(limits));
  for (const Kernel& k : cplan.kernels) {
    std::string s = emit_compute_kernel(cplan, k, limits).source;
    r.compute += s.size();
    r.largest_compute = std::max(r.largest_compute, s.size());
    count(s);
  }
  return r;
}

}  // namespace

TEST_CASE("codegen: the GLSL of a chain of N maps grows linearly in N, in kernels of bounded size") {
  // issue 19: the emitters walked the shared DAG as a tree (2^N paths); every walk is now linear, so the source
  // (one local per shared node) grows by a constant per layer, and ScheduleOptions::max_inline_chain_cost cuts
  // the chain into kernels of bounded size (a GPU compiler's time grows faster than a shader's size)
  const Emitted a = emit_chain(200), b = emit_chain(400);
  INFO("fragment " << a.fragment << " -> " << b.fragment << " bytes in " << a.kernels << " -> " << b.kernels
                   << " kernels (largest " << a.largest_fragment << ", " << b.largest_fragment << "), compute "
                   << a.compute << " -> " << b.compute << " (largest " << a.largest_compute << ", " << b.largest_compute << ")");
  CHECK(b.fragment < 400 * 400);
  CHECK(b.compute < 400 * 400);
  // doubling N adds the same 200 layers again: at most twice the size (the fixed part is shared)
  CHECK(b.fragment <= 2 * a.fragment);
  CHECK(b.compute <= 2 * a.compute);
  CHECK(b.fragment - a.fragment > 200 * 50);  // and the layers are really there
  // the chain is cut: more kernels for the longer chain, none larger than the shorter chain's largest
  CHECK(a.kernels >= 3);
  CHECK(b.kernels > a.kernels);
  CHECK(b.largest_fragment <= a.largest_fragment * 11 / 10);
  CHECK(b.largest_compute <= a.largest_compute * 11 / 10);
  CHECK(b.largest_fragment < 20000);
  // the math helpers are defined once per kernel that calls them, not once per use
  CHECK(b.tanh_defs <= static_cast<int>(2 * b.kernels));
}
