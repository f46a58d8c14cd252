// Reverse-mode autodiff: the VJP rule table and the backward traversal.
#include "sg/autodiff.h"

#include <algorithm>
#include <cmath>
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

/// The VJP table: adjoints of n's inputs given the adjoint g of n (empty Tensor: no gradient).
std::vector<Tensor> vjp(const NodePtr& np, const Tensor& g) {
  const Node& n = *np;
  const SourceLoc& loc = n.loc;
  auto in = [&](size_t i) { return Tensor(n.inputs[i]); };
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
    case Op::Map: {
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
    case Op::Reduce: {
      const Tensor x = in(0);
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
    case Op::MatMul: {
      Tensor a = in(0), b = in(1);
      Tensor ga = matmul(g, transpose(b));
      Tensor gb = matmul(transpose(a), g);
      return {sum_to(ga, a.shape()), sum_to(gb, b.shape())};
    }
    case Op::Reshape: return {reshape(g, n.inputs[0]->shape)};
    case Op::Permute: {
      llvm::SmallVector<int, 4> inv(n.attrs.perm.size());
      for (size_t i = 0; i < inv.size(); ++i) inv[n.attrs.perm[i]] = static_cast<int>(i);
      return {permute(g, inv)};
    }
    case Op::Expand: return {sum_to(g, n.inputs[0]->shape)};
    case Op::Slice: {
      // Scatter g back into x's shape. A strided axis first interleaves zeros: (.., len, ..) ->
      // (.., len, 1, ..) -> pad the new axis to `step` -> (.., len*step, ..), cropped to what fits in x.
      const Shape& xs = n.inputs[0]->shape;
      Tensor r = g;
      for (size_t i = 0; i < xs.size(); ++i) {
        const int64_t step = n.attrs.steps[i], len = n.shape[i];
        if (step == 1 || len <= 1) continue;
        Shape split(r.shape().begin(), r.shape().end());
        split.insert(split.begin() + i + 1, 1);
        Shape zero(split.size(), 0), after(split.size(), 0);
        after[i + 1] = step - 1;
        Shape merged(r.shape().begin(), r.shape().end());
        merged[i] = len * step;
        r = reshape(pad(reshape(r, split), zero, after, 0.0), merged);
        r = slice(r, static_cast<int>(i), 0, std::min(len * step, xs[i] - n.attrs.starts[i]));
      }
      Shape before(xs.size()), after(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        before[i] = n.attrs.starts[i];
        after[i] = xs[i] - n.attrs.starts[i] - r.shape()[i];
      }
      return {pad(r, before, after, 0.0)};
    }
    case Op::Pad: {
      Tensor r = g;
      for (size_t i = 0; i < n.shape.size(); ++i)
        r = slice(r, static_cast<int>(i), n.attrs.pads_before[i], n.attrs.pads_before[i] + n.inputs[0]->shape[i]);
      return {r};
    }
    case Op::OneHot: return {Tensor()};
    case Op::Conv2d: {
      Tensor gx = make_like(Op::Conv2dGradInput, n, n.inputs[0]->shape, {g.node(), n.inputs[1]}, loc);
      Tensor gw = make_like(Op::Conv2dGradWeight, n, n.inputs[1]->shape, {g.node(), n.inputs[0]}, loc);
      return {gx, gw};
    }
    case Op::MaxPool2d:
      return {make_like(Op::MaxPool2dGrad, n, n.inputs[0]->shape, {g.node(), n.inputs[0]}, loc)};
    case Op::AvgPool2d: return {make_like(Op::AvgPool2dGrad, n, n.inputs[0]->shape, {g.node()}, loc)};
    case Op::Conv2dGradInput:
    case Op::Conv2dGradWeight:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2dGrad: unsupported(n, "gradients of gradients are not supported");
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

class SGD final : public Optimizer {
 public:
  explicit SGD(SGDOptions o) : o_(o) {}
  std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    std::vector<Update> ups;
    const double lr = o_.lr, mom = o_.momentum, wd = o_.weight_decay;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      LocationOverride at_param(p.node()->loc);
      Tensor g = grads[i];
      if (wd != 0) g = g + p * wd;
      if (mom == 0) {
        ups.push_back({p.node(), Tensor(p - g * lr).node()});
        continue;
      }
      // torch: buf = g on the first step, else momentum*buf + g (dampening 0). A per-param "started" flag
      // would cost a state; buf starts at 0, and momentum*0 + g = g, which is the same first step.
      Tensor buf = state_for(bufs_, p, ".momentum_buffer");
      Tensor nb = buf * mom + g;
      Tensor step = o_.nesterov ? Tensor(g + nb * mom) : nb;
      ups.push_back({buf.node(), nb.node()});
      ups.push_back({p.node(), Tensor(p - step * lr).node()});
    }
    return ups;
  }
  std::string describe() const override {
    return fmt::format("SGD(lr={}, momentum={}, weight_decay={}{})", o_.lr, o_.momentum, o_.weight_decay,
                       o_.nesterov ? ", nesterov" : "");
  }

 private:
  SGDOptions o_;
  StateTable bufs_;
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

class Adam final : public Optimizer {
 public:
  explicit Adam(AdamOptions o) : o_(o) {}
  std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    std::vector<Update> ups;
    const double lr = o_.lr, b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps, wd = o_.weight_decay;
    if (!step_) step_ = state("adam.step", {}, {0.f});
    Tensor t = step_;
    // the step counter belongs to no parameter: name the first parameter's line, as the other update nodes do,
    // rather than this file
    std::optional<LocationOverride> at_model;
    if (!params.empty()) at_model.emplace(params[0].node()->loc);
    Tensor t1 = t + 1.0;
    // PyTorch: step_size = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps. The bias corrections depend on
    // the step counter only: one node each, shared by every parameter's update; the scheduler computes such
    // single-element values once per step (scalar hoisting, sg/schedule.h) and each update kernel loads them.
    Tensor bc1 = one_minus_pow(b1, t1);
    Tensor sqrt_bc2 = sqrt(one_minus_pow(b2, t1));
    at_model.reset();
    ups.push_back({t.node(), t1.node()});
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      LocationOverride at_param(p.node()->loc);
      Tensor g = grads[i];
      if (wd != 0) g = g + p * wd;
      Tensor m = state_for(m_, p, ".exp_avg");
      Tensor v = state_for(v_, p, ".exp_avg_sq");
      Tensor m1 = m * b1 + g * (1 - b1);
      Tensor v1 = v * b2 + g * g * (1 - b2);
      Tensor p1 = p - (m1 * lr / bc1) / (sqrt(v1) / sqrt_bc2 + eps);
      ups.push_back({m.node(), m1.node()});
      ups.push_back({v.node(), v1.node()});
      ups.push_back({p.node(), p1.node()});
    }
    return ups;
  }
  std::string describe() const override {
    return fmt::format("Adam(lr={}, betas=({}, {}), eps={}, weight_decay={})", o_.lr, o_.beta1, o_.beta2, o_.eps,
                       o_.weight_decay);
  }

 private:
  AdamOptions o_;
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
}  // namespace

std::unique_ptr<Optimizer> make_sgd(SGDOptions opt) {
  require_at_least("make_sgd", "lr", opt.lr, 0.0);
  require_at_least("make_sgd", "momentum", opt.momentum, 0.0);
  require_at_least("make_sgd", "weight_decay", opt.weight_decay, 0.0);
  if (opt.nesterov && !(opt.momentum > 0))
    throw ValueError("make_sgd: nesterov momentum requires momentum > 0 (torch.optim.SGD's rule)");
  return std::make_unique<SGD>(opt);
}
std::unique_ptr<Optimizer> make_adam(AdamOptions opt) {
  require_at_least("make_adam", "lr", opt.lr, 0.0);
  require_at_least("make_adam", "eps", opt.eps, 0.0);
  require_in_unit("make_adam", "beta1", opt.beta1);
  require_in_unit("make_adam", "beta2", opt.beta2);
  require_at_least("make_adam", "weight_decay", opt.weight_decay, 0.0);
  return std::make_unique<Adam>(opt);
}

Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const std::vector<std::pair<std::string, Tensor>>& extra_outputs, TrainStepGradients& inspect) {
  for (auto& p : params)
    if (p.node()->op != Op::Param)
      throw ValueError(fmt::format("make_train_step: {} is not a parameter (sg::param)", p.node()->describe()));
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
  for (auto& [name, t] : extra_outputs) prog.add_output(name, t);
  prog.updates = opt.updates(params, std::vector<Tensor>(inspect.grads.begin(), inspect.grads.begin() +
                                                                                   static_cast<long>(params.size())));
  return prog;
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
