// compress: pruning as torch.nn.utils.prune does it (L1 unstructured per tensor and global, remove) and seed 002's
// structured channel pruning (slim) that builds a genuinely narrower make_cnn.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "sg/compress.h"

namespace sg::compress {

namespace {

void check_amount(double amount, const char* what) {
  if (!(amount >= 0 && amount <= 1))
    throw ValueError(fmt::format("{}: amount must be a fraction in [0, 1] (got {})", what, amount));
}

/// torch.nn.utils.prune._compute_nparams_toprune: round(amount * n), Python's round (half to even).
int64_t to_prune(double amount, int64_t n) { return static_cast<int64_t>(std::nearbyint(amount * static_cast<double>(n))); }

std::vector<float>& mask_of(Model& m, const std::string& name) {
  auto& w = m.param(name);
  auto it = m.masks.find(name);
  if (it == m.masks.end()) it = m.masks.emplace(name, std::vector<float>(w.data.size(), 1.f)).first;
  return it->second;
}

/// Prunes the `k` entries of smallest |w| among those still kept in (weights[i], masks[i]) ranked together
/// (ties: the earlier tensor, then the lower flat index), zeroing weight and mask.
void prune_smallest(std::vector<io::NamedTensor*> ws, std::vector<std::vector<float>*> masks, double amount) {
  std::vector<std::pair<size_t, size_t>> kept;  // (tensor, element)
  for (size_t t = 0; t < ws.size(); ++t)
    for (size_t i = 0; i < ws[t]->data.size(); ++i)
      if ((*masks[t])[i] != 0) kept.emplace_back(t, i);
  const int64_t k = to_prune(amount, static_cast<int64_t>(kept.size()));
  auto mag = [&](const std::pair<size_t, size_t>& e) { return std::fabs(ws[e.first]->data[e.second]); };
  std::stable_sort(kept.begin(), kept.end(), [&](auto& a, auto& b) { return mag(a) < mag(b); });
  for (int64_t j = 0; j < k; ++j) {
    auto [t, i] = kept[static_cast<size_t>(j)];
    (*masks[t])[i] = 0.f;
    ws[t]->data[i] = 0.f;
  }
}

}  // namespace

void prune_l1(Model& m, const std::string& weight, double amount) {
  check_amount(amount, "compress::prune_l1");
  prune_smallest({&m.param(weight)}, {&mask_of(m, weight)}, amount);
}

void prune_global_l1(Model& m, double amount, const std::vector<std::string>& weights) {
  check_amount(amount, "compress::prune_global_l1");
  std::vector<io::NamedTensor*> ws;
  std::vector<std::vector<float>*> masks;
  for (auto& name : weights.empty() ? Model::weight_names() : weights) {
    masks.push_back(&mask_of(m, name));
    ws.push_back(&m.param(name));
  }
  prune_smallest(ws, masks, amount);
}

void remove_masks(Model& m) {
  for (auto& [name, mask] : m.masks) {
    auto& w = m.param(name).data;
    for (size_t i = 0; i < w.size(); ++i) w[i] *= mask[i];
  }
  m.masks.clear();
}

std::vector<LayerSparsity> sparsity(const Model& m) {
  std::vector<LayerSparsity> r;
  for (auto& name : Model::weight_names()) {
    const auto& w = m.param(name);
    LayerSparsity s{name, w.shape, 0, static_cast<int64_t>(w.data.size())};
    for (float v : w.data) s.zeros += v == 0;
    r.push_back(s);
  }
  return r;
}

namespace {

/// Output channels (rows of dim 0) kept by prune.ln_structured(amount, n=1, dim=0): the largest L1 norms, in
/// index order (seed 002's kept()).
std::vector<int64_t> kept_channels(const io::NamedTensor& w, double amount) {
  const int64_t rows = w.shape[0], cols = static_cast<int64_t>(w.data.size()) / rows;
  std::vector<double> norm(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) norm[static_cast<size_t>(r)] += std::fabs(w.data[static_cast<size_t>(r * cols + c)]);
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return norm[a] > norm[b]; });
  order.resize(static_cast<size_t>(rows - to_prune(amount, rows)));
  std::sort(order.begin(), order.end());
  return order;
}

/// out[i, j, rest] = in[rows[i], cols[j], rest] of a tensor viewed as (R, C, inner).
std::vector<float> take(const std::vector<float>& in, int64_t C, int64_t inner, const std::vector<int64_t>& rows,
                        const std::vector<int64_t>& cols) {
  std::vector<float> out;
  out.reserve(rows.size() * cols.size() * static_cast<size_t>(inner));
  for (int64_t r : rows)
    for (int64_t c : cols)
      for (int64_t k = 0; k < inner; ++k) out.push_back(in[static_cast<size_t>((r * C + c) * inner + k)]);
  return out;
}

std::vector<int64_t> all_of(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

Slim slim(const Model& m, double amount) {
  check_amount(amount, "compress::slim");
  if (!m.masks.empty() || m.quant)
    throw ValueError("compress::slim: the model has masks or quantisation; slim a float model after remove_masks");
  const CnnSpec& s = m.spec;
  const int64_t hw = (s.height / 4) * (s.width / 4);  // columns per channel after Flatten
  auto k1 = kept_channels(m.param("0.weight"), amount), k2 = kept_channels(m.param("3.weight"), amount),
       k3 = kept_channels(m.param("7.weight"), amount);
  Slim r;
  r.masked = m;
  const std::pair<const char*, const std::vector<int64_t>*> layers[] = {{"0", &k1}, {"3", &k2}, {"7", &k3}};
  for (auto [layer, keep] : layers) {  // zero the pruned channels' weights and biases
    auto& w = r.masked.param(std::string(layer) + ".weight");
    auto& b = r.masked.param(std::string(layer) + ".bias");
    const int64_t rows = w.shape[0], cols = static_cast<int64_t>(w.data.size()) / rows;
    std::vector<char> on(static_cast<size_t>(rows), 0);
    for (int64_t k : *keep) on[static_cast<size_t>(k)] = 1;
    for (int64_t row = 0; row < rows; ++row)
      if (!on[static_cast<size_t>(row)]) {
        std::fill_n(w.data.begin() + row * cols, cols, 0.f);
        b.data[static_cast<size_t>(row)] = 0.f;
      }
  }
  CnnSpec ss = s;
  ss.c1 = static_cast<int64_t>(k1.size()), ss.c2 = static_cast<int64_t>(k2.size()), ss.hidden = static_cast<int64_t>(k3.size());
  r.small = init_cnn(ss, 0);
  auto set = [&](const char* name, std::vector<float> v) {
    auto& p = r.small.param(name);
    if (v.size() != p.data.size()) throw Error(fmt::format("compress::slim: {} got {} values for shape {}", name, v.size(), p.data.size()));
    p.data = std::move(v);
  };
  const auto& w0 = m.param("0.weight").data;
  set("0.weight", take(w0, s.channels, 9, k1, all_of(s.channels)));
  set("0.bias", take(m.param("0.bias").data, 1, 1, k1, {0}));
  set("3.weight", take(m.param("3.weight").data, s.c1, 9, k2, k1));
  set("3.bias", take(m.param("3.bias").data, 1, 1, k2, {0}));
  set("7.weight", take(m.param("7.weight").data, s.c2, hw, k3, k2));  // (hidden, c2, hw) rows k3, channels k2
  set("7.bias", take(m.param("7.bias").data, 1, 1, k3, {0}));
  set("9.weight", take(m.param("9.weight").data, s.hidden, 1, all_of(s.classes), k3));
  set("9.bias", m.param("9.bias").data);
  return r;
}

}  // namespace sg::compress
