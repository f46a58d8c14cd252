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
#include <optional>
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
/// Layer normalisation over the trailing dimensions (Ba et al. 2016, "Layer Normalization"; the torch equivalent is
/// torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)):
///   y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias
/// with E and Var over the last normalized_shape.size() dimensions, Var biased (divided by N, as torch). x (..., *
/// normalized_shape), f32; weight and bias (optional: an empty Tensor skips them) of shape normalized_shape; the
/// result has x's shape. Two passes (the mean, then the squared deviations; no E[x^2] - E[x]^2 cancellation). Fusion:
/// the mean and the variance are one kernel (two outputs per row), the normalisation an elementwise kernel that fuses
/// into its consumer (a matmul's prologue). Gradients by autodiff of the same expression (torch's formula). Errors:
/// ShapeError when normalized_shape is empty, longer than x's rank, or differs from x's trailing dimensions, or when
/// weight/bias do not have shape normalized_shape; ValueError for eps < 0 or NaN.
Tensor layer_norm(const Tensor& x, ShapeRef normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5, loc_t loc = loc_t::current());
/// Root-mean-square normalisation over the trailing dimensions (Zhang & Sennrich 2019; torch >= 2.4's
/// torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)):
///   y = x * rsqrt(mean(x^2) + eps) * weight
/// with the mean over the last normalized_shape.size() dimensions. eps: nullopt means torch's default, the machine
/// epsilon of f32 (torch.finfo(torch.float32).eps = 2^-23 = 1.1920929e-07). weight optional (of shape normalized_shape).
/// Fusion: the mean square is one reduction kernel, the scaling an elementwise kernel. Errors as layer_norm.
Tensor rms_norm(const Tensor& x, ShapeRef normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt, loc_t loc = loc_t::current());
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
/// Values of `x` picked along `axis` by integer indices (torch.gather(x, axis, index); numpy.take_along_axis):
///   out[j0, .., jr] = x[j0, .., index[j0, .., jr], .., jr]   (index replaces coordinate `axis`)
/// Shapes: index has x's rank; index.shape[d] <= x.shape[d] for d != axis; any size along `axis`; the result has
/// index's shape and x's dtype. index must be i32 (an i32 input, argmax, or movement ops of them).
/// Gradient: d/dx is a scatter-add of the output's adjoint into x's shape (positions picked twice add up, rows never
/// picked get 0), computed deterministically as a reduction over the index (no atomics), as torch.gather's backward.
/// Errors: ShapeError for a rank mismatch, an axis out of range, or an index larger than x outside `axis`;
/// ValueError for a non-i32 index or an empty `axis` of x. Out-of-range index values: run() refuses a fed index
/// outside [0, x.shape[axis]) with a ValueError naming the input, the element, the value, this op and the line that
/// called it (sg/feeds.h); an index computed in the graph is clamped into range on every backend (never an
/// out-of-bounds read), and the CPU reference throws for it.
Tensor gather(const Tensor& x, int axis, const Tensor& index, loc_t loc = loc_t::current());
/// Rows (slices) of `x` picked along `axis` by integer indices of any shape (numpy.take(x, indices, axis);
/// torch.index_select(x, axis, indices) for 1-D indices; torch.nn.functional.embedding(indices, x) for axis 0):
///   out shape = x.shape[:axis] + indices.shape + x.shape[axis+1:],
///   out[a.., i.., c..] = x[a.., indices[i..], c..]
/// The embedding lookup: take(weight (V, D), tokens (B, T)) -> (B, T, D). Built from gather (one fused read, no
/// one_hot matmul); its gradient is gather's deterministic scatter-add (repeated indices add up). indices must be
/// i32; out-of-range values are refused when fed, as for gather. Errors: ShapeError for an axis out of range or a
/// 0-D x; ValueError for non-i32 indices or an empty `axis` of x.
Tensor take(const Tensor& x, const Tensor& indices, int axis = 0, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Random numbers inside kernels (counter-based: Philox-4x32-10, sg/philox.h)
// ------------------------------------------------------------------------------------------------

/// Uniform random values in [0, 1) of `shape` (the distribution of torch.rand(shape); the bits are shadergrad's own,
/// not torch's stream), from the counter-based generator Philox-4x32-10 (Salmon et al. 2011, sg/philox.h): element j
/// (row-major) is (word 0 of philox4x32_10(counter (j, 0, step, stream), key (seed low, seed high)) >> 8) * 2^-24, a
/// multiple of 2^-24 in [0, 1 - 2^-24], exact in f32. The same bits on the CPU reference and on every backend (GLES,
/// GLES compute, Vulkan, WebGPU, WebGL2): no generator state lives anywhere, a value is a pure function of (seed,
/// stream, step, element index).
///  - `seed`: the key, fixed when the graph is built (a literal in the shaders);
///  - `step`: a one-element tensor (f32 or i32: a State step counter the program updates, or a fed input) holding an
///    integer in [0, 2^24]: each step draws a fresh stream without a host round trip or a recompilation. The CPU
///    reference throws ValueError for any other step value (negative, fractional, NaN, above 2^24); GPU kernels
///    convert it with int() and compute some stream for it;
///  - `stream`: word 3 of the counter. Without it, each call takes the next stream of `seed` (0 for the first call
///    with that seed in this process, then 1, 2, ...: torch's generator likewise advances per call), so two
///    random_uniform (or bernoulli, dropout) calls of one seed draw independent values; pass `stream` to pin it.
/// The node is an elementwise leaf (Op::RandomUniform): it is recomputed inside every kernel that reads it and never
/// stored, so a dropout mask costs no memory and its gradient regenerates it. dtype f32, no gradient.
/// Errors: ValueError for a negative size, more than 2^31 - 1 elements, or a step that is empty or has more than
/// one element; the message names the op and the caller's line.
Tensor random_uniform(ShapeRef shape, uint64_t seed, const Tensor& step, loc_t loc = loc_t::current());
Tensor random_uniform(ShapeRef shape, uint64_t seed, const Tensor& step, uint32_t stream,
                      loc_t loc = loc_t::current());
/// The stream the next random_uniform / bernoulli / dropout call with `seed` and no explicit stream will take (the
/// number of such calls made so far in this process), without taking it.
uint32_t peek_random_stream(uint64_t seed);
/// 1.0 with probability p, else 0.0, elementwise (torch.bernoulli(p)): out = (u < p) with u =
/// random_uniform(p.shape, seed, step) (the next stream of `seed`), so P(1) = ceil(p * 2^24) / 2^24 for p in [0, 1]:
/// p = 0 gives 0 and p = 1 gives 1 everywhere. p: any shape, f32; the result has p's shape, dtype f32, and no
/// gradient (torch: zeros). torch raises for p outside [0, 1]; here such a p (computed in the graph) gives 0 below 0
/// (and for NaN) and 1 above 1. Errors: those of random_uniform.
Tensor bernoulli(const Tensor& p, uint64_t seed, const Tensor& step, loc_t loc = loc_t::current());
/// Dropout (torch.nn.functional.dropout(x, p, training); Srivastava et al. 2014): in training, each element is zeroed
/// with probability p and the survivors are scaled by 1 / (1 - p), computed as torch does:
///   y = x * m,  m = (u < 1 - p) ? 1.0f / float(1 - p) : 0,  u = random_uniform(x.shape, seed, step)
/// (the next stream of `seed`; P(keep) = ceil((1 - p) * 2^24) / 2^24). A dropped NaN or infinity gives NaN and a
/// dropped -x gives -0, as torch's x * 0. p = 0 or training = false: x itself (identity, as torch); p = 1: x * 0
/// (zeros, NaN where x is NaN or infinite, as torch). x: any shape, f32; the result has x's shape.
/// Gradient: the adjoint times the same m (torch: grad * mask / (1 - p)); the mask is never stored: the random
/// values are regenerated inside the kernels of the forward and of the backward (one Map node over x and the
/// random leaf, fused into its producer's and consumers' kernels). Errors: ValueError for p outside [0, 1] or NaN
/// (torch: ValueError "dropout probability has to be between 0 and 1"), and those of random_uniform.
Tensor dropout(const Tensor& x, double p, uint64_t seed, const Tensor& step, bool training = true,
               loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Index masks and flip (issue 36): coordinates computed in the kernels, never host constants
// ------------------------------------------------------------------------------------------------

/// The coordinate along `axis` of every element of a tensor of `shape`: out[j0, .., jr] = j_axis (torch:
/// torch.arange(shape[axis]) viewed along `axis` and broadcast to `shape`; jax.lax.broadcasted_iota). No inputs and no
/// stored data: a kernel reading it computes it from its own coordinates, so a mask built from it (tril, triu, causal
/// attention) costs no upload and no memory. dtype f32 (default; the coordinate as an exact float, for masks and
/// arithmetic) or i32 (an index: gather, take, one_hot accept it; stored as exact floats like every i32). No gradient
/// flows into it (it has no inputs). Errors: ShapeError for an axis out of range or a 0-D shape; ValueError for a
/// negative size or an axis longer than 2^24 (its coordinates would not be exact in f32).
Tensor iota(ShapeRef shape, int axis, DType dtype = DType::f32, loc_t loc = loc_t::current());
/// 0, 1, .., n - 1 as a 1-D tensor of n elements (torch.arange(n); f32 by default, i32 for indices): iota({n}, 0).
/// Errors as iota (ValueError for n < 0 or n > 2^24).
Tensor arange(int64_t n, DType dtype = DType::f32, loc_t loc = loc_t::current());
/// The lower triangle of the last two dimensions (torch.tril(x, diagonal)): x (..., M, N), any batch dimensions;
///   out[.., i, j] = x[.., i, j] where j - i <= diagonal, else 0
/// (diagonal 0: the main diagonal and below; > 0 also that many diagonals above; < 0 excludes as many below). The
/// mask is computed from iota in the kernel (one Map, fused into its producer and consumers). A select, not a
/// product: NaN or inf outside the triangle give 0, as torch. Gradient: tril of the adjoint (NaN/inf adjoints outside
/// the triangle reach nothing). Same dtype as x. Errors: ShapeError when x has fewer than 2 dimensions.
Tensor tril(const Tensor& x, int64_t diagonal = 0, loc_t loc = loc_t::current());
/// The upper triangle of the last two dimensions (torch.triu(x, diagonal)): x (..., M, N);
///   out[.., i, j] = x[.., i, j] where j - i >= diagonal, else 0
/// triu(ones(L, L), 1) is the causal attention mask's "not allowed" set. As tril otherwise (gradient: triu of the
/// adjoint; ShapeError for fewer than 2 dimensions).
Tensor triu(const Tensor& x, int64_t diagonal = 0, loc_t loc = loc_t::current());
/// x with the order of elements reversed along each axis of `dims` (torch.flip(x, dims); numpy.flip): for
/// dims = {d}, out[.., i, ..] = x[.., n - 1 - i, ..] with n = x.shape[d]. Any rank and dtype; negative axes count from
/// the end. A Slice with step -1 (read through by its consumers, no copy); its gradient flips the adjoint back.
/// Errors: ShapeError for an axis out of range or given twice (torch: "dim ... appears multiple times").
Tensor flip(const Tensor& x, Axes dims, loc_t loc = loc_t::current());

// ------------------------------------------------------------------------------------------------
// Convolution and pooling (NCHW)
// ------------------------------------------------------------------------------------------------

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;  ///< channel groups (torch's groups): 1 dense, C depthwise
};
/// 2-D convolution (torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)): x (N,C,H,W),
/// w (O,C/groups,KH,KW), optional bias (O) -> (N,O,OH,OW) with OH = (H + 2*pad - dil*(KH-1) - 1)/stride + 1 (likewise
/// OW). With groups G the channels split into G groups: output channel o sees only the C/G input channels of its
/// group g = o / (O/G), y[n,o] = sum_{c < C/G} x[n, g*C/G + c] (*) w[o, c]; groups = C (with O = k*C) is the depthwise
/// convolution with channel multiplier k. f32. Gradients: the input gradient (conv_transpose2d of the adjoint with the
/// same groups) and the weight gradient, both per group. Throws ShapeError for other ranks, a channel mismatch
/// (C != w's dimension 1 * groups), a bias not (O) or a kernel larger than the padded input; ValueError for stride or
/// dilation < 1, negative padding, groups < 1, or C or O not divisible by groups (torch: "in_channels must be
/// divisible by groups").
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), Conv2dOptions opt = {},
              loc_t loc = loc_t::current());

struct ConvTranspose2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> output_padding{0, 0};  ///< extra output rows/columns at the end; < stride
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;  ///< channel groups (torch's groups)
};
/// Transposed convolution (torch.nn.functional.conv_transpose2d(x, w, bias, stride, padding, output_padding, groups,
/// dilation)): the adjoint of conv2d with the same stride, padding, dilation and groups with respect to its input.
/// x (N, C_in, H, W), w (C_in, C_out/groups, KH, KW) (torch's layout), optional bias (C_out) -> (N, C_out, OH, OW)
/// with C_out = w's dimension 1 * groups and
/// OH = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1 (likewise OW).
/// f32. Gradients: conv2d of the adjoint (x), conv2d's weight gradient (w). Throws ShapeError for other ranks, a
/// channel mismatch, a bias not (C_out) or an output smaller than 1; ValueError for stride or dilation < 1, negative
/// padding, groups < 1 or C_in not divisible by groups, or output_padding outside [0, stride) (torch allows up to
/// max(stride, dilation) - 1; here the output must be one whose conv2d has x's size).
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), ConvTranspose2dOptions opt = {},
                        loc_t loc = loc_t::current());
/// Nearest-neighbour upsampling of (N, C, H, W) by whole factors (torch.nn.functional.interpolate(x,
/// scale_factor=(sh, sw), mode='nearest') for integer factors): out[n, c, i, j] = x[n, c, i / sh, j / sw], an exact
/// copy (NaN and inf stay where they were) made by broadcasting, no kernel of its own. Gradient: the adjoint summed
/// over each sh x sw block. Throws ShapeError for another rank, ValueError for a factor < 1.
Tensor upsample_nearest2d(const Tensor& x, int64_t scale_h, int64_t scale_w, loc_t loc = loc_t::current());

struct UpsampleBilinearOptions {
  std::optional<std::array<int64_t, 2>> size;          ///< output (OH, OW); exactly one of size and scale_factor
  std::optional<std::array<double, 2>> scale_factor;   ///< (sh, sw) > 0: OH = floor(H * sh), OW = floor(W * sw)
  bool align_corners = false;
};
/// Bilinear interpolation of (N, C, H, W) to (N, C, OH, OW) (torch.nn.functional.interpolate(x, size=... or
/// scale_factor=..., mode='bilinear', align_corners=...) with recompute_scale_factor unset, as torch 1.13's CPU
/// kernel computes it). Along each axis (in size I, out size O) output index o reads source position
///   align_corners = true:  s = (I - 1) / (O - 1) * o (0 when O = 1)
///   align_corners = false: s = max(r * (o + 0.5) - 0.5, 0), r = 1 / scale_factor when scale_factor was given
///                          (torch uses the given scale, not I / O), else r = I / O
/// (the ratios in f32, as torch), i0 = min(floor(s), I - 1), i1 = min(i0 + 1, I - 1), l1 = s - i0, l0 = 1 - l1;
/// out = l0h * (l0w * x[i0h, i0w] + l1w * x[i0h, i1w]) + l1h * (l0w * x[i1h, i0w] + l1w * x[i1h, i1w]): all four taps
/// always, so a NaN or infinity reaches the outputs whose taps include it even at weight 0 (as in torch). Computed as
/// two linear interpolations (along W, then H), each two gathers of x at constant sorted indices and a weighted sum
/// (no kernel of its own). Gradient: per axis the transposed interpolation as a gather-style sum, d x[i] = sum over
/// the outputs o with i0(o) = i of l0(o) * dy[o] plus those with i1(o) = i of l1(o) * dy[o], a fixed-length sum per
/// element (no atomics, deterministic). f32. Throws ShapeError for another rank; ValueError unless exactly one of
/// size and scale_factor is given, for sizes < 1, scale factors <= 0 (or not finite), or an output size < 1.
Tensor upsample_bilinear2d(const Tensor& x, const UpsampleBilinearOptions& opt, loc_t loc = loc_t::current());

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
/// Same value as y (gradient passes through unchanged), carrying State updates: a Program that evaluates the result
/// (Program::add_output, sg::make_train_step) also commits each (state, next_value) pair at the end of the step, as it
/// commits optimizer updates (reads during the step see the old value). How layers update buffers in a forward pass
/// (BatchNorm's running statistics, a Dropout layer's step counter). `state` must be a State leaf (sg::state) and
/// next_value a tensor of its shape. Throws ValueError otherwise, naming the state and the caller's line.
Tensor with_state_updates(const Tensor& y, const std::vector<std::pair<Tensor, Tensor>>& updates,
                          loc_t loc = loc_t::current());

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
