// Shared by the clipping tests (test_optim, test_tree_reduction): a stack of Linear layers with tanh between them and
// its inputs, built from the DSL with seeded normal initial parameters.
#pragma once

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "sg/sg.h"
#include "test_util.h"

namespace sg::testing {

/// Linear layers of `widths` ([batch, widths[0]] -> [batch, widths.back()] logits, tanh between layers). Layer l's
/// weight `l.weight` [out, in] is randn(seed_w + l) x w_scale, its bias `l.bias` [out] randn(seed_b + l) x 0.05.
struct TanhMlp {
  Tensor x, labels, logits;  // x f32 [batch, widths[0]], labels i32 [batch]
  std::vector<Tensor> params;  // weight, bias per layer
};

inline TanhMlp tanh_mlp(const std::vector<int64_t>& widths, int64_t batch, uint32_t seed_w, uint32_t seed_b,
                        float w_scale) {
  TanhMlp m{input("x", {batch, widths[0]}), input("labels", {batch}, DType::i32), {}, {}};
  Tensor h = m.x;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], out = widths[l + 1];
    Tensor w = param(fmt::format("{}.weight", l), {out, in}, randn(static_cast<size_t>(out * in), static_cast<uint32_t>(seed_w + l), w_scale));
    Tensor b = param(fmt::format("{}.bias", l), {out}, randn(static_cast<size_t>(out), static_cast<uint32_t>(seed_b + l), 0.05f));
    h = matmul(h, transpose(w)) + b;
    if (l + 2 < widths.size()) h = tanh(h);
    m.params.push_back(w);
    m.params.push_back(b);
  }
  m.logits = h;
  return m;
}

}  // namespace sg::testing
