// Storage pass: 2-D temporaries stored transposed (Value::transposed, ScheduleOptions::transpose_row_reduced).
//
// A materialised 2-D temporary (not a leaf, output or update; both axes multiples of 4, at least 8 rows) whose
// every read reduces over its axis 0 — the B operand of a matmul, a sum over rows, or an inlined same-shape Map
// (e.g. a relu mask) whose readers all do, up to 4 Maps deep — is stored as its transpose, so the readers' loops
// walk contiguous elements (on the fragment target: one texel fetch per 4 rows instead of 4). Runs after
// decide_materialisation (it needs ScheduleState::mat), before any lowering (the Lowerer reads transposed values
// at swapped coordinates, and a transposed value is computed by a kernel of its own over the reversed shape).
// Not run when unfused. Invariant left: ScheduleState::transposed holds exactly those nodes.
#include "schedule/state.h"

#include <functional>

namespace sg::sched {

void choose_transposed_storage(ScheduleState& st) {
  for (auto& np : st.plan.order) {
    const Node* n = np.get();
    if (!st.mat.count(n) || n->is_leaf() || st.external.count(n) || n->shape.size() != 2 || n->shape[0] % 4 ||
        n->shape[1] % 4 || n->shape[0] < 8)
      continue;
    // every read reduces over axis 0: a matmul's B operand, a sum over rows, or an inlined same-shape Map
    // (e.g. a relu mask) whose readers all do
    std::function<bool(const Node*, int)> row_reduced = [&](const Node* v, int depth) {
      const auto& cons = st.consumers[v];
      if (cons.empty() || depth > 4) return false;
      for (const Node* u : cons) {
        bool b_operand = u->op == Op::MatMul && u->inputs[1].get() == v && u->inputs[0].get() != v;
        bool row_sum = u->op == Op::Reduce && u->attrs.axes.size() == 1 && u->attrs.axes[0] == 0;
        bool through_map = u->op == Op::Map && !st.mat.count(u) && u->shape == v->shape && row_reduced(u, depth + 1);
        if (!(b_operand || row_sum || through_map)) return false;
      }
      return true;
    };
    if (row_reduced(n, 0)) st.transposed.insert(n);
  }
}

}  // namespace sg::sched
