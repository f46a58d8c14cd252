// Scalar expression builders (with folding), evaluation, printing.
#include "sg/scalar_expr.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

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
    case SOp::Erf: return "erf";
    case SOp::Erfc: return "erfc";
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
    case SOp::Erf: return std::erf(a);
    case SOp::Erfc: return std::erfc(a);
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

namespace {

/// Calls f on every distinct node of e once (children before parents).
template <class F>
void for_each_node(const SExprPtr& e, F&& f) {
  std::unordered_set<const SExpr*> seen;
  std::vector<std::pair<const SExpr*, bool>> stack{{e.get(), false}};
  while (!stack.empty()) {
    auto [x, children_done] = stack.back();
    stack.pop_back();
    if (!x) continue;
    if (children_done) {
      f(*x);
      continue;
    }
    if (!seen.insert(x).second) continue;
    stack.push_back({x, true});
    stack.push_back({x->c.get(), false}), stack.push_back({x->b.get(), false}), stack.push_back({x->a.get(), false});
  }
}

/// ssubstitute's rebuild; memo == nullptr: as a tree (every use of a shared node rebuilt).
SExprPtr substitute(const SExprPtr& e, llvm::ArrayRef<SExprPtr> subs,
                    std::unordered_map<const SExpr*, SExprPtr>* memo) {
  switch (e->op) {
    case SOp::Const: return e;
    case SOp::Arg: return subs[e->arg];
    default: break;
  }
  if (memo)
    if (auto it = memo->find(e.get()); it != memo->end()) return it->second;
  SExprPtr r;
  if (e->op == SOp::Select)
    r = sselect(substitute(e->a, subs, memo), substitute(e->b, subs, memo), substitute(e->c, subs, memo));
  else if (sop_arity(e->op) == 1)
    r = sunary(e->op, substitute(e->a, subs, memo));
  else
    r = sbinary(e->op, substitute(e->a, subs, memo), substitute(e->b, subs, memo));
  if (memo) memo->emplace(e.get(), r);
  return r;
}

}  // namespace

int sarg_count(const SExprPtr& e) {
  int n = 0;
  if (e) for_each_node(e, [&](const SExpr& x) { if (x.op == SOp::Arg) n = std::max(n, x.arg + 1); });
  return n;
}

SExprPtr ssubstitute(const SExprPtr& e, llvm::ArrayRef<SExprPtr> subs) {
  if (sexpr_size(e) <= kSExprTreeLimit) return substitute(e, subs, nullptr);
  std::unordered_map<const SExpr*, SExprPtr> memo;
  return substitute(e, subs, &memo);
}

static std::string fmt_const(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

namespace {

/// Appends e's infix form to out; stops once out is longer than `max` (the tree view of a DAG can be exponential).
void print(const SExprPtr& e, std::string& out, size_t max) {
  if (out.size() > max) return;
  auto bin = [&](const char* op) {
    out += '(';
    print(e->a, out, max);
    out += op;
    print(e->b, out, max);
    out += ')';
  };
  switch (e->op) {
    case SOp::Const: out += fmt_const(e->value); return;
    case SOp::Arg: out += fmt::format("a{}", e->arg); return;
    case SOp::Add: return bin(" + ");
    case SOp::Sub: return bin(" - ");
    case SOp::Mul: return bin(" * ");
    case SOp::Div: return bin(" / ");
    case SOp::Lt: return bin(" < ");
    case SOp::Le: return bin(" <= ");
    case SOp::Gt: return bin(" > ");
    case SOp::Ge: return bin(" >= ");
    case SOp::Eq: return bin(" == ");
    case SOp::Ne: return bin(" != ");
    case SOp::Neg:
      out += '-';
      print(e->a, out, max);
      return;
    default: break;
  }
  out += e->op == SOp::Select ? "where" : sop_name(e->op);
  out += '(';
  print(e->a, out, max);
  if (e->b) {
    out += ", ";
    print(e->b, out, max);
  }
  if (e->c) {
    out += ", ";
    print(e->c, out, max);
  }
  out += ')';
}

bool equal(const SExprPtr& x, const SExprPtr& y, std::set<std::pair<const SExpr*, const SExpr*>>& known) {
  if (x == y) return true;
  if (!x || !y || x->op != y->op) return false;
  if (x->op == SOp::Const) return x->value == y->value || (std::isnan(x->value) && std::isnan(y->value));
  if (x->op == SOp::Arg) return x->arg == y->arg;
  if (known.count({x.get(), y.get()})) return true;  // shared subexpressions are compared once
  if (!equal(x->a, y->a, known) || !equal(x->b, y->b, known) || !equal(x->c, y->c, known)) return false;
  known.insert({x.get(), y.get()});
  return true;
}

}  // namespace

std::string sexpr_str(const SExprPtr& e, size_t max_chars) {
  std::string out;
  print(e, out, max_chars);
  if (out.size() > max_chars) out.resize(max_chars), out += "...";
  return out;
}

namespace {
/// Counts the tree view's nodes down from `budget`; false once it runs out (no allocation: bodies are small).
bool count_within(const SExpr* e, int& budget) {
  if (!e) return true;
  if (--budget < 0) return false;
  return count_within(e->a.get(), budget) && count_within(e->b.get(), budget) && count_within(e->c.get(), budget);
}
}  // namespace

int sexpr_size(const SExprPtr& e) {
  if (!e) return 0;
  constexpr int kWalk = 4096;
  if (int budget = kWalk; count_within(e.get(), budget)) return kWalk - budget;  // small: walk the tree
  std::unordered_map<const SExpr*, double> size;  // of the tree view below each node, children first
  for_each_node(e, [&](const SExpr& x) {
    double s = 1;
    for (const SExprPtr* c : {&x.a, &x.b, &x.c})
      if (*c) s += size.at(c->get());
    size[&x] = std::min(s, 1e300);
  });
  return static_cast<int>(std::min(size.at(e.get()), double{std::numeric_limits<int>::max()}));
}

bool sexpr_equal(const SExprPtr& x, const SExprPtr& y) {
  std::set<std::pair<const SExpr*, const SExpr*>> known;
  return equal(x, y, known);
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
Scalar erf(Scalar a) { return sunary(SOp::Erf, a.e); }
Scalar erfc(Scalar a) { return sunary(SOp::Erfc, a.e); }
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
// 0.70710678118654752 = 1/sqrt(2) (M_SQRT1_2); 1.5957691216057308 = 2 sqrt(2/pi) (torch's kBeta = sqrt(2/pi), doubled)
Scalar gelu(Scalar x) { return x * 0.5 * erfc(x * -0.70710678118654752); }
Scalar gelu_tanh(Scalar x) { return x * sigmoid((x + x * x * x * 0.044715) * 1.5957691216057308); }

}  // namespace sg
