// The op library: shape checking and node construction for every DSL op.
#include "sg/tensor.h"

#include <algorithm>
#include <limits>
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

// --- conv / pool ---
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Conv2dOptions opt, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  check_tensor(x, "conv2d", "input", l);
  check_tensor(w, "conv2d", "weight", l);
  if (x.rank() != 4 || w.rank() != 4)
    shape_error("conv2d", fmt::format("expects x (N,C,H,W) and w (O,C,KH,KW), got {} and {}", shape_str(x.shape()),
                                      shape_str(w.shape())), l);
  if (x.dim(1) != w.dim(1))
    shape_error("conv2d", fmt::format("input channels differ: x {} has C={}, w {} has C={}", shape_str(x.shape()),
                                      x.dim(1), shape_str(w.shape()), w.dim(1)), l);
  Attrs a;
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

// --- softmax and losses ---
Tensor stop_gradient(const Tensor& x, loc_t loc) {
  SourceLoc l(loc);
  check_tensor(x, "stop_gradient", "input", l);
  Node n = *x.node();
  n.op = Op::Reshape;
  n.inputs = {x.node()};
  n.attrs = {};
  n.body = nullptr;
  n.data = nullptr;
  n.name = "";
  n.loc = l;
  n.custom_vjp = std::make_shared<const CustomVJP>(
      [](const NodePtr&, const NodePtr&) { return std::vector<NodePtr>{nullptr}; });
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
