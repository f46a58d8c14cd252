// Scalar expression builders (with folding), evaluation, printing.
#include "sg/scalar_expr.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace sg {

int sop_arity(SOp op) {
  if (op == SOp::Const || op == SOp::Arg) return 0;
  if (op <= SOp::Recip) return 1;
  if (op == SOp::Select) return 3;
  return 2;
}

const char* sop_name(SOp op) {
  switch (op) {
    case SOp::Const: return "const";
    case SOp::Arg: return "arg";
    case SOp::Neg: return "neg";
    case SOp::Abs: return "abs";
    case SOp::Exp: return "exp";
    case SOp::Log: return "log";
    case SOp::Log1p: return "log1p";
    case SOp::Sqrt: return "sqrt";
    case SOp::Rsqrt: return "rsqrt";
    case SOp::Sin: return "sin";
    case SOp::Cos: return "cos";
    case SOp::Tanh: return "tanh";
    case SOp::Sigmoid: return "sigmoid";
    case SOp::Relu: return "relu";
    case SOp::Sign: return "sign";
    case SOp::Floor: return "floor";
    case SOp::Round: return "round";
    case SOp::Recip: return "recip";
    case SOp::Add: return "add";
    case SOp::Sub: return "sub";
    case SOp::Mul: return "mul";
    case SOp::Div: return "div";
    case SOp::Pow: return "pow";
    case SOp::Max: return "max";
    case SOp::Min: return "min";
    case SOp::Lt: return "lt";
    case SOp::Le: return "le";
    case SOp::Gt: return "gt";
    case SOp::Ge: return "ge";
    case SOp::Eq: return "eq";
    case SOp::Ne: return "ne";
    case SOp::Select: return "where";
  }
  return "?";
}

static SExprPtr mk(SOp op, SExprPtr a = nullptr, SExprPtr b = nullptr, SExprPtr c = nullptr) {
  auto e = std::make_shared<SExpr>();
  e->op = op;
  e->a = std::move(a);
  e->b = std::move(b);
  e->c = std::move(c);
  return e;
}

SExprPtr sconst(double v) {
  auto e = std::make_shared<SExpr>();
  e->op = SOp::Const;
  e->value = v;
  return e;
}

SExprPtr sarg(int index) {
  auto e = std::make_shared<SExpr>();
  e->op = SOp::Arg;
  e->arg = index;
  return e;
}

bool is_const(const SExprPtr& e) { return e && e->op == SOp::Const; }
bool is_const(const SExprPtr& e, double v) { return is_const(e) && e->value == v; }

double seval_op(SOp op, double a, double b, double c) {
  switch (op) {
    case SOp::Neg: return -a;
    case SOp::Abs: return std::fabs(a);
    case SOp::Exp: return std::exp(a);
    case SOp::Log: return std::log(a);
    case SOp::Log1p: return std::log1p(a);
    case SOp::Sqrt: return std::sqrt(a);
    case SOp::Rsqrt: return 1.0 / std::sqrt(a);
    case SOp::Sin: return std::sin(a);
    case SOp::Cos: return std::cos(a);
    case SOp::Tanh: return std::tanh(a);
    case SOp::Sigmoid: return 1.0 / (1.0 + std::exp(-a));
    case SOp::Relu: return std::isnan(a) ? a : (a > 0 ? a : 0.0);  // torch.relu(NaN) = NaN
    case SOp::Sign: return a > 0 ? 1.0 : (a < 0 ? -1.0 : (std::isnan(a) ? a : 0.0));
    case SOp::Floor: return std::floor(a);
    case SOp::Round: return std::nearbyint(a);  // default rounding mode: half to even
    case SOp::Recip: return 1.0 / a;
    case SOp::Add: return a + b;
    case SOp::Sub: return a - b;
    case SOp::Mul: return a * b;
    case SOp::Div: return a / b;
    case SOp::Pow: return std::pow(a, b);
    case SOp::Max: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
    case SOp::Min: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::min(a, b);
    case SOp::Lt: return a < b ? 1.0 : 0.0;
    case SOp::Le: return a <= b ? 1.0 : 0.0;
    case SOp::Gt: return a > b ? 1.0 : 0.0;
    case SOp::Ge: return a >= b ? 1.0 : 0.0;
    case SOp::Eq: return a == b ? 1.0 : 0.0;
    case SOp::Ne: return a != b ? 1.0 : 0.0;
    case SOp::Select: return a != 0.0 ? b : c;
    case SOp::Const:
    case SOp::Arg: break;
  }
  return 0.0;
}

SExprPtr sunary(SOp op, SExprPtr a) {
  if (is_const(a)) return sconst(seval_op(op, a->value, 0, 0));
  if (op == SOp::Neg && a->op == SOp::Neg) return a->a;
  return mk(op, std::move(a));
}

SExprPtr sbinary(SOp op, SExprPtr a, SExprPtr b) {
  if (is_const(a) && is_const(b)) return sconst(seval_op(op, a->value, b->value, 0));
  switch (op) {
    case SOp::Add:
      if (is_const(a, 0)) return b;
      if (is_const(b, 0)) return a;
      if (b->op == SOp::Neg) return sbinary(SOp::Sub, a, b->a);
      break;
    case SOp::Sub:
      if (is_const(b, 0)) return a;
      if (is_const(a, 0)) return sunary(SOp::Neg, b);
      if (b->op == SOp::Neg) return sbinary(SOp::Add, a, b->a);
      break;
    case SOp::Mul:
      // no x*0 -> 0: x may be NaN or +-inf (torch: NaN); autodiff drops its structural zero terms itself (diff.cpp)
      if (is_const(a, 1)) return b;
      if (is_const(b, 1)) return a;
      if (is_const(a, -1)) return sunary(SOp::Neg, b);
      if (is_const(b, -1)) return sunary(SOp::Neg, a);
      break;
    case SOp::Div:
      if (is_const(b, 1)) return a;  // no 0/x -> 0: 0/0 and 0/NaN are NaN
      break;
    case SOp::Pow:
      if (is_const(b, 1)) return a;
      if (is_const(b, 0)) return sconst(1.0);
      break;
    default: break;
  }
  return mk(op, std::move(a), std::move(b));
}

SExprPtr sselect(SExprPtr cond, SExprPtr a, SExprPtr b) {
  if (is_const(cond)) return cond->value != 0.0 ? a : b;
  if (is_const(a) && is_const(b) && a->value == b->value) return a;
  return mk(SOp::Select, std::move(cond), std::move(a), std::move(b));
}

double seval(const SExpr& e, llvm::ArrayRef<double> args) {
  switch (e.op) {
    case SOp::Const: return e.value;
    case SOp::Arg: return args[e.arg];
    case SOp::Select: return seval(*e.a, args) != 0.0 ? seval(*e.b, args) : seval(*e.c, args);
    default: break;
  }
  double a = seval(*e.a, args);
  double b = e.b ? seval(*e.b, args) : 0.0;
  return seval_op(e.op, a, b, 0.0);
}

int sarg_count(const SExprPtr& e) {
  if (!e) return 0;
  if (e->op == SOp::Arg) return e->arg + 1;
  return std::max({sarg_count(e->a), sarg_count(e->b), sarg_count(e->c)});
}

SExprPtr ssubstitute(const SExprPtr& e, llvm::ArrayRef<SExprPtr> subs) {
  switch (e->op) {
    case SOp::Const: return e;
    case SOp::Arg: return subs[e->arg];
    case SOp::Select:
      return sselect(ssubstitute(e->a, subs), ssubstitute(e->b, subs), ssubstitute(e->c, subs));
    default: break;
  }
  if (sop_arity(e->op) == 1) return sunary(e->op, ssubstitute(e->a, subs));
  return sbinary(e->op, ssubstitute(e->a, subs), ssubstitute(e->b, subs));
}

static std::string fmt_const(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string sexpr_str(const SExprPtr& e) {
  switch (e->op) {
    case SOp::Const: return fmt_const(e->value);
    case SOp::Arg: return fmt::format("a{}", e->arg);
    case SOp::Add: return fmt::format("({} + {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Sub: return fmt::format("({} - {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Mul: return fmt::format("({} * {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Div: return fmt::format("({} / {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Lt: return fmt::format("({} < {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Le: return fmt::format("({} <= {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Gt: return fmt::format("({} > {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Ge: return fmt::format("({} >= {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Eq: return fmt::format("({} == {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Ne: return fmt::format("({} != {})", sexpr_str(e->a), sexpr_str(e->b));
    case SOp::Neg: return fmt::format("-{}", sexpr_str(e->a));
    case SOp::Select:
      return fmt::format("where({}, {}, {})", sexpr_str(e->a), sexpr_str(e->b), sexpr_str(e->c));
    default: break;
  }
  if (sop_arity(e->op) == 1) return fmt::format("{}({})", sop_name(e->op), sexpr_str(e->a));
  return fmt::format("{}({}, {})", sop_name(e->op), sexpr_str(e->a), sexpr_str(e->b));
}

int sexpr_size(const SExprPtr& e) {
  if (!e) return 0;
  return 1 + sexpr_size(e->a) + sexpr_size(e->b) + sexpr_size(e->c);
}

bool sexpr_equal(const SExprPtr& x, const SExprPtr& y) {
  if (x == y) return true;
  if (!x || !y || x->op != y->op) return false;
  if (x->op == SOp::Const) return x->value == y->value || (std::isnan(x->value) && std::isnan(y->value));
  if (x->op == SOp::Arg) return x->arg == y->arg;
  return sexpr_equal(x->a, y->a) && sexpr_equal(x->b, y->b) && sexpr_equal(x->c, y->c);
}

// --- Scalar operators ---
Scalar operator+(Scalar a, Scalar b) { return sbinary(SOp::Add, a.e, b.e); }
Scalar operator-(Scalar a, Scalar b) { return sbinary(SOp::Sub, a.e, b.e); }
Scalar operator*(Scalar a, Scalar b) { return sbinary(SOp::Mul, a.e, b.e); }
Scalar operator/(Scalar a, Scalar b) { return sbinary(SOp::Div, a.e, b.e); }
Scalar operator-(Scalar a) { return sunary(SOp::Neg, a.e); }
Scalar operator<(Scalar a, Scalar b) { return sbinary(SOp::Lt, a.e, b.e); }
Scalar operator<=(Scalar a, Scalar b) { return sbinary(SOp::Le, a.e, b.e); }
Scalar operator>(Scalar a, Scalar b) { return sbinary(SOp::Gt, a.e, b.e); }
Scalar operator>=(Scalar a, Scalar b) { return sbinary(SOp::Ge, a.e, b.e); }
Scalar operator==(Scalar a, Scalar b) { return sbinary(SOp::Eq, a.e, b.e); }
Scalar operator!=(Scalar a, Scalar b) { return sbinary(SOp::Ne, a.e, b.e); }
Scalar neg(Scalar a) { return sunary(SOp::Neg, a.e); }
Scalar abs(Scalar a) { return sunary(SOp::Abs, a.e); }
Scalar exp(Scalar a) { return sunary(SOp::Exp, a.e); }
Scalar log(Scalar a) { return sunary(SOp::Log, a.e); }
Scalar log1p(Scalar a) { return sunary(SOp::Log1p, a.e); }
Scalar sqrt(Scalar a) { return sunary(SOp::Sqrt, a.e); }
Scalar rsqrt(Scalar a) { return sunary(SOp::Rsqrt, a.e); }
Scalar sin(Scalar a) { return sunary(SOp::Sin, a.e); }
Scalar cos(Scalar a) { return sunary(SOp::Cos, a.e); }
Scalar tanh(Scalar a) { return sunary(SOp::Tanh, a.e); }
Scalar sigmoid(Scalar a) { return sunary(SOp::Sigmoid, a.e); }
Scalar relu(Scalar a) { return sunary(SOp::Relu, a.e); }
Scalar sign(Scalar a) { return sunary(SOp::Sign, a.e); }
Scalar floor(Scalar a) { return sunary(SOp::Floor, a.e); }
Scalar round(Scalar a) { return sunary(SOp::Round, a.e); }
Scalar reciprocal(Scalar a) { return sunary(SOp::Recip, a.e); }
Scalar pow(Scalar a, Scalar b) { return sbinary(SOp::Pow, a.e, b.e); }
Scalar max(Scalar a, Scalar b) { return sbinary(SOp::Max, a.e, b.e); }
Scalar min(Scalar a, Scalar b) { return sbinary(SOp::Min, a.e, b.e); }
Scalar where(Scalar c, Scalar a, Scalar b) { return sselect(c.e, a.e, b.e); }
Scalar leaky_relu(Scalar x, double slope) { return where(x > 0.0, x, x * slope); }
Scalar softplus(Scalar x) { return max(x, 0.0) + log1p(exp(-abs(x))); }

}  // namespace sg
