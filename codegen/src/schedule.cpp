// The scheduler's pipeline: a Program to a Plan through named passes (codegen/src/schedule/, one file each with
// its invariants; schedule/state.h lists them).
#include "sg/schedule.h"

#include <fmt/format.h>

#include "schedule/state.h"

namespace sg {

int Plan::node_index(const Node* n) const {
  if (!node_numbers.empty()) {
    auto it = node_numbers.find(n);
    return it == node_numbers.end() ? -1 : it->second;
  }
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].get() == n) return static_cast<int>(i);
  return -1;
}

const Value& Plan::value_of(const Node* n) const {
  for (auto& v : values)
    if (v.node.get() == n) return v;
  throw ValueError("plan: node " + n->describe() + " is not materialised");
}

namespace sched {

ScheduleState::ScheduleState(const Program& p, const ScheduleOptions& o) : program(p), opt(o) {
  plan.program = p;
  plan.order = p.nodes();
  plan.node_numbers.reserve(plan.order.size());
  for (size_t i = 0; i < plan.order.size(); ++i) plan.node_numbers.emplace(plan.order[i].get(), static_cast<int>(i));
  max_h = o.max_texture_height ? o.max_texture_height : o.max_texture_width;
}

}  // namespace sched

Plan schedule(const Program& program, const ScheduleOptions& opt) {
  using namespace sched;
  if (opt.col_planes != 1 && opt.col_planes != 2)
    throw ValueError(fmt::format("ScheduleOptions::col_planes must be 1 (off) or 2, got {}", opt.col_planes));
  const bool multi_output = !opt.unfused && opt.max_outputs > 1;
  // binding budgets: no Map reads more inputs than one kernel may bind (the program itself when none does)
  const Program fitted = split_wide_maps(program, input_budget(opt), opt.max_guarded_reads);
  ScheduleState st(fitted, opt);
  // target-neutral: what is materialised, how it is stored
  analyse_uses(st);
  decide_materialisation(st);
  if (opt.transpose_row_reduced && !opt.unfused) choose_transposed_storage(st);
  create_leaf_values(st);
  // target-neutral fusion: multi-output groups, reductions sunk into their only reader
  if (opt.row_planes > 1) st.tiles_alone = row_planes_tile_alone;  // the fragment target's register tiling
  group_multi_output(st);
  sink_reductions(st);
  mark_stored_members(st);
  // launches: one kernel per group, or (fragment target) per union of independent groups of different domains
  form_unions(st);
  if (opt.union_domains && multi_output) merge_union_domains(st);
  order_launches(st);
  build_kernels(st);  // with the loop-budget and split-K splits
  bind_updates(st);
  // fragment target: register tiles over render targets
  if (opt.row_planes > 1) assign_row_planes(st);
  plan_memory(st);
  return std::move(st.plan);
}

}  // namespace sg
