#include "kernel_analysis.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace sg {

const std::set<std::string>& KFreeVars::operator()(const KExprPtr& e) {
  if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
  std::set<std::string> s;
  if (e->op == KOp::Var) s.insert(e->name);
  for (const KExprPtr* x : {&e->a, &e->b, &e->c})
    if (*x) {
      const auto& f = (*this)(*x);
      s.insert(f.begin(), f.end());
    }
  if (e->op == KOp::Reduce)
    for (const auto& v : e->loop_vars) s.erase(v);
  return memo_[e.get()] = std::move(s);
}

std::set<std::string> kfree_vars(const KExprPtr& e) {
  if (!e) return {};
  KFreeVars fv;
  return fv(e);
}

void kloop_invariant_reductions(const KExprPtr& root, const std::set<std::string>& bound, KFreeVars& free_vars,
                                std::vector<KExprPtr>& out) {
  std::unordered_set<const KExpr*> seen;  // nodes visited under this `bound` (each once: linear in the DAG)
  std::function<void(const KExprPtr&)> go = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op != KOp::Reduce) return go(e->a), go(e->b), go(e->c);
    const auto& vars = free_vars(e);
    if (std::none_of(vars.begin(), vars.end(), [&](const std::string& v) { return bound.count(v) > 0; })) {
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
      return;
    }
    std::set<std::string> inner = bound;
    inner.insert(e->loop_vars.begin(), e->loop_vars.end());
    kloop_invariant_reductions(e->a, inner, free_vars, out);
  };
  go(root);
}

}  // namespace sg
