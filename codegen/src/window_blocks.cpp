// Window blocks (the webgpu cpu plan: ComputeLimits::register_tiles): one invocation computes an s0 x s1 ... block of
// output elements where every output coordinate iD is read as iD / sD and iD % sD and a reduction depends on the
// coordinates only through the quotients. A max-pool gradient over windows that do not overlap (lower_pool_grad:
// the element's window (h + p) / s, its offset (h + p) % s) is the case: the window's argmax is the same for its
// s x s elements, so one invocation per window computes it once and writes the window's elements, instead of each
// element recomputing it (SwiftShader runs each invocation's loads lane by lane: Run W8).
//
// The rewrite is exact integer algebra: for iD = wD * sD + oD with 0 <= oD < sD (coordinates are non-negative),
// iD / sD = wD and iD % sD = oD; every other use of iD reads wD * sD + oD. Each element of the block substitutes its
// constant offsets oD into that expression; subtrees free of every oD (the argmax) keep their identity, so the
// printer (KPrinter: shared subtrees once) evaluates them once per invocation. Each element's value is the same
// expression tree as the per-element kernel's, in the same order: NaN, ties (the first maximum) and the summation
// order are those of the CPU reference as before.
#include <fmt/format.h>

#include <functional>
#include <unordered_set>

#include "compute_emit.h"
#include "compute_glsl.h"
#include "kernel_analysis.h"

namespace sg::compute {

namespace {

/// Most elements one invocation computes (its code holds one copy of the epilogue per element).
constexpr int64_t kMaxBlockElements = 16;

std::string coord_name(size_t d) { return fmt::format("i{}", d); }
std::string window_name(size_t d) { return fmt::format("w{}", d); }
std::string offset_name(size_t d) { return fmt::format("o{}", d); }

/// Index of the output coordinate `e` is (a Var "iD" with D < rank), else -1.
int coord_of(const KExprPtr& e, size_t rank) {
  if (!e || e->op != KOp::Var || e->name.size() < 2 || e->name[0] != 'i') return -1;
  for (size_t d = 0; d < rank; ++d)
    if (e->name == coord_name(d)) return static_cast<int>(d);
  return -1;
}

/// Every node of the DAGs of `roots`, each once.
void visit(const std::vector<KExprPtr>& roots, const std::function<void(const KExprPtr&)>& f) {
  std::unordered_set<const KExpr*> seen;
  std::function<void(const KExprPtr&)> go = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    f(e);
    go(e->a), go(e->b), go(e->c);
  };
  for (auto& r : roots) go(r);
}

/// Per coordinate: the block factor sD (the one constant > 1 it is divided or reduced modulo by, dividing its
/// extent), else 1. Empty when a variable named like the rewrite's wD / oD is already in use.
std::vector<int64_t> block_factors(const std::vector<KExprPtr>& exprs, const Shape& shape) {
  const size_t rank = shape.size();
  std::vector<std::set<int64_t>> divisors(rank);
  bool clash = false;
  visit(exprs, [&](const KExprPtr& e) {
    if (e->op == KOp::Var && (e->name[0] == 'w' || e->name[0] == 'o')) clash = true;
    if ((e->op == KOp::IDiv || e->op == KOp::IMod) && e->b && e->b->op == KOp::IntConst && e->b->ivalue > 1) {
      const int d = coord_of(e->a, rank);
      if (d >= 0) divisors[static_cast<size_t>(d)].insert(e->b->ivalue);
    }
  });
  if (clash) return {};
  std::vector<int64_t> factor(rank, 1);
  for (size_t d = 0; d < rank; ++d)
    if (divisors[d].size() == 1 && shape[d] % *divisors[d].begin() == 0) factor[d] = *divisors[d].begin();
  return factor;
}

/// e with integer variables replaced (by name) and the integer nodes above them rebuilt by the folding builders,
/// so a constant offset folds into the index arithmetic; unchanged subtrees keep their identity.
std::vector<KExprPtr> substitute_folding(const std::vector<KExprPtr>& roots,
                                         const std::function<KExprPtr(const KExprPtr&)>& replace) {
  std::map<const KExpr*, KExprPtr> memo;
  std::function<KExprPtr(const KExprPtr&)> go = [&](const KExprPtr& x) -> KExprPtr {
    if (!x) return x;
    if (auto m = memo.find(x.get()); m != memo.end()) return m->second;
    KExprPtr r = replace(x);
    if (!r) {
      KExprPtr a = go(x->a), b = go(x->b), c = go(x->c);
      const bool int_bin = x->op >= KOp::IAdd && x->op <= KOp::IAnd;
      r = int_bin && (a != x->a || b != x->b) ? kibin(x->op, a, b) : kwith_children(x, a, b, c);
    }
    memo[x.get()] = r;
    return r;
  };
  std::vector<KExprPtr> out;
  for (auto& r : roots) out.push_back(go(r));
  return out;
}

}  // namespace

std::optional<WindowBlocking> window_blocking(const std::vector<KExprPtr>& exprs, const Shape& shape) {
  const size_t rank = shape.size();
  WindowBlocking wb;
  wb.factor = block_factors(exprs, shape);
  if (wb.factor.empty()) return std::nullopt;
  int64_t elements = 1;
  for (int64_t f : wb.factor) elements *= f;
  if (elements <= 1 || elements > kMaxBlockElements) return std::nullopt;
  // iD / sD -> wD, iD % sD -> oD, iD -> wD * sD + oD (blocked coordinates only)
  const std::vector<int64_t>& factor = wb.factor;
  const std::vector<KExprPtr> general = substitute_folding(exprs, [&](const KExprPtr& e) -> KExprPtr {
    const bool divmod = (e->op == KOp::IDiv || e->op == KOp::IMod) && e->b && e->b->op == KOp::IntConst;
    const int d = coord_of(divmod ? e->a : e, rank);
    if (d < 0 || factor[static_cast<size_t>(d)] == 1) return nullptr;
    const size_t u = static_cast<size_t>(d);
    if (divmod) return kvar(e->op == KOp::IDiv ? window_name(u) : offset_name(u));
    return kibin(KOp::IAdd, kibin(KOp::IMul, kvar(window_name(u)), kint(factor[u])), kvar(offset_name(u)));
  });
  // worth it only when some reduction does not depend on the offsets (it is then evaluated once per block), one
  // outside any reduction that does (that one's loop runs per element, and every reduction in its body with it)
  bool shared_reduce = false;
  std::unordered_set<const KExpr*> seen;
  std::function<void(const KExprPtr&)> find = [&](const KExprPtr& e) {
    if (!e || shared_reduce || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Reduce) {
      const std::set<std::string> fv = kfree_vars(e);
      bool free_of_offsets = true;
      for (size_t d = 0; d < rank; ++d)
        if (fv.count(offset_name(d))) free_of_offsets = false;
      shared_reduce = free_of_offsets;
      return;  // not into its body: evaluated per element when it depends on the offsets
    }
    find(e->a), find(e->b), find(e->c);
  };
  for (auto& r : general) find(r);
  if (!shared_reduce) return std::nullopt;
  wb.grid.assign(shape.begin(), shape.end());
  for (size_t d = 0; d < rank; ++d) wb.grid[d] /= factor[d];
  // the block's elements in row-major order of their offsets
  std::vector<int64_t> off(rank, 0);
  for (int64_t n = 0; n < elements; ++n) {
    int64_t rest = n;
    for (size_t d = rank; d-- > 0;) {
      off[d] = rest % factor[d];
      rest /= factor[d];
    }
    int64_t flat = 0;
    const Shape st = contiguous_strides(shape);
    for (size_t d = 0; d < rank; ++d) flat += off[d] * st[d];
    wb.offsets.push_back(flat);
    wb.exprs.push_back(substitute_folding(general, [&](const KExprPtr& e) -> KExprPtr {
      if (e->op != KOp::Var) return nullptr;
      for (size_t d = 0; d < rank; ++d)
        if (factor[d] > 1 && e->name == offset_name(d)) return kint(off[d]);
      return nullptr;
    }));
  }
  return wb;
}

std::vector<KExprPtr> WindowBlocking::all_exprs() const {
  std::vector<KExprPtr> all;
  for (auto& e : exprs) all.insert(all.end(), e.begin(), e.end());
  return all;
}

std::string window_block_code(const WindowBlocking& wb, const Shape& shape, const std::vector<std::string>& outputs,
                              KPrinter& p, int indent, const std::string& prefix, const Lang& lang) {
  const std::string pad(static_cast<size_t>(indent) * 2, ' ');
  const Shape gs = contiguous_strides(wb.grid);
  const Shape st = contiguous_strides(shape);
  std::string s;
  std::string base;
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::string q = gs[d] == 1 ? "elem" : lang.div_const("elem", gs[d]);
    const std::string name = wb.factor[d] > 1 ? window_name(d) : coord_name(d);
    s += pad + lang.let(LType::Int, name, d == 0 ? q : lang.mod_const(q, wb.grid[d])) + "\n";
    const int64_t stride = st[d] * wb.factor[d];  // element stride of one step of the block's coordinate
    const std::string term = stride == 1 ? name : fmt::format("{} * {}", name, stride);
    base = base.empty() ? term : fmt::format("{} + {}", base, term);
  }
  s += pad + lang.let(LType::Int, prefix + "base", base.empty() ? "0" : base) + "\n";
  std::vector<std::string> values;
  for (auto& e : wb.exprs)
    for (auto& x : e) values.push_back(p.print(x));
  s += p.take_code();
  for (size_t n = 0; n < wb.exprs.size(); ++n) {
    s += pad + fmt::format("// element {} of the block (offset {})\n", n, wb.offsets[n]);
    const std::string at = wb.offsets[n] == 0 ? prefix + "base" : fmt::format("{}base + {}", prefix, wb.offsets[n]);
    for (size_t j = 0; j < outputs.size(); ++j) s += pad + lang.store(outputs[j], at, values[n * outputs.size() + j]) + "\n";
  }
  return s;
}

std::string window_block_note(const WindowBlocking& wb) {
  std::string f;
  for (int64_t x : wb.factor) f += (f.empty() ? "" : "x") + std::to_string(x);
  return fmt::format("window blocks {}: one invocation per block of {} elements (its reductions free of the offset "
                     "within the block computed once)",
                     f, wb.exprs.size());
}

}  // namespace sg::compute
