// Target-neutral fusion: reduction sinking, then which group members are stored.
//
// sink_reductions (multi-output fusion only): a reduction kept in a group of its own (a heavy op, not an output
// or update, not split-K) that exactly one other group reads is computed inside that reader instead of being
// stored, when the reader, lowered with the reduction inlined, stays within max_inputs (and max_storage_buffers)
// and the loop budget and computes the reduction once (its loop iterations do not exceed the reader's plus the
// reduction's own, per element and over all elements of each): the weight gradient becomes a local of the optimizer
// kernel. A reduction the target will register-tile
// (ScheduleState::tiles_alone) is not sunk into a reader that writes updates: that reader is never tiled, and
// the sum would run untiled there. Nor is one sunk where multi-output fusion would not add it (one contraction per
// tiled kernel: multi_output.cpp).
// Invariants left: sunk groups are dead and their node is no longer in ScheduleState::mat (nor in trial_of);
// readers' trial lowerings and deps are updated.
//
// mark_stored_members: ScheduleState::read_elsewhere = the members some live group loads. A member is stored when
// it is alone in its group, a program output or update value, or read elsewhere (is_stored); the others are
// computed in their kernel but never written.
#include "schedule/state.h"

#include <algorithm>

#include <range/v3/view/filter.hpp>
#include <range/v3/view/join.hpp>
#include <range/v3/view/transform.hpp>

namespace sg::sched {

namespace {

/// The one live group other than gi that reads group gi's only member `r`, or -1 (none or several).
int only_reader(const ScheduleState& st, size_t gi, const NodePtr& r) {
  int reader = -1, readers = 0;
  for (size_t gj = 0; gj < st.groups.size(); ++gj)
    if (gj != gi && !st.groups[gj].dead && reads(st.groups[gj].lowered, st.trial_of.at(r.get())))
      reader = static_cast<int>(gj), ++readers;
  return readers == 1 ? reader : -1;
}

bool writes_updates(const ScheduleState& st, const Group& g) {
  return std::any_of(g.members.begin(), g.members.end(),
                     [&](const NodePtr& m) { return st.update_values.count(m.get()) > 0; });
}

}  // namespace

void sink_reductions(ScheduleState& st) {
  const ScheduleOptions& opt = st.opt;
  auto& groups = st.groups;
  for (size_t gi = 0; st.max_out > 1 && gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (g.dead || g.members.size() != 1) continue;
    const NodePtr r = g.members[0];
    if (st.external.count(r.get()) || !is_heavy(r->op) || split_k_candidate(st, r, g.lowered)) continue;
    const int reader = only_reader(st, gi, r);
    if (reader < 0) continue;
    // a sum the target's tiling pass would tile is not sunk into a reader that writes updates (an optimizer's m,
    // v and parameter): such a kernel is never tiled, and there the sum would run untiled (on the fragment
    // target: the MLP's dW1 inside W1's Adam kernel, one row per fragment instead of a row-planes tile). (The
    // tiling pass may still leave it untiled, e.g. when its readers would run out of samplers.)
    if (st.tiles_alone && st.tiles_alone(st, r, g.lowered.exprs[0]) && writes_updates(st, groups[reader])) continue;
    auto vo = st.trial_of;
    vo.erase(r.get());
    auto l = try_lower(st, groups[reader].members, vo);
    if (!l || !within_bindings(opt, l->inputs.size(), l->exprs.size()) || !within_guards(opt, l->exprs) ||
        4 * (1 + kloop_iterations(l->exprs)) > opt.max_loop_iterations)
      continue;
    if (adds_store_reduction(st, groups[reader], g.lowered, *l)) continue;  // one contraction per tiled kernel
    double before = kloop_iterations(groups[reader].lowered.exprs), own = kloop_iterations(g.lowered.exprs);
    // it would be computed more than once: per element of the reader, or for several of the reader's elements
    // (a reader over more elements than the reduction, e.g. a 2x2 max pool's gradient reading dy = a conv's
    // input gradient once per input element: 4x the sums)
    const double after = kloop_iterations(l->exprs);
    const double reader_elems = static_cast<double>(groups[reader].members[0]->numel());
    if (after > before + own + 0.5) continue;
    if (after * reader_elems > (before + 0.5) * reader_elems + own * static_cast<double>(r->numel())) continue;
    groups[reader].lowered = std::move(*l);
    g.dead = true;
    st.mat.erase(r.get());
    st.trial_of = std::move(vo);
    groups[reader].deps = deps_of(st, groups[reader].lowered, reader);
  }
}

void mark_stored_members(ScheduleState& st) {
  namespace views = ranges::views;
  auto live_inputs = st.groups | views::filter([](const Group& g) { return !g.dead; }) |
                     views::transform([](const Group& g) -> const std::vector<int>& { return g.lowered.inputs; }) |
                     views::join;
  for (int id : live_inputs | views::filter([](int id) { return id >= kPseudo; }))
    st.read_elsewhere.insert(st.mat_nodes[id - kPseudo].get());
}

bool is_stored(const ScheduleState& st, const Group& g, const NodePtr& m) {
  return g.members.size() == 1 || st.external.count(m.get()) > 0 || st.read_elsewhere.count(m.get()) > 0;
}

}  // namespace sg::sched
