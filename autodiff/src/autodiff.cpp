// Reverse-mode autodiff: the VJP rule table and the backward traversal.
#include "sg/autodiff.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace sg {

namespace {

/// A Map node over only the arguments `body` uses (unused ones are dropped and indices renumbered).
Tensor map_pruned(const SExprPtr& body, const std::vector<NodePtr>& args, const SourceLoc& loc) {
  std::vector<SExprPtr> subs(args.size());
  std::vector<NodePtr> used;
  std::vector<bool> seen(args.size(), false);
  std::unordered_set<const SExpr*> visited;  // each node once: a body's DAG may have exponentially many paths
  std::function<void(const SExprPtr&)> walk = [&](const SExprPtr& e) {
    if (!e || !visited.insert(e.get()).second) return;
    if (e->op == SOp::Arg) seen[e->arg] = true;
    walk(e->a), walk(e->b), walk(e->c);
  };
  walk(body);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!seen[i]) {
      subs[i] = sconst(0);
      continue;
    }
    int j = -1;  // dedupe identical nodes
    for (size_t u = 0; u < used.size(); ++u)
      if (used[u] == args[i]) j = static_cast<int>(u);
    if (j < 0) {
      used.push_back(args[i]);
      j = static_cast<int>(used.size()) - 1;
    }
    subs[i] = sarg(j);
  }
  return Tensor(materialize(ssubstitute(body, subs), used, loc));
}

SExprPtr shift_args(const SExprPtr& e, int by) {
  int n = sarg_count(e);
  std::vector<SExprPtr> subs;
  for (int i = 0; i < n; ++i) subs.push_back(sarg(i + by));
  return ssubstitute(e, subs);
}

Tensor keepdims_view(const Tensor& g, const Node& red) {
  // reshape a reduction's adjoint to the keepdims shape
  Shape keep(red.inputs[0]->shape.begin(), red.inputs[0]->shape.end());
  for (int a : red.attrs.axes) keep[a] = 1;
  return reshape(g, keep);
}

[[noreturn]] void unsupported(const Node& n, const std::string& why) {
  throw UnsupportedError(fmt::format("grad: cannot differentiate {}: {}", n.describe(), why));
}

Tensor make_like(Op op, const Node& proto, ShapeRef shape, std::vector<NodePtr> inputs, const SourceLoc& loc) {
  Node n;
  n.op = op;
  n.shape = Shape(shape.begin(), shape.end());
  n.inputs = std::move(inputs);
  n.attrs = proto.attrs;
  n.attrs.shape = n.shape;
  n.loc = loc;
  return Tensor(make_node(std::move(n)));
}

/// The adjoints of a Map's inputs: d body / d arg_i times g, summed back to each input's shape.
std::vector<Tensor> vjp_map(const Node& n, const Tensor& g) {
  const SourceLoc& loc = n.loc;
  std::vector<Tensor> out;
  std::vector<NodePtr> args = {g.node()};
  args.insert(args.end(), n.inputs.begin(), n.inputs.end());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    SExprPtr d = diff(n.body, static_cast<int>(i));
    if (is_const(d, 0)) {
      out.emplace_back();
      continue;
    }
    SExprPtr body = sbinary(SOp::Mul, sarg(0), shift_args(d, 1));
    Tensor full = map_pruned(body, args, loc);
    if (full.shape() != ShapeRef(n.shape)) full = broadcast_to(full, n.shape);
    out.push_back(sum_to(full, n.inputs[i]->shape));
  }
  return out;
}

/// The adjoint of a reduction's input: broadcast back (sum), or split among the tied extrema (max, min).
std::vector<Tensor> vjp_reduce(const NodePtr& np, const Tensor& g) {
  const Node& n = *np;
  const Tensor x(n.inputs[0]);
  switch (n.attrs.reduce) {
    case ReduceKind::Sum: return {broadcast_to(keepdims_view(g, n), x.shape())};
    case ReduceKind::Max:
    case ReduceKind::Min: {
      // torch.amax/amin convention: the gradient is split evenly among tied extrema.
      Tensor yk = keepdims_view(Tensor(np), n);
      Tensor mask = eq(x, yk);
      Tensor cnt = sum(mask, n.attrs.axes, true);
      return {keepdims_view(g, n) * mask / cnt};
    }
    case ReduceKind::ArgMax: return {Tensor()};
  }
  return {};
}

/// The adjoints of a matmul's two factors.
std::vector<Tensor> vjp_matmul(const Node& n, const Tensor& g) {
  Tensor a(n.inputs[0]), b(n.inputs[1]);
  Tensor ga = matmul(g, transpose(b));
  if (b.rank() == 2 && a.rank() > 2) {
    // a weight shared by every batch (x (.., M, K) @ W (K, N), a Linear on a sequence): its gradient is one
    // matmul over the folded batch, sum_b a_b^T g_b = fold(a)^T fold(g) with K' = B*M, not a batched matmul
    // then a sum over the batch (one kernel fewer, and no (B, K, N) temporary)
    const int64_t k = a.shape().back(), n_out = g.shape().back(), rows = a.numel() / k;
    Tensor gb = matmul(transpose(reshape(a, {rows, k})), reshape(g, {rows, n_out}));
    return {sum_to(ga, a.shape()), gb};
  }
  Tensor gb = matmul(transpose(a), g);
  return {sum_to(ga, a.shape()), sum_to(gb, b.shape())};
}

/// The adjoint of a slice: g scattered back into the sliced tensor's shape with zeros elsewhere.
std::vector<Tensor> vjp_slice(const Node& n, const Tensor& g) {
  // Scatter g back into x's shape. An axis walked backwards (a negative step: flip) first reverses g along
  // it (flip(g) there), which makes it the forward slice starting at the lowest index it read. A strided axis
  // then interleaves zeros: (.., len, ..) -> (.., len, 1, ..) -> pad the new axis to `step` -> (.., len*step,
  // ..), cropped to what fits in x.
  const Shape& xs = n.inputs[0]->shape;
  Shape starts = n.attrs.starts, steps = n.attrs.steps;
  Tensor r = g;
  llvm::SmallVector<int, 4> backwards;
  for (size_t i = 0; i < xs.size(); ++i)
    if (steps[i] < 0) {
      if (n.shape[i] > 1) backwards.push_back(static_cast<int>(i));
      starts[i] += (n.shape[i] - 1) * steps[i];
      steps[i] = -steps[i];
    }
  if (!backwards.empty()) r = flip(r, backwards);
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t step = steps[i], len = n.shape[i];
    if (step == 1 || len <= 1) continue;
    Shape split(r.shape().begin(), r.shape().end());
    split.insert(split.begin() + i + 1, 1);
    Shape zero(split.size(), 0), after(split.size(), 0);
    after[i + 1] = step - 1;
    Shape merged(r.shape().begin(), r.shape().end());
    merged[i] = len * step;
    r = reshape(pad(reshape(r, split), zero, after, 0.0), merged);
    r = slice(r, static_cast<int>(i), 0, std::min(len * step, xs[i] - starts[i]));
  }
  Shape before(xs.size()), after(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    before[i] = starts[i];
    after[i] = xs[i] - starts[i] - r.shape()[i];
  }
  return {pad(r, before, after, 0.0)};
}

/// The adjoint of a zero padding: the slice of g where the input lies.
std::vector<Tensor> vjp_pad(const Node& n, const Tensor& g) {
  Tensor r = g;
  for (size_t i = 0; i < n.shape.size(); ++i)
    r = slice(r, static_cast<int>(i), n.attrs.pads_before[i], n.attrs.pads_before[i] + n.inputs[0]->shape[i]);
  return {r};
}

/// The adjoint of a gather's source tensor (its index gets none).
std::vector<Tensor> vjp_gather(const Node& n, const Tensor& g) {
  // The scatter-add of g into x's shape, deterministic and without atomics (WebGL2 has none): per element of x,
  // a sum over the index positions k along the axis whose index equals its coordinate v,
  //   dx[.., v, ..] = sum_k (index[.., k, ..] == v) ? g[.., k, ..] : 0
  // as a reduction of a select over a one_hot of the index (it fuses into one kernel; a select, not a product,
  // so an infinite or NaN g reaches only the rows it was gathered from, as in torch). Where the index is smaller
  // than x outside the axis, the rest of dx is zero padding.
  const Shape& xs = n.inputs[0]->shape;
  const Shape& is = n.inputs[1]->shape;
  const int a = n.attrs.axes[0], r = static_cast<int>(xs.size());
  const Tensor index(n.inputs[1]);
  Shape hot(is.begin(), is.end());
  hot.push_back(xs[a]);
  Tensor mask = reshape(one_hot(reshape(index, Shape{numel(is)}), xs[a]), hot);  // (is.., V)
  llvm::SmallVector<int, 4> perm;
  for (int d = 0; d < a; ++d) perm.push_back(d);
  perm.push_back(r);
  for (int d = a; d < r; ++d) perm.push_back(d);
  mask = permute(mask, perm);  // (is[:a].., V, is[a:]..)
  Shape gs(is.begin(), is.end());
  gs.insert(gs.begin() + a, 1);
  Tensor picked = where(mask, reshape(g, gs), 0.0);
  Tensor dx = sum(picked, {a + 1});  // (is[:a].., V, is[a+1:]..)
  Shape before(r, 0), after(r, 0);
  for (int d = 0; d < r; ++d) after[d] = xs[d] - dx.shape()[d];
  return {pad(dx, before, after, 0.0), Tensor()};
}

/// The adjoints of a convolution-family or pooling node: the matching gradient ops.
std::vector<Tensor> vjp_conv_pool(const Node& n, const Tensor& g) {
  const SourceLoc& loc = n.loc;
  switch (n.op) {
    case Op::Conv2d: {
      Tensor gx = make_like(Op::Conv2dGradInput, n, n.inputs[0]->shape, {g.node(), n.inputs[1]}, loc);
      Tensor gw = make_like(Op::Conv2dGradWeight, n, n.inputs[1]->shape, {g.node(), n.inputs[0]}, loc);
      return {gx, gw};
    }
    case Op::MaxPool2d:
      return {make_like(Op::MaxPool2dGrad, n, n.inputs[0]->shape, {g.node(), n.inputs[0]}, loc)};
    case Op::AvgPool2d: return {make_like(Op::AvgPool2dGrad, n, n.inputs[0]->shape, {g.node()}, loc)};
    case Op::Conv2dGradInput: {  // conv_transpose2d(x, w): the adjoint map of conv2d(., w)
      Tensor gx = make_like(Op::Conv2d, n, n.inputs[0]->shape, {g.node(), n.inputs[1]}, loc);
      Tensor gw = make_like(Op::Conv2dGradWeight, n, n.inputs[1]->shape, {n.inputs[0], g.node()}, loc);
      return {gx, gw};
    }
    case Op::Conv2dGradWeight:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2dGrad: unsupported(n, "gradients of gradients are not supported");
    default: break;
  }
  unsupported(n, "no VJP rule");
}

/// The VJP table: adjoints of n's inputs given the adjoint g of n (empty Tensor: no gradient).
std::vector<Tensor> vjp(const NodePtr& np, const Tensor& g) {
  const Node& n = *np;
  if (n.custom_vjp) {
    std::vector<NodePtr> r = (*n.custom_vjp)(np, g.node());
    std::vector<Tensor> out;
    for (auto& x : r) out.emplace_back(x);
    out.resize(n.inputs.size());
    return out;
  }
  switch (n.op) {
    case Op::Input:
    case Op::Param:
    case Op::State:
    case Op::Const: return {};
    case Op::Map: return vjp_map(n, g);
    case Op::Reduce: return vjp_reduce(np, g);
    case Op::MatMul: return vjp_matmul(n, g);
    case Op::Reshape: return {reshape(g, n.inputs[0]->shape)};
    case Op::Permute: {
      llvm::SmallVector<int, 4> inv(n.attrs.perm.size());
      for (size_t i = 0; i < inv.size(); ++i) inv[n.attrs.perm[i]] = static_cast<int>(i);
      return {permute(g, inv)};
    }
    case Op::Expand: return {sum_to(g, n.inputs[0]->shape)};
    case Op::Slice: return vjp_slice(n, g);
    case Op::Pad: return vjp_pad(n, g);
    case Op::OneHot: return {Tensor()};
    case Op::RandomUniform: return {Tensor()};  // random values have no gradient; the step counter gets none
    case Op::Iota: return {};  // no inputs
    case Op::Gather: return vjp_gather(n, g);
    case Op::Conv2d:
    case Op::MaxPool2d:
    case Op::AvgPool2d:
    case Op::Conv2dGradInput:
    case Op::Conv2dGradWeight:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2dGrad: return vjp_conv_pool(n, g);
  }
  unsupported(n, "no VJP rule");
}

}  // namespace

std::vector<Tensor> grad(const Tensor& y, const std::vector<Tensor>& wrt, const Tensor& seed, loc_t loc) {
  SourceLoc l(loc);
  if (!y) throw ValueError("grad: y is an empty Tensor at " + l.str());
  Tensor g0 = seed;
  if (!g0) {
    if (y.numel() != 1)
      throw ShapeError(fmt::format("grad: y must be a scalar (got {}) or a seed adjoint must be given at {}",
                                   shape_str(y.shape()), l.str()));
    g0 = full(y.shape(), 1.0, loc);
  } else if (seed.shape() != y.shape()) {
    throw ShapeError(fmt::format("grad: seed shape {} differs from y shape {} at {}", shape_str(seed.shape()),
                                 shape_str(y.shape()), l.str()));
  }
  // Only nodes on a path from some wrt to y need adjoints.
  std::vector<NodePtr> order = topo_order({y.node()});
  std::unordered_set<const Node*> targets, relevant;
  for (auto& w : wrt) targets.insert(w.node().get());
  for (auto& n : order) {
    bool r = targets.count(n.get()) > 0;
    for (auto& i : n->inputs) r |= relevant.count(i.get()) > 0;
    if (r) relevant.insert(n.get());
  }
  std::unordered_map<const Node*, Tensor> adj;
  adj[y.node().get()] = g0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodePtr& n = *it;
    auto a = adj.find(n.get());
    if (a == adj.end() || n->inputs.empty()) continue;
    bool any = false;
    for (auto& i : n->inputs) any |= relevant.count(i.get()) > 0;
    if (!any) continue;
    LocationOverride at_forward(n->loc);  // backward nodes name the forward node's user line
    std::vector<Tensor> gs = vjp(n, a->second);
    for (size_t i = 0; i < n->inputs.size() && i < gs.size(); ++i) {
      const Node* src = n->inputs[i].get();
      if (!gs[i] || !relevant.count(src)) continue;
      auto [pos, fresh] = adj.try_emplace(src, gs[i]);
      if (!fresh) pos->second = Tensor(pos->second + gs[i]);  // fan-out: accumulate
    }
  }
  std::vector<Tensor> out;
  for (auto& w : wrt) {
    auto a = adj.find(w.node().get());
    out.push_back(a != adj.end() ? a->second : zeros(w.shape(), loc));
  }
  return out;
}

Tensor custom_vjp(const Tensor& y, CustomVJP rule, loc_t loc) {
  Node n = *y.node();
  n.loc = SourceLoc(loc);
  n.custom_vjp = std::make_shared<const CustomVJP>(std::move(rule));
  return Tensor(make_node(std::move(n)));
}

Tensor fake_quant(const Tensor& x, double scale, int64_t zero_point, int64_t qmin, int64_t qmax, loc_t loc) {
  if (!(scale > 0)) throw ValueError(fmt::format("fake_quant: scale must be > 0 (got {})", scale));
  if (qmin > qmax) throw ValueError(fmt::format("fake_quant: qmin {} > qmax {}", qmin, qmax));
  const double inv = static_cast<float>(1.0 / static_cast<float>(scale));  // as ATen: inv_scale = 1.0f / scale
  const double sc = static_cast<float>(scale), zp = static_cast<double>(zero_point);
  const double lo = static_cast<double>(qmin), hi = static_cast<double>(qmax);
  auto q = [=](Scalar v) { return round(v * inv) + zp; };
  Tensor y = map([=](Scalar v) { return (min(max(q(v), lo), hi) - zp) * sc; }, x, loc);
  SourceLoc l(loc);
  return custom_vjp(
      y,
      [=](const NodePtr& node, const NodePtr& g) -> std::vector<NodePtr> {
        // straight-through: pass the adjoint where the quantised value is inside [qmin, qmax]
        Tensor xin(node->inputs[0]);
        Tensor mask = map([=](Scalar v) { return where(q(v) >= lo, where(q(v) <= hi, 1.0, 0.0), 0.0); }, xin);
        return {Tensor(Tensor(g) * mask).node()};
      },
      loc);
}

Tensor fake_quant(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t qmin, int64_t qmax,
                  loc_t loc) {
  if (qmin > qmax) throw ValueError(fmt::format("fake_quant: qmin {} > qmax {}", qmin, qmax));
  for (const Tensor* p : {&scale, &zero_point})
    if (Shape b; !broadcast_shapes(p->shape(), x.shape(), b) || ShapeRef(b) != x.shape())
      throw ShapeError(fmt::format("fake_quant: {} of shape {} does not broadcast to x's shape {}",
                                   p == &scale ? "scale" : "zero_point", shape_str(p->shape()), shape_str(x.shape())));
  const double lo = static_cast<double>(qmin), hi = static_cast<double>(qmax);
  auto q = [=](Scalar v, Scalar s, Scalar z) { return round(v * (Scalar(1.0) / s)) + z; };
  Tensor y = map([=](Scalar v, Scalar s, Scalar z) { return (min(max(q(v, s, z), lo), hi) - z) * s; }, x, scale,
                 zero_point, loc);
  return custom_vjp(
      y,
      [=](const NodePtr& node, const NodePtr& g) -> std::vector<NodePtr> {
        // straight-through: pass the adjoint where the quantised value is inside [qmin, qmax]; no gradient to the
        // quantisation parameters (torch's fake_quantize_* return none for them either)
        Tensor xin(node->inputs[0]), sin(node->inputs[1]), zin(node->inputs[2]);
        Tensor mask = map([=](Scalar v, Scalar s, Scalar z) { return where(q(v, s, z) >= lo, where(q(v, s, z) <= hi,
                                                                                                   1.0, 0.0), 0.0); },
                          xin, sin, zin);
        return {Tensor(Tensor(g) * mask).node(), NodePtr(), NodePtr()};
      },
      loc);
}

// --- Program ---
// --- optimizers ---
namespace {

std::vector<float> zeros_like(const Tensor& p) { return std::vector<float>(p.numel(), 0.f); }

/// Optimizer state per parameter, created once: programs built by the same optimizer (e.g. a second train
/// step for a smaller last batch) share the same State leaves, so a backend keeps one copy.
using StateTable = std::unordered_map<const Node*, Tensor>;
Tensor state_for(StateTable& table, const Tensor& p, const char* suffix) {
  auto it = table.find(p.node().get());
  if (it == table.end()) it = table.emplace(p.node().get(), state(p.name() + suffix, p.shape(), zeros_like(p))).first;
  return it->second;
}

// --- learning-rate schedules ---
/// The schedule's checks (LRSchedule's docstring), for the factories and for a schedule written field by field.
void check_schedule(const std::string& who, const LRSchedule& s, const SourceLoc& loc) {
  auto fail = [&](const std::string& msg) {
    throw ValueError(fmt::format("{}: {}{}", who, msg, loc.known() ? " at " + loc.str() : std::string()));
  };
  switch (s.kind) {
    case LRSchedule::Kind::Constant: return;
    case LRSchedule::Kind::Step:
      if (s.step_size < 1) fail(fmt::format("step_size {} must be >= 1 (torch.optim.lr_scheduler.StepLR)", s.step_size));
      if (!(s.gamma >= 0) || !std::isfinite(s.gamma))
        fail(fmt::format("gamma {} must be finite and >= 0 (the factor lr is multiplied by every step_size steps)",
                         s.gamma));
      return;
    case LRSchedule::Kind::WarmupCosine:
      if (s.warmup_steps < 0) fail(fmt::format("warmup_steps {} must be >= 0", s.warmup_steps));
      if (s.total_steps < 1) fail(fmt::format("total_steps {} must be >= 1", s.total_steps));
      if (s.warmup_steps > s.total_steps)
        fail(fmt::format("warmup_steps {} exceeds total_steps {} (the warmup is part of the schedule's steps)",
                         s.warmup_steps, s.total_steps));
      if (!(s.min_lr >= 0) || !std::isfinite(s.min_lr))
        fail(fmt::format("min_lr {} must be finite and >= 0 (CosineAnnealingLR's eta_min)", s.min_lr));
      return;
  }
}

/// lr(t) as one Map node over the step counter t (shape {}, f32 on the GPU backends, f64 on the CPU reference).
/// The scheduler computes such a single-element function of the counter once per step (scalar hoisting) and the
/// update kernels load it.
Tensor schedule_node(const LRSchedule& s, double base, const Tensor& t) {
  switch (s.kind) {
    case LRSchedule::Kind::Constant: break;
    case LRSchedule::Kind::Step: {
      // k = floor(t / step_size), exactly: the f32 quotient of an inexact GPU division may land just below an
      // integer, so the first guess is corrected by products of integers (exact in f32 below 2^24)
      const double size = static_cast<double>(s.step_size), inv = 1.0 / size, gamma = s.gamma;
      const double ln_gamma = gamma > 0 ? std::log(gamma) : 0.0;
      return map(
          [=](Scalar tt) {
            Scalar k0 = floor((tt + 0.5) * inv);
            Scalar k = k0 + where(tt >= (k0 + 1.0) * size, 1.0, 0.0) - where(tt < k0 * size, 1.0, 0.0);
            if (gamma == 0) return where(k < 0.5, base, 0.0);  // 0^0 = 1, 0^k = 0
            return base * exp(k * ln_gamma);
          },
          t);
    }
    case LRSchedule::Kind::WarmupCosine: {
      const double W = static_cast<double>(s.warmup_steps), T = static_cast<double>(s.total_steps);
      const double floor_lr = s.min_lr, span = T - W;
      return map(
          [=](Scalar tt) {
            // (1 + cos(pi (t - W) / (T - W))) / 2 = sin^2(pi/2 * (T - t) / (T - W)): no cancellation near the end;
            // T - t is exact, q is clamped to [0, 1] (held at min_lr after T)
            Scalar cosine = floor_lr;
            if (span > 0) {
              Scalar q = (T - tt) * (1.0 / span);
              q = where(q > 0.0, where(q < 1.0, q, 1.0), 0.0);
              Scalar sn = sin(q * (M_PI / 2));
              cosine = floor_lr + (base - floor_lr) * (sn * sn);
            }
            if (W == 0) return cosine;
            return where(tt < W, (tt + 1.0) * (base / W), cosine);
          },
          t);
    }
  }
  return full({}, base);
}

/// An optimizer's learning rate: its base lr and schedule, and the node lr(t) of its step counter (made once).
class ScheduledLR {
 public:
  ScheduledLR(double base, LRSchedule s) : base_(base), s_(s) {}
  bool constant() const { return s_.kind == LRSchedule::Kind::Constant; }
  double base() const { return base_; }
  const LRSchedule& schedule() const { return s_; }
  /// lr(t) of `counter` (a constant node for the constant schedule)
  Tensor of(const Tensor& counter) {
    if (!node_) node_ = constant() ? full({}, base_) : schedule_node(s_, base_, counter);
    return node_;
  }
  std::string suffix() const { return constant() ? "" : ", schedule=" + s_.describe(); }

 private:
  double base_;
  LRSchedule s_;
  Tensor node_;
};

/// The step counter State of an optimizer, made on first use at the first parameter's line (the counter belongs to
/// no parameter: name the model's line, as the other update nodes do, rather than this file).
Tensor step_counter(Tensor& counter, const char* name, const std::vector<Tensor>& params) {
  if (!counter) {
    std::optional<LocationOverride> at_model;
    if (!params.empty()) at_model.emplace(params[0].node()->loc);
    counter = state(name, {}, {0.f});
  }
  return counter;
}

class SGD final : public Optimizer {
 public:
  explicit SGD(SGDOptions o) : o_(o), lr_(o.lr, o.schedule) {}
  std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    std::vector<Update> ups;
    const double lr = o_.lr, mom = o_.momentum, wd = o_.weight_decay;
    Tensor lr_t;  // a schedule's lr(t), else the host constant lr
    if (!lr_.constant()) {
      Tensor t = step_counter(step_, "sgd.step", params);
      std::optional<LocationOverride> at_model;
      if (!params.empty()) at_model.emplace(params[0].node()->loc);
      lr_t = lr_.of(t);
      ups.push_back({t.node(), Tensor(t + 1.0).node()});
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      LocationOverride at_param(p.node()->loc);
      Tensor g = grads[i];
      if (wd != 0) g = g + p * wd;
      if (mom == 0) {
        ups.push_back({p.node(), lr_t ? Tensor(p - g * lr_t).node() : Tensor(p - g * lr).node()});
        continue;
      }
      // torch: buf = g on the first step, else momentum*buf + g (dampening 0). A per-param "started" flag
      // would cost a state; buf starts at 0, and momentum*0 + g = g, which is the same first step.
      Tensor buf = state_for(bufs_, p, ".momentum_buffer");
      Tensor nb = buf * mom + g;
      Tensor step = o_.nesterov ? Tensor(g + nb * mom) : nb;
      ups.push_back({buf.node(), nb.node()});
      ups.push_back({p.node(), lr_t ? Tensor(p - step * lr_t).node() : Tensor(p - step * lr).node()});
    }
    return ups;
  }
  std::string describe() const override {
    return fmt::format("SGD(lr={}, momentum={}, weight_decay={}{}{})", o_.lr, o_.momentum, o_.weight_decay,
                       o_.nesterov ? ", nesterov" : "", lr_.suffix());
  }
  Tensor lr() override { return lr_.of(lr_.constant() ? Tensor() : step_counter(step_, "sgd.step", {})); }

 private:
  SGDOptions o_;
  ScheduledLR lr_;
  StateTable bufs_;
  Tensor step_;
};

/// 1 - beta^t for a step count t >= 1, without the cancellation of 1 - pow(beta, t) in f32 (at t = 1, beta = 0.999
/// that lost 1e-4 relative on GPUs): -expm1(t ln beta), ln beta computed in f64 here, expm1(x) by its Taylor
/// series through x^8 for |x| < 0.5 (truncation below 3e-9 relative; x^9/9! / x at |x| = 0.5) and exp(x) - 1 beyond
/// (no cancellation there: |exp(x) - 1| > 0.39). Relative error in f32 about 2e-7; the CPU reference is exact to f64.
Tensor one_minus_pow(double beta, const Tensor& t) {
  const double ln_beta = std::log(beta);
  return map(
      [ln_beta](auto tt) {
        auto x = tt * ln_beta;
        auto series = x * (1.0 + x * (1.0 / 2 + x * (1.0 / 6 + x * (1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720 +
                      x * (1.0 / 5040 + x * (1.0 / 40320))))))));
        return -where(abs(x) < 0.5, series, exp(x) - 1.0);
      },
      t);
}

/// One Adam core for torch.optim.Adam (weight decay added to the gradient: L2) and torch.optim.AdamW (decoupled:
/// the parameter is multiplied by 1 - lr*wd before the Adam step).
struct AdamConfig {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  ///< AdamW
  LRSchedule schedule;
};

class Adam final : public Optimizer {
 public:
  explicit Adam(AdamConfig o) : o_(o), lr_(o.lr, o.schedule) {}
  std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    std::vector<Update> ups;
    const double lr = o_.lr, b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps, wd = o_.weight_decay;
    Tensor t = step_counter(step_, counter_name(), params);
    std::optional<LocationOverride> at_model;
    if (!params.empty()) at_model.emplace(params[0].node()->loc);
    Tensor t1 = t + 1.0;
    // PyTorch: step_size = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps. The bias corrections depend on
    // the step counter only: one node each, shared by every parameter's update; the scheduler computes such
    // single-element values once per step (scalar hoisting, sg/schedule.h) and each update kernel loads them.
    Tensor bc1 = one_minus_pow(b1, t1);
    Tensor sqrt_bc2 = sqrt(one_minus_pow(b2, t1));
    // a schedule's lr(t) (t = steps before this one) enters as single-element nodes too: lr(t) / (1 - b1^t) and
    // AdamW's 1 - lr(t) wd; without one, lr is a host constant as before
    Tensor step_size, decay;
    if (!lr_.constant()) {
      Tensor lr_t = lr_.of(t);
      step_size = lr_t / bc1;
      if (o_.decoupled && wd != 0) decay = 1.0 - lr_t * wd;
    }
    at_model.reset();
    ups.push_back({t.node(), t1.node()});
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      LocationOverride at_param(p.node()->loc);
      Tensor g = grads[i];
      if (!o_.decoupled && wd != 0) g = g + p * wd;
      Tensor m = state_for(m_, p, ".exp_avg");
      Tensor v = state_for(v_, p, ".exp_avg_sq");
      Tensor m1 = m * b1 + g * (1 - b1);
      Tensor v1 = v * b2 + g * g * (1 - b2);
      Tensor p1;
      if (lr_.constant()) {
        if (o_.decoupled && wd != 0)
          p1 = p * (1 - lr * wd) - (m1 * lr / bc1) / (sqrt(v1) / sqrt_bc2 + eps);
        else
          p1 = p - (m1 * lr / bc1) / (sqrt(v1) / sqrt_bc2 + eps);
      } else {
        if (decay)
          p1 = p * decay - (m1 * step_size) / (sqrt(v1) / sqrt_bc2 + eps);
        else
          p1 = p - (m1 * step_size) / (sqrt(v1) / sqrt_bc2 + eps);
      }
      ups.push_back({m.node(), m1.node()});
      ups.push_back({v.node(), v1.node()});
      ups.push_back({p.node(), p1.node()});
    }
    return ups;
  }
  std::string describe() const override {
    return fmt::format("{}(lr={}, betas=({}, {}), eps={}, weight_decay={}{})", o_.decoupled ? "AdamW" : "Adam",
                       o_.lr, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, lr_.suffix());
  }
  Tensor lr() override { return lr_.of(lr_.constant() ? Tensor() : step_counter(step_, counter_name(), {})); }

 private:
  const char* counter_name() const { return o_.decoupled ? "adamw.step" : "adam.step"; }
  AdamConfig o_;
  ScheduledLR lr_;
  StateTable m_, v_;
  Tensor step_;
};

}  // namespace

namespace {
// torch.optim's argument checks, written as torch writes them (`not 0.0 <= lr`), so NaN fails them too.
void require_at_least(const char* optimizer, const char* name, double v, double lo) {
  if (!(lo <= v)) throw ValueError(fmt::format("{}: invalid {} {} (must be >= {})", optimizer, name, v, lo));
}
void require_in_unit(const char* optimizer, const char* name, double v) {
  if (!(0.0 <= v && v < 1.0)) throw ValueError(fmt::format("{}: invalid {} {} (must be in [0, 1))", optimizer, name, v));
}
void check_adam(const char* who, double lr, double beta1, double beta2, double eps, double weight_decay,
                const LRSchedule& schedule) {
  require_at_least(who, "lr", lr, 0.0);
  require_at_least(who, "eps", eps, 0.0);
  require_in_unit(who, "beta1", beta1);
  require_in_unit(who, "beta2", beta2);
  require_at_least(who, "weight_decay", weight_decay, 0.0);
  check_schedule(std::string(who) + ": schedule", schedule, SourceLoc());
}
}  // namespace

Tensor Optimizer::lr() {
  throw UnsupportedError(fmt::format("{} does not expose its learning rate as a tensor (Optimizer::lr)", describe()));
}

LRSchedule LRSchedule::step(int64_t step_size, double gamma, loc_t loc) {
  LRSchedule s;
  s.kind = Kind::Step;
  s.step_size = step_size;
  s.gamma = gamma;
  check_schedule("LRSchedule::step", s, SourceLoc(loc));
  return s;
}

LRSchedule LRSchedule::warmup_cosine(int64_t warmup_steps, int64_t total_steps, double min_lr, loc_t loc) {
  LRSchedule s;
  s.kind = Kind::WarmupCosine;
  s.warmup_steps = warmup_steps;
  s.total_steps = total_steps;
  s.min_lr = min_lr;
  check_schedule("LRSchedule::warmup_cosine", s, SourceLoc(loc));
  return s;
}

double LRSchedule::at(double base_lr, int64_t t) const {
  switch (kind) {
    case Kind::Constant: return base_lr;
    case Kind::Step: return base_lr * std::pow(gamma, static_cast<double>(t / step_size));
    case Kind::WarmupCosine: {
      if (t < warmup_steps) return base_lr * static_cast<double>(t + 1) / static_cast<double>(warmup_steps);
      if (total_steps == warmup_steps) return min_lr;
      const double progress = static_cast<double>(std::min(t, total_steps) - warmup_steps) /
                              static_cast<double>(total_steps - warmup_steps);
      return min_lr + (base_lr - min_lr) * (1 + std::cos(M_PI * progress)) / 2;
    }
  }
  return base_lr;
}

std::string LRSchedule::describe() const {
  switch (kind) {
    case Kind::Constant: return "constant";
    case Kind::Step: return fmt::format("StepLR(step_size={}, gamma={})", step_size, gamma);
    case Kind::WarmupCosine:
      return fmt::format("warmup_cosine(warmup_steps={}, total_steps={}, min_lr={})", warmup_steps, total_steps,
                         min_lr);
  }
  return "?";
}

std::unique_ptr<Optimizer> make_sgd(SGDOptions opt) {
  require_at_least("make_sgd", "lr", opt.lr, 0.0);
  require_at_least("make_sgd", "momentum", opt.momentum, 0.0);
  require_at_least("make_sgd", "weight_decay", opt.weight_decay, 0.0);
  if (opt.nesterov && !(opt.momentum > 0))
    throw ValueError("make_sgd: nesterov momentum requires momentum > 0 (torch.optim.SGD's rule)");
  check_schedule("make_sgd: schedule", opt.schedule, SourceLoc());
  return std::make_unique<SGD>(opt);
}
std::unique_ptr<Optimizer> make_adam(AdamOptions opt) {
  check_adam("make_adam", opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.schedule);
  return std::make_unique<Adam>(
      AdamConfig{opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, /*decoupled=*/false, opt.schedule});
}
std::unique_ptr<Optimizer> make_adamw(AdamWOptions opt) {
  check_adam("make_adamw", opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.schedule);
  return std::make_unique<Adam>(
      AdamConfig{opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, /*decoupled=*/true, opt.schedule});
}

// --- gradient clipping ---
ClippedGrads clip_grad_norm(const std::vector<Tensor>& grads, double max_norm, double norm_type, loc_t loc) {
  const SourceLoc l(loc);
  auto fail = [&](const std::string& msg) {
    throw ValueError(fmt::format("clip_grad_norm: {}{}", msg, l.known() ? " at " + l.str() : std::string()));
  };
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    fail(fmt::format("max_norm {} must be positive and finite (the largest total gradient norm kept)", max_norm));
  const bool inf_norm = norm_type == std::numeric_limits<double>::infinity();
  if (!inf_norm && !(norm_type > 0 && std::isfinite(norm_type)))
    fail(fmt::format("norm_type {} is not supported (a p > 0, or infinity for the max norm)", norm_type));
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].dtype() != DType::f32)
      fail(fmt::format("gradient {} ({}) is not f32", i, grads[i].node()->describe()));
  LocationOverride at(l);
  ClippedGrads r;
  if (grads.empty()) {  // torch returns tensor(0.) for no gradients
    r.total_norm = full({}, 0.0);
    return r;
  }
  // one reduction per gradient (each its own kernel or fused into its producer's), added in parameter order
  Tensor total;
  for (const Tensor& g : grads) {
    Tensor part;
    if (inf_norm)
      part = max(abs(g));
    else if (norm_type == 2)
      part = sum(g * g);
    else if (norm_type == 1)
      part = sum(abs(g));
    else
      part = sum(map([norm_type](Scalar x) { return pow(abs(x), norm_type); }, g));
    total = !total ? part : inf_norm ? Tensor(maximum(total, part)) : Tensor(total + part);
  }
  if (!inf_norm && norm_type == 2)
    total = sqrt(total);
  else if (!inf_norm && norm_type != 1)
    total = map([norm_type](Scalar x) { return pow(x, 1.0 / norm_type); }, total);
  // torch: clip_coef = max_norm / (total_norm + 1e-6); torch.clamp(clip_coef, max=1.0) keeps NaN, as minimum does
  Tensor coef = minimum(max_norm / (total + 1e-6), 1.0);
  for (const Tensor& g : grads) r.grads.push_back(g * coef);
  r.total_norm = total;
  return r;
}

Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const TrainStepOptions& options, loc_t loc) {
  for (auto& p : params)
    if (p.node()->op != Op::Param)
      throw ValueError(fmt::format("make_train_step: {} is not a parameter (sg::param)", p.node()->describe()));
  const SourceLoc l(loc);
  if (options.output_grad_norm && options.clip_grad_norm == 0)
    throw ValueError(fmt::format("make_train_step: output_grad_norm needs clip_grad_norm > 0 (the norm is computed by "
                                 "the clipping){}", l.known() ? " at " + l.str() : std::string()));
  TrainStepGradients none;
  TrainStepGradients& inspect = options.inspect ? *options.inspect : none;
  std::vector<Tensor> wrt = params;
  wrt.insert(wrt.end(), inspect.also.begin(), inspect.also.end());
  Tensor seed;  // d(loss)/d(loss) = 1, named after the loss's line rather than this file
  if (loss.numel() == 1) {
    LocationOverride at_loss(loss.node()->loc);
    seed = full(loss.shape(), 1.0);
  }
  inspect.grads = grad(loss, wrt, seed);
  Program prog;
  prog.add_output("loss", loss);
  for (auto& [name, t] : options.extra_outputs) prog.add_output(name, t);
  std::vector<Tensor> grads(inspect.grads.begin(), inspect.grads.begin() + static_cast<long>(params.size()));
  if (options.clip_grad_norm != 0) {
    // the clipping's nodes name the line that asked for it (make_train_step's caller)
    ClippedGrads c = clip_grad_norm(grads, options.clip_grad_norm, options.clip_norm_type, loc);
    grads = std::move(c.grads);
    if (options.output_grad_norm) prog.add_output("grad_norm", c.total_norm);
  }
  for (Update& u : opt.updates(params, grads))
    prog.updates.push_back(std::move(u));  // after the forward pass's state updates (Program::add_output)
  if (options.output_lr) prog.add_output("lr", opt.lr());
  return prog;
}

Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const std::vector<std::pair<std::string, Tensor>>& extra_outputs, TrainStepGradients& inspect) {
  TrainStepOptions o;
  o.extra_outputs = extra_outputs;
  o.inspect = &inspect;
  return make_train_step(loss, params, opt, o);
}

Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const std::vector<std::pair<std::string, Tensor>>& extra_outputs) {
  TrainStepGradients none;
  return make_train_step(loss, params, opt, extra_outputs, none);
}

// --- gradient check ---
std::string GradCheckResult::report() const {
  if (worst_index < 0) return ok ? "ok (no elements)" : "failed";
  return fmt::format("{}: worst element {}[{}]: analytic {:.9g}, numeric {:.9g} (abs err {:.3g}, rel err {:.3g})",
                     ok ? "ok" : "FAILED", worst_tensor, worst_index, worst_analytic, worst_numeric, max_abs_err,
                     max_rel_err);
}

GradCheckResult check_gradients(const Tensor& y, const std::vector<Tensor>& wrt,
                                const std::map<const Node*, std::vector<double>>& values,
                                const GraphEvaluator& eval, double h, double rtol, double atol) {
  if (y.numel() != 1) throw ShapeError("check_gradients: y must be a scalar, got " + shape_str(y.shape()));
  std::vector<Tensor> gs = grad(y, wrt);
  std::vector<NodePtr> outs;
  for (auto& g : gs) outs.push_back(g.node());
  auto analytic = eval(outs, values);
  GradCheckResult res;
  double worst_score = -1;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const Node* leaf = wrt[w].node().get();
    if (!leaf->is_leaf()) throw ValueError("check_gradients: wrt tensors must be leaves: " + leaf->describe());
    std::map<const Node*, std::vector<double>> vals = values;
    if (!vals.count(leaf)) {
      if (!leaf->data) throw ValueError("check_gradients: no value for " + leaf->describe());
      vals[leaf].assign(leaf->data->begin(), leaf->data->end());
    }
    std::vector<double>& x = vals[leaf];
    for (size_t i = 0; i < x.size(); ++i) {
      double x0 = x[i], step = h * std::max(1.0, std::fabs(x0));
      x[i] = x0 + step;
      double fp = eval({y.node()}, vals)[0][0];
      x[i] = x0 - step;
      double fm = eval({y.node()}, vals)[0][0];
      x[i] = x0;
      double num = (fp - fm) / (2 * step), an = analytic[w][i];
      double abs_err = std::fabs(an - num), rel = abs_err / std::max(std::fabs(num), 1e-12);
      bool pass = abs_err <= atol + rtol * std::fabs(num);
      double score = abs_err / (atol + rtol * std::fabs(num));
      res.max_abs_err = std::max(res.max_abs_err, abs_err);
      res.max_rel_err = std::max(res.max_rel_err, std::min(rel, abs_err / std::max(atol, 1e-300)));
      if (!pass) res.ok = false;
      if (score > worst_score) {
        worst_score = score;
        res.worst_tensor = leaf->name.empty() ? leaf->describe() : leaf->name;
        res.worst_index = static_cast<int64_t>(i);
        res.worst_analytic = an;
        res.worst_numeric = num;
      }
    }
  }
  return res;
}

}  // namespace sg
