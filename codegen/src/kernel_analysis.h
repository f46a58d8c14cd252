// shadergrad — analyses of kernel-IR expressions shared by the schedule's cost model (kloop_iterations,
// kernel_ir.cpp) and both printers (the fragment ExprEmitter, glsl_expr.h; the compute KPrinter, compute_glsl.h):
// the free variables of an expression and the loop-invariant reductions hoisted before a loop. The printers and the
// cost model must agree on what is hoisted (a budget computed for one hoisting and code printed for another would
// let a kernel run past llvmpipe's loop limit), so there is one definition of each.
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sg/kernel_ir.h"

namespace sg {

/// The integer variables a kernel-IR expression reads that it does not bind itself (a Reduce binds its loop
/// variables), memoised per node: each node of the DAG is analysed once for the object's life. Expressions are
/// immutable and the caller keeps them alive while it holds the object (the memo is keyed by node address).
class KFreeVars {
 public:
  const std::set<std::string>& operator()(const KExprPtr& e);

 private:
  std::unordered_map<const KExpr*, std::set<std::string>> memo_;
};

/// kfree_vars(e) = KFreeVars()(e): one expression's free variables (empty for a null expression).
std::set<std::string> kfree_vars(const KExprPtr& e);

/// The reductions inside `root` that read none of the loop variables `bound` (those of the loop being opened and of
/// the reductions between it and them), outermost first, each once: appended to `out` unless already there. The
/// printers compute them before the loop (a mean inside a variance's sum of squared deviations), the cost model
/// counts them once. A reduction that reads a bound variable is looked into with its own loop variables added.
void kloop_invariant_reductions(const KExprPtr& root, const std::set<std::string>& bound, KFreeVars& free_vars,
                                std::vector<KExprPtr>& out);

}  // namespace sg
