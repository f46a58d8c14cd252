// Launch pass: union-domain kernels (ScheduleOptions::union_domains), for the fragment target and, with
// ScheduleOptions::union_invocation_blocks, for buffer (compute) targets.
//
// Compute targets (union_invocation_blocks): a dispatch's invocation range is partitioned into blocks, each
// invocation computing one element of one block, so the loop budget is the largest block's (not the sum), no
// storage grows, and only *small* groups join (outputs x (1 + loop iterations per element) at most
// union_max_block_work, and fewer than kLongLoop = 256 loop iterations per element): every block of a compute union
// is computed one invocation per element, which costs nothing for kernels that small (they are launch-bound) but
// would lose the tiled and tree strategies of large ones and the parallelism of long reductions.
//
// A draw renders one rectangle, so independent fusion groups of different iteration domains can share one draw:
// each becomes a domain block computing the fragments inside its own texture layout (and writing 0 elsewhere),
// the draw covering the largest output's extent. Unions are merged greedily, the pair sharing the most inputs
// (then the most producing groups) first, earliest pair on ties, while
//  - neither depends on the other (directly or transitively, through the groups' deps),
//  - their stored outputs stay within max_outputs, their inputs within max_inputs (both together within
//    max_storage_buffers) and their loops (added up: every fragment runs every block's code) within the loop budget,
//  - their code (kcode_size, added up: every block is code of the one shader) within max_kernel_size,
//  - the texture memory allocated beyond the outputs' own layouts (each output, front and back for a parameter's
//    next value, covers the draw's extent) stays within union_max_extra_bytes;
// a union that append_kernel will split (loop budget, split-K) or that assign_row_planes will tile stays alone.
// Runs after form_unions (one union per live group) and before order_launches; not run when unfused or without
// multi-output fusion. Invariants left: every live group is in exactly one union (union_of); a union's groups
// are sorted by group index; merged-away unions are empty.
#include "schedule/state.h"

#include <algorithm>
#include <functional>

#include <range/v3/view/zip.hpp>

namespace sg::sched {

namespace {

/// A union being formed.
struct U {
  std::set<int> inputs;                      // value ids read (pseudo ids for materialised nodes)
  std::vector<std::pair<Extent, int>> outs;  // per stored output: its layout's size, textures holding it
  Extent extent;                             // the draw: every output layout covered
  std::set<int> producers;                   // groups whose values it reads
  int outputs = 0;                           // stored outputs (render targets)
  double iters = 0;                          // loop iterations of all its blocks
  double code = 0;                           // code size of all its blocks (kcode_size)
  bool fixed = false;                        // stays alone: split (split-K, loop budget) or given row planes
  bool dead = false;
};

/// The layout's size of member m, as build_kernels will make it.
Extent stored_extent(const ScheduleState& st, const NodePtr& m) {
  Shape s(m->shape.begin(), m->shape.end());
  if (st.transposed.count(m.get())) std::reverse(s.begin(), s.end());
  TextureLayout l = value_layout(s, st);
  return Extent{l.width, l.height};
}

U single_group_union(const ScheduleState& st, const Group& g) {
  const ScheduleOptions& opt = st.opt;
  U x;
  x.inputs.insert(g.lowered.inputs.begin(), g.lowered.inputs.end());
  x.producers = g.deps;
  for (auto& m : g.members)
    if (is_stored(st, g, m)) {
      ++x.outputs;
      x.outs.push_back({stored_extent(st, m), st.update_values.count(m.get()) ? 2 : 1});
      x.extent = x.extent.cover(x.outs.back().first);
    }
  x.iters = kloop_iterations(g.lowered.exprs);
  x.code = kcode_size(g.lowered.exprs);
  // a single stored output is split by append_kernel when over the loop budget, latency-bound (split-K) or a few
  // long reductions (the two-stage tree)
  x.fixed = x.outputs == 1 && (4 * (1 + x.iters) > opt.max_loop_iterations ||
                               latency_bound(g.members[0]->numel(), x.iters, opt) ||
                               tree_bound(g.members[0]->numel(), x.iters, opt));
  // compute targets: only small groups with short loops join a union (its blocks are computed one invocation per
  // element): a loop of kLongLoop (256) or more iterations per element stays alone, where the emitter gives it a
  // tree reduction or a tiled contraction (the H200, Run 15: the CNN's conv bias gradients, 1024-4096 iterations
  // per output, as union blocks made its step 9 % slower)
  if (opt.union_invocation_blocks)
    x.fixed = x.fixed || x.iters >= kLongLoop ||
              static_cast<double>(g.members[0]->numel()) * (1 + x.iters) > opt.union_max_block_work;
  // a kernel the row-planes pass will tile (P rows per fragment into P render targets, the GPU's matmul fast
  // path) stays alone as well: the same test on its stored members
  if (const int P = std::min(opt.row_planes, opt.max_outputs); P > 1 && !x.fixed && x.outputs * P <= opt.max_outputs) {
    bool plane = true, tiled = false;
    for (auto&& [m, expr] : ranges::views::zip(g.members, g.lowered.exprs)) {
      if (!is_stored(st, g, m)) continue;
      tiled |= khas_unrollable_sum(expr);
      if (st.update_values.count(m.get()) || !row_planes_fit(st, m)) plane = false;
    }
    x.fixed = plane && tiled;
  }
  return x;
}

/// reach[a][b]: union a depends (transitively) on union b.
std::vector<std::vector<char>> reachability(const ScheduleState& st, const std::vector<U>& us) {
  const size_t n = us.size();
  std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
  std::vector<std::set<int>> udeps(n);
  for (size_t u = 0; u < n; ++u)
    if (!us[u].dead)
      for (int gi : st.unions[u])
        for (int d : st.groups[gi].deps)
          if (st.union_of[d] >= 0 && st.union_of[d] != static_cast<int>(u)) udeps[u].insert(st.union_of[d]);
  std::vector<char> done(n, 0);
  std::function<void(size_t)> close = [&](size_t u) {
    if (done[u]) return;
    done[u] = 1;
    for (int d : udeps[u]) {
      close(static_cast<size_t>(d));
      reach[u][d] = 1;
      for (size_t x = 0; x < n; ++x) reach[u][x] |= reach[d][x];
    }
  };
  for (size_t u = 0; u < n; ++u)
    if (!us[u].dead) close(u);
  return reach;
}

/// Loop iterations per invocation of a union of a and b: every fragment runs every block (textures), an invocation
/// runs one block (union_invocation_blocks).
double joint_iters(const ScheduleOptions& opt, const U& a, const U& b) {
  return opt.union_invocation_blocks ? std::max(a.iters, b.iters) : a.iters + b.iters;
}

int overlap(const std::set<int>& a, const std::set<int>& b) {
  int c = 0;
  for (int x : a) c += b.count(x) > 0;
  return c;
}

/// The next pair of unions to merge, or {-1, -1}.
std::pair<int, int> best_pair(const ScheduleState& st, const std::vector<U>& us) {
  const ScheduleOptions& opt = st.opt;
  const auto reach = reachability(st, us);
  int best_a = -1, best_b = -1;
  std::pair<int, int> best_score{-1, -1};
  for (size_t a = 0; a < us.size(); ++a) {
    if (us[a].dead || us[a].fixed) continue;
    for (size_t b = a + 1; b < us.size(); ++b) {
      if (us[b].dead || us[b].fixed || reach[a][b] || reach[b][a]) continue;
      if (us[a].outputs + us[b].outputs > st.max_out) continue;
      if (4 * (1 + joint_iters(opt, us[a], us[b])) > opt.max_loop_iterations) continue;
      if (us[a].code + us[b].code > opt.max_kernel_size) continue;  // every block is code of the one shader
      const int shared = overlap(us[a].inputs, us[b].inputs);
      if (!within_bindings(opt, us[a].inputs.size() + us[b].inputs.size() - static_cast<size_t>(shared),
                           static_cast<size_t>(us[a].outputs + us[b].outputs)))
        continue;
      // textures: memory allocated beyond the outputs' own layouts (every output covers the draw's extent)
      if (!opt.union_invocation_blocks) {
        const Extent e = us[a].extent.cover(us[b].extent);
        double extra = 0;
        for (const U* x : {&us[a], &us[b]})
          for (auto& [le, copies] : x->outs) extra += double(copies) * double(e.texels() - le.texels()) * 16.0;
        if (extra > static_cast<double>(opt.union_max_extra_bytes)) continue;
      }
      std::pair<int, int> score{shared, overlap(us[a].producers, us[b].producers)};
      if (score > best_score) best_score = score, best_a = static_cast<int>(a), best_b = static_cast<int>(b);
    }
  }
  return {best_a, best_b};
}

void merge(ScheduleState& st, std::vector<U>& us, int best_a, int best_b) {
  U& a = us[best_a];
  U& b = us[best_b];
  a.inputs.insert(b.inputs.begin(), b.inputs.end());
  a.producers.insert(b.producers.begin(), b.producers.end());
  a.outputs += b.outputs;
  a.iters = joint_iters(st.opt, a, b);
  a.code += b.code;
  a.outs.insert(a.outs.end(), b.outs.begin(), b.outs.end());
  a.extent = a.extent.cover(b.extent);
  b.dead = true;
  for (int gi : st.unions[best_b]) st.union_of[gi] = best_a;
  st.unions[best_a].insert(st.unions[best_a].end(), st.unions[best_b].begin(), st.unions[best_b].end());
  std::sort(st.unions[best_a].begin(), st.unions[best_a].end());
  st.unions[best_b].clear();
}

}  // namespace

void merge_union_domains(ScheduleState& st) {
  std::vector<U> us(st.unions.size());
  for (size_t u = 0; u < st.unions.size(); ++u) us[u] = single_group_union(st, st.groups[st.unions[u][0]]);
  for (;;) {
    auto [a, b] = best_pair(st, us);
    if (a < 0) break;
    merge(st, us, a, b);
  }
}

}  // namespace sg::sched
