// The op library: shape checking and node construction for every DSL op.
#include "sg/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

namespace sg {

namespace {

[[noreturn]] void shape_error(const std::string& op, const std::string& msg, const SourceLoc& loc) {
  throw ShapeError(fmt::format("{}: {}{}", op, msg, loc.known() ? " at " + loc.str() : std::string()));
}
[[noreturn]] void value_error(const std::string& op, const std::string& msg, const SourceLoc& loc) {
  throw ValueError(fmt::format("{}: {}{}", op, msg, loc.known() ? " at " + loc.str() : std::string()));
}
/// ValueError naming op and line when the element count of `shape` overflows int64 (checked_numel).
void checked_shape(ShapeRef shape, const std::string& op, const SourceLoc& loc) {
  try {
    checked_numel(shape, op);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}{}", e.what(), loc.known() ? " at " + loc.str() : std::string()));
  }
}

void check_tensor(const Tensor& t, const char* op, const char* what, const SourceLoc& loc) {
  if (!t) value_error(op, fmt::format("{} is an empty Tensor (default-constructed)", what), loc);
}

Tensor make(Op op, Shape shape, std::vector<NodePtr> inputs, Attrs attrs, const SourceLoc& loc,
            DType dtype = DType::f32) {
  checked_shape(shape, op_name(op), loc);
  Node n;
  n.op = op;
  n.shape = std::move(shape);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.loc = loc;
  n.dtype = dtype;
  return Tensor(make_node(std::move(n)));
}

Tensor leaf(Op op, const std::string& name, ShapeRef shape, std::vector<float> data, DType dtype,
            const SourceLoc& loc, const char* opname) {
  for (int64_t d : shape)
    if (d < 0) value_error(opname, fmt::format("negative size in shape {}", shape_str(shape)), loc);
  checked_shape(shape, opname, loc);
  if (op != Op::Input && static_cast<int64_t>(data.size()) != numel(shape))
    value_error(opname, fmt::format("'{}' has shape {} ({} elements) but {} values were given", name,
                                    shape_str(shape), numel(shape), data.size()), loc);
  Node n;
  n.op = op;
  n.shape = Shape(shape.begin(), shape.end());
  n.dtype = dtype;
  n.name = name;
  n.loc = loc;
  if (op != Op::Input) n.data = std::make_shared<const std::vector<float>>(std::move(data));
  return Tensor(make_node(std::move(n)));
}

llvm::SmallVector<int, 4> norm_axes(Axes axes, int rank, const char* op, const SourceLoc& loc) {
  llvm::SmallVector<int, 4> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) {
    int n = normalize_axis(a, rank);
    if (n < 0) shape_error(op, fmt::format("axis {} out of range for rank {}", a, rank), loc);
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Tensor reduce(ReduceKind k, const Tensor& x, Axes axes, bool keepdims, const SourceLoc& loc) {
  const char* op = reduce_name(k);
  check_tensor(x, op, "input", loc);
  auto ax = norm_axes(axes, x.rank(), op, loc);
  if (ax.empty()) return x;
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    bool reduced = std::find(ax.begin(), ax.end(), i) != ax.end();
    if (reduced && x.shape()[i] == 0 && k != ReduceKind::Sum)
      shape_error(op, fmt::format("cannot reduce an empty axis {} of {}", i, shape_str(x.shape())), loc);
    if (!reduced)
      out.push_back(x.shape()[i]);
    else if (keepdims)
      out.push_back(1);
  }
  Attrs a;
  a.reduce = k;
  a.axes = ax;
  a.keepdims = keepdims;
  return make(Op::Reduce, out, {x.node()}, a, loc, k == ReduceKind::ArgMax ? DType::i32 : x.dtype());
}

}  // namespace

int ExprArgs::index_of(const NodePtr& n) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] == n) return static_cast<int>(i);
  inputs.push_back(n);
  return static_cast<int>(inputs.size()) - 1;
}

SExprPtr BodyExpr::build(ExprArgs& a) const {
  std::vector<SExprPtr> subs;
  for (auto& n : args) subs.push_back(sarg(a.index_of(n)));
  return ssubstitute(body, subs);
}

NodePtr materialize(const SExprPtr& body, const std::vector<NodePtr>& inputs, const SourceLoc& loc) {
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) value_error("map", fmt::format("argument {} is an empty Tensor", i), loc);
    Shape next;
    if (!broadcast_shapes(shape, inputs[i]->shape, next)) {
      std::string shapes;
      for (auto& in : inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(in->shape);
      shape_error("map", fmt::format("operands do not broadcast ({}) in {}", shapes, sexpr_str(body)), loc);
    }
    shape = next;
  }
  if (body->op == SOp::Arg && inputs[body->arg]->shape == shape) return inputs[body->arg];
  checked_shape(shape, "map", loc);
  Node n;
  n.op = Op::Map;
  n.shape = shape;
  n.inputs = inputs;
  n.body = body;
  n.loc = loc;
  return make_node(std::move(n));
}

int64_t Tensor::dim(int axis) const {
  int a = normalize_axis(axis, rank());
  if (a < 0) throw ShapeError(fmt::format("dim: axis {} out of range for shape {}", axis, shape_str(shape())));
  return shape()[a];
}

Tensor leaky_relu(const Tensor& x, double slope, loc_t loc) {
  return map([slope](Scalar v) { return leaky_relu(v, slope); }, x, loc);
}
Tensor softplus(const Tensor& x, loc_t loc) {
  return map([](Scalar v) { return softplus(v); }, x, loc);
}
Tensor gelu(const Tensor& x, std::string_view approximate, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "gelu", "input", l);
  if (approximate == "none") return map([](Scalar v) { return gelu(v); }, x, loc);
  if (approximate == "tanh") return map([](Scalar v) { return gelu_tanh(v); }, x, loc);
  value_error("gelu", fmt::format("approximate='{}' is not 'none' or 'tanh' (torch.nn.functional.gelu's choices)",
                                  approximate), l);
}

// --- leaves ---
Tensor input(const std::string& name, ShapeRef shape, DType dtype, loc_t loc) {
  return leaf(Op::Input, name, shape, {}, dtype, SourceLoc(loc), "input");
}
Tensor param(const std::string& name, ShapeRef shape, std::vector<float> data, loc_t loc) {
  return leaf(Op::Param, name, shape, std::move(data), DType::f32, SourceLoc(loc), "param");
}
Tensor state(const std::string& name, ShapeRef shape, std::vector<float> data, loc_t loc) {
  return leaf(Op::State, name, shape, std::move(data), DType::f32, SourceLoc(loc), "state");
}
Tensor constant(ShapeRef shape, std::vector<float> data, loc_t loc) {
  return leaf(Op::Const, "", shape, std::move(data), DType::f32, SourceLoc(loc), "constant");
}
Tensor full(ShapeRef shape, double value, loc_t loc) {
  return leaf(Op::Const, "", shape, std::vector<float>(numel(shape), static_cast<float>(value)), DType::f32,
              SourceLoc(loc), "full");
}
Tensor zeros(ShapeRef shape, loc_t loc) { return full(shape, 0.0, loc); }
Tensor scalar(double value, loc_t loc) { return full({}, value, loc); }

// --- reductions ---
Tensor sum(const Tensor& x, Axes axes, bool keepdims, loc_t loc) {
  return reduce(ReduceKind::Sum, x, axes, keepdims, SourceLoc(loc));
}
Tensor max(const Tensor& x, Axes axes, bool keepdims, loc_t loc) {
  return reduce(ReduceKind::Max, x, axes, keepdims, SourceLoc(loc));
}
Tensor min(const Tensor& x, Axes axes, bool keepdims, loc_t loc) {
  return reduce(ReduceKind::Min, x, axes, keepdims, SourceLoc(loc));
}
Tensor mean(const Tensor& x, Axes axes, bool keepdims, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "mean", "input", l);
  auto ax = norm_axes(axes, x.rank(), "mean", l);
  int64_t count = 1;
  for (int a : ax) count *= x.shape()[a];
  Tensor s = reduce(ReduceKind::Sum, x, axes, keepdims, l);
  return Tensor(materialize(sbinary(SOp::Mul, sarg(0), sconst(1.0 / static_cast<double>(count))), {s.node()}, l));
}
Tensor argmax(const Tensor& x, int axis, bool keepdims, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "argmax", "input", l);
  if (normalize_axis(axis, x.rank()) < 0)
    shape_error("argmax", fmt::format("axis {} out of range for shape {}", axis, shape_str(x.shape())), l);
  int ax[1] = {axis};
  return reduce(ReduceKind::ArgMax, x, ax, keepdims, l);
}

Tensor sum_to(const Tensor& x, ShapeRef shape, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  Shape b;
  if (!broadcast_shapes(shape, x.shape(), b) || ShapeRef(b) != x.shape())
    shape_error("sum_to", fmt::format("{} does not broadcast to {}", shape_str(shape), shape_str(x.shape())), l);
  if (ShapeRef(shape) == x.shape()) return x;
  int lead = x.rank() - static_cast<int>(shape.size());
  llvm::SmallVector<int, 4> axes;
  for (int i = 0; i < x.rank(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) axes.push_back(i);
  Tensor s = axes.empty() ? x : reduce(ReduceKind::Sum, x, axes, true, l);
  return reshape(s, shape, loc);
}

// --- linear algebra and movement ---
Tensor matmul(const Tensor& a, const Tensor& b, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(a, "matmul", "left operand", l);
  check_tensor(b, "matmul", "right operand", l);
  if (a.rank() < 2 || b.rank() < 2)
    shape_error("matmul", fmt::format("operands must have rank >= 2 ({} @ {}); reshape 1-D operands first",
                                      shape_str(a.shape()), shape_str(b.shape())), l);
  if (a.dim(-1) != b.dim(-2))
    shape_error("matmul", fmt::format("inner dimensions differ ({} @ {})", shape_str(a.shape()),
                                      shape_str(b.shape())), l);
  Shape batch;
  if (!broadcast_shapes(a.shape().drop_back(2), b.shape().drop_back(2), batch))
    shape_error("matmul", fmt::format("batch dimensions do not broadcast ({} @ {})", shape_str(a.shape()),
                                      shape_str(b.shape())), l);
  batch.push_back(a.dim(-2));
  batch.push_back(b.dim(-1));
  return make(Op::MatMul, batch, {a.node(), b.node()}, {}, l);
}

Tensor reshape(const Tensor& x, ShapeRef shape, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "reshape", "input", l);
  Shape s(shape.begin(), shape.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) shape_error("reshape", "more than one -1 in " + shape_str(shape), l);
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      shape_error("reshape", "negative size in " + shape_str(shape), l);
    } else {
      known = checked_mul(known, s[i], "reshape");
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      shape_error("reshape", fmt::format("cannot infer -1: {} elements into {}", x.numel(), shape_str(shape)), l);
    s[infer] = x.numel() / known;
  }
  if (numel(s) != x.numel())
    shape_error("reshape", fmt::format("element count differs ({} has {}, {} has {})", shape_str(x.shape()),
                                       x.numel(), shape_str(s), numel(s)), l);
  if (ShapeRef(s) == x.shape()) return x;
  // reshape of a reshape collapses into one view
  const NodePtr& in = x.node()->op == Op::Reshape && !x.node()->custom_vjp ? x.node()->inputs[0] : x.node();
  if (ShapeRef(s) == ShapeRef(in->shape)) return Tensor(in);
  return make(Op::Reshape, s, {in}, {}, l, x.dtype());
}

Tensor flatten(const Tensor& x, int start_dim, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "flatten", "input", l);
  int sd = normalize_axis(start_dim, x.rank());
  if (sd < 0) shape_error("flatten", fmt::format("start_dim {} out of range for {}", start_dim, shape_str(x.shape())), l);
  Shape s(x.shape().begin(), x.shape().begin() + sd);
  s.push_back(numel(x.shape().drop_front(sd)));
  return reshape(x, s, loc);
}

Tensor permute(const Tensor& x, llvm::ArrayRef<int> perm, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "permute", "input", l);
  if (static_cast<int>(perm.size()) != x.rank())
    shape_error("permute", fmt::format("perm has {} entries for rank {}", perm.size(), x.rank()), l);
  llvm::SmallVector<int, 4> p;
  std::vector<bool> seen(x.rank(), false);
  bool identity = true;
  Shape out;
  for (size_t i = 0; i < perm.size(); ++i) {
    int a = normalize_axis(perm[i], x.rank());
    if (a < 0 || seen[a]) shape_error("permute", "perm is not a permutation of the axes", l);
    seen[a] = true;
    p.push_back(a);
    identity &= a == static_cast<int>(i);
    out.push_back(x.shape()[a]);
  }
  if (identity) return x;
  Attrs at;
  at.perm = p;
  return make(Op::Permute, out, {x.node()}, at, l, x.dtype());
}

Tensor transpose(const Tensor& x, int axis0, int axis1, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "transpose", "input", l);
  int a = normalize_axis(axis0, x.rank()), b = normalize_axis(axis1, x.rank());
  if (a < 0 || b < 0)
    shape_error("transpose", fmt::format("axes ({}, {}) out of range for {}", axis0, axis1, shape_str(x.shape())), l);
  llvm::SmallVector<int, 4> p(x.rank());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[a], p[b]);
  return permute(x, p, loc);
}

Tensor broadcast_to(const Tensor& x, ShapeRef shape, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "broadcast_to", "input", l);
  Shape b;
  if (!broadcast_shapes(x.shape(), shape, b) || ShapeRef(b) != shape)
    shape_error("broadcast_to", fmt::format("{} does not broadcast to {}", shape_str(x.shape()), shape_str(shape)), l);
  if (x.shape() == shape) return x;
  Attrs a;
  a.shape = Shape(shape.begin(), shape.end());
  return make(Op::Expand, a.shape, {x.node()}, a, l, x.dtype());
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "slice", "input", l);
  int ax = normalize_axis(axis, x.rank());
  if (ax < 0) shape_error("slice", fmt::format("axis {} out of range for {}", axis, shape_str(x.shape())), l);
  if (step < 1) value_error("slice", fmt::format("step must be >= 1 (got {})", step), l);
  int64_t n = x.shape()[ax];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t s = clampi(start), e = clampi(end);
  int64_t len = e > s ? (e - s + step - 1) / step : 0;
  if (len == n) return x;
  Attrs a;
  a.starts.assign(x.rank(), 0);
  a.steps.assign(x.rank(), 1);
  a.starts[ax] = s;
  a.steps[ax] = step;
  Shape out(x.shape().begin(), x.shape().end());
  out[ax] = len;
  return make(Op::Slice, out, {x.node()}, a, l, x.dtype());
}

Tensor pad(const Tensor& x, ShapeRef before, ShapeRef after, double value, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "pad", "input", l);
  if (static_cast<int>(before.size()) != x.rank() || static_cast<int>(after.size()) != x.rank())
    shape_error("pad", fmt::format("pads need {} entries each (got {} and {})", x.rank(), before.size(), after.size()), l);
  Shape out;
  bool none = true;
  for (int i = 0; i < x.rank(); ++i) {
    if (before[i] < 0 || after[i] < 0) value_error("pad", "negative padding (use slice to crop)", l);
    none &= before[i] == 0 && after[i] == 0;
    out.push_back(x.shape()[i] + before[i] + after[i]);
  }
  if (none) return x;
  Attrs a;
  a.pads_before = Shape(before.begin(), before.end());
  a.pads_after = Shape(after.begin(), after.end());
  a.value = value;
  return make(Op::Pad, out, {x.node()}, a, l, x.dtype());
}

Tensor concat(const std::vector<Tensor>& xs, int axis, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  if (xs.empty()) value_error("concat", "needs at least one tensor", l);
  for (auto& t : xs) check_tensor(t, "concat", "an operand", l);
  int rank = xs[0].rank();
  int ax = normalize_axis(axis, rank);
  if (ax < 0) shape_error("concat", fmt::format("axis {} out of range for rank {}", axis, rank), l);
  int64_t total = 0;
  for (auto& t : xs) {
    bool ok = t.rank() == rank;
    for (int i = 0; ok && i < rank; ++i) ok = i == ax || t.shape()[i] == xs[0].shape()[i];
    if (!ok)
      shape_error("concat", fmt::format("shapes {} and {} differ outside axis {}", shape_str(xs[0].shape()),
                                        shape_str(t.shape()), ax), l);
    total += t.shape()[ax];
  }
  if (xs.size() == 1) return xs[0];
  // concat = sum of zero-padded operands; fusion turns it into one kernel with selects.
  std::vector<NodePtr> padded;
  int64_t offset = 0;
  for (auto& t : xs) {
    Shape before(rank, 0), after(rank, 0);
    before[ax] = offset;
    after[ax] = total - offset - t.shape()[ax];
    offset += t.shape()[ax];
    padded.push_back(pad(t, before, after, 0.0, loc).node());
  }
  SExprPtr body = sarg(0);
  for (size_t i = 1; i < padded.size(); ++i) body = sbinary(SOp::Add, body, sarg(static_cast<int>(i)));
  return Tensor(materialize(body, padded, l));
}

Tensor one_hot(const Tensor& labels, int64_t num_classes, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(labels, "one_hot", "labels", l);
  if (num_classes < 1) value_error("one_hot", fmt::format("num_classes must be >= 1 (got {})", num_classes), l);
  Shape out(labels.shape().begin(), labels.shape().end());
  out.push_back(num_classes);
  Attrs a;
  a.num_classes = num_classes;
  return make(Op::OneHot, out, {labels.node()}, a, l);
}

Tensor gather(const Tensor& x, int axis, const Tensor& index, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "gather", "input", l);
  check_tensor(index, "gather", "index", l);
  if (index.dtype() != DType::i32)
    value_error("gather", fmt::format("index must be i32 (an i32 input, argmax, or a reshape of them), got {} {}",
                                      dtype_name(index.dtype()), shape_str(index.shape())), l);
  if (x.rank() < 1) shape_error("gather", "input must have at least one axis (got a 0-D tensor)", l);
  int ax = normalize_axis(axis, x.rank());
  if (ax < 0) shape_error("gather", fmt::format("axis {} out of range for {}", axis, shape_str(x.shape())), l);
  if (index.rank() != x.rank())
    shape_error("gather", fmt::format("index {} must have the rank of the input {} (torch.gather)",
                                      shape_str(index.shape()), shape_str(x.shape())), l);
  for (int d = 0; d < x.rank(); ++d)
    if (d != ax && index.shape()[d] > x.shape()[d])
      shape_error("gather", fmt::format("index {} is larger than the input {} along axis {} (only axis {} may differ "
                                        "freely)", shape_str(index.shape()), shape_str(x.shape()), d, ax), l);
  if (x.shape()[ax] == 0 && index.numel() > 0)
    value_error("gather", fmt::format("axis {} of the input {} is empty: there is nothing to pick", ax,
                                      shape_str(x.shape())), l);
  Attrs a;
  a.axes = {ax};
  return make(Op::Gather, Shape(index.shape().begin(), index.shape().end()), {x.node(), index.node()}, a, l,
              x.dtype());
}

Tensor take(const Tensor& x, const Tensor& indices, int axis, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "take", "input", l);
  check_tensor(indices, "take", "indices", l);
  if (indices.dtype() != DType::i32)
    value_error("take", fmt::format("indices must be i32 (an i32 input, argmax, or a reshape of them), got {} {}",
                                    dtype_name(indices.dtype()), shape_str(indices.shape())), l);
  if (x.rank() < 1) shape_error("take", "input must have at least one axis (got a 0-D tensor)", l);
  int ax = normalize_axis(axis, x.rank());
  if (ax < 0) shape_error("take", fmt::format("axis {} out of range for {}", axis, shape_str(x.shape())), l);
  if (x.shape()[ax] == 0 && indices.numel() > 0)
    value_error("take", fmt::format("axis {} of the input {} is empty: there is nothing to pick", ax,
                                    shape_str(x.shape())), l);
  // x as (pre, V, post); indices as (1, N, 1) broadcast to (pre, N, post); gather along axis 1
  int64_t pre = 1, post = 1;
  for (int d = 0; d < ax; ++d) pre *= x.shape()[d];
  for (int d = ax + 1; d < x.rank(); ++d) post *= x.shape()[d];
  const int64_t n = indices.numel();
  Tensor x3 = reshape(x, Shape{pre, x.shape()[ax], post}, loc);
  Tensor i3 = broadcast_to(reshape(indices, Shape{1, n, 1}, loc), Shape{pre, n, post}, loc);
  Shape out(x.shape().begin(), x.shape().begin() + ax);
  out.append(indices.shape().begin(), indices.shape().end());
  out.append(x.shape().begin() + ax + 1, x.shape().end());
  return reshape(gather(x3, 1, i3, loc), out, loc);
}

// --- index masks and flip ---
Tensor iota(ShapeRef shape, int axis, DType dtype, loc_t loc) {
  SourceLoc l(loc);
  for (int64_t d : shape)
    if (d < 0) value_error("iota", fmt::format("negative size in shape {}", shape_str(shape)), l);
  if (shape.empty()) shape_error("iota", "a 0-D shape has no axis to count along", l);
  const int ax = normalize_axis(axis, static_cast<int>(shape.size()));
  if (ax < 0) shape_error("iota", fmt::format("axis {} out of range for shape {}", axis, shape_str(shape)), l);
  if (shape[ax] > (int64_t{1} << 24))
    value_error("iota", fmt::format("axis {} of shape {} is longer than 2^24: its coordinates are not exact in f32", ax,
                                    shape_str(shape)), l);
  Attrs a;
  a.axes = {ax};
  return make(Op::Iota, Shape(shape.begin(), shape.end()), {}, a, l, dtype);
}

Tensor arange(int64_t n, DType dtype, loc_t loc) {
  SourceLoc l(loc);
  if (n < 0) value_error("arange", fmt::format("n must be >= 0 (got {})", n), l);
  if (n > (int64_t{1} << 24)) value_error("arange", fmt::format("n = {} is larger than 2^24: not exact in f32", n), l);
  const int64_t shape[1] = {n};
  return iota(shape, 0, dtype, loc);
}

namespace {
/// tril (upper = false) or triu of x's last two dimensions: one Map node select(j - i <= d, x, 0) (triu:
/// j - i >= d) over x and the row and column iotas, whose VJP is the same triangle of the adjoint.
Tensor triangle(const Tensor& x, int64_t diagonal, bool upper, const SourceLoc& l) {
  const char* op = upper ? "triu" : "tril";
  check_tensor(x, op, "input", l);
  if (x.rank() < 2)
    shape_error(op, fmt::format("input must have at least 2 dimensions (got {}); torch.{} works on the last two", shape_str(x.shape()), op), l);
  LocationOverride at_user(l);
  const int64_t m = x.dim(-2), n = x.dim(-1);
  const int64_t rows_shape[2] = {m, 1}, cols_shape[2] = {1, n};
  Tensor rows = iota(rows_shape, 0, DType::f32), cols = iota(cols_shape, 1, DType::f32);
  // j - i <= d (tril) or j - i >= d (triu), on exact float coordinates
  const SExprPtr offset = sbinary(SOp::Sub, sarg(2), sarg(1));
  const SExprPtr keep = sbinary(upper ? SOp::Ge : SOp::Le, offset, sconst(static_cast<double>(diagonal)));
  Node nd;
  nd.op = Op::Map;
  nd.shape = Shape(x.shape().begin(), x.shape().end());
  nd.inputs = {x.node(), rows.node(), cols.node()};
  nd.body = sselect(keep, sarg(0), sconst(0.0));
  nd.loc = l;
  nd.dtype = x.dtype();
  // torch's tril/triu backward: the same triangle of the adjoint (a select: NaN/inf adjoints outside it reach nothing)
  nd.custom_vjp = std::make_shared<const CustomVJP>([diagonal, upper](const NodePtr&, const NodePtr& g) {
    Tensor gt(g);
    return std::vector<NodePtr>{(upper ? triu(gt, diagonal) : tril(gt, diagonal)).node(), nullptr, nullptr};
  });
  return Tensor(make_node(std::move(nd)));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal, loc_t loc) { return triangle(x, diagonal, false, SourceLoc(loc)); }
Tensor triu(const Tensor& x, int64_t diagonal, loc_t loc) { return triangle(x, diagonal, true, SourceLoc(loc)); }

Tensor flip(const Tensor& x, Axes dims, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "flip", "input", l);
  Attrs a;
  a.starts.assign(x.rank(), 0);
  a.steps.assign(x.rank(), 1);
  std::vector<bool> seen(x.rank(), false);
  bool any = false;
  for (int d : dims) {
    const int ax = normalize_axis(d, x.rank());
    if (ax < 0) shape_error("flip", fmt::format("axis {} out of range for {}", d, shape_str(x.shape())), l);
    if (seen[ax]) shape_error("flip", fmt::format("axis {} appears more than once in dims", ax), l);
    seen[ax] = true;
    if (x.shape()[ax] <= 1) continue;  // nothing to reverse
    a.starts[ax] = x.shape()[ax] - 1;
    a.steps[ax] = -1;
    any = true;
  }
  if (!any) return x;
  return make(Op::Slice, Shape(x.shape().begin(), x.shape().end()), {x.node()}, a, l, x.dtype());
}

// --- conv / pool ---
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Conv2dOptions opt, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "conv2d", "input", l);
  check_tensor(w, "conv2d", "weight", l);
  if (x.rank() != 4 || w.rank() != 4)
    shape_error("conv2d", fmt::format("expects x (N,C,H,W) and w (O,C,KH,KW), got {} and {}", shape_str(x.shape()),
                                      shape_str(w.shape())), l);
  const int64_t g = opt.groups;
  if (g < 1) value_error("conv2d", fmt::format("groups must be >= 1, got {}", g), l);
  if (x.dim(1) % g != 0)
    value_error("conv2d", fmt::format("in_channels {} of x {} must be divisible by groups {}", x.dim(1),
                                      shape_str(x.shape()), g), l);
  if (w.dim(0) % g != 0)
    value_error("conv2d", fmt::format("out_channels {} of w {} (dimension 0) must be divisible by groups {}", w.dim(0),
                                      shape_str(w.shape()), g), l);
  if (x.dim(1) != w.dim(1) * g) {
    if (g == 1)
      shape_error("conv2d", fmt::format("input channels differ: x {} has C={}, w {} has C={}", shape_str(x.shape()),
                                        x.dim(1), shape_str(w.shape()), w.dim(1)), l);
    shape_error("conv2d", fmt::format("given groups={}, w {} expects x to have {} channels (C/groups = {} in "
                                      "dimension 1), but x {} has {}", g, shape_str(w.shape()), w.dim(1) * g,
                                      w.dim(1), shape_str(x.shape()), x.dim(1)), l);
  }
  Attrs a;
  a.groups = g;
  Shape out = {x.dim(0), w.dim(0), 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (opt.stride[i] < 1 || opt.dilation[i] < 1 || opt.padding[i] < 0)
      value_error("conv2d", "stride and dilation must be >= 1 and padding >= 0", l);
    a.stride[i] = opt.stride[i];
    a.padding[i] = opt.padding[i];
    a.dilation[i] = opt.dilation[i];
    int64_t span = opt.dilation[i] * (w.dim(2 + i) - 1) + 1;
    int64_t o = (x.dim(2 + i) + 2 * opt.padding[i] - span) / opt.stride[i] + 1;
    if (x.dim(2 + i) + 2 * opt.padding[i] < span || o < 1)
      shape_error("conv2d", fmt::format("kernel {} larger than padded input {}", shape_str(w.shape()),
                                        shape_str(x.shape())), l);
    out[2 + i] = o;
  }
  Tensor y = make(Op::Conv2d, out, {x.node(), w.node()}, a, l);
  if (bias) {
    if (bias.rank() != 1 || bias.dim(0) != w.dim(0))
      shape_error("conv2d", fmt::format("bias must have shape ({}), got {}", w.dim(0), shape_str(bias.shape())), l);
    Tensor b4 = reshape(bias, Shape{1, w.dim(0), 1, 1}, loc);
    return Tensor(materialize(sbinary(SOp::Add, sarg(0), sarg(1)), {y.node(), b4.node()}, l));
  }
  return y;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias, ConvTranspose2dOptions opt, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  const char* op = "conv_transpose2d";
  check_tensor(x, op, "input", l);
  check_tensor(w, op, "weight", l);
  if (x.rank() != 4 || w.rank() != 4)
    shape_error(op, fmt::format("expects x (N,C_in,H,W) and w (C_in,C_out,KH,KW), got {} and {}", shape_str(x.shape()),
                                shape_str(w.shape())), l);
  if (x.dim(1) != w.dim(0))
    shape_error(op, fmt::format("input channels differ: x {} has C_in={}, w {} has C_in={} (dimension 0)",
                                shape_str(x.shape()), x.dim(1), shape_str(w.shape()), w.dim(0)), l);
  const int64_t g = opt.groups;
  if (g < 1) value_error(op, fmt::format("groups must be >= 1, got {}", g), l);
  if (x.dim(1) % g != 0)
    value_error(op, fmt::format("in_channels {} of x {} must be divisible by groups {}", x.dim(1),
                                shape_str(x.shape()), g), l);
  const int64_t c_out = w.dim(1) * g;
  Attrs a;
  a.groups = g;
  Shape out = {x.dim(0), c_out, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (opt.stride[i] < 1 || opt.dilation[i] < 1 || opt.padding[i] < 0)
      value_error(op, "stride and dilation must be >= 1 and padding >= 0", l);
    if (opt.output_padding[i] < 0 || opt.output_padding[i] >= opt.stride[i])
      value_error(op, fmt::format("output_padding {} must be within [0, stride {})", opt.output_padding[i],
                                  opt.stride[i]), l);
    a.stride[i] = opt.stride[i];
    a.padding[i] = opt.padding[i];
    a.dilation[i] = opt.dilation[i];
    out[2 + i] = (x.dim(2 + i) - 1) * opt.stride[i] - 2 * opt.padding[i] + opt.dilation[i] * (w.dim(2 + i) - 1) +
                 opt.output_padding[i] + 1;
    if (out[2 + i] < 1)
      shape_error(op, fmt::format("output size {} < 1 for input {} and kernel {} (padding too large)", out[2 + i],
                                  shape_str(x.shape()), shape_str(w.shape())), l);
  }
  a.shape = out;
  // conv2d's input gradient is this op: its adjoint "dy" is x, its weight (O = C_in, C = C_out, KH, KW) is w
  Tensor y = make(Op::Conv2dGradInput, out, {x.node(), w.node()}, a, l);
  if (!bias) return y;
  if (bias.rank() != 1 || bias.dim(0) != c_out)
    shape_error(op, fmt::format("bias must have shape ({}), got {}", c_out, shape_str(bias.shape())), l);
  Tensor b4 = reshape(bias, Shape{1, c_out, 1, 1}, loc);
  return Tensor(materialize(sbinary(SOp::Add, sarg(0), sarg(1)), {y.node(), b4.node()}, l));
}

Tensor upsample_nearest2d(const Tensor& x, int64_t scale_h, int64_t scale_w, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "upsample_nearest2d", "input", l);
  if (x.rank() != 4)
    shape_error("upsample_nearest2d", fmt::format("expects (N,C,H,W), got {}", shape_str(x.shape())), l);
  if (scale_h < 1 || scale_w < 1)
    value_error("upsample_nearest2d", fmt::format("scale factors must be whole numbers >= 1, got {} and {}", scale_h,
                                                  scale_w), l);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor blocks = broadcast_to(reshape(x, Shape{n, c, h, 1, w, 1}), Shape{n, c, h, scale_h, w, scale_w});
  return reshape(blocks, Shape{n, c, h * scale_h, w * scale_w});
}

namespace {
/// Gather along `axis` of x at the constant, non-decreasing indices `index` (one per output position along the axis,
/// the same for every other coordinate), whose VJP is the transposed gather written as a sum of fixed length: input
/// position i collects the adjoint of the (contiguous) output positions whose index is i, at most K of them, as a
/// gather of the adjoint at (K per input position) constant indices, masked where i has fewer than K, summed over K.
/// Gather's own VJP (a one-hot reduction over every output position) would cost O(out) per element instead of O(K).
Tensor gather_sorted(const Tensor& x, int axis, const std::vector<int64_t>& index, const SourceLoc& l) {
  const int64_t in = x.dim(axis), out = static_cast<int64_t>(index.size());
  Shape ishape(x.rank(), 1), oshape(x.shape().begin(), x.shape().end());
  ishape[axis] = out;
  oshape[axis] = out;
  std::vector<float> data(index.begin(), index.end());
  Tensor idx = leaf(Op::Const, "", ishape, std::move(data), DType::i32, l, "upsample_bilinear2d");
  Tensor y = gather(x, axis, broadcast_to(idx, oshape));
  Node n = *y.node();
  n.custom_vjp = std::make_shared<const CustomVJP>([axis, in, index, l](const NodePtr&, const NodePtr& g) {
    LocationOverride at(l);
    const int64_t out = static_cast<int64_t>(index.size());
    std::vector<int64_t> first(static_cast<size_t>(in), 0), count(static_cast<size_t>(in), 0);
    for (int64_t o = out - 1; o >= 0; --o) {
      first[index[o]] = o;
      ++count[index[o]];
    }
    const int64_t k = *std::max_element(count.begin(), count.end());
    std::vector<float> at_(static_cast<size_t>(in * k)), keep(static_cast<size_t>(in * k));
    bool masked = false;
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const bool ok = j < count[i];
        at_[i * k + j] = static_cast<float>(ok ? first[i] + j : 0);
        keep[i * k + j] = ok ? 1.0f : 0.0f;
        masked |= !ok;
      }
    Tensor gt(g);
    const int r = gt.rank();
    Shape ks(r, 1), ps(gt.shape().begin(), gt.shape().end());
    ks[axis] = in * k;
    ps[axis] = in * k;
    Tensor jt = leaf(Op::Const, "", ks, std::move(at_), DType::i32, l, "upsample_bilinear2d");
    Tensor picked = gather(gt, axis, broadcast_to(jt, ps));
    // a select, not a product: an infinite or NaN adjoint reaches only the positions it was gathered from
    if (masked) picked = Tensor(where(constant(ks, std::move(keep)), picked, 0.0));
    if (k == 1) return std::vector<NodePtr>{picked.node(), nullptr};
    Shape split(ps.begin(), ps.end());
    split[axis] = in;
    split.insert(split.begin() + axis + 1, k);
    return std::vector<NodePtr>{sum(reshape(picked, split), {axis + 1}).node(), nullptr};
  });
  return Tensor(make_node(std::move(n)));
}

/// torch's linear interpolation taps along one axis (ATen/native/UpSample.h, torch 1.13: area_pixel_compute_scale,
/// area_pixel_compute_source_index, guard_index_and_lambda; the ratio and source index in f32 as its CPU kernel).
struct LinearTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> l0, l1;
};
LinearTaps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  float ratio;
  if (align_corners) ratio = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  else ratio = scale && *scale > 0 ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
  LinearTaps t;
  for (int64_t o = 0; o < out; ++o) {
    float src;
    if (align_corners) {
      src = ratio * static_cast<float>(o);
    } else {
      src = static_cast<float>(static_cast<double>(ratio) * (static_cast<double>(o) + 0.5) - 0.5);
      if (src < 0) src = 0;
    }
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const float l1 = std::min(std::max(src - static_cast<float>(i0), 0.0f), 1.0f);
    t.i0.push_back(i0);
    t.i1.push_back(i0 + (i0 < in - 1 ? 1 : 0));
    t.l1.push_back(l1);
    t.l0.push_back(1.0f - l1);
  }
  return t;
}

/// x linearly interpolated along `axis`: l0 * x[i0] + l1 * x[i1] (both taps always, as torch).
Tensor interpolate_axis(const Tensor& x, int axis, const LinearTaps& t, const SourceLoc& l) {
  Shape ws(x.rank(), 1);
  ws[axis] = static_cast<int64_t>(t.l0.size());
  Tensor a = gather_sorted(x, axis, t.i0, l), b = gather_sorted(x, axis, t.i1, l);
  Tensor l0 = constant(ws, t.l0), l1 = constant(ws, t.l1);
  return Tensor(materialize(sbinary(SOp::Add, sbinary(SOp::Mul, sarg(0), sarg(1)), sbinary(SOp::Mul, sarg(2), sarg(3))),
                            {a.node(), l0.node(), b.node(), l1.node()}, l));
}
}  // namespace

Tensor upsample_bilinear2d(const Tensor& x, const UpsampleBilinearOptions& opt, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  const char* op = "upsample_bilinear2d";
  check_tensor(x, op, "input", l);
  if (x.rank() != 4) shape_error(op, fmt::format("expects (N,C,H,W), got {}", shape_str(x.shape())), l);
  if (opt.size.has_value() == opt.scale_factor.has_value())
    value_error(op, opt.size ? "only one of size or scale_factor should be defined (torch.nn.functional.interpolate)"
                             : "either size or scale_factor should be defined (torch.nn.functional.interpolate)", l);
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    if (opt.size) {
      out[i] = (*opt.size)[i];
      if (out[i] < 1) value_error(op, fmt::format("output size must be >= 1, got ({}, {})", (*opt.size)[0], (*opt.size)[1]), l);
    } else {
      const double s = (*opt.scale_factor)[i];
      if (!(s > 0) || !std::isfinite(s))
        value_error(op, fmt::format("scale factors must be finite and > 0, got ({}, {})", (*opt.scale_factor)[0],
                                    (*opt.scale_factor)[1]), l);
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.dim(2 + i)) * s));  // torch: floor(in * scale)
      if (out[i] < 1)
        value_error(op, fmt::format("scale factor {} gives an empty output along axis {} of {} (size {})", s, 2 + i,
                                    shape_str(x.shape()), out[i]), l);
    }
  }
  auto scale = [&](int i) -> std::optional<double> {
    if (opt.scale_factor) return (*opt.scale_factor)[i];
    return std::nullopt;
  };
  // along W first, then H: out = l0h * (row i0h interpolated along W) + l1h * (row i1h ...), torch's order
  Tensor t = interpolate_axis(x, 3, linear_taps(x.dim(3), out[1], opt.align_corners, scale(1)), l);
  return interpolate_axis(t, 2, linear_taps(x.dim(2), out[0], opt.align_corners, scale(0)), l);
}

static Tensor pool(Op op, const char* name, const Tensor& x, Pool2dOptions opt, const SourceLoc& l) {
  check_tensor(x, name, "input", l);
  if (x.rank() != 4) shape_error(name, fmt::format("expects (N,C,H,W), got {}", shape_str(x.shape())), l);
  Attrs a;
  Shape out = {x.dim(0), x.dim(1), 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t k = opt.kernel[i], s = opt.stride[i] == 0 ? k : opt.stride[i], p = opt.padding[i];
    if (k < 1 || s < 1 || p < 0) value_error(name, "kernel and stride must be >= 1, padding >= 0", l);
    if (p * 2 > k) value_error(name, fmt::format("padding {} must be at most half the kernel {}", p, k), l);
    a.kernel[i] = k;
    a.stride[i] = s;
    a.padding[i] = p;
    int64_t o = (x.dim(2 + i) + 2 * p - k) / s + 1;
    if (o < 1) shape_error(name, fmt::format("kernel {} larger than padded input {}", k, shape_str(x.shape())), l);
    out[2 + i] = o;
  }
  return make(op, out, {x.node()}, a, l);
}

Tensor max_pool2d(const Tensor& x, Pool2dOptions opt, loc_t loc) {
  return pool(Op::MaxPool2d, "max_pool2d", x, opt, SourceLoc(loc));
}
Tensor avg_pool2d(const Tensor& x, Pool2dOptions opt, loc_t loc) {
  return pool(Op::AvgPool2d, "avg_pool2d", x, opt, SourceLoc(loc));
}

// --- random numbers (sg/philox.h) ---
namespace {

std::mutex random_streams_mutex;
std::map<uint64_t, uint32_t> random_streams;  // per seed: the streams taken by calls without an explicit stream

uint32_t take_random_stream(uint64_t seed) {
  std::lock_guard<std::mutex> lock(random_streams_mutex);
  return random_streams[seed]++;
}

void check_step(const char* op, const Tensor& step, const SourceLoc& l) {
  check_tensor(step, op, "step", l);
  if (step.numel() != 1)
    value_error(op, fmt::format("step must have exactly one element (a step counter: a State or input of shape {{}} "
                                "or {{1}}), got {} {}", dtype_name(step.dtype()), shape_str(step.shape())), l);
}

Tensor random_node(const char* op, ShapeRef shape, uint64_t seed, const Tensor& step, uint32_t stream,
                   const SourceLoc& l) {
  check_step(op, step, l);
  for (int64_t d : shape)
    if (d < 0) value_error(op, fmt::format("negative size in shape {}", shape_str(shape)), l);
  checked_shape(shape, op, l);
  if (numel(shape) > std::numeric_limits<int32_t>::max())
    value_error(op, fmt::format("shape {} has {} elements; random values are numbered by a 32-bit element index "
                                "(at most 2^31 - 1 elements)", shape_str(shape), numel(shape)), l);
  Attrs a;
  a.seed = seed;
  a.stream = stream;
  return make(Op::RandomUniform, Shape(shape.begin(), shape.end()), {step.node()}, a, l);
}

}  // namespace

uint32_t peek_random_stream(uint64_t seed) {
  std::lock_guard<std::mutex> lock(random_streams_mutex);
  auto it = random_streams.find(seed);
  return it == random_streams.end() ? 0 : it->second;
}

Tensor random_uniform(ShapeRef shape, uint64_t seed, const Tensor& step, loc_t loc) {
  SourceLoc l(loc);
  check_step("random_uniform", step, l);  // before a stream is taken
  return random_node("random_uniform", shape, seed, step, take_random_stream(seed), l);
}

Tensor random_uniform(ShapeRef shape, uint64_t seed, const Tensor& step, uint32_t stream, loc_t loc) {
  return random_node("random_uniform", shape, seed, step, stream, SourceLoc(loc));
}

Tensor bernoulli(const Tensor& p, uint64_t seed, const Tensor& step, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(p, "bernoulli", "p", l);
  check_step("bernoulli", step, l);
  Tensor u = random_node("bernoulli", p.shape(), seed, step, take_random_stream(seed), l);
  return Tensor(u < p, loc);
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, const Tensor& step, bool training, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "dropout", "input", l);
  check_step("dropout", step, l);
  if (!(p >= 0.0 && p <= 1.0))
    value_error("dropout", fmt::format("dropout probability has to be between 0 and 1, but got {}", p), l);
  if (!training) return x;  // torch returns the input itself
  // in training a stream is taken whatever p is, so the streams of later calls do not depend on this p
  const uint32_t stream = take_random_stream(seed);
  if (p == 0.0) return x;                        // torch returns the input itself
  if (p == 1.0) return Tensor(x * 0.0, loc);     // torch: input * zeros (NaN and infinities give NaN)
  // keep where u < 1 - p: u is a multiple of 2^-24, so u < 1 - p exactly when u < ceil((1 - p) 2^24) 2^-24, a
  // threshold exact in f32 (the GPUs compare in f32, the CPU reference in f64: both give the same mask)
  const double keep = std::ceil((1.0 - p) * 16777216.0) / 16777216.0;
  const double scale = static_cast<float>(1.0f / static_cast<float>(1.0 - p));  // torch: noise.div_(1 - p) in f32
  Tensor u = random_node("dropout", x.shape(), seed, step, stream, l);
  return Tensor(x * where(u < keep, scale, 0.0), loc);
}

// --- softmax and losses ---
/// A Reshape of x to its own shape (a view, no kernel) created at `l`, without x's name, custom VJP or effects.
static Node identity_view(const Tensor& x, const SourceLoc& l) {
  Node n = *x.node();
  n.op = Op::Reshape;
  n.inputs = {x.node()};
  n.attrs = {};
  n.body = nullptr;
  n.data = nullptr;
  n.name = "";
  n.loc = l;
  n.custom_vjp = nullptr;
  n.effects.clear();
  return n;
}

Tensor stop_gradient(const Tensor& x, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "stop_gradient", "input", l);
  Node n = identity_view(x, l);
  n.custom_vjp = std::make_shared<const CustomVJP>(
      [](const NodePtr&, const NodePtr&) { return std::vector<NodePtr>{nullptr}; });
  return Tensor(make_node(std::move(n)));
}

Tensor with_state_updates(const Tensor& y, const std::vector<std::pair<Tensor, Tensor>>& updates, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(y, "with_state_updates", "input", l);
  Node n = identity_view(y, l);  // carries the effects
  for (auto& [state, next] : updates) {
    check_tensor(state, "with_state_updates", "state", l);
    check_tensor(next, "with_state_updates", "next value", l);
    if (state.node()->op != Op::State)
      throw ValueError(fmt::format("with_state_updates: {} is not a State leaf (sg::state) at {}",
                                   state.node()->describe(), l.str()));
    if (next.shape() != state.shape() || next.dtype() != state.dtype())
      throw ShapeError(fmt::format("with_state_updates: state '{}' is {} {}, its next value {} {} at {}",
                                   state.node()->name, dtype_name(state.dtype()), shape_str(state.shape()),
                                   dtype_name(next.dtype()), shape_str(next.shape()), l.str()));
    n.effects.emplace_back(state.node(), next.node());
  }
  return Tensor(make_node(std::move(n)));
}

Tensor log_softmax(const Tensor& x, int axis, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "log_softmax", "input", l);
  int ax[1] = {axis};
  Tensor m = stop_gradient(max(x, ax, true, loc), loc);
  Tensor z = x - m;
  Tensor lse = log(sum(exp(z), ax, true, loc));
  return z - lse;
}

Tensor logsumexp(const Tensor& x, Axes axes, bool keepdims, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "logsumexp", "input", l);
  // torch's shift: an infinite maximum shifts by a finite value (all -inf: log(0) = -inf; a +inf: exp(inf) = inf),
  // as a clamp (NaN-propagating maximum/minimum) rather than a test for infinity that a compiler may fold away
  Tensor m = stop_gradient(max(x, axes, true, loc), loc);
  Tensor shift = map([](Scalar v) { return min(max(v, -3e38), 3e38); }, m, loc);
  Tensor r = map([](Scalar s, Scalar c) { return log(s) + c; }, sum(exp(x - shift), axes, true, loc), shift, loc);
  if (keepdims) return r;
  Shape out;
  auto ax = norm_axes(axes, x.rank(), "logsumexp", l);
  for (int i = 0; i < x.rank(); ++i)
    if (std::find(ax.begin(), ax.end(), i) == ax.end()) out.push_back(x.shape()[i]);
  return reshape(r, out, loc);
}

Tensor var(const Tensor& x, Axes axes, bool unbiased, bool keepdims, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "var", "input", l);
  auto ax = norm_axes(axes, x.rank(), "var", l);
  int64_t count = 1;
  for (int a : ax) count *= x.shape()[a];
  Tensor mu = mean(x, axes, true, loc);
  Tensor ss = sum(map([](Scalar v, Scalar m) { return (v - m) * (v - m); }, x, mu, loc), axes, keepdims, loc);
  const double denom = static_cast<double>(std::max<int64_t>(count - (unbiased ? 1 : 0), 0));  // torch clamps at 0
  return Tensor(materialize(sbinary(SOp::Div, sarg(0), sconst(denom)), {ss.node()}, l));
}

Tensor std(const Tensor& x, Axes axes, bool unbiased, bool keepdims, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "std", "input", l);
  // where(v == 0, 0, sqrt(v)): the same value, and the gradient 0 at v = 0 (torch) instead of 0.5 / 0 * 0 = NaN
  return map([](Scalar v) { return where(v == 0.0, 0.0, sqrt(v)); }, var(x, axes, unbiased, keepdims, loc), loc);
}

namespace {
/// The axes of x that normalized_shape names (its last normalized_shape.size() dimensions), after checking x, the
/// shape and the affine parameters (op: "layer_norm" / "rms_norm").
llvm::SmallVector<int, 4> norm_trailing_axes(const char* op, const Tensor& x, ShapeRef normalized_shape,
                                             const std::vector<std::pair<const char*, Tensor>>& affine, double eps,
                                             const SourceLoc& l) {
  check_tensor(x, op, "input", l);
  if (!(eps >= 0)) value_error(op, fmt::format("eps must be >= 0 (got {})", eps), l);
  const int k = static_cast<int>(normalized_shape.size());
  if (k == 0) shape_error(op, "normalized_shape is empty (torch: it must name at least one trailing dimension)", l);
  if (k > x.rank() || x.shape().take_back(k) != normalized_shape)
    shape_error(op, fmt::format("input {} does not end in normalized_shape {} (its last {} dimension{} must be {})",
                                shape_str(x.shape()), shape_str(normalized_shape), k, k == 1 ? "" : "s",
                                shape_str(normalized_shape)), l);
  for (const auto& [what, t] : affine)
    if (t && t.shape() != normalized_shape)
      shape_error(op, fmt::format("{} has shape {}, expected normalized_shape {}", what, shape_str(t.shape()),
                                  shape_str(normalized_shape)), l);
  llvm::SmallVector<int, 4> axes;
  for (int d = x.rank() - k; d < x.rank(); ++d) axes.push_back(d);
  return axes;
}
}  // namespace

Tensor layer_norm(const Tensor& x, ShapeRef normalized_shape, const Tensor& weight, const Tensor& bias, double eps,
                  loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  const auto axes = norm_trailing_axes("layer_norm", x, normalized_shape, {{"weight", weight}, {"bias", bias}}, eps, l);
  Tensor mu = mean(x, axes, true, loc);
  Tensor var = mean(map([](Scalar v, Scalar m) { return (v - m) * (v - m); }, x, mu, loc), axes, true, loc);
  Tensor y = map([eps](Scalar v, Scalar m, Scalar s) { return (v - m) * rsqrt(s + eps); }, x, mu, var, loc);
  if (weight) y = y * weight;
  if (bias) y = y + bias;
  return y;
}

Tensor rms_norm(const Tensor& x, ShapeRef normalized_shape, const Tensor& weight, std::optional<double> eps,
                loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  const double e = eps ? *eps : static_cast<double>(std::numeric_limits<float>::epsilon());  // torch: finfo(x.dtype).eps
  const auto axes = norm_trailing_axes("rms_norm", x, normalized_shape, {{"weight", weight}}, e, l);
  Tensor ms = mean(x * x, axes, true, loc);
  Tensor y = map([e](Scalar v, Scalar s) { return v * rsqrt(s + e); }, x, ms, loc);
  if (weight) y = y * weight;
  return y;
}

Tensor softmax(const Tensor& x, int axis, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "softmax", "input", l);
  int ax[1] = {axis};
  Tensor m = stop_gradient(max(x, ax, true, loc), loc);
  Tensor e = exp(x - m);
  return e / sum(e, ax, true, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(logits, "cross_entropy", "logits", l);
  check_tensor(labels, "cross_entropy", "labels", l);
  if (logits.rank() != 2 || labels.rank() != 1 || logits.dim(0) != labels.dim(0))
    shape_error("cross_entropy", fmt::format("expects logits (N,C) and labels (N), got {} and {}",
                                             shape_str(logits.shape()), shape_str(labels.shape())), l);
  Tensor logp = log_softmax(logits, 1, loc);
  Tensor picked = sum(logp * one_hot(labels, logits.dim(1), loc), 1, false, loc);
  return -mean(picked, {}, false, loc);
}

Tensor mse_loss(const Tensor& a, const Tensor& b, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(a, "mse_loss", "input", l);
  check_tensor(b, "mse_loss", "target", l);
  if (a.shape() != b.shape())
    shape_error("mse_loss", fmt::format("input {} and target {} differ", shape_str(a.shape()), shape_str(b.shape())), l);
  Tensor d = a - b;
  return mean(d * d, {}, false, loc);
}

Tensor kl_div(const Tensor& log_probs, const Tensor& target, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(log_probs, "kl_div", "input", l);
  check_tensor(target, "kl_div", "target", l);
  if (log_probs.shape() != target.shape() || log_probs.rank() < 1)
    shape_error("kl_div", fmt::format("input {} and target {} must have the same shape (N,...)",
                                      shape_str(log_probs.shape()), shape_str(target.shape())), l);
  Tensor pointwise = map([](Scalar lp, Scalar t) { return where(t > 0.0, t * (log(t) - lp), 0.0); }, log_probs,
                         target, loc);
  Tensor s = sum(pointwise, {}, false, loc);
  return s * (1.0 / static_cast<double>(log_probs.dim(0)));
}

}  // namespace sg
