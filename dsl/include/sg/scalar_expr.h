// shadergrad — scalar expressions: the body of an elementwise Map node.
//
// A Map node computes out[i] = body(in_0[i'], in_1[i''], ...) where i', i'' are the NumPy-broadcast
// indices. The body is a small immutable expression tree over its arguments (Arg k = input k of the node).
// The same tree is evaluated by the CPU reference (in f64), emitted as GLSL by codegen, and differentiated
// symbolically by autodiff (sg::diff in autodiff/).
//
// Builders fold constants and apply the identities x*1 = x, x+0 = x, x-0 = x, x/1 = x, x^1 = x, x^0 = 1, --x = x,
// so derivative bodies stay small and readable in generated shaders. They do not fold x*0 or 0/x (x may be NaN or
// +-inf, which IEEE and torch turn into NaN); autodiff drops its structurally zero terms itself.
//
// Numeric semantics (the CPU reference's, in f64; every backend must match them, docs/RELIABILITY.md): IEEE 754 with
// torch's choices where IEEE leaves one — relu(NaN) = NaN, maximum/minimum propagate NaN, sign(NaN) = NaN,
// x / 0 = +-inf (NaN for 0 / 0), pow(0, -1) = inf, comparisons with NaN are false (!= is true).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

namespace sg {

/// Scalar operation codes. Semantics follow PyTorch for the same-named elementwise function.
enum class SOp : uint8_t {
  // leaves
  Const,  ///< a literal (value)
  Arg,    ///< argument `arg` (input `arg` of the Map node)
  // unary
  Neg, Abs, Exp, Log,
  Log1p,  ///< log(1 + a), accurate for small |a| (torch.log1p)
  Erf,    ///< the error function 2/sqrt(pi) * integral_0^a exp(-t^2) dt (torch.erf, C99 erf)
  Erfc,   ///< 1 - erf(a), accurate where erf(a) is near 1 (torch.erfc, C99 erfc)
  Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Sign, Floor,
  Round,  ///< round half to even (torch.round)
  Recip,
  // binary
  Add, Sub, Mul, Div,
  Pow,    ///< a^b (torch.pow); a<0 with non-integer b gives NaN
  Max, Min,  ///< torch.maximum/minimum (NaN propagates on CPU; GPU follows GLSL max/min)
  Lt, Le, Gt, Ge, Eq, Ne,  ///< comparisons give 1.0 or 0.0
  // ternary
  Select,  ///< a != 0 ? b : c (torch.where)
};

/// Number of operands of an op (0, 1, 2 or 3).
int sop_arity(SOp op);
/// Lower-case name ("add", "sigmoid") used in node names and kernel names.
const char* sop_name(SOp op);

struct SExpr;
using SExprPtr = std::shared_ptr<const SExpr>;

/// One node of a scalar expression tree (immutable, shared).
struct SExpr {
  SOp op;
  double value = 0.0;  ///< for Const
  int arg = -1;        ///< for Arg
  SExprPtr a, b, c;    ///< operands (nullptr when unused)
};

// --- builders (with folding/simplification) ---
SExprPtr sconst(double v);
SExprPtr sarg(int index);
SExprPtr sunary(SOp op, SExprPtr a);
SExprPtr sbinary(SOp op, SExprPtr a, SExprPtr b);
SExprPtr sselect(SExprPtr cond, SExprPtr a, SExprPtr b);

bool is_const(const SExprPtr& e, double v);
bool is_const(const SExprPtr& e);

/// Evaluates in f64 with the given argument values (CPU reference semantics), walking the tree view (tests, small
/// bodies; the CPU reference evaluates a body as a DAG: runtime/src/cpu_reference.cpp).
double seval(const SExpr& e, llvm::ArrayRef<double> args);
/// Evaluates one op on already-evaluated operands.
double seval_op(SOp op, double a, double b, double c);

// A body is a DAG: a lambda that reuses a Scalar (softplus reads its argument twice; autodiff's tanh' = 1 - e * e)
// shares it. The functions below visit each distinct node once, also where a body of N nodes has 2^N paths (a
// lambda looping over layers); the tree view is what sexpr_size counts and what sexpr_str prints.

/// Bodies whose tree view has more nodes than this are rebuilt (ssubstitute) and lowered to kernel IR as DAGs, their
/// shared subexpressions computed once; smaller ones are rebuilt and lowered as their tree view (a shared
/// subexpression is printed once per use, the generated code's long-standing form).
inline constexpr int kSExprTreeLimit = 1024;

/// Highest Arg index used + 1 (0 if none).
int sarg_count(const SExprPtr& e);
/// Replaces Arg k by subs[k] everywhere (as a tree up to kSExprTreeLimit nodes, else keeping e's sharing).
SExprPtr ssubstitute(const SExprPtr& e, llvm::ArrayRef<SExprPtr> subs);
/// Infix rendering for humans and comments: "(a0 * sigmoid(a0))"; longer than `max_chars`, cut there and ended
/// with "...".
std::string sexpr_str(const SExprPtr& e, size_t max_chars = 4096);
/// Number of nodes of the tree view (a cost proxy for fusion decisions), at most INT_MAX.
int sexpr_size(const SExprPtr& e);
/// Structural equality.
bool sexpr_equal(const SExprPtr& x, const SExprPtr& y);

/// A symbolic scalar: what a custom elementwise lambda passed to sg::map receives and returns.
/// Supports + - * / unary -, comparisons, and the sg:: math functions (exp, sigmoid, max, where, ...).
struct Scalar {
  SExprPtr e;
  Scalar(SExprPtr x) : e(std::move(x)) {}          // NOLINT(implicit)
  Scalar(double v) : e(sconst(v)) {}               // NOLINT(implicit)
  Scalar(float v) : e(sconst(v)) {}                // NOLINT(implicit)
  Scalar(int v) : e(sconst(v)) {}                  // NOLINT(implicit)
};

Scalar operator+(Scalar a, Scalar b);
Scalar operator-(Scalar a, Scalar b);
Scalar operator*(Scalar a, Scalar b);
Scalar operator/(Scalar a, Scalar b);
Scalar operator-(Scalar a);
Scalar operator<(Scalar a, Scalar b);
Scalar operator<=(Scalar a, Scalar b);
Scalar operator>(Scalar a, Scalar b);
Scalar operator>=(Scalar a, Scalar b);
Scalar operator==(Scalar a, Scalar b);
Scalar operator!=(Scalar a, Scalar b);
Scalar neg(Scalar a);
Scalar abs(Scalar a);
Scalar exp(Scalar a);
Scalar log(Scalar a);
/// log(1 + a), accurate for small |a| (torch.log1p, C99 log1p): log1p(-1) = -inf, NaN below -1.
Scalar log1p(Scalar a);
/// The error function 2/sqrt(pi) * integral_0^a exp(-t^2) dt (torch.erf, C99 erf): erf(+-inf) = +-1, erf(-0) = -0,
/// NaN propagates. Derivative 2/sqrt(pi) * exp(-a^2). GPU helper: codegen/shaders/math/erf.glsl (minimax, a few ulps).
Scalar erf(Scalar a);
/// 1 - erf(a) without cancellation (torch.erfc, C99 erfc): erfc(-inf) = 2, erfc(inf) = 0, erfc(9) = 4.1e-37,
/// NaN propagates. Derivative -2/sqrt(pi) * exp(-a^2).
Scalar erfc(Scalar a);
Scalar sqrt(Scalar a);
Scalar rsqrt(Scalar a);
Scalar sin(Scalar a);
Scalar cos(Scalar a);
Scalar tanh(Scalar a);
Scalar sigmoid(Scalar a);
/// max(a, 0) with relu(NaN) = NaN (torch.relu).
Scalar relu(Scalar a);
Scalar sign(Scalar a);
Scalar floor(Scalar a);
Scalar round(Scalar a);
Scalar reciprocal(Scalar a);
Scalar pow(Scalar a, Scalar b);
Scalar max(Scalar a, Scalar b);
Scalar min(Scalar a, Scalar b);
Scalar where(Scalar c, Scalar a, Scalar b);
/// x if x > 0 else slope*x (torch.nn.functional.leaky_relu).
Scalar leaky_relu(Scalar x, double slope = 0.01);
/// log(1 + exp(x)), computed stably as max(x,0) + log1p(exp(-|x|)) (torch softplus, beta=1): softplus(-20) = 2.06e-9.
Scalar softplus(Scalar x);
/// Exact GELU, x * Phi(x) = x/2 * (1 + erf(x/sqrt(2))) (Hendrycks & Gimpel 2016; torch.nn.functional.gelu with
/// approximate='none'), computed as x/2 * erfc(-x/sqrt(2)): no cancellation for negative x (gelu(-10) = -7.6e-23,
/// where 1 + erf rounds to 0). gelu(inf) = inf, gelu(-inf) = NaN (torch: inf * 0), NaN propagates.
Scalar gelu(Scalar x);
/// The tanh approximation of GELU, x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016;
/// torch.nn.functional.gelu with approximate='tanh'), computed as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) (the
/// same function, 1 + tanh(u) = 2 sigmoid(2u), without cancellation for negative x). gelu_tanh(-inf) = NaN as torch's.
Scalar gelu_tanh(Scalar x);

}  // namespace sg
