// shadergrad — Tensor handles, elementwise expression templates, and the op library.
//
// A Tensor is a handle to a graph Node. Elementwise math on tensors builds compile-time expression types
// (CRTP, no virtual calls); converting such an expression to a Tensor materialises it into ONE Map node whose
// body is the scalar expression, with NumPy broadcasting over the distinct tensors it reads:
//
//     sg::Tensor h = sg::relu(x * w + b);          // one Map node, body relu(a0 * a1 + a2)
//     sg::Tensor y = sg::map([](auto v) { return v * sg::sigmoid(v); }, h);   // custom layer (SiLU)
//
// Non-elementwise ops (matmul, sum, conv2d, ...) accept expressions too and create their own nodes.
// Every entry point captures the caller's sg::source_location; shape errors throw sg::ShapeError naming
// the op, the shapes and the user's file:line, e.g. "matmul: inner dimensions differ (32x784 @ 100x10)
// at model.cpp:42".
#pragma once

#include <array>
#include <concepts>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sg/graph.h"

namespace sg {

using loc_t = sg::source_location;  // the caller's file and line (error.h)

// ------------------------------------------------------------------------------------------------
// Expression templates
// ------------------------------------------------------------------------------------------------

/// The distinct tensors an expression reads; the k-th becomes Arg k of the Map body.
struct ExprArgs {
  std::vector<NodePtr> inputs;
  int index_of(const NodePtr& n);  ///< adds n if new
};

template <class D>
struct Expr {
  const D& derived() const { return static_cast<const D&>(*this); }
};

class Tensor;
template <class T>
concept IsExpr = std::is_base_of_v<Expr<T>, T>;
template <class T>
concept IsNumber = std::is_arithmetic_v<T>;

/// A literal in a tensor expression.
struct ConstExpr : Expr<ConstExpr> {
  double v;
  explicit ConstExpr(double x) : v(x) {}
  SExprPtr build(ExprArgs&) const { return sconst(v); }
};

template <SOp O, class A>
struct UnaryExpr : Expr<UnaryExpr<O, A>> {
  A a;
  explicit UnaryExpr(const A& x) : a(x) {}
  SExprPtr build(ExprArgs& args) const { return sunary(O, a.build(args)); }
};

template <SOp O, class A, class B>
struct BinaryExpr : Expr<BinaryExpr<O, A, B>> {
  A a;
  B b;
  BinaryExpr(const A& x, const B& y) : a(x), b(y) {}
  SExprPtr build(ExprArgs& args) const {
    SExprPtr x = a.build(args);  // sequenced: Arg numbering follows the expression left to right
    SExprPtr y = b.build(args);
    return sbinary(O, std::move(x), std::move(y));
  }
};

template <class C, class A, class B>
struct SelectExpr : Expr<SelectExpr<C, A, B>> {
  C c;
  A a;
  B b;
  SelectExpr(const C& z, const A& x, const B& y) : c(z), a(x), b(y) {}
  SExprPtr build(ExprArgs& args) const {
    SExprPtr z = c.build(args);  // sequenced, as in BinaryExpr
    SExprPtr x = a.build(args);
    SExprPtr y = b.build(args);
    return sselect(std::move(z), std::move(x), std::move(y));
  }
};

/// An arbitrary prebuilt body over explicit arguments (used by sg::map and leaky_relu/softplus).
struct BodyExpr : Expr<BodyExpr> {
  SExprPtr body;
  std::vector<NodePtr> args;
  SExprPtr build(ExprArgs& a) const;
};

/// Materialises an expression into a Map node (or returns the input itself for a bare tensor).
/// Throws ShapeError when the tensors it reads do not broadcast.
NodePtr materialize(const SExprPtr& body, const std::vector<NodePtr>& inputs, const SourceLoc& loc);

// ------------------------------------------------------------------------------------------------
// Tensor
// ------------------------------------------------------------------------------------------------

/// A handle to a graph node (cheap to copy). Default-constructed tensors are empty (`!t`).
class Tensor : public Expr<Tensor> {
 public:
  Tensor() = default;
  explicit Tensor(NodePtr n) : node_(std::move(n)) {}
  /// Materialises an elementwise expression into one Map node.
  template <class D>
    requires(!std::is_same_v<D, Tensor>)
  Tensor(const Expr<D>& e, loc_t loc = loc_t::current()) {  // NOLINT(implicit)
    ExprArgs args;
    SExprPtr body = e.derived().build(args);
    node_ = materialize(body, args.inputs, SourceLoc(loc));
  }

  const NodePtr& node() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }
  ShapeRef shape() const { return node_->shape; }
  int64_t dim(int axis) const;  ///< size of axis (negative counts from the end); ShapeError if out of range
  int rank() const { return static_cast<int>(node_->shape.size()); }
  int64_t numel() const { return node_->numel(); }
  DType dtype() const { return node_->dtype; }
  const std::string& name() const { return node_->name; }

  SExprPtr build(ExprArgs& args) const { return sarg(args.index_of(node_)); }

 private:
  NodePtr node_;
};

template <class T>
auto as_expr(const T& x) {
  if constexpr (IsNumber<T>)
    return ConstExpr(static_cast<double>(x));
  else
    return x;
}
template <class T>
using as_expr_t = decltype(as_expr(std::declval<T>()));

template <class A, class B>
concept ExprPair = (IsExpr<A> && IsExpr<B>) || (IsExpr<A> && IsNumber<B>) || (IsNumber<A> && IsExpr<B>);

#define SG_BINARY_OPERATOR(OPSYM, SOPCODE)                                               \
  template <class A, class B>                                                             \
    requires ExprPair<A, B>                                                               \
  auto operator OPSYM(const A& a, const B& b) {                                           \
    return BinaryExpr<SOPCODE, as_expr_t<A>, as_expr_t<B>>(as_expr(a), as_expr(b));      \
  }
SG_BINARY_OPERATOR(+, SOp::Add)
SG_BINARY_OPERATOR(-, SOp::Sub)
SG_BINARY_OPERATOR(*, SOp::Mul)
SG_BINARY_OPERATOR(/, SOp::Div)
SG_BINARY_OPERATOR(<, SOp::Lt)
SG_BINARY_OPERATOR(<=, SOp::Le)
SG_BINARY_OPERATOR(>, SOp::Gt)
SG_BINARY_OPERATOR(>=, SOp::Ge)
#undef SG_BINARY_OPERATOR

#define SG_BINARY_FUNCTION(FN, SOPCODE)                                                  \
  template <class A, class B>                                                             \
    requires ExprPair<A, B>                                                               \
  auto FN(const A& a, const B& b) {                                                       \
    return BinaryExpr<SOPCODE, as_expr_t<A>, as_expr_t<B>>(as_expr(a), as_expr(b));      \
  }
SG_BINARY_FUNCTION(pow, SOp::Pow)
SG_BINARY_FUNCTION(maximum, SOp::Max)
SG_BINARY_FUNCTION(minimum, SOp::Min)
SG_BINARY_FUNCTION(eq, SOp::Eq)
SG_BINARY_FUNCTION(ne, SOp::Ne)
SG_BINARY_FUNCTION(lt, SOp::Lt)
SG_BINARY_FUNCTION(le, SOp::Le)
SG_BINARY_FUNCTION(gt, SOp::Gt)
SG_BINARY_FUNCTION(ge, SOp::Ge)
#undef SG_BINARY_FUNCTION

template <class A>
  requires IsExpr<A>
auto operator-(const A& a) {
  return UnaryExpr<SOp::Neg, A>(a);
}

#define SG_UNARY_FUNCTION(FN, SOPCODE)            \
  template <class A>                               \
    requires IsExpr<A>                             \
  auto FN(const A& a) {                            \
    return UnaryExpr<SOPCODE, A>(a);               \
  }
SG_UNARY_FUNCTION(neg, SOp::Neg)
SG_UNARY_FUNCTION(abs, SOp::Abs)
SG_UNARY_FUNCTION(exp, SOp::Exp)
SG_UNARY_FUNCTION(log, SOp::Log)
SG_UNARY_FUNCTION(log1p, SOp::Log1p)
SG_UNARY_FUNCTION(erf, SOp::Erf)    // torch.erf: erf(+-inf) = +-1, NaN propagates (Scalar erf's docstring)
SG_UNARY_FUNCTION(erfc, SOp::Erfc)  // torch.erfc: 1 - erf(x) without cancellation
SG_UNARY_FUNCTION(sqrt, SOp::Sqrt)
SG_UNARY_FUNCTION(rsqrt, SOp::Rsqrt)
SG_UNARY_FUNCTION(sin, SOp::Sin)
SG_UNARY_FUNCTION(cos, SOp::Cos)
SG_UNARY_FUNCTION(tanh, SOp::Tanh)
SG_UNARY_FUNCTION(sigmoid, SOp::Sigmoid)
SG_UNARY_FUNCTION(relu, SOp::Relu)
SG_UNARY_FUNCTION(sign, SOp::Sign)
SG_UNARY_FUNCTION(floor, SOp::Floor)
SG_UNARY_FUNCTION(round, SOp::Round)
SG_UNARY_FUNCTION(reciprocal, SOp::Recip)
#undef SG_UNARY_FUNCTION

/// torch.where(cond, a, b): cond != 0 selects a. Arguments may be tensors, expressions or numbers.
template <class C, class A, class B>
  requires IsExpr<C> && (IsExpr<A> || IsNumber<A>) && (IsExpr<B> || IsNumber<B>)
auto where(const C& c, const A& a, const B& b) {
  return SelectExpr<C, as_expr_t<A>, as_expr_t<B>>(c, as_expr(a), as_expr(b));
}

/// leaky_relu(x) = x > 0 ? x : slope*x (torch.nn.functional.leaky_relu).
Tensor leaky_relu(const Tensor& x, double slope = 0.01, loc_t loc = loc_t::current());
/// softplus(x) = log(1 + exp(x)), stable form (torch.nn.functional.softplus, beta=1).
Tensor softplus(const Tensor& x, loc_t loc = loc_t::current());
/// GELU (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units"), elementwise, any shape, f32; the torch equivalent is
/// torch.nn.functional.gelu(x, approximate=...):
///  - approximate "none" (default): exact, x/2 * (1 + erf(x/sqrt(2))), computed as x/2 * erfc(-x/sqrt(2)) (no
///    cancellation for negative x: gelu(-10) = -7.6e-23 where torch's float32 gives 0);
///  - approximate "tanh": x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), computed as x * sigmoid(2 sqrt(2/pi) *
///    (x + 0.044715 x^3)) (the same function).
/// gelu(inf) = inf, gelu(-inf) = NaN (as torch: -inf * 0), NaN propagates. One Map node: fuses like any elementwise op;
/// its gradient is the body's symbolic derivative. Throws ValueError for another `approximate` (torch: RuntimeError).
Tensor gelu(const Tensor& x, std::string_view approximate = "none", loc_t loc = loc_t::current());

/// A custom elementwise layer from a generic lambda over sg::Scalar. The lambda is instantiated once
/// with symbolic scalars; its result becomes the Map body (differentiated symbolically by autodiff).
/// Inputs broadcast like NumPy.
template <class F>
Tensor map(F f, const Tensor& a, loc_t loc = loc_t::current()) {
  Scalar r = f(Scalar(sarg(0)));
  return Tensor(materialize(r.e, {a.node()}, SourceLoc(loc)));
}
template <class F>
Tensor map(F f, const Tensor& a, const Tensor& b, loc_t loc = loc_t::current()) {
  Scalar r = f(Scalar(sarg(0)), Scalar(sarg(1)));
  return Tensor(materialize(r.e, {a.node(), b.node()}, SourceLoc(loc)));
}
template <class F>
Tensor map(F f, const Tensor& a, const Tensor& b, const Tensor& c, loc_t loc = loc_t::current()) {
  Scalar r = f(Scalar(sarg(0)), Scalar(sarg(1)), Scalar(sarg(2)));
  return Tensor(materialize(r.e, {a.node(), b.node(), c.node()}, SourceLoc(loc)));
}

// ------------------------------------------------------------------------------------------------
// Leaves
// ------------------------------------------------------------------------------------------------

/// Run-time data (a batch of images, labels). `name` must be unique in a Program.
Tensor input(const std::string& name, ShapeRef shape, DType dtype = DType::f32, loc_t loc = loc_t::current());
/// A trainable parameter with initial value `data` (row-major, numel(shape) floats). ValueError on size mismatch.
Tensor param(const std::string& name, ShapeRef shape, std::vector<float> data, loc_t loc = loc_t::current());
/// Persistent non-trainable state (optimizer moments, counters), initial value `data`.
Tensor state(const std::string& name, ShapeRef shape, std::vector<float> data, loc_t loc = loc_t::current());
/// A constant tensor.
Tensor constant(ShapeRef shape, std::vector<float> data, loc_t loc = loc_t::current());
/// A tensor filled with `value`.
Tensor full(ShapeRef shape, double value, loc_t loc = loc_t::current());
Tensor zeros(ShapeRef shape, loc_t loc = loc_t::current());
Tensor scalar(double value, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Reductions (axes: empty = all axes; negative axes count from the end)
// ------------------------------------------------------------------------------------------------

using Axes = llvm::ArrayRef<int>;
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdims = false, loc_t loc = loc_t::current());
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdims = false, loc_t loc = loc_t::current());
Tensor max(const Tensor& x, Axes axes = {}, bool keepdims = false, loc_t loc = loc_t::current());
Tensor min(const Tensor& x, Axes axes = {}, bool keepdims = false, loc_t loc = loc_t::current());
/// log(sum(exp(x))) over `axes` (empty = all; negative count from the end), computed stably with the max shift
/// m + log(sum(exp(x - m))) (torch.logsumexp(x, dim, keepdim)). x: any shape, f32; the result has x's shape without
/// the reduced axes (kept as size 1 with `keepdims`). torch's special values: a row of all -inf gives -inf, a row with
/// +inf gives +inf, NaN propagates (m is clamped to +-3e38, so a finite maximum above 3e38 gives inf). Gradient:
/// softmax(x) along the axes. Fuses as log_softmax does: a max reduction, then the sum of exp(x - m) with its log as
/// epilogue. Throws ShapeError for an axis out of range or an empty reduced axis (as max does).
Tensor logsumexp(const Tensor& x, Axes axes = {}, bool keepdims = false, loc_t loc = loc_t::current());
/// Variance over `axes` (empty = all), sum((x - mean)^2) / (N - correction) with correction 1 when `unbiased` (Bessel's
/// correction, torch's default) else 0, N the number of reduced elements (torch.var(x, dim, unbiased, keepdim)). Two
/// passes (the mean, then the squared deviations: no cancellation of E[x^2] - E[x]^2). x: any shape, f32. N - correction
/// = 0 gives NaN (0/0), as torch. Throws ShapeError for an axis out of range.
Tensor var(const Tensor& x, Axes axes = {}, bool unbiased = true, bool keepdims = false, loc_t loc = loc_t::current());
/// Standard deviation, sqrt(var(x, axes, unbiased, keepdims)) (torch.std); its gradient is 0 where the deviation is 0
/// (torch's std_backward), not NaN. Throws as var.
Tensor std(const Tensor& x, Axes axes = {}, bool unbiased = true, bool keepdims = false, loc_t loc = loc_t::current());
/// Index of the first maximum along `axis` (i32, stored as exact floats). Not differentiable.
Tensor argmax(const Tensor& x, int axis = -1, bool keepdims = false, loc_t loc = loc_t::current());
/// Sums `x` over broadcast axes so the result has `shape` (the adjoint of broadcasting).
/// ShapeError unless `shape` broadcasts to x's shape.
Tensor sum_to(const Tensor& x, ShapeRef shape, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Linear algebra and movement
// ------------------------------------------------------------------------------------------------

/// (M,K)@(K,N) -> (M,N); batched (...,M,K)@(...,K,N) with broadcast batch dims; 1-D operands are not
/// promoted (use reshape). ShapeError when inner dimensions differ.
Tensor matmul(const Tensor& a, const Tensor& b, loc_t loc = loc_t::current());
/// New shape with the same element count; one entry may be -1 (inferred). Row-major order.
Tensor reshape(const Tensor& x, ShapeRef shape, loc_t loc = loc_t::current());
/// Flattens axes start_dim..end: (N,C,H,W) -> (N, C*H*W) for start_dim = 1.
Tensor flatten(const Tensor& x, int start_dim = 1, loc_t loc = loc_t::current());
Tensor permute(const Tensor& x, llvm::ArrayRef<int> perm, loc_t loc = loc_t::current());
/// Swaps two axes (default: the last two).
Tensor transpose(const Tensor& x, int axis0 = -2, int axis1 = -1, loc_t loc = loc_t::current());
Tensor broadcast_to(const Tensor& x, ShapeRef shape, loc_t loc = loc_t::current());
/// x[start:end:step] along `axis` (Python semantics for negative start/end; step >= 1).
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step = 1, loc_t loc = loc_t::current());
/// Constant padding: before[i]/after[i] elements on axis i (both of length rank).
Tensor pad(const Tensor& x, ShapeRef before, ShapeRef after, double value = 0.0, loc_t loc = loc_t::current());
/// Concatenation along `axis`; other axes must match.
Tensor concat(const std::vector<Tensor>& xs, int axis = 0, loc_t loc = loc_t::current());
/// Integer labels (N) -> (N, num_classes) of 0/1 floats.
Tensor one_hot(const Tensor& labels, int64_t num_classes, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Convolution and pooling (NCHW)
// ------------------------------------------------------------------------------------------------

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
};
/// x (N,C,H,W), w (O,C,KH,KW), optional bias (O) -> (N,O,OH,OW) with
/// OH = (H + 2*pad - dil*(KH-1) - 1)/stride + 1 (torch.nn.functional.conv2d, groups = 1).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), Conv2dOptions opt = {},
              loc_t loc = loc_t::current());

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  ///< 0 = kernel size (PyTorch default)
  std::array<int64_t, 2> padding{0, 0};
};
/// torch.nn.functional.max_pool2d (padding counts as -inf). Ties in backward: first max in window order.
Tensor max_pool2d(const Tensor& x, Pool2dOptions opt = {}, loc_t loc = loc_t::current());
/// torch.nn.functional.avg_pool2d with count_include_pad=True.
Tensor avg_pool2d(const Tensor& x, Pool2dOptions opt = {}, loc_t loc = loc_t::current());

/// Same value as x; autodiff passes no gradient through it (torch's detach()).
Tensor stop_gradient(const Tensor& x, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Softmax and losses
// ------------------------------------------------------------------------------------------------

/// exp(x - max) / sum(exp(x - max)) along axis (stable for |x| up to float max).
Tensor softmax(const Tensor& x, int axis = -1, loc_t loc = loc_t::current());
/// x - max - log(sum(exp(x - max))) along axis.
Tensor log_softmax(const Tensor& x, int axis = -1, loc_t loc = loc_t::current());
/// Mean over the batch of -log_softmax(logits)[i, labels[i]]; logits (N,C), labels (N) integer-valued.
/// (torch.nn.functional.cross_entropy, reduction='mean')
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, loc_t loc = loc_t::current());
/// mean((a - b)^2) over all elements (torch.nn.functional.mse_loss).
Tensor mse_loss(const Tensor& a, const Tensor& b, loc_t loc = loc_t::current());
/// sum(target * (log(target) - log_probs)) / N, with 0*log 0 = 0 (torch kl_div, reduction='batchmean').
Tensor kl_div(const Tensor& log_probs, const Tensor& target, loc_t loc = loc_t::current());

}  // namespace sg
