// The graph of a compress::Model: make_cnn with masked weights, fake-quantised weights and activations, observers.
#include "compress_graph.h"

#include <cfloat>

#include <fmt/format.h>

namespace sg::compress::detail {

namespace {

Tensor leaf_of(const io::NamedTensor& t, bool trainable, const std::string& name) {
  return trainable ? sg::param(name, t.shape, t.data) : sg::state(name, t.shape, t.data);
}

/// Seed 002's QuantWeight: symmetric fake quantisation with scale = max|w| / qmax (per tensor or per output
/// channel), recomputed from the weight every forward, no gradient through the scale.
Tensor quant_weight(const Tensor& w, const QuantConfig& q) {
  const double qmax = static_cast<double>(q.weight_qmax());
  Tensor a = map([](Scalar v) { return abs(v); }, w);
  Tensor absmax;
  if (q.per_channel) {
    std::vector<int> axes;
    for (int i = 1; i < static_cast<int>(w.rank()); ++i) axes.push_back(i);
    absmax = max(a, axes, /*keepdims=*/true);
  } else {
    absmax = reshape(max(a), {1});
  }
  // torch.ao clamps a zero range to float32's epsilon (a layer pruned to all zeros keeps a valid scale)
  Tensor scale = stop_gradient(map([=](Scalar m) { return max(m / qmax, static_cast<double>(FLT_EPSILON)); }, absmax));
  return fake_quant(w, scale, zeros(scale.shape()), -q.weight_qmax(), q.weight_qmax());
}

/// Activation fake quantisation over [0, 2^bits - 1] with the range (lo, hi) (torch.ao _calculate_qparams,
/// per_tensor_affine).
Tensor quant_act(const Tensor& x, const Tensor& lo, const Tensor& hi, const QuantConfig& q) {
  const double qmin = 0, qmax = static_cast<double>(q.act_qmax());
  Tensor scale = map([=](Scalar l, Scalar h) {
    return max((max(h, 0.0) - min(l, 0.0)) / (qmax - qmin), static_cast<double>(FLT_EPSILON));
  }, lo, hi);
  Tensor zp = map([=](Scalar l, Scalar s) { return min(max(qmin - round(min(l, 0.0) / s), qmin), qmax); }, lo, scale);
  return fake_quant(x, stop_gradient(scale), stop_gradient(zp), 0, q.act_qmax());
}

}  // namespace

Bound bind(const Model& m) {
  Bound b;
  for (auto& p : m.params) {
    b.params.push_back(leaf_of(p, true, p.name));
    if (auto it = m.masks.find(p.name); it != m.masks.end())
      b.masks[p.name] = sg::state(p.name + "_mask", p.shape, it->second);
  }
  if (m.quant) {
    if (m.act_lo.size() != kActPoints || m.act_hi.size() != kActPoints)
      throw ValueError(fmt::format("compress: a quantised model needs {} activation ranges (has {}); make it with "
                                   "compress::quantize", kActPoints, m.act_hi.size()));
    for (int i = 0; i < kActPoints; ++i) {
      b.act_lo.push_back(sg::state(fmt::format("act{}.lo", i), {1}, {m.act_lo[i]}));
      b.act_hi.push_back(sg::state(fmt::format("act{}.hi", i), {1}, {m.act_hi[i]}));
    }
    for (size_t i = 0; i < m.act_given.size(); ++i) {
      b.act_scale.push_back(sg::state(fmt::format("act{}.scale", i), {1}, {m.act_given[i].scale}));
      b.act_zp.push_back(sg::state(fmt::format("act{}.zero_point", i), {1}, {static_cast<float>(m.act_given[i].zero_point)}));
    }
  }
  return b;
}

Tensor forward(const Model& m, Bound& b, const Tensor& x, const ForwardOptions& opt) {
  const CnnSpec& s = m.spec;
  b.act_in.clear();
  b.observer_updates.clear();
  auto weight = [&](int i) {  // parameter index i of Model::params (weights at even indices)
    Tensor w = b.params[static_cast<size_t>(i)];
    if (auto it = b.masks.find(m.params[static_cast<size_t>(i)].name); it != b.masks.end()) w = w * it->second;
    if (m.quant && m.quant->weights) w = quant_weight(w, *m.quant);
    return w;
  };
  auto act = [&](const Tensor& h) -> Tensor {  // a quantisation point: the input or a ReLU's output
    const int i = static_cast<int>(b.act_in.size());
    b.act_in.push_back(h);
    if (!m.quant || !opt.quant_acts) return h;
    Tensor lo = b.act_lo[i], hi = b.act_hi[i];
    const QuantConfig& q = *m.quant;
    if (!b.act_scale.empty()) return fake_quant(h, b.act_scale[i], b.act_zp[i], 0, q.act_qmax());
    if (opt.observe && q.observer != QuantConfig::Observer::fixed) {
      Tensor bmin = reshape(min(stop_gradient(h)), {1}), bmax = reshape(max(stop_gradient(h)), {1});
      if (q.observer == QuantConfig::Observer::minmax) {
        lo = map([](Scalar a, Scalar v) { return min(a, v); }, lo, bmin);
        hi = map([](Scalar a, Scalar v) { return max(a, v); }, hi, bmax);
      } else {  // torch.ao MovingAverageMinMaxObserver: x_min + c * (min(x) - x_min)
        const double c = q.averaging_constant;
        lo = map([=](Scalar a, Scalar v) { return a + c * (v - a); }, lo, bmin);
        hi = map([=](Scalar a, Scalar v) { return a + c * (v - a); }, hi, bmax);
      }
      b.observer_updates.push_back({b.act_lo[i].node(), lo.node()});
      b.observer_updates.push_back({b.act_hi[i].node(), hi.node()});
    }
    return quant_act(h, lo, hi, q);
  };
  const Conv2dOptions conv{.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}};
  const Pool2dOptions pool{.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0}};
  Tensor h = act(x);
  h = max_pool2d(act(relu(conv2d(h, weight(0), b.params[1], conv))), pool);
  h = max_pool2d(act(relu(conv2d(h, weight(2), b.params[3], conv))), pool);
  h = flatten(h, 1);
  h = act(relu(Tensor(matmul(h, transpose(weight(4))) + b.params[5])));
  (void)s;
  return Tensor(matmul(h, transpose(weight(6))) + b.params[7]);
}

void read_back(Model& m, const Bound& b, Backend& backend) {
  for (size_t i = 0; i < m.params.size(); ++i) m.params[i].data = backend.read(b.params[i]);
  for (size_t i = 0; i < b.act_lo.size(); ++i) {
    m.act_lo[i] = backend.read(b.act_lo[i])[0];
    m.act_hi[i] = backend.read(b.act_hi[i])[0];
  }
}

std::vector<float> gather_images(const data::Dataset& all, const std::vector<int64_t>& indices, size_t begin,
                                 size_t end) {
  const int64_t ss = all.sample_size();
  std::vector<float> x(static_cast<size_t>(ss) * (end - begin));
  for (size_t i = begin; i < end; ++i) {
    if (indices[i] < 0 || indices[i] >= all.n)
      throw ValueError(fmt::format("compress: sample index {} outside the {} digits", indices[i], all.n));
    std::copy_n(all.sample(indices[i]), ss, x.begin() + static_cast<ptrdiff_t>((i - begin) * ss));
  }
  return x;
}

}  // namespace sg::compress::detail
