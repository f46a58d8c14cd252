// Shared by test_cpu_simd and test_wgsl: the embedding gradient of a NaN and an infinite adjoint, the case of the cpu
// plans' one-hot^T x dY register tile (codegen/src/contraction.h a_mask_only). torch's embedding backward is an
// index_add: a NaN of dY at one position reaches only the row of that position's token, never the whole column.
#pragma once

#include <limits>
#include <vector>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/sg.h"
#include "test_util.h"

namespace sg::testing {

/// d_table = 0.5 x the gradient of sum(take(table, tok) * adj) w.r.t. table [300, 40]; tok [2, 70] (i32, position i
/// holds (37 i) mod 300), adj [2, 70, 40] with a NaN at position 3, column 5 (token 111) and +inf at position 80,
/// column 7 (token 260): the expected d_table has exactly one NaN and one infinite element.
struct EmbeddingNanCase {
  Tensor table = input("table", {300, 40}), tok = input("tok", {2, 70}, DType::i32), adj = input("adj", {2, 70, 40});
  std::vector<float> tv = randn(300 * 40, 31), tokv = tokens(), av = adjoint();
  Program program() const {
    Program p;
    p.add_output("d_table", grad(sum(Tensor(take(table, tok) * adj)) * 0.5, {table})[0]);
    return p;
  }
  std::vector<Feed> feeds() const { return {{"table", &tv}, {"tok", &tokv}, {"adj", &av}}; }

 private:
  static std::vector<float> tokens() {
    std::vector<float> t(140);
    for (int i = 0; i < 140; ++i) t[i] = static_cast<float>((i * 37) % 300);
    return t;
  }
  static std::vector<float> adjoint() {
    std::vector<float> a = randn(140 * 40, 32);
    a[3 * 40 + 5] = std::numeric_limits<float>::quiet_NaN();
    a[80 * 40 + 7] = std::numeric_limits<float>::infinity();
    return a;
  }
};

}  // namespace sg::testing
