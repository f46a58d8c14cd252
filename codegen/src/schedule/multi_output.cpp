// Target-neutral fusion: multi-output grouping (ScheduleOptions::max_outputs > 1).
//
// Every materialised non-leaf node, in topological order, either starts a fusion group or joins an earlier one;
// a group is one kernel writing several values at the same element (render targets on the fragment target,
// buffers on a compute target). A node joins a group when
//  - the group has fewer than max_outputs members and the same iteration domain (shapes equal up to size-1 axes),
//    neither is stored transposed (a transposed value is a kernel of its own over the reversed shape), and an
//    update value joins no update value of another layout (one draw addresses all its outputs alike: the other
//    stored members take the block's layout when the kernel is built, but an update value's is its target's);
//  - lowering the group with the node reads every member only at its own element (vertical fusion: Adam's
//    parameter update reads the m and v it computes), within max_inputs (and max_storage_buffers with its
//    outputs), max_guarded_reads and the loop budget, and
//    without a dependency cycle between groups;
//  - the node is not latency-bound (split-K would split it; multi-output kernels are never split);
//  - with ScheduleOptions::one_long_reduction, the kernel computes at most one distinct reduction of
//    long_reduction_iterations or more iterations per element (the compute emitter parallelises one reduction per
//    kernel on GPUs, the cpu plan's register tiles tile one);
//  - one contraction per tiled kernel (GPU compute targets: tiles_in_workgroups): a kernel of more than
//    split_min_outputs elements that is a contraction (compute::find_contraction, the tiled strategy's) takes no
//    member that adds a distinct reduction of kTiledStoreSteps or more steps per element, and a quarter of the
//    contraction's, which neither the group nor the node computes alone: the tiled strategy sums any reduction but
//    its contraction in its store, one element per invocation in a serial loop (charlm's attention backward: two
//    64-step contractions side by side, 0.065 ms a kernel on an H100 where two tiled kernels would take about 0.01 ms
//    each; docs/perf-log/23.md E); sink_reductions keeps to it too (adds_store_reduction);
//  - the kernel's expressions stay within max_kernel_size (kcode_size: their code's size; a group that would grow past
//    it is sealed: it takes no further members), so that a long chain of layers becomes many small kernels of
//    bounded driver compile time, most of them equal up to names (compiled once: kernel_code_key).
// Candidates are tried related first (the node reads a member, or they share an input: horizontal fusion, m and
// v both read the gradient), latest group first, then the others. Groups are decided on trial lowerings in which
// each materialised node has a pseudo value id (kPseudo + its index in mat_nodes).
// Invariants left: every mat_node is a member of exactly one group (group_of); Group::deps are the groups whose
// values a group reads; the groups form a DAG.
#include "schedule/state.h"

#include "contraction.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/enumerate.hpp>
#include <range/v3/view/filter.hpp>

namespace sg::sched {

namespace {

int producer_group(const ScheduleState& st, int id) {
  return id < kPseudo ? -1 : st.group_of.at(st.mat_nodes[id - kPseudo].get());
}

/// True when group `to` depends (transitively) on group `from`.
bool depends(const ScheduleState& st, int to, int from) {
  std::vector<int> stack = {to};
  std::set<int> seen;
  while (!stack.empty()) {
    int g = stack.back();
    stack.pop_back();
    if (g == from) return true;
    if (!seen.insert(g).second) continue;
    for (int d : st.groups[g].deps) stack.push_back(d);
  }
  return false;
}

/// The distinct (by pointer, then structure) top-level reductions of `roots` that `counts`.
size_t distinct_reductions(const std::vector<KExprPtr>& roots, const std::function<bool(const KExprPtr&)>& counts) {
  std::vector<KExprPtr> found;
  std::unordered_set<const KExpr*> seen;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Reduce) {
      if (counts(e) && std::none_of(found.begin(), found.end(), [&](const KExprPtr& f) { return kequal(f, e); }))
        found.push_back(e);
      return;  // a reduction nested in it is its own loop, not another kernel-level one
    }
    walk(e->a), walk(e->b), walk(e->c);
  };
  for (const KExprPtr& r : roots) walk(r);
  return found.size();
}

/// The distinct top-level reductions of `roots` of `long_loop` or more iterations (kloop_iterations).
size_t long_reductions(const std::vector<KExprPtr>& roots, double long_loop) {
  return distinct_reductions(roots, [&](const KExprPtr& e) { return kloop_iterations(e) >= long_loop; });
}

/// One contraction per tiled kernel: a reduction beside a kernel's contraction counts from kTiledStoreSteps steps (its
/// loops' extents multiplied) and from a quarter of the contraction's. Shorter ones stay in the store, where they
/// cost less than a kernel of their own: a ResNet block's 1x1 downsample convolution (16 or 32 channels) beside its
/// 3x3 convolution (144 or 288 steps).
constexpr int64_t kTiledStoreSteps = 32;

/// The distinct top-level reductions of `roots` of `min_steps` or more steps.
size_t store_reductions(const std::vector<KExprPtr>& roots, int64_t min_steps) {
  return distinct_reductions(roots, [&](const KExprPtr& e) {
    int64_t steps = 1;
    for (int64_t x : e->extents) steps *= x;
    return steps >= min_steps;
  });
}

/// The target computes a contraction with a workgroup's shared-memory tiles (the compute emitter's tiled strategy on
/// GPUs; ScheduleOptions::one_contraction_per_tiled_kernel, set by compute_schedule_options). The cpu plans (cpu-simd,
/// wasm, WGSL on CPU devices: register tiles, docs/perf-log/P37.md), CPU devices (lavapipe, llvmpipe) and the
/// fragment target keep their kernels.
bool tiles_in_workgroups(const ScheduleOptions& o) { return o.one_contraction_per_tiled_kernel; }

}  // namespace

bool adds_store_reduction(const ScheduleState& st, const Group& g, const Lowered& added, const Lowered& joined) {
  if (!tiles_in_workgroups(st.opt) || g.members[0]->numel() <= st.opt.split_min_outputs) return false;
  // (a kernel of fewer elements is the tree-reduction strategy's where its reduction is long, which sums the others
  // in its strided loop too)
  auto adds = [&](int64_t min_steps) {
    const size_t n = store_reductions(joined.exprs, min_steps);
    return n >= 2 && n > std::max(store_reductions(g.lowered.exprs, min_steps), store_reductions(added.exprs, min_steps));
  };
  if (!adds(kTiledStoreSteps)) return false;  // (necessary for any larger bound: the cheap test first)
  Kernel k;
  k.exprs = joined.exprs;
  const std::optional<compute::Contraction> c = compute::find_contraction(k, g.members[0]->shape);
  return c && (c->K / 4 <= kTiledStoreSteps || adds(c->K / 4));
}

namespace {

/// What adds_store_reduction_apart needs of a group's lowering or of a node's: its reductions of kTiledStoreSteps or
/// more steps and, where it has one, its contraction (find_contraction), computed once per lowering.
struct StoreFacts {
  size_t reductions = 0;
  std::optional<compute::Contraction> contraction;
};

StoreFacts store_facts(const Lowered& l, const Shape& shape) {
  StoreFacts f;
  f.reductions = store_reductions(l.exprs, kTiledStoreSteps);
  if (f.reductions > 0) {
    Kernel k;
    k.exprs = l.exprs;
    f.contraction = compute::find_contraction(k, shape);
  }
  return f;
}

/// adds_store_reduction's answer without the trial lowering where it is plainly yes: group g (facts `gf`) and node n
/// (lowered alone as `solo`, facts `sf`) of the same shape share no heavy node and each computes a reduction of the
/// bound (kTiledStoreSteps, or a quarter of the contraction's steps) of a kernel that is a contraction (the costlier of
/// their contractions, as find_contraction picks over both): the joined kernel computes both. Without it a long chain
/// of such nodes (the LSTM's per-step weight gradients) tried every earlier group of its domain with a trial lowering.
bool adds_store_reduction_apart(const ScheduleState& st, const Group& g, const StoreFacts& gf, const NodePtr& n,
                                const Lowered& solo, const StoreFacts& sf) {
  if (!tiles_in_workgroups(st.opt) || g.members[0]->numel() <= st.opt.split_min_outputs) return false;
  if (gf.reductions == 0 || sf.reductions == 0 || g.members[0]->shape != n->shape) return false;
  const std::optional<compute::Contraction>& c =
      gf.contraction && (!sf.contraction || kcost(gf.contraction->reduce) >= kcost(sf.contraction->reduce))
          ? gf.contraction
          : sf.contraction;
  if (!c) return false;
  for (const NodePtr& x : solo.inlined)
    if (is_heavy(x->op) && std::find(g.lowered.inlined.begin(), g.lowered.inlined.end(), x) != g.lowered.inlined.end())
      return false;
  if (c->K / 4 <= kTiledStoreSteps) return true;
  return store_reductions(g.lowered.exprs, c->K / 4) > 0 && store_reductions(solo.exprs, c->K / 4) > 0;
}

/// Lowered as group gi's kernel: inputs within the binding limit, loops within budget, at most one long reduction
/// where the target asks, no dependency cycle.
bool fits(const ScheduleState& st, const Lowered& l, int gi) {
  if (!within_bindings(st.opt, l.inputs.size(), l.exprs.size()) || !within_guards(st.opt, l.exprs)) return false;
  if (4 * (1 + kloop_iterations(l.exprs)) > st.opt.max_loop_iterations) return false;
  if (st.opt.one_long_reduction && long_reductions(l.exprs, st.opt.long_reduction_iterations) > 1) return false;
  for (int d : deps_of(st, l, gi))
    if (depends(st, d, gi)) return false;
  return true;
}

/// An update value's storage is its target's (front and back swap), so its layout is fixed; any other stored member
/// of a block takes the block's layout (launch.cpp). Two update values of one block must therefore have one layout:
/// row-aligned layouts give a (1, N) tensor a texture row and an (N) one a near-square block.
bool layouts_agree(const ScheduleState& st, const Group& g, const NodePtr& n) {
  if (!st.update_values.count(n.get())) return true;
  const TextureLayout mine = value_layout(n->shape, st);
  for (const NodePtr& m : g.members)
    if (st.update_values.count(m.get()) && value_layout(m->shape, st) != mine) return false;
  return true;
}

/// The groups node n may join, in the order they are tried: related ones (n reads a member, or they share an
/// input) first, latest first; then the others.
std::vector<int> join_candidates(const ScheduleState& st, const NodePtr& n, const Lowered& solo,
                                 const std::vector<char>& sealed) {
  std::vector<int> related, others;
  for (int gi = static_cast<int>(st.groups.size()) - 1; st.max_out > 1 && gi >= 0 && !st.transposed.count(n.get());
       --gi) {
    const Group& g = st.groups[gi];
    if (g.dead || sealed[gi] || static_cast<int>(g.members.size()) >= st.max_out ||
        !same_domain(g.members[0]->shape, n->shape) || st.transposed.count(g.members[0].get()) ||
        !layouts_agree(st, g, n))
      continue;
    bool rel = false;
    for (auto& m : g.members) rel |= reads(solo, st.trial_of.at(m.get()));
    for (int id : solo.inputs) rel |= reads(g.lowered, id);
    (rel ? related : others).push_back(gi);
  }
  related.insert(related.end(), others.begin(), others.end());
  return related;
}

/// The bindings group g would have with node n (lowered alone as `solo`) joined are within the budget. Exact, so
/// that a candidate refused here is one `fits` would refuse after the trial lowering: the joined kernel reads g's
/// inputs and solo's, except the members of g that solo reads (computed in the kernel), and writes both's members.
/// Without it, a long chain whose groups stop at the binding budget before max_outputs tries every such group again
/// for every later node (quadratic trial lowerings).
bool may_fit_bindings(const ScheduleState& st, const Group& g, const Lowered& solo) {
  size_t inputs = g.lowered.inputs.size();
  for (int id : solo.inputs)
    if (!reads(g.lowered, id) &&
        std::none_of(g.members.begin(), g.members.end(), [&](const NodePtr& m) { return st.trial_of.at(m.get()) == id; }))
      ++inputs;
  return within_bindings(st.opt, inputs, g.lowered.exprs.size() + solo.exprs.size());
}

}  // namespace

bool within_bindings(const ScheduleOptions& opt, size_t inputs, size_t outputs) {
  return static_cast<int>(inputs) <= opt.max_inputs &&
         (opt.max_storage_buffers <= 0 || static_cast<int>(inputs + outputs) <= opt.max_storage_buffers);
}

bool reads(const Lowered& l, int id) { return std::find(l.inputs.begin(), l.inputs.end(), id) != l.inputs.end(); }

std::set<int> deps_of(const ScheduleState& st, const Lowered& l, int self) {
  std::set<int> d;
  for (int id : l.inputs)
    if (int g = producer_group(st, id); g >= 0 && g != self) d.insert(g);
  return d;
}

std::optional<Lowered> try_lower(const ScheduleState& st, const std::vector<NodePtr>& members,
                                 const std::unordered_map<const Node*, int>& vo) {
  try {
    return lower_group(members, vo, nullptr, &st.transposed);
  } catch (const NotIdentity&) {
    return std::nullopt;
  }
}

bool split_k_candidate(const ScheduleState& st, const NodePtr& n, const Lowered& l) {
  const double iters = kloop_iterations(l.exprs);
  return latency_bound(n->numel(), iters, st.opt) || tree_bound(n->numel(), iters, st.opt);
}

void group_multi_output(ScheduleState& st) {
  st.mat_nodes = st.plan.order |
                 ranges::views::filter([&](const NodePtr& n) { return !n->is_leaf() && st.mat.count(n.get()) > 0; }) |
                 ranges::to<std::vector>();
  st.trial_of = st.value_of;  // leaves: real ids
  for (auto&& [i, n] : ranges::views::enumerate(st.mat_nodes)) st.trial_of[n.get()] = kPseudo + static_cast<int>(i);
  st.max_out = st.opt.unfused ? 1 : std::max(1, st.opt.max_outputs);
  // groups that once grew past max_kernel_size take no more members (a long chain then tries only the groups
  // still open, not every group of its domain again for every later node)
  std::vector<char> sealed;
  std::vector<std::optional<StoreFacts>> facts;  // per group, of its current lowering (where asked)
  const bool one_contraction = tiles_in_workgroups(st.opt);
  for (auto& n : st.mat_nodes) {
    Lowered solo = lower_group({n}, st.trial_of, nullptr, &st.transposed);
    std::optional<StoreFacts> solo_facts;
    int joined = -1;
    sealed.resize(st.groups.size(), 0);
    facts.resize(st.groups.size());
    for (int gi : join_candidates(st, n, solo, sealed)) {
      Group& g = st.groups[gi];
      if (!may_fit_bindings(st, g, solo)) continue;  // before the trial lowering: linear time on long chains
      if (one_contraction && g.members[0]->numel() > st.opt.split_min_outputs) {  // likewise
        if (!facts[gi]) facts[gi] = store_facts(g.lowered, g.members[0]->shape);
        if (!solo_facts) solo_facts = store_facts(solo, n->shape);
        if (adds_store_reduction_apart(st, g, *facts[gi], n, solo, *solo_facts)) continue;
      }
      std::vector<NodePtr> members = g.members;
      members.push_back(n);
      auto l = try_lower(st, members, st.trial_of);
      if (l && kcode_size(l->exprs) > st.opt.max_kernel_size) {
        sealed[gi] = 1;
        continue;
      }
      if (!l || adds_store_reduction(st, g, solo, *l) || !fits(st, *l, gi) || split_k_candidate(st, n, *l)) continue;
      g.members = std::move(members);
      g.lowered = std::move(*l);
      facts[gi].reset();
      g.deps = deps_of(st, g.lowered, gi);
      joined = gi;
      break;
    }
    if (joined < 0) {
      joined = static_cast<int>(st.groups.size());
      st.groups.push_back({{n}, std::move(solo), {}, false});
      st.group_of[n.get()] = joined;
      st.groups[joined].deps = deps_of(st, st.groups[joined].lowered, joined);
    }
    st.group_of[n.get()] = joined;
  }
}

}  // namespace sg::sched
