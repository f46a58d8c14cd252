// Range-aware simplification of integer division and modulo in kernel IR (codegen/src/index_simplify.h): the
// rewrites on constructed index expressions, and by brute force over the variables' whole ranges that every
// simplified expression has the original's value (truncating division, as C, GLSL and WGSL), negative ranges
// left alone.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "../codegen/src/index_simplify.h"
#include "sg/kernel_ir.h"

using namespace sg;

namespace {

KExprPtr v(const char* n) { return kvar(n); }
KExprPtr c(int64_t x) { return kint(x); }
KExprPtr add(KExprPtr a, KExprPtr b) { return kibin(KOp::IAdd, std::move(a), std::move(b)); }
KExprPtr sub(KExprPtr a, KExprPtr b) { return kibin(KOp::ISub, std::move(a), std::move(b)); }
KExprPtr mul(KExprPtr a, int64_t k) { return kibin(KOp::IMul, std::move(a), kint(k)); }
KExprPtr div(KExprPtr a, int64_t k) { return kibin(KOp::IDiv, std::move(a), kint(k)); }
KExprPtr mod(KExprPtr a, int64_t k) { return kibin(KOp::IMod, std::move(a), kint(k)); }
KExprPtr band(KExprPtr a, KExprPtr b) { return kibin(KOp::IAnd, std::move(a), std::move(b)); }
KExprPtr in_0_n(const KExprPtr& x, int64_t n) { return band(kibin(KOp::IGe, x, c(0)), kibin(KOp::ILt, x, c(n))); }

using Env = std::map<std::string, int64_t>;

/// Integer (and Reduce/ToFloat/Load-as-identity float) evaluation with truncating division; a taken ISelect
/// evaluates only its branch. Loads read an identity buffer (the value is the index).
double eval(const KExprPtr& e, Env& env) {
  auto I = [&](const KExprPtr& x) { return static_cast<int64_t>(eval(x, env)); };
  switch (e->op) {
    case KOp::IntConst: return static_cast<double>(e->ivalue);
    case KOp::FloatConst: return e->fvalue;
    case KOp::Var: return static_cast<double>(env.at(e->name));
    case KOp::IAdd: return static_cast<double>(I(e->a) + I(e->b));
    case KOp::ISub: return static_cast<double>(I(e->a) - I(e->b));
    case KOp::IMul: return static_cast<double>(I(e->a) * I(e->b));
    case KOp::IDiv: return static_cast<double>(I(e->a) / I(e->b));
    case KOp::IMod: return static_cast<double>(I(e->a) % I(e->b));
    case KOp::IMin: return static_cast<double>(std::min(I(e->a), I(e->b)));
    case KOp::IMax: return static_cast<double>(std::max(I(e->a), I(e->b)));
    case KOp::ILt: return I(e->a) < I(e->b);
    case KOp::ILe: return I(e->a) <= I(e->b);
    case KOp::IEq: return I(e->a) == I(e->b);
    case KOp::IGe: return I(e->a) >= I(e->b);
    case KOp::IAnd: return I(e->a) && I(e->b);
    case KOp::ToFloat: return eval(e->a, env);
    case KOp::Load: return eval(e->a, env);
    case KOp::ISelect: return eval(e->a, env) != 0 ? eval(e->b, env) : eval(e->c, env);
    case KOp::FMath:
      if (e->sop == SOp::Add) return eval(e->a, env) + eval(e->b, env);
      break;
    case KOp::Reduce: {
      REQUIRE(e->reduce == ReduceKind::Sum);
      double s = 0;
      std::function<void(size_t)> loop = [&](size_t d) {
        if (d == e->loop_vars.size()) return void(s += eval(e->a, env));
        for (int64_t x = 0; x < e->extents[d]; ++x) {
          env[e->loop_vars[d]] = x;
          loop(d + 1);
        }
        env.erase(e->loop_vars[d]);
      };
      loop(0);
      return s;
    }
    default: break;
  }
  FAIL("eval: unsupported op");
  return 0;
}

/// Simplifies `e` with `ranges` (inclusive) for its free variables and checks, at every point of their product,
/// that the result has the original's value. Returns the simplified expression.
KExprPtr check_exact(const KExprPtr& e, const std::map<std::string, KVarRange>& ranges) {
  const KExprPtr s = ksimplify_index({e}, ranges)[0];
  Env env;
  int64_t points = 0;
  std::function<void(std::map<std::string, KVarRange>::const_iterator)> go = [&](auto it) {
    if (it == ranges.end()) {
      ++points;
      const double want = eval(e, env), got = eval(s, env);
      if (want != got) {
        std::string at;
        for (auto& [n, x] : env) at += n + "=" + std::to_string(x) + " ";
        FAIL_CHECK(kexpr_str(e) << " -> " << kexpr_str(s) << " at " << at << ": " << want << " vs " << got);
      }
      return;
    }
    for (int64_t x = it->second.first; x <= it->second.second; ++x) {
      env[it->first] = x;
      go(std::next(it));
    }
    env.erase(it->first);
  };
  go(ranges.begin());
  CHECK(points > 0);
  return s;
}

bool has_divmod(const std::string& s) { return s.find('/') != std::string::npos || s.find('%') != std::string::npos; }

}  // namespace

TEST_CASE("index simplify: a flattened index divided by the extent it was multiplied by") {
  // the embedding gradient's one-hot: j = r0 * 1728 + i2 * 27 + i1 (1 x 27 x 64 output, 2048 tokens)
  const KExprPtr j = add(add(mul(v("i0"), 1728), mul(v("i2"), 27)), v("i1"));
  const std::map<std::string, KVarRange> r = {{"i0", {0, 40}}, {"i1", {0, 26}}, {"i2", {0, 63}}};
  CHECK(kexpr_str(check_exact(div(j, 27), r)) == "((i0 * 64) + i2)");
  CHECK(kexpr_str(check_exact(mod(j, 27), r)) == "i1");
  // ... then split again by the token's shape (the one-hot's input index): (j / 27 / 64) % 2048 is i0
  CHECK(kexpr_str(check_exact(mod(div(div(j, 27), 64), 2048), r)) == "i0");
  CHECK(kexpr_str(check_exact(mod(div(j, 27), 64), r)) == "i2");
  // the loop variable's range comes from its Reduce
  const KExprPtr jr = add(add(mul(v("r0"), 1728), mul(v("i2"), 27)), v("i1"));
  const KExprPtr red = kreduce(ReduceKind::Sum, {"r0"}, {48},
                               kload(0, add(mul(mod(div(div(jr, 27), 64), 2048), 64), mod(jr, 27))));
  const KExprPtr s = check_exact(red, {{"i1", {0, 26}}, {"i2", {0, 63}}});
  CHECK(kexpr_str(s) == "sum[r0<48](load0[((r0 * 64) + i1)])");
}

TEST_CASE("index simplify: the basic rules") {
  const std::map<std::string, KVarRange> r = {{"x", {0, 200}}, {"y", {0, 15}}};
  CHECK(kexpr_str(check_exact(div(v("y"), 16), r)) == "0");  // a in [0, c)
  CHECK(kexpr_str(check_exact(mod(v("y"), 16), r)) == "y");
  CHECK(kexpr_str(check_exact(div(div(v("x"), 4), 8), r)) == "(x / 32)");  // (x / b) / c
  CHECK(kexpr_str(check_exact(mod(mod(v("x"), 64), 16), r)) == "(x % 16)");  // c divides m
  CHECK(kexpr_str(check_exact(mod(mod(v("x"), 48), 16), r)) == "(x % 16)");
  CHECK(kexpr_str(check_exact(mod(mod(v("x"), 40), 16), r)) == "((x % 40) % 16)");  // 16 does not divide 40
  // a term not smaller than c: (x * 16 + x) / 16 = x + x / 16
  CHECK(kexpr_str(check_exact(div(add(mul(v("x"), 16), v("x")), 16), r)) == "(x + (x / 16))");
  CHECK(kexpr_str(check_exact(mod(add(mul(v("x"), 16), v("x")), 16), r)) == "(x % 16)");
  // a subtracted constant that c divides, the value non-negative: (x + 64 - 32) / 16 = x / 16 + 2
  CHECK(!has_divmod(kexpr_str(check_exact(div(sub(add(mul(v("y"), 16), c(64)), c(32)), 16), r))));
}

TEST_CASE("index simplify: possibly negative operands are left as they are") {
  const std::map<std::string, KVarRange> r = {{"x", {0, 40}}, {"y", {-3, 3}}, {"z", {0, 70}}};
  for (const KExprPtr& e : {div(sub(v("x"), c(5)), 4), mod(sub(v("x"), c(5)), 4),   // x - 5 in [-5, 35]
                            div(add(mul(v("x"), 4), v("y")), 4), mod(add(mul(v("x"), 4), v("y")), 4),  // y < 0
                            div(sub(v("z"), c(64)), 16), mod(sub(v("z"), c(64)), 16),
                            div(div(sub(v("x"), c(2)), 4), 8),  // (x - 2) / 4 is 0 for x = 1, x - 2 is not >= 0
                            div(v("w"), 4), mod(mul(v("w"), 4), 4)}) {  // w: no known range
    const KExprPtr s = ksimplify_index({e}, r)[0];  // w's range unknown to it (evaluated over [-9, 9] below)
    CHECK(s == e);
    Env env;
    for (int64_t x = 0; x <= 40; ++x)
      for (int64_t y = -3; y <= 3; ++y)
        for (int64_t z = 0; z <= 70; z += 7)
          for (int64_t w = -9; w <= 9; w += 3) {
            env = {{"x", x}, {"y", y}, {"z", z}, {"w", w}};
            CHECK(eval(s, env) == eval(e, env));
          }
  }
}

TEST_CASE("index simplify: a padded operand's index inside the pad's select") {
  // the q/k/v-gradient concatenation (permute_pad_add): j0 = i2 - 128 is read only where 0 <= j0 < 64
  const KExprPtr j0 = sub(v("i2"), c(128));
  const KExprPtr j1 = add(add(mul(v("i0"), 4096), mul(v("i1"), 64)), j0);
  const KExprPtr idx = add(add(add(mul(div(j1, 4096), 4096), mul(mod(div(j1, 16), 4), 1024)), mul(mod(div(j1, 64), 64), 16)),
                           mod(j1, 16));
  const std::map<std::string, KVarRange> r = {{"i0", {0, 2}}, {"i1", {0, 63}}, {"i2", {0, 191}}};
  // outside the select j1 may be negative (i0 = i1 = 0, i2 < 128): nothing changes
  CHECK(ksimplify_index({idx}, r)[0] == idx);
  // inside: every division goes but j0's own, which prints as a shift of i2
  const KExprPtr e = kselect(in_0_n(j0, 64), kload(0, idx), kfloat(-1));
  const KExprPtr s = check_exact(e, r);
  CHECK(kexpr_str(s) ==
        "((((i2 - 128) >= 0) && ((i2 - 128) < 64)) ? load0[((((i0 * 4096) + (((i2 / 16) - 8) * 1024)) + (i1 * 16)) + (i2 % 16))] : -1f)");
  // the other branch keeps the unconditioned ranges
  const KExprPtr e2 = kselect(in_0_n(j0, 64), kfloat(-1), kload(0, idx));
  CHECK(check_exact(e2, r) == e2);
  // a condition on a variable narrows the variable by name (the third operand: i2 < 64)
  const KExprPtr j4 = add(add(mul(v("i0"), 4096), mul(v("i1"), 64)), v("i2"));
  const KExprPtr e3 = kselect(in_0_n(v("i2"), 64), kload(0, mod(div(j4, 64), 64)), kfloat(-1));
  CHECK(kexpr_str(check_exact(e3, r)) == "(((i2 >= 0) && (i2 < 64)) ? load0[i1] : -1f)");
}

TEST_CASE("index simplify: a loop variable bound by several reductions gets their hull") {
  // r0 < 8 in one reduction, r0 < 24 in the other: r0 % 16 cannot go (r0 up to 23), r0 % 32 can
  const KExprPtr a = kreduce(ReduceKind::Sum, {"r0"}, {8}, kto_float(add(mod(v("r0"), 16), mod(v("r0"), 32))));
  const KExprPtr b = kreduce(ReduceKind::Sum, {"r0"}, {24}, kto_float(mod(v("r0"), 16)));
  const KExprPtr s = check_exact(kmath(SOp::Add, a, b), {});
  CHECK(kexpr_str(s) == "add(sum[r0<8](float(((r0 % 16) + r0))), sum[r0<24](float((r0 % 16))))");
}
