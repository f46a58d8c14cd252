// Symbolic differentiation of Map bodies.
#include <cmath>
#include <unordered_map>

#include "sg/autodiff.h"

namespace sg {

namespace {

using Memo = std::unordered_map<const SExpr*, SExprPtr>;

/// d e / d arg k; memo: the derivative of every node already differentiated (a body shares subexpressions: a
/// chain of N softplus layers in one lambda has 2^N paths but N derivatives to build).
SExprPtr diff_node(const SExprPtr& e, int k, Memo& memo);

SExprPtr diff_uncached(const SExprPtr& e, int k, Memo& memo) {
  auto diff = [&memo](const SExprPtr& x, int kk) { return diff_node(x, kk, memo); };
  auto c = [](double v) { return sconst(v); };
  auto add = [](SExprPtr a, SExprPtr b) { return sbinary(SOp::Add, a, b); };
  auto sub = [](SExprPtr a, SExprPtr b) { return sbinary(SOp::Sub, a, b); };
  // Terms of the chain rule whose factor is the derivative 0 of a constant or another argument are dropped, as
  // torch's autograd never computes them (sbinary keeps x*0 and 0/x: x may be NaN or inf).
  auto mul = [](SExprPtr a, SExprPtr b) {
    return is_const(a, 0) || is_const(b, 0) ? sconst(0.0) : sbinary(SOp::Mul, a, b);
  };
  auto div = [](SExprPtr a, SExprPtr b) { return is_const(a, 0) ? sconst(0.0) : sbinary(SOp::Div, a, b); };
  switch (e->op) {
    case SOp::Const: return c(0);
    case SOp::Arg: return c(e->arg == k ? 1.0 : 0.0);
    default: break;
  }
  const SExprPtr& a = e->a;
  SExprPtr da = diff(a, k);
  if (sop_arity(e->op) == 1) {
    if (is_const(da, 0)) return c(0);
    switch (e->op) {
      case SOp::Neg: return sunary(SOp::Neg, da);
      case SOp::Abs: return mul(sunary(SOp::Sign, a), da);
      case SOp::Exp: return mul(e, da);
      case SOp::Log: return div(da, a);
      case SOp::Log1p: return div(da, sbinary(SOp::Add, c(1), a));
      // d erf(a) = 2/sqrt(pi) exp(-a^2) da (torch's erf backward: 2/sqrt(pi) * exp(-x^2) * grad); erfc: its negation
      case SOp::Erf:
      case SOp::Erfc: {
        SExprPtr d = mul(c(e->op == SOp::Erf ? 1.1283791670955126 : -1.1283791670955126),
                         sunary(SOp::Exp, sunary(SOp::Neg, mul(a, a))));
        return mul(d, da);
      }
      case SOp::Sqrt: return div(mul(c(0.5), da), e);
      case SOp::Rsqrt: return mul(mul(c(-0.5), div(e, a)), da);
      case SOp::Sin: return mul(sunary(SOp::Cos, a), da);
      case SOp::Cos: return sunary(SOp::Neg, mul(sunary(SOp::Sin, a), da));
      case SOp::Tanh: return mul(sub(c(1), mul(e, e)), da);
      // sigmoid(x) * sigmoid(-x), not s * (1 - s): 1 - s cancels to 0 in f32 for x > ~17 (sigmoid'(20) = 2.06e-9)
      case SOp::Sigmoid: return mul(mul(e, sunary(SOp::Sigmoid, sunary(SOp::Neg, a))), da);
      // torch's threshold_backward: 0 where the input is <= 0, else the incoming gradient (also for NaN inputs)
      case SOp::Relu: return sselect(sbinary(SOp::Le, a, c(0)), c(0), da);
      case SOp::Sign:
      case SOp::Floor:
      case SOp::Round: return c(0);
      case SOp::Recip: return sunary(SOp::Neg, div(da, mul(a, a)));
      default: break;
    }
  }
  const SExprPtr& b = e->b;
  if (e->op == SOp::Select) {
    SExprPtr db = diff(b, k), dc = diff(e->c, k);
    return sselect(a, db, dc);
  }
  SExprPtr db = diff(b, k);
  switch (e->op) {
    case SOp::Add: return add(da, db);
    case SOp::Sub: return sub(da, db);
    case SOp::Mul: return add(mul(da, b), mul(a, db));
    case SOp::Div: return sub(div(da, b), div(mul(a, db), mul(b, b)));
    case SOp::Pow: {
      // d(a^b) = b*a^(b-1)*da + a^b*log(a)*db
      SExprPtr t1 = is_const(da, 0) ? c(0) : mul(mul(b, sbinary(SOp::Pow, a, sub(b, c(1)))), da);
      SExprPtr t2 = is_const(db, 0) ? c(0) : mul(mul(e, sunary(SOp::Log, a)), db);
      return add(t1, t2);
    }
    case SOp::Max:
    case SOp::Min: {
      // torch.maximum/minimum: the gradient goes to the winner; ties split it evenly.
      SOp win = e->op == SOp::Max ? SOp::Gt : SOp::Lt;
      return sselect(sbinary(win, a, b), da,
                     sselect(sbinary(SOp::Eq, a, b), mul(c(0.5), add(da, db)), db));
    }
    default: return c(0);  // comparisons
  }
}

SExprPtr diff_node(const SExprPtr& e, int k, Memo& memo) {
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  SExprPtr d = diff_uncached(e, k, memo);
  memo.emplace(e.get(), d);
  return d;
}

}  // namespace

SExprPtr diff(const SExprPtr& e, int k) {
  Memo memo;
  return diff_node(e, k, memo);
}

}  // namespace sg
