// CPU reference executor: one straightforward loop nest per primitive op, f64 accumulation.
#include "sg/cpu_reference.h"

#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "sg/philox.h"

namespace sg::cpu {

namespace {

using Vec = std::vector<double>;

/// Strides of `in` broadcast against `out` (0 on stretched axes), aligned at the right.
Shape broadcast_strides(ShapeRef in, ShapeRef out) {
  Shape st(out.size(), 0);
  Shape cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

/// Calls f(out_flat, in_offsets...) over every element of `out`, with per-input strides.
template <class F>
void for_each_index(ShapeRef out, const std::vector<Shape>& strides, F&& f) {
  int64_t n = numel(out);
  int r = static_cast<int>(out.size());
  Shape idx(r, 0);
  std::vector<int64_t> offs(strides.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(flat, offs);
    for (int d = r - 1; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < strides.size(); ++k) offs[k] += strides[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < strides.size(); ++k) offs[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

/// A Map body flattened for fast repeated evaluation: one instruction per distinct node of its DAG (children first),
/// each writing its own register, so a shared subexpression is evaluated once (a lambda looping over layers has
/// exponentially many paths, not nodes). Select evaluates both branches (values only; no side effects).
struct Bytecode {
  struct Ins {
    SOp op;
    double value;
    int arg;
    int a = -1, b = -1, c = -1;  // operand registers
  };
  std::vector<Ins> code;
  void compile(const SExprPtr& root) {
    std::unordered_map<const SExpr*, int> reg;
    std::function<int(const SExprPtr&)> go = [&](const SExprPtr& e) -> int {
      if (auto it = reg.find(e.get()); it != reg.end()) return it->second;
      Ins i{e->op, e->value, e->arg};
      if (e->a) i.a = go(e->a);
      if (e->b) i.b = go(e->b);
      if (e->c) i.c = go(e->c);
      code.push_back(i);
      return reg[e.get()] = static_cast<int>(code.size()) - 1;
    };
    go(root);
  }
  double run(const double* args, std::vector<double>& regs) const {
    regs.resize(code.size());
    for (size_t r = 0; r < code.size(); ++r) {
      const Ins& i = code[r];
      switch (sop_arity(i.op)) {
        case 0: regs[r] = i.op == SOp::Const ? i.value : args[i.arg]; break;
        case 1: regs[r] = seval_op(i.op, regs[i.a], 0, 0); break;
        case 2: regs[r] = seval_op(i.op, regs[i.a], regs[i.b], 0); break;
        default: regs[r] = regs[i.a] != 0.0 ? regs[i.b] : regs[i.c];
      }
    }
    return regs.back();
  }
};

Vec eval_map(const Node& n, const std::vector<const Vec*>& in) {
  Bytecode bc;
  bc.compile(n.body);
  std::vector<Shape> strides;
  for (auto& i : n.inputs) strides.push_back(broadcast_strides(i->shape, n.shape));
  Vec out(n.numel());
  std::vector<double> args(in.size()), regs;
  for_each_index(n.shape, strides, [&](int64_t flat, const std::vector<int64_t>& offs) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = (*in[k])[offs[k]];
    out[flat] = bc.run(args.data(), regs);
  });
  return out;
}

Vec eval_reduce(const Node& n, const Vec& x) {
  const Node& src = *n.inputs[0];
  int r = static_cast<int>(src.shape.size());
  // output strides for each input axis (0 on reduced axes)
  Shape keep_shape;
  std::vector<bool> red(r, false);
  for (int a : n.attrs.axes) red[a] = true;
  for (int i = 0; i < r; ++i) keep_shape.push_back(red[i] ? 1 : src.shape[i]);
  Shape ost = contiguous_strides(keep_shape);
  for (int i = 0; i < r; ++i)
    if (red[i]) ost[i] = 0;
  int64_t out_n = numel(keep_shape);
  ReduceKind k = n.attrs.reduce;
  double init = k == ReduceKind::Sum ? 0.0
                : k == ReduceKind::Min ? std::numeric_limits<double>::infinity()
                                       : -std::numeric_limits<double>::infinity();
  Vec acc(out_n, init), arg(out_n, 0.0);
  std::vector<bool> nan(out_n, false);
  int axis = n.attrs.axes.empty() ? 0 : n.attrs.axes[0];
  Shape cs = contiguous_strides(src.shape);
  std::vector<Shape> strides = {ost};
  for_each_index(src.shape, strides, [&](int64_t flat, const std::vector<int64_t>& offs) {
    double v = x[flat];
    int64_t o = offs[0];
    switch (k) {
      case ReduceKind::Sum: acc[o] += v; break;
      case ReduceKind::Max:
        if (std::isnan(v)) nan[o] = true;
        acc[o] = std::max(acc[o], v);
        break;
      case ReduceKind::Min:
        if (std::isnan(v)) nan[o] = true;
        acc[o] = std::min(acc[o], v);
        break;
      case ReduceKind::ArgMax: {
        int64_t pos = (flat / cs[axis]) % src.shape[axis];
        if (pos == 0 || v > acc[o] || (std::isnan(v) && !nan[o])) {  // first maximum wins; NaN counts as max
          if (pos == 0 || !nan[o]) {
            acc[o] = v;
            arg[o] = static_cast<double>(pos);
          }
          if (std::isnan(v)) nan[o] = true;
        }
        break;
      }
    }
  });
  if (k == ReduceKind::ArgMax) return arg;
  for (int64_t i = 0; i < out_n; ++i)
    if (nan[i]) acc[i] = std::numeric_limits<double>::quiet_NaN();
  return acc;
}

Vec eval_matmul(const Node& n, const Vec& a, const Vec& b) {
  const Shape& as = n.inputs[0]->shape;
  const Shape& bs = n.inputs[1]->shape;
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape batch(n.shape.begin(), n.shape.end() - 2);
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::vector<Shape> strides = {broadcast_strides(ab, batch), broadcast_strides(bb, batch)};
  Vec out(n.numel());
  std::vector<double> row(N);
  for_each_index(batch, strides, [&](int64_t bi, const std::vector<int64_t>& offs) {
    const double* A = a.data() + offs[0] * M * K;
    const double* B = b.data() + offs[1] * K * N;
    double* C = out.data() + bi * M * N;
    for (int64_t i = 0; i < M; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        double av = A[i * K + k];
        const double* Bk = B + k * N;
        for (int64_t j = 0; j < N; ++j) row[j] += av * Bk[j];
      }
      std::copy(row.begin(), row.end(), C + i * N);
    }
  });
  return out;
}

/// Maps each output element to an input flat index (or -1 for "fill"), for movement ops.
template <class IndexFn>
Vec eval_gather(const Node& n, const Vec& x, IndexFn fn, double fill = 0.0) {
  Vec out(n.numel());
  int r = static_cast<int>(n.shape.size());
  Shape idx(r, 0);
  for (int64_t flat = 0; flat < n.numel(); ++flat) {
    int64_t src = fn(idx);
    out[flat] = src < 0 ? fill : x[src];
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < n.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Grouped convolution (attrs.groups = G): output channel o of O reads the C/G input channels of its group
// g = o / (O/G), i.e. input channel g*(C/G) + c for c < C/G; the weight is (O, C/G, KH, KW).
Vec eval_conv(const Node& n, const Vec& x, const Vec& w) {
  const Shape& xs = n.inputs[0]->shape;
  const Shape& ws = n.inputs[1]->shape;
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  int64_t OH = n.shape[2], OW = n.shape[3];
  auto& a = n.attrs;
  const int64_t OG = O / a.groups;
  Vec out(n.numel());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * a.stride[0] - a.padding[0] + kh * a.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * a.stride[1] - a.padding[1] + kw * a.dilation[1];
                if (iw < 0 || iw >= W) continue;
                const int64_t ci = o / OG * CG + c;
                acc += x[((b * C + ci) * H + ih) * W + iw] * w[((o * CG + c) * KH + kh) * KW + kw];
              }
            }
          out[((b * O + o) * OH + oh) * OW + ow] = acc;
        }
  return out;
}

// dx[b,ci,ih,iw] = sum dy[b,o,oh,ow] * w[o,c,kh,kw] over ih = oh*s - p + kh*d, ci = group(o) * C/G + c
Vec eval_conv_grad_input(const Node& n, const Vec& dy, const Vec& w) {
  const Shape& ys = n.inputs[0]->shape;
  const Shape& ws = n.inputs[1]->shape;
  int64_t N = ys[0], O = ys[1], OH = ys[2], OW = ys[3], CG = ws[1], KH = ws[2], KW = ws[3];
  int64_t C = n.shape[1], H = n.shape[2], W = n.shape[3];
  auto& a = n.attrs;
  const int64_t OG = O / a.groups;
  Vec out(n.numel(), 0.0);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double g = dy[((b * O + o) * OH + oh) * OW + ow];
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * a.stride[0] - a.padding[0] + kh * a.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * a.stride[1] - a.padding[1] + kw * a.dilation[1];
                if (iw < 0 || iw >= W) continue;
                const int64_t ci = o / OG * CG + c;
                out[((b * C + ci) * H + ih) * W + iw] += g * w[((o * CG + c) * KH + kh) * KW + kw];
              }
            }
        }
  return out;
}

Vec eval_conv_grad_weight(const Node& n, const Vec& dy, const Vec& x) {
  const Shape& ys = n.inputs[0]->shape;
  const Shape& xs = n.inputs[1]->shape;
  int64_t N = ys[0], O = ys[1], OH = ys[2], OW = ys[3], C = xs[1], H = xs[2], W = xs[3];
  int64_t CG = n.shape[1], KH = n.shape[2], KW = n.shape[3];
  auto& a = n.attrs;
  const int64_t OG = O / a.groups;
  Vec out(n.numel(), 0.0);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < CG; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          double acc = 0;
          const int64_t ci = o / OG * CG + c;
          for (int64_t b = 0; b < N; ++b)
            for (int64_t oh = 0; oh < OH; ++oh) {
              int64_t ih = oh * a.stride[0] - a.padding[0] + kh * a.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t ow = 0; ow < OW; ++ow) {
                int64_t iw = ow * a.stride[1] - a.padding[1] + kw * a.dilation[1];
                if (iw < 0 || iw >= W) continue;
                acc += dy[((b * O + o) * OH + oh) * OW + ow] * x[((b * C + ci) * H + ih) * W + iw];
              }
            }
          out[((o * CG + c) * KH + kh) * KW + kw] = acc;
        }
  return out;
}

/// Visits each pooling window: f(out_flat, in_plane_base, list of in-bounds (ih,iw), count_incl_pad).
template <class F>
void for_each_window(const Node& pool, ShapeRef xs, ShapeRef ys, F&& f) {
  auto& a = pool.attrs;
  int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) f(p, oh, ow, H, W, a);
}

Vec eval_max_pool(const Node& n, const Vec& x, bool grad, const Vec* dy) {
  // grad: n is MaxPool2dGrad with inputs (dy, x); output has x's shape.
  const Shape& xs = grad ? n.inputs[1]->shape : n.inputs[0]->shape;
  const Shape& ys = grad ? n.inputs[0]->shape : n.shape;
  Vec out(grad ? numel(xs) : numel(ys), grad ? 0.0 : -std::numeric_limits<double>::infinity());
  for_each_window(n, xs, ys, [&](int64_t p, int64_t oh, int64_t ow, int64_t H, int64_t W, const Attrs& a) {
    double best = -std::numeric_limits<double>::infinity();
    int64_t best_i = -1;
    for (int64_t kh = 0; kh < a.kernel[0]; ++kh) {
      int64_t ih = oh * a.stride[0] - a.padding[0] + kh;
      if (ih < 0 || ih >= H) continue;
      for (int64_t kw = 0; kw < a.kernel[1]; ++kw) {
        int64_t iw = ow * a.stride[1] - a.padding[1] + kw;
        if (iw < 0 || iw >= W) continue;
        int64_t i = (p * H + ih) * W + iw;
        if (best_i < 0 || x[i] > best || (std::isnan(x[i]) && !std::isnan(best))) {
          best = x[i];
          best_i = i;
        }
      }
    }
    int64_t o = (p * ys[2] + oh) * ys[3] + ow;
    if (!grad)
      out[o] = best;
    else if (best_i >= 0)
      out[best_i] += (*dy)[o];
  });
  return out;
}

Vec eval_avg_pool(const Node& n, const Vec& src, bool grad) {
  const Shape& xs = grad ? n.shape : n.inputs[0]->shape;
  const Shape& ys = grad ? n.inputs[0]->shape : n.shape;
  Vec out(grad ? numel(xs) : numel(ys), 0.0);
  for_each_window(n, xs, ys, [&](int64_t p, int64_t oh, int64_t ow, int64_t H, int64_t W, const Attrs& a) {
    double inv = 1.0 / static_cast<double>(a.kernel[0] * a.kernel[1]);  // count_include_pad=True
    int64_t o = (p * ys[2] + oh) * ys[3] + ow;
    double acc = 0;
    for (int64_t kh = 0; kh < a.kernel[0]; ++kh) {
      int64_t ih = oh * a.stride[0] - a.padding[0] + kh;
      if (ih < 0 || ih >= H) continue;
      for (int64_t kw = 0; kw < a.kernel[1]; ++kw) {
        int64_t iw = ow * a.stride[1] - a.padding[1] + kw;
        if (iw < 0 || iw >= W) continue;
        int64_t i = (p * H + ih) * W + iw;
        if (grad)
          out[i] += src[o] * inv;
        else
          acc += src[i];
      }
    }
    if (!grad) out[o] = acc * inv;
  });
  return out;
}

}  // namespace

Vec eval_node(const Node& n, const std::vector<const Vec*>& in) {
  switch (n.op) {
    case Op::Input:
    case Op::Param:
    case Op::State:
    case Op::Const:
      throw ValueError(fmt::format("cpu: leaf {} has no value", n.describe()));
    case Op::Map: return eval_map(n, in);
    case Op::Reduce: return eval_reduce(n, *in[0]);
    case Op::MatMul: return eval_matmul(n, *in[0], *in[1]);
    case Op::Reshape: return *in[0];
    case Op::Permute: {
      const Shape& xs = n.inputs[0]->shape;
      Shape cs = contiguous_strides(xs);
      return eval_gather(n, *in[0], [&](const Shape& idx) {
        int64_t s = 0;
        for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * cs[n.attrs.perm[i]];
        return s;
      });
    }
    case Op::Expand: {
      Shape st = broadcast_strides(n.inputs[0]->shape, n.shape);
      return eval_gather(n, *in[0], [&](const Shape& idx) {
        int64_t s = 0;
        for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * st[i];
        return s;
      });
    }
    case Op::Slice: {
      Shape cs = contiguous_strides(n.inputs[0]->shape);
      return eval_gather(n, *in[0], [&](const Shape& idx) {
        int64_t s = 0;
        for (size_t i = 0; i < idx.size(); ++i) s += (n.attrs.starts[i] + idx[i] * n.attrs.steps[i]) * cs[i];
        return s;
      });
    }
    case Op::Pad: {
      const Shape& xs = n.inputs[0]->shape;
      Shape cs = contiguous_strides(xs);
      return eval_gather(
          n, *in[0],
          [&](const Shape& idx) -> int64_t {
            int64_t s = 0;
            for (size_t i = 0; i < idx.size(); ++i) {
              int64_t j = idx[i] - n.attrs.pads_before[i];
              if (j < 0 || j >= xs[i]) return -1;
              s += j * cs[i];
            }
            return s;
          },
          n.attrs.value);
    }
    case Op::OneHot: {
      int64_t C = n.attrs.num_classes;
      Vec out(n.numel(), 0.0);
      for (size_t i = 0; i < in[0]->size(); ++i) {
        double l = (*in[0])[i];
        if (l >= 0 && l < static_cast<double>(C) && l == std::floor(l)) out[i * C + static_cast<int64_t>(l)] = 1.0;
      }
      return out;
    }
    case Op::Gather: {
      // out[j] = x[j with j[axis] = index[j]]; an out-of-range or non-integer index (computed in the graph: fed
      // indices are checked by run(), sg/feeds.h) is an error here, where GPU kernels clamp it into range
      const Shape& xs = n.inputs[0]->shape;
      const Shape xst = contiguous_strides(xs), ist = contiguous_strides(n.shape);
      const int ax = n.attrs.axes[0];
      const Vec& index = *in[1];
      return eval_gather(n, *in[0], [&](const Shape& idx) {
        int64_t s = 0, at = 0;
        for (size_t i = 0; i < idx.size(); ++i) at += idx[i] * ist[i];
        const double v = index[at];
        if (!(v >= 0 && v < static_cast<double>(xs[ax])) || v != std::floor(v))
          throw ValueError(fmt::format("cpu: {}: index element {} is {}, outside [0, {}) (axis {} of the input {}); "
                                       "indices must be 0..{}", n.describe(), at, v, xs[ax], ax, shape_str(xs),
                                       xs[ax] - 1));
        for (size_t i = 0; i < idx.size(); ++i)
          s += (static_cast<int>(i) == ax ? static_cast<int64_t>(v) : idx[i]) * xst[i];
        return s;
      });
    }
    case Op::RandomUniform: {
      // element j = philox_uniform(seed, stream, step, j) (sg/philox.h), the definition the kernels reproduce bit
      // for bit; a step that is not an integer in [0, 2^24] (computed in the graph, or fed) is an error here
      const double step = (*in[0])[0];
      if (!(step >= 0 && step <= 16777216.0) || step != std::floor(step))
        throw ValueError(fmt::format("cpu: {}: step is {}; the step of random numbers must be an integer in "
                                     "[0, 2^24] (a step counter)", n.describe(), step));
      Vec out(static_cast<size_t>(n.numel()));
      for (size_t j = 0; j < out.size(); ++j)
        out[j] = philox_uniform(n.attrs.seed, n.attrs.stream, static_cast<uint32_t>(step), static_cast<uint32_t>(j));
      return out;
    }
    case Op::Iota: {
      // the coordinate along attrs.axes[0]: (flat / stride) % extent
      const int ax = n.attrs.axes[0];
      const int64_t stride = contiguous_strides(n.shape)[ax], extent = n.shape[ax];
      Vec out(n.numel());
      for (int64_t i = 0; i < n.numel(); ++i) out[i] = static_cast<double>((i / stride) % extent);
      return out;
    }
    case Op::Conv2d: return eval_conv(n, *in[0], *in[1]);
    case Op::Conv2dGradInput: return eval_conv_grad_input(n, *in[0], *in[1]);
    case Op::Conv2dGradWeight: return eval_conv_grad_weight(n, *in[0], *in[1]);
    case Op::MaxPool2d: return eval_max_pool(n, *in[0], false, nullptr);
    case Op::MaxPool2dGrad: return eval_max_pool(n, *in[1], true, in[0]);
    case Op::AvgPool2d: return eval_avg_pool(n, *in[0], false);
    case Op::AvgPool2dGrad: return eval_avg_pool(n, *in[0], true);
  }
  throw ValueError("cpu: unknown op");
}

std::vector<Vec> evaluate(const std::vector<NodePtr>& outputs, const LeafValues& leaves, EvalOptions opt,
                          const std::function<void(const Node&, const std::vector<double>&)>& on_node) {
  std::unordered_map<const Node*, Vec> vals;
  for (const NodePtr& n : topo_order(outputs)) {
    Vec v;
    if (n->is_leaf()) {
      auto it = leaves.find(n.get());
      if (it != leaves.end()) {
        v = it->second;
      } else if (n->data) {
        v.assign(n->data->begin(), n->data->end());
      } else {
        throw ValueError(fmt::format("cpu: no value fed for input '{}' (shape {}){}", n->name,
                                     shape_str(n->shape), n->loc.known() ? " created at " + n->loc.str() : ""));
      }
      if (static_cast<int64_t>(v.size()) != n->numel())
        throw ValueError(fmt::format("cpu: value for {} has {} elements, expected {}", n->describe(), v.size(),
                                     n->numel()));
    } else {
      std::vector<const Vec*> ins;
      for (auto& i : n->inputs) ins.push_back(&vals.at(i.get()));
      v = eval_node(*n, ins);
    }
    if (opt.f32_storage)
      for (double& x : v) x = static_cast<float>(x);
    if (on_node && !n->is_leaf()) on_node(*n, v);
    vals[n.get()] = std::move(v);
  }
  std::vector<Vec> out;
  for (auto& o : outputs) out.push_back(vals.at(o.get()));
  return out;
}

GradCheckResult check_gradients(const Tensor& y, const std::vector<Tensor>& wrt, const LeafValues& values,
                                double h, double rtol, double atol) {
  GraphEvaluator ev = [](const std::vector<NodePtr>& outs, const std::map<const Node*, std::vector<double>>& lv) {
    return evaluate(outs, lv, EvalOptions{false});
  };
  return sg::check_gradients(y, wrt, values, ev, h, rtol, atol);
}

}  // namespace sg::cpu
