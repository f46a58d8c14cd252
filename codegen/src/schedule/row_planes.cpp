// Fragment target, launch pass: row and column planes (Value::planes, ScheduleOptions::row_planes/col_planes),
// the fragment target's register tiling.
//
// A fragment writes one texel (4 consecutive elements) per render target, so a matmul-like kernel computes more
// than 4 outputs per fragment only by writing more render targets: with P row planes a one-block kernel whose
// outputs are tile-mode sums (the emitter unrolls them by 4: innermost extent a multiple of 4, at least 8, no
// nested loop) computes rows P*i+0 .. P*i+P-1 of its outputs, one render target (plane) per row; with Pc = 2
// column planes also 2 texels of each row (a P x 8 tile, P * 2 render targets). The shared operand's texels are
// then fetched once for all rows (and columns) of the tile.
// A kernel is planed when: P = min(row_planes, max_outputs) >= 2, one domain block, outputs x P <= max_outputs;
// every output a Temp (not an update, not transposed) whose stored shape has rows a multiple of P, whole texels
// per row and at least min_plane_texels texels per plane (row_planes_fit); some output has an unrollable sum; and
// every kernel reading the outputs stays within max_inputs samplers (each plane is one sampler).
// Column planes additionally need outputs x P x 2 <= max_outputs, the row-planed last axis a multiple of 8 and
// min_plane_texels per plane, and the readers' samplers for 2 P planes.
// Runs after bind_updates (it must know the update values) and before plan_memory (planes are pooled buffers).
// Invariants left: a planed kernel has P * Pc exprs per output, exprs[j * P * Pc + p * Pc + q], reading the tensor
// column kColumnVar + 4 q in place of the last coordinate when Pc > 1; its outputs' layouts are one plane's.
#include "schedule/state.h"

#include <algorithm>

#include <fmt/format.h>

namespace sg::sched {

namespace {

/// A stored shape whose rows can be split into P planes of at least min_plane_texels texels each, with whole
/// texels per row.
bool plane_shape_ok(ShapeRef s, int P, const ScheduleOptions& opt) {
  return s.size() >= 2 && s.back() % 4 == 0 && s[s.size() - 2] % P == 0 &&
         (numel(s) / P + 3) / 4 >= opt.min_plane_texels;
}

int planes_of(const ScheduleOptions& opt) { return std::min(opt.row_planes, opt.max_outputs); }

/// Every kernel reading k's outputs takes `planes` - 1 more samplers per output read; they stay within max_inputs.
bool readers_fit(const ScheduleState& st, const Kernel& k, int planes) {
  for (auto& r : st.plan.kernels) {
    int samplers = 0, extra = 0;
    for (int in : r.inputs) {
      samplers += st.plan.values[in].planes;
      if (std::find(k.outputs.begin(), k.outputs.end(), in) != k.outputs.end()) extra += planes - 1;
    }
    if (extra > 0 && samplers + extra > st.opt.max_inputs) return false;
  }
  return true;
}

/// The column planes of kernel k given P row planes (1 = none). `st_shape`: the outputs' stored shape.
int column_planes(const ScheduleState& st, const Kernel& k, int P, const Shape& st_shape) {
  const ScheduleOptions& opt = st.opt;
  if (opt.col_planes != 2 || k.outputs.size() * P * 2 > static_cast<size_t>(opt.max_outputs)) return 1;
  Shape rs = st_shape;  // the row-planed stored shape
  rs[rs.size() - 2] /= P;
  return rs.back() % 8 == 0 && (numel(rs) / 2 + 3) / 4 >= opt.min_plane_texels && readers_fit(st, k, 2 * P) ? 2 : 1;
}

/// Kernel k's exprs rewritten per plane (output-major: exprs[j * P * Pc + p * Pc + q]) for P row and Pc column
/// planes: row variable `row` -> P * row + p; last variable `last` -> kColumnVar + 4 q.
std::vector<KExprPtr> per_plane_exprs(const Kernel& k, int P, int Pc, const std::string& row, const std::string& last) {
  std::vector<KExprPtr> per_plane;
  if (Pc == 1) {
    for (size_t j = 0; j < k.outputs.size(); ++j)
      for (int p = 0; p < P; ++p)
        per_plane.push_back(ksubstitute(k.exprs[j], {{row, kibin(KOp::IAdd, kibin(KOp::IMul, kint(P), kvar(row)), kint(p))}}));
    return per_plane;
  }
  // column plane q: the plane's column c' is the tensor's column Pc * (c' - c' % 4) + 4 q + c' % 4, written
  // jc + 4 q with jc (kColumnVar) declared by the emitter; in lane mode jc is the vectorised variable (a
  // multiple of 4), so lane l reads column jc + 4 q + l and loads along it stay whole texels. One rewrite per
  // column plane, then one per row plane over all of them: a subtree that depends on the row only (the A
  // operand's load) or on the column only (B's) stays one node for the emitter to load once per step.
  std::vector<std::vector<KExprPtr>> cols;  // [q][j]
  for (int q = 0; q < Pc; ++q) {
    const KExprPtr jc = kibin(KOp::IAdd, kvar(kColumnVar), kint(4 * q));
    cols.push_back(krewrite(k.exprs, [&](const KExprPtr& x) -> KExprPtr {
      return x->op == KOp::Var && x->name == last ? jc : nullptr;
    }));
  }
  std::vector<KExprPtr> all;  // [q][j] flattened
  for (auto& c : cols) all.insert(all.end(), c.begin(), c.end());
  std::vector<std::vector<KExprPtr>> rows;  // [p][q * outputs + j]
  for (int p = 0; p < P; ++p) {
    const KExprPtr r = kibin(KOp::IAdd, kibin(KOp::IMul, kint(P), kvar(row)), kint(p));
    rows.push_back(krewrite(all, [&](const KExprPtr& x) -> KExprPtr {
      return x->op == KOp::Var && x->name == row ? r : nullptr;
    }));
  }
  for (size_t j = 0; j < k.outputs.size(); ++j)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Pc; ++q) per_plane.push_back(rows[p][q * k.outputs.size() + j]);
  return per_plane;
}

/// Plans kernel k with P row planes when it qualifies (see the file comment).
void plane_kernel(ScheduleState& st, Kernel& k, int P) {
  const ScheduleOptions& opt = st.opt;
  // every output of the kernel gets P planes (P render targets each); union-domain kernels are left alone
  if (k.blocks() > 1 || k.exprs.size() != k.outputs.size() || k.outputs.size() * P > static_cast<size_t>(opt.max_outputs))
    return;
  bool ok = std::any_of(k.exprs.begin(), k.exprs.end(), khas_unrollable_sum);
  Shape s;
  for (int o : k.outputs) {
    const Value& v = st.plan.values[o];
    if (v.kind != ValueKind::Temp || v.update_of >= 0 || v.transposed) ok = false;
    s = v.stored_shape();
    if (!plane_shape_ok(s, P, opt)) ok = false;
  }
  if (!ok || !readers_fit(st, k, P)) return;
  const int Pc = column_planes(st, k, P, s);
  const std::string row = fmt::format("i{}", s.size() - 2), last = fmt::format("i{}", s.size() - 1);
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    Value& v = st.plan.values[k.outputs[j]];
    v.planes = P * Pc;
    v.col_planes = Pc;
    const Shape ps = v.stored_shape();
    v.layout = opt.row_aligned_layout
                   ? TextureLayout::for_shape(std::vector<int64_t>(ps.begin(), ps.end()), opt.max_texture_width,
                                              opt.max_texture_height)
                   : TextureLayout::for_numel(numel(ps), opt.max_texture_width, opt.max_texture_height);
  }
  k.exprs = per_plane_exprs(k, P, Pc, row, last);
  k.notes += fmt::format("// row planes: each invocation computes rows {0}*{1}+0 .. {0}*{1}+{2} of its outputs, one "
                         "render target (or buffer) per row\n", P, row, P - 1);
  if (Pc > 1)
    k.notes += fmt::format("// column planes: and {0} texels of each row, columns {1} + 4*q + 0..3 (q < {0}, "
                           "{1} = {0} * {2} - {3} * ({2} % 4)), one render target per (row, q); plane p * {0} + q\n",
                           Pc, kColumnVar, last, Pc - 1);
}

}  // namespace

bool row_planes_fit(const ScheduleState& st, const NodePtr& m) {
  return !st.transposed.count(m.get()) && plane_shape_ok(m->shape, planes_of(st.opt), st.opt);
}

bool row_planes_tile_alone(const ScheduleState& st, const NodePtr& value, const KExprPtr& expr) {
  return planes_of(st.opt) > 1 && khas_unrollable_sum(expr) && row_planes_fit(st, value);
}

void assign_row_planes(ScheduleState& st) {
  const int P = planes_of(st.opt);
  if (P < 2) return;
  for (auto& k : st.plan.kernels) plane_kernel(st, k, P);
}

}  // namespace sg::sched
