// Private to codegen: recognising matmul-like contractions in a kernel (the tiled compute emitter's analysis).
//
// A contraction is a top-level sum reduction R = sum over loop variables r of (A(M coords, batch, r) x
// B(N coords, batch, r)) in a kernel's expressions, where the output coordinates split into three disjoint sets:
// M (read only by factor A), N (read only by factor B) and batch (read by both, or by neither). The body's product
// tree is split into atoms; an ISelect(cond, x, 0) contributes its condition as a mask atom (applied as
// select(cond, factor, 0) on the side whose coordinates it reads). matmul, x.W^T, x^T.dh (with prologues such as
// relu masks inlined) and conv2d forward / grad-input / grad-weight match; reductions whose atoms read coordinates of
// both sides (a row dot product) do not.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sg/schedule.h"

namespace sg::compute {

struct Contraction {
  KExprPtr reduce;                    ///< the sum R (shared by every output expression that reads it)
  KExprPtr factor_a, factor_b;        ///< A: reads M coords, batch coords and r; B: N coords, batch coords and r
  std::vector<int> m_dims, n_dims, batch_dims;  ///< output coordinates (i<d>) of each set, ascending
  int64_t M = 1, N = 1, batch = 1, K = 1;       ///< products of the sets' extents and of the loop extents
  /// Whether each factor's loads walk memory contiguously along r (else along its last M / N coordinate): the
  /// staging loop then lets consecutive invocations read consecutive elements.
  bool a_k_contiguous = true, b_k_contiguous = false;
  /// A side made of masks only: its factor is 1 or 0, and the tile must take the product as a select of the other
  /// factor (cond ? other : 0), never 0 * other, so that a NaN or infinity the mask excludes stays out of the sum
  /// as in the kernel's own select (the embedding gradient's one-hot^T x dY: a NaN of dY at one position reaches
  /// only its token's row, as in torch).
  bool a_mask_only = false, b_mask_only = false;
};

/// The contraction of kernel `k` (outputs over `shape`, the first output's stored shape), or nullopt. Picks the
/// costliest top-level sum reduction that splits as described in the file comment. `where_masks`: a float
/// where(cond, x, 0) (SOp::Select) in the body is a mask atom too (the register-tiled emitter's, whose products
/// honour a_mask_only / b_mask_only; the other callers keep it one atom).
std::optional<Contraction> find_contraction(const Kernel& k, const Shape& shape, bool where_masks = false);

/// The costliest top-level reduction of `k` (sum, max or min; not argmax) whose body contains no reduction, or
/// nullptr. (The tree-reduction strategy's candidate.)
KExprPtr main_reduction(const Kernel& k);

}  // namespace sg::compute
