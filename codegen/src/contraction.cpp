// Recognising matmul-like contractions (see contraction.h).
#include "contraction.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "compute_glsl.h"
#include "kernel_analysis.h"

namespace sg::compute {

namespace {

/// Top-level reductions (not inside another reduction) of the kernel's expressions, each once.
std::vector<KExprPtr> top_reductions(const Kernel& k) {
  std::vector<KExprPtr> out;
  std::set<const KExpr*> seen;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Reduce) {
      out.push_back(e);
      return;
    }
    walk(e->a), walk(e->b), walk(e->c);
  };
  for (auto& e : k.exprs) walk(e);
  return out;
}

struct Atom {
  KExprPtr e;
  bool mask = false;         ///< a condition (from ISelect(cond, x, 0) or where(cond, x, 0)), else a float factor
  bool float_mask = false;   ///< the mask's condition is a float (where: cond != 0), else an Int
  std::set<int> dims;        ///< output coordinates it reads
  bool reads_mn = false;     ///< reads an M or N coordinate (set when the sides are known)
};

bool zero(const KExprPtr& e) { return e->op == KOp::FloatConst && e->fvalue == 0.0; }

/// Splits a product tree into atoms (see the file comment of contraction.h; `where_masks` as find_contraction's).
void atoms_of(const KExprPtr& e, std::vector<Atom>& out, bool where_masks) {
  if (e->op == KOp::FMath && e->sop == SOp::Mul) {
    atoms_of(e->a, out, where_masks);
    atoms_of(e->b, out, where_masks);
    return;
  }
  if (e->op == KOp::ISelect && zero(e->c)) {
    out.push_back({e->a, true, false, {}});
    atoms_of(e->b, out, where_masks);
    return;
  }
  if (where_masks && e->op == KOp::FMath && e->sop == SOp::Select && zero(e->c)) {
    out.push_back({e->a, true, true, {}});
    atoms_of(e->b, out, where_masks);
    return;
  }
  out.push_back({e, false, false, {}});
}

/// Coefficient of integer variable `v` in a linear index expression (nullopt when not linear in v).
std::optional<int64_t> coefficient(const KExprPtr& e, const std::string& v) {
  switch (e->op) {
    case KOp::IntConst: return 0;
    case KOp::Var: return e->name == v ? 1 : 0;
    case KOp::IAdd:
    case KOp::ISub: {
      auto a = coefficient(e->a, v), b = coefficient(e->b, v);
      if (!a || !b) return std::nullopt;
      return e->op == KOp::IAdd ? *a + *b : *a - *b;
    }
    case KOp::IMul: {
      if (e->a->op == KOp::IntConst) {
        auto b = coefficient(e->b, v);
        return b ? std::optional<int64_t>(*b * e->a->ivalue) : std::nullopt;
      }
      if (e->b->op == KOp::IntConst) {
        auto a = coefficient(e->a, v);
        return a ? std::optional<int64_t>(*a * e->b->ivalue) : std::nullopt;
      }
      const auto fv = kfree_vars(e);
      return fv.count(v) ? std::nullopt : std::optional<int64_t>(0);
    }
    default: {
      const auto fv = kfree_vars(e);
      return fv.count(v) ? std::nullopt : std::optional<int64_t>(0);
    }
  }
}

/// True when some load of `e` has unit stride along variable `v`.
bool unit_stride(const KExprPtr& root, const std::string& v) {
  std::unordered_set<const KExpr*> seen;  // each node of the DAG once (a visited node found nothing)
  std::function<bool(const KExprPtr&)> go = [&](const KExprPtr& e) -> bool {
    if (!e || !seen.insert(e.get()).second) return false;
    if (e->op == KOp::Load) {
      auto c = coefficient(e->a, v);
      if (c && *c == 1) return true;
    }
    return go(e->a) || go(e->b) || go(e->c);
  };
  return go(root);
}

int dim_of(const std::string& var) {
  if (var.size() < 2 || var[0] != 'i') return -1;
  for (size_t i = 1; i < var.size(); ++i)
    if (var[i] < '0' || var[i] > '9') return -1;
  return std::stoi(var.substr(1));
}

/// `atoms` of one side combined: the float factors multiplied in order, then the masks applied as selects.
KExprPtr side_factor(const std::vector<const Atom*>& atoms) {
  KExprPtr f;
  for (const Atom* a : atoms)
    if (!a->mask) f = f ? kmath(SOp::Mul, f, a->e) : a->e;
  if (!f) f = kfloat(1.0);
  for (const Atom* a : atoms)
    if (a->mask) f = a->float_mask ? kmath(SOp::Select, a->e, f, kfloat(0.0)) : kselect(a->e, f, kfloat(0.0));
  return f;
}

/// True when `atoms` (one side) are masks only (at least one): the side's factor is 1 or 0.
bool masks_only(const std::vector<const Atom*>& atoms) {
  return !atoms.empty() && std::all_of(atoms.begin(), atoms.end(), [](const Atom* a) { return a->mask; });
}

std::optional<Contraction> try_contraction(const KExprPtr& r, const Shape& shape, bool where_masks) {
  if (r->reduce != ReduceKind::Sum || kcontains_reduce(r->a)) return std::nullopt;
  std::vector<Atom> atoms;
  atoms_of(r->a, atoms, where_masks);
  const std::set<std::string> loop(r->loop_vars.begin(), r->loop_vars.end());
  for (auto& a : atoms)
    for (auto& v : kfree_vars(a.e)) {
      if (loop.count(v)) continue;
      const int d = dim_of(v);
      if (d < 0 || d >= static_cast<int>(shape.size())) return std::nullopt;  // another variable (e.g. kColumnVar)
      a.dims.insert(d);
    }
  // batch: coordinates read by every atom that reads any coordinate
  std::set<int> batch;
  bool first = true;
  for (auto& a : atoms) {
    if (a.dims.empty()) continue;
    if (first) batch = a.dims, first = false;
    else {
      std::set<int> both;
      std::set_intersection(batch.begin(), batch.end(), a.dims.begin(), a.dims.end(), std::inserter(both, both.end()));
      batch = both;
    }
  }
  // the other coordinates: connected components (linked by sharing an atom); two sides needed
  std::map<int, int> comp;
  std::function<int(int)> find = [&](int x) { return comp[x] == x ? x : comp[x] = find(comp[x]); };
  for (auto& a : atoms)
    for (int d : a.dims)
      if (!batch.count(d) && !comp.count(d)) comp[d] = d;
  for (auto& a : atoms) {
    int root = -1;
    for (int d : a.dims) {
      if (batch.count(d)) continue;
      if (root < 0) root = find(d);
      else comp[find(d)] = root;
    }
  }
  std::set<int> roots;
  for (auto& [d, p] : comp) roots.insert(find(d));
  if (roots.size() < 2) return std::nullopt;
  const int root_a = *roots.begin();  // side A: the component of the lowest coordinate (rows); B: the others
  Contraction c;
  c.reduce = r;
  std::vector<const Atom*> side_a, side_b;
  for (auto& a : atoms) {
    int side = 0;  // atoms reading no M/N coordinate go with A
    for (int d : a.dims)
      if (!batch.count(d)) side = find(d) == root_a ? 0 : 1, a.reads_mn = true;
    // a mask of the loop and batch coordinates only (split-K's chunk guard `k < K`) guards both sides' loads:
    // with it on A alone, B would still be read past its last row (0 * Inf/NaN there is NaN)
    if (a.mask && !a.reads_mn) side_b.push_back(&a);
    (side == 0 ? side_a : side_b).push_back(&a);
  }
  // where masks (the register tiles): when A's other atoms are scalars (reading no M/N coordinate: the embedding
  // gradient's where(one_hot, scale * dY, 0)), they go with B, so that A's factor is 1 or 0 and the tile selects B
  // (Contraction::a_mask_only)
  const auto is_mask = [](const Atom* a) { return a->mask; };
  if (where_masks && std::any_of(side_a.begin(), side_a.end(), is_mask) &&
      std::all_of(side_a.begin(), side_a.end(), [](const Atom* a) { return a->mask || !a->reads_mn; })) {
    for (const Atom* a : side_a)
      if (!a->mask) side_b.push_back(a);
    std::erase_if(side_a, [](const Atom* a) { return !a->mask; });
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    const int di = static_cast<int>(d);
    if (comp.count(di) && !batch.count(di)) (find(di) == root_a ? c.m_dims : c.n_dims).push_back(di);
    else c.batch_dims.push_back(di);
  }
  for (int d : c.m_dims) c.M *= shape[d];
  for (int d : c.n_dims) c.N *= shape[d];
  for (int d : c.batch_dims) c.batch *= shape[d];
  for (int64_t e : r->extents) c.K *= e;
  c.factor_a = side_factor(side_a);
  c.factor_b = side_factor(side_b);
  c.a_mask_only = masks_only(side_a);
  c.b_mask_only = masks_only(side_b);
  const std::string& inner = r->loop_vars.back();
  c.a_k_contiguous = unit_stride(c.factor_a, inner) || !unit_stride(c.factor_a, fmt::format("i{}", c.m_dims.back()));
  c.b_k_contiguous = unit_stride(c.factor_b, inner) && !unit_stride(c.factor_b, fmt::format("i{}", c.n_dims.back()));
  return c;
}

}  // namespace

std::optional<Contraction> find_contraction(const Kernel& k, const Shape& shape, bool where_masks) {
  std::optional<Contraction> best;
  for (auto& r : top_reductions(k)) {
    auto c = try_contraction(r, shape, where_masks);
    if (c && (!best || kcost(c->reduce) > kcost(best->reduce))) best = std::move(c);
  }
  return best;
}

KExprPtr main_reduction(const Kernel& k) {
  KExprPtr best;
  for (auto& r : top_reductions(k)) {
    if (r->reduce == ReduceKind::ArgMax || kcontains_reduce(r->a)) continue;
    if (!best || kcost(r) > kcost(best)) best = r;
  }
  return best;
}

}  // namespace sg::compute
