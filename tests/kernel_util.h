// Shared helpers of the Catch2 suites that inspect scheduled kernels (test_schedule, test_cpu_plan).
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "sg/kernel_ir.h"
#include "sg/schedule.h"

namespace sg::testing {

/// The distinct top-level reductions of kernel k of 256 or more loop iterations per element.
inline size_t long_reductions(const Kernel& k) {
  std::vector<KExprPtr> found;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e) return;
    if (e->op == KOp::Reduce) {
      if (kloop_iterations(e) >= 256 &&
          std::none_of(found.begin(), found.end(), [&](const KExprPtr& f) { return kequal(f, e); }))
        found.push_back(e);
      return;
    }
    walk(e->a), walk(e->b), walk(e->c);
  };
  for (const KExprPtr& e : k.exprs) walk(e);
  return found.size();
}

}  // namespace sg::testing
