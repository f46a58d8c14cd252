// Target-neutral fusion, the loop-budget and split-K rules: how one kernel's reductions are split when its loops are
// too long for one invocation or leave the device idle.
//
// append_kernel appends a kernel to the plan; a single-output kernel is first split while (at most kMaxSplitRounds
// times: one round per top-level reduction moved out, so a kernel adding up many reductions, such as global-norm
// clipping's one sum of squares per parameter, fits however many parameters the model has)
//  - loop budget: its loops run more than ScheduleOptions::max_loop_iterations per invocation (4 elements each);
//    llvmpipe silently stops a loop after 65535 iterations, a GPU watchdog kills long ones, or
//  - split-K (first round only): it is latency-bound (fewer than min_parallel_texels output texels, loops of
//    kLongLoop or more iterations per element): too few invocations to fill the device, or
//  - two-stage tree (first round only, before the other two, ScheduleOptions::reduce_tree_workgroups): a few outputs (4 per output at
//    most per reduce_tree_workgroups) of kTreeLoop or more iterations each, which the compute emitter would give
//    one workgroup per output: stage 1 is about reduce_tree_workgroups / n partial reductions of contiguous
//    chunks (the outermost loop with at least a quarter of that many iterations is cut, so a chunk is whole rows
//    of a row-major input), stage 2 reduces the partials.
// The two-stage tree of a kernel adding several top-level sums ((sum a) + (sum b) + ...: global-norm clipping) cuts
// every sum of that group instead (split_additive_group): partial p sums chunk p of each, the final kernel adds the
// partials in the group's place.
// Otherwise a split takes the costliest top-level reduction (not argmax, not nested) and its longest loop (the tree: its
// outermost loop of at least P / 4 iterations, else the longest): a partial kernel over (P, domain...) reduces chunk p
// of that loop (chunks a multiple of 4 iterations of an innermost loop, so the fragment emitter's tile mode still
// applies), appended first (and split again if need be), and the kernel reduces the P partial results instead.
// Max/min chunks padded past the loop's end read the identity (-inf / +inf), so NaN still propagates as in one
// loop. A kernel whose loops still exceed the budget throws UnsupportedError.
// Multi-output kernels are formed within the budget (multi_output.cpp) and never split.
// Invariants left: kernels in launch order; every output's Value::producer is its kernel's index; Kernel::extent
// covers every output's layout (row planes may narrow layouts later: plan_memory recomputes it); kernel names
// k<index>_<ops> (+ "_partial") are stable.
#include "schedule/state.h"

#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace sg::sched {

namespace {

/// Split rounds of one kernel at most: enough for a sum of 256 reductions (the rounds after the first only split a
/// kernel over the loop budget, which would otherwise be refused).
constexpr int kMaxSplitRounds = 256;

std::string kernel_name(int index, const std::vector<NodePtr>& nodes) {
  std::vector<std::string> parts;
  auto add = [&](const std::string& p) {
    if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
  };
  std::unordered_set<const SExpr*> seen;  // a body's shared subexpressions once (the names' order is the same)
  std::function<void(const SExprPtr&)> walk = [&](const SExprPtr& e) {
    if (!e || e->op == SOp::Const || e->op == SOp::Arg || !seen.insert(e.get()).second) return;
    walk(e->a), walk(e->b), walk(e->c);
    add(sop_name(e->op));
  };
  for (auto& n : nodes) {
    if (n->op == Op::Map)
      walk(n->body);
    else if (n->op == Op::Reduce)
      add(reduce_name(n->attrs.reduce));
    else if (n->op != Op::Reshape)
      add(op_name(n->op));
  }
  if (parts.empty()) parts.push_back("copy");
  if (parts.size() > 4) parts.resize(4);
  std::string name = fmt::format("k{:02}", index);
  for (auto& p : parts) name += "_" + p;
  return name;
}

/// The costliest top-level reduction of `e` (argmax and reductions nested in another are never split) and its
/// loop iterations; nullptr when there is none.
std::pair<const KExpr*, double> costliest_reduction(const KExprPtr& root) {
  const KExpr* best = nullptr;
  double best_cost = 0;
  std::function<void(const KExprPtr&)> find = [&](const KExprPtr& e) {
    if (!e) return;
    if (e->op == KOp::Reduce) {
      double c = kloop_iterations(e);
      if (e->reduce != ReduceKind::ArgMax && c > best_cost) best = e.get(), best_cost = c;
      return;  // nested reductions are not split
    }
    find(e->a), find(e->b), find(e->c);
  };
  find(root);
  return {best, best_cost};
}

/// `e` with every Load's input slot s replaced by to[s] (one memo: shared subtrees stay shared).
KExprPtr remap_loads(const KExprPtr& e, const std::vector<int>& to, std::unordered_map<const KExpr*, KExprPtr>& memo) {
  if (!e) return e;
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  KExprPtr a = remap_loads(e->a, to, memo), b = remap_loads(e->b, to, memo), c = remap_loads(e->c, to, memo);
  KExprPtr r;
  if (e->op == KOp::Load && to[static_cast<size_t>(e->input)] != e->input) {
    auto n = std::make_shared<KExpr>(*e);
    n->input = to[static_cast<size_t>(e->input)];
    n->a = a;
    r = n;
  } else {
    r = kwith_children(e, a, b, c);
  }
  return memo[e.get()] = r;
}

void collect_loads(const KExprPtr& e, std::vector<bool>& read, std::unordered_set<const KExpr*>& seen) {
  if (!e || !seen.insert(e.get()).second) return;
  if (e->op == KOp::Load) read[static_cast<size_t>(e->input)] = true;
  collect_loads(e->a, read, seen);
  collect_loads(e->b, read, seen);
  collect_loads(e->c, read, seen);
}

/// The consumer's side of a split: `k` binds the partial value `pid` (P partials of each of the output's elements,
/// partial-major) and gets the reduction of element (i0, ..., in)'s P partials over loop variable p<guard>.
KExprPtr reduce_partials(Kernel& k, int pid, const Shape& oshape, int guard, int64_t P, ReduceKind kind) {
  const int slot = static_cast<int>(k.inputs.size());
  k.inputs.push_back(pid);
  std::vector<KExprPtr> idx;
  for (size_t i = 0; i < oshape.size(); ++i) idx.push_back(kvar(fmt::format("i{}", i)));
  const std::string pv = fmt::format("p{}", guard);
  KExprPtr flat = kibin(KOp::IAdd, kibin(KOp::IMul, kvar(pv), kint(numel(oshape))), linearize(idx, oshape));
  return kreduce(kind, {pv}, {P}, kload(slot, flat));
}

/// Drops the inputs no expression of `k` reads, renumbering the loads: a split's partial kernel inherits the
/// inputs read after the reduction (a bias) and its final kernel those read inside it (the matmul's operands),
/// which cost bindings (storage buffers, samplers) the kernel never uses.
void drop_unread_inputs(Kernel& k) {
  std::vector<bool> read(k.inputs.size(), false);
  std::unordered_set<const KExpr*> seen;
  for (const KExprPtr& e : k.exprs) collect_loads(e, read, seen);
  if (std::all_of(read.begin(), read.end(), [](bool r) { return r; })) return;
  std::vector<int> to(k.inputs.size(), -1), inputs;
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (read[i]) {
      to[i] = static_cast<int>(inputs.size());
      inputs.push_back(k.inputs[i]);
    }
  std::unordered_map<const KExpr*, KExprPtr> memo;
  for (KExprPtr& e : k.exprs) e = remap_loads(e, to, memo);
  k.inputs = std::move(inputs);
}

/// The sums of an additive group: the leaves of the largest tree of Add nodes in `root` (by the loop iterations of its
/// sum leaves) that are top-level sum reductions (none nested inside, each a leaf once), with that tree's root.
struct AddGroup {
  KExprPtr root;
  std::vector<KExprPtr> sums;
};

AddGroup additive_sums(const KExprPtr& root) {
  AddGroup best;
  double best_cost = 0;
  auto is_add = [](const KExprPtr& e) { return e && e->op == KOp::FMath && e->sop == SOp::Add; };
  std::unordered_set<const KExpr*> seen;
  std::function<void(const KExprPtr&, bool)> walk = [&](const KExprPtr& e, bool parent_add) {
    if (!e || e->op == KOp::Reduce) return;  // (nothing inside a reduction is top-level)
    if (is_add(e) && !parent_add) {  // a maximal Add tree: its leaves, by path
      std::vector<KExprPtr> leaves, rest;
      std::function<void(const KExprPtr&)> collect = [&](const KExprPtr& x) {
        if (leaves.size() > 4096) return;  // (a DAG of shared Add nodes: too many paths, left alone)
        if (is_add(x)) return collect(x->a), collect(x->b);
        leaves.push_back(x);
      };
      collect(e);
      if (leaves.size() > 4096) return;
      std::map<const KExpr*, int> times;
      for (auto& x : leaves) ++times[x.get()];
      AddGroup g{e, {}};
      double cost = 0;
      for (auto& x : leaves)
        if (x->op == KOp::Reduce && x->reduce == ReduceKind::Sum && times[x.get()] == 1 && !kcontains_reduce(x->a)) {
          g.sums.push_back(x);
          cost += kloop_iterations(x);
        }
      if (g.sums.size() >= 2 && cost > best_cost) best = std::move(g), best_cost = cost;
      for (auto& x : leaves) walk(x, false);
      return;
    }
    if (!seen.insert(e.get()).second) return;
    walk(e->a, false), walk(e->b, false), walk(e->c, false);
  };
  walk(root, false);
  return best;
}

/// Stage 1 of the tree over an additive group of sums (GPUs; ScheduleOptions::reduce_tree_workgroups): a scalar such as
/// global-norm clipping's sum over every parameter of its sum of squares, (sum a) + (sum b) + ..., where splitting only
/// the costliest sum leaves stage 2 the others in one workgroup (charlm: 30 sums, 91k products; stage 2 0.072 ms on an
/// H100). P partials, each the sum over chunk p of every long sum of the group (each sum's flat iteration space cut
/// into P contiguous chunks of ceil(L / P), so a workgroup's work is about that of the group / P, positions past L
/// adding 0; the tree emitter folds the chunks into one strided loop); the final kernel adds the P partials in the
/// group's place. False without such a group of two or more sums.
bool split_additive_group(ScheduleState& st, Kernel& k, const std::vector<NodePtr>& name_nodes, const std::string& suffix,
                          int guard) {
  const ScheduleOptions& opt = st.opt;
  const NodePtr out_node = st.plan.values[k.output()].node;
  const std::string out_name = st.plan.values[k.output()].name;
  const Shape oshape = st.plan.values[k.output()].stored_shape();
  AddGroup g = additive_sums(k.exprs[0]);
  if (g.sums.size() < 2) return false;
  double total = 0;
  for (auto& r : g.sums) total += kloop_iterations(r);
  const int64_t n = numel(oshape);
  const int64_t P = std::min<int64_t>(opt.reduce_tree_workgroups / std::max<int64_t>(n, 1),
                                      static_cast<int64_t>(total / kTreeChunk));
  if (P < 2) return false;
  const std::vector<KExprPtr>& split = g.sums;  // (a sum shorter than P: one iteration in each of its first partials)
  // partial kernel: coordinates (p, i0..in); sum j over its flat chunk p, loop variables from the flat position
  std::map<std::string, KExprPtr> outer;
  for (size_t i = 0; i < oshape.size(); ++i) outer[fmt::format("i{}", i)] = kvar(fmt::format("i{}", i + 1));
  KExprPtr sum;
  std::string chunks;
  for (auto& r : split) {
    int64_t L = 1;
    for (int64_t e : r->extents) L *= e;
    const int64_t C = (L + P - 1) / P;
    const std::string& v = r->loop_vars[0];  // the chunk's loop variable (its name is free in the body)
    KExprPtr pos = kibin(KOp::IAdd, kibin(KOp::IMul, kvar("i0"), kint(C)), kvar(v));
    std::map<std::string, KExprPtr> subs = outer;
    int64_t stride = L;
    for (size_t d = 0; d < r->extents.size(); ++d) {
      stride /= r->extents[d];
      KExprPtr x = kibin(KOp::IDiv, pos, kint(stride));
      if (d > 0) x = kibin(KOp::IMod, x, kint(r->extents[d]));
      subs[r->loop_vars[d]] = x;
    }
    KExprPtr body = ksubstitute(r->a, subs);
    if (P * C != L) body = kselect(kibin(KOp::ILt, pos, kint(L)), body, kfloat(0.0));
    KExprPtr part = kreduce(ReduceKind::Sum, {v}, {C}, body);
    sum = sum ? kmath(SOp::Add, sum, part) : part;
    chunks += fmt::format("{}{}", chunks.empty() ? "" : ", ", L);
  }
  Kernel part;
  part.inputs = k.inputs;
  part.nodes = k.nodes;
  part.exprs = {sum};
  Shape pshape = {P};
  pshape.append(oshape.begin(), oshape.end());
  Node pn;
  pn.op = Op::Reduce;
  pn.shape = pshape;
  pn.attrs.reduce = ReduceKind::Sum;
  pn.name = fmt::format("partial sum of {}", out_name);
  pn.loc = out_node->loc;
  int pid = add_value(st, make_node(std::move(pn)), ValueKind::Temp, out_name + "_partial", false);
  part.outputs = {pid};
  part.comment = k.comment;
  part.notes = fmt::format("// partial sums: {} chunks of each of {} added sums (of {} iterations)\n", P, split.size(),
                           chunks) + k.notes;
  drop_unread_inputs(part);
  append_kernel(st, std::move(part), name_nodes, suffix + "_partial");
  // the consumer: the group's tree with the split sums replaced by one sum of the P partials
  KExprPtr partials = reduce_partials(k, pid, oshape, guard, P, ReduceKind::Sum);
  std::unordered_set<const KExpr*> is_split;
  for (auto& r : split) is_split.insert(r.get());
  bool placed = false;
  std::function<KExprPtr(const KExprPtr&)> rebuild = [&](const KExprPtr& x) -> KExprPtr {
    if (x->op == KOp::FMath && x->sop == SOp::Add) {
      KExprPtr a = rebuild(x->a), b = rebuild(x->b);
      if (!a || !b) return a ? a : b;
      return kwith_children(x, a, b, x->c);
    }
    if (!is_split.count(x.get())) return x;
    if (placed) return nullptr;
    placed = true;
    return partials;
  };
  k.exprs[0] = kreplace(k.exprs[0], g.root.get(), rebuild(g.root));
  drop_unread_inputs(k);
  k.notes = fmt::format("// final sum over {} partial results of {} added sums\n", P, split.size()) + k.notes;
  return true;
}

/// Splits the costliest reduction of single-output kernel `k` (round `guard`) into a partial kernel, appended to
/// the plan, and a final reduction in k. False when nothing can be split.
/// Why a kernel is split: its loops exceed the budget, it is latency-bound (split-K) or a few long reductions
/// (the two-stage tree).
enum class SplitWhy { Budget, SplitK, Tree };

bool split_once(ScheduleState& st, Kernel& k, const std::vector<NodePtr>& name_nodes, const std::string& suffix,
                int guard, SplitWhy why) {
  const ScheduleOptions& opt = st.opt;
  const NodePtr out_node = st.plan.values[k.output()].node;  // copies: add_value below grows plan.values
  const std::string out_name = st.plan.values[k.output()].name;
  const Shape oshape = st.plan.values[k.output()].stored_shape();  // the kernel's iteration domain
  const int64_t texels = (numel(oshape) + 3) / 4;
  auto [best, best_cost] = costliest_reduction(k.exprs[0]);
  if (!best) return false;
  size_t vi = std::max_element(best->extents.begin(), best->extents.end()) - best->extents.begin();
  int64_t P = static_cast<int64_t>(std::ceil(4 * (1 + best_cost) / (opt.max_loop_iterations / 2)));
  if (why == SplitWhy::SplitK) {
    // split-K for parallelism: enough chunks to give min_parallel_texels fragments, each chunk still running
    // kLongLoop / 4 iterations or more
    P = std::min<int64_t>((opt.min_parallel_texels + texels - 1) / texels,
                          static_cast<int64_t>(best_cost / (kLongLoop / 4)));
  } else if (why == SplitWhy::Tree) {
    // stage 1 of the tree: about reduce_tree_workgroups workgroups in all, each chunk at least kTreeChunk iterations;
    // contiguous chunks: the outermost loop with at least a quarter of that many iterations (whole rows of a
    // row-major input; 1024 rows when the device asks for 1056 partials)
    const int64_t n = numel(oshape);
    P = std::min<int64_t>(opt.reduce_tree_workgroups / std::max<int64_t>(n, 1),
                          static_cast<int64_t>(best_cost / kTreeChunk));
    for (size_t d = 0; d < best->extents.size(); ++d)
      if (best->extents[d] >= std::max<int64_t>(P / 4, 2)) {  // (P is clamped to the loop's extent below)
        vi = d;
        break;
      }
  }
  int64_t E = best->extents[vi];
  P = std::clamp<int64_t>(P, 2, E);
  int64_t C = (E + P - 1) / P;
  // chunks of a multiple of 4 iterations of the innermost loop keep the emitter's tile mode (unroll by 4)
  if (E >= 16 && vi + 1 == best->extents.size()) C = (C + 3) / 4 * 4;
  P = (E + C - 1) / C;
  if (P < 2) return false;
  // partial kernel: coordinates (p, i0..in) -> reduce over chunk p of loop variable vi
  std::map<std::string, KExprPtr> subs;
  for (size_t i = 0; i < oshape.size(); ++i) subs[fmt::format("i{}", i)] = kvar(fmt::format("i{}", i + 1));
  const std::string& v = best->loop_vars[vi];
  KExprPtr pos = kibin(KOp::IAdd, kibin(KOp::IMul, kvar("i0"), kint(C)), kvar(v));
  subs[v] = pos;
  KExprPtr body = ksubstitute(best->a, subs);
  double identity = best->reduce == ReduceKind::Sum ? 0.0
                    : best->reduce == ReduceKind::Max ? -std::numeric_limits<double>::infinity()
                                                      : std::numeric_limits<double>::infinity();
  if (P * C != E) body = kselect(kibin(KOp::ILt, pos, kint(E)), body, kfloat(identity));
  std::vector<int64_t> ext = best->extents;
  ext[vi] = C;
  Kernel part;
  part.inputs = k.inputs;
  part.nodes = k.nodes;
  part.exprs = {kreduce(best->reduce, best->loop_vars, ext, body)};
  Shape pshape = {P};
  pshape.append(oshape.begin(), oshape.end());
  Node pn;
  pn.op = Op::Reduce;
  pn.shape = pshape;
  pn.attrs.reduce = best->reduce;
  pn.name = fmt::format("partial {} of {}", reduce_name(best->reduce), out_name);
  pn.loc = out_node->loc;
  int pid = add_value(st, make_node(std::move(pn)), ValueKind::Temp, out_name + "_partial", false);
  part.outputs = {pid};
  part.comment = k.comment;
  part.notes = fmt::format("// partial {}s: {} chunks of {} iterations of loop {} (of {})\n", reduce_name(best->reduce),
                           P, C, v, E) + k.notes;
  drop_unread_inputs(part);
  append_kernel(st, std::move(part), name_nodes, suffix + "_partial");
  // the consumer reduces the P partial results
  const ReduceKind kind = best->reduce;  // `best` points into k.exprs[0], which the next line may free
  KExprPtr partials = reduce_partials(k, pid, oshape, guard, P, kind);
  k.exprs[0] = kreplace(k.exprs[0], best, partials);
  drop_unread_inputs(k);
  k.notes = fmt::format("// final {} over {} partial results\n", reduce_name(kind), P) + k.notes;
  return true;
}

}  // namespace

void append_kernel(ScheduleState& st, Kernel&& k, const std::vector<NodePtr>& name_nodes, const std::string& suffix) {
  const ScheduleOptions& opt = st.opt;
  const NodePtr out_node = st.plan.values[k.output()].node;
  const int64_t n = numel(st.plan.values[k.output()].stored_shape());
  for (int guard = 0; guard < kMaxSplitRounds && k.exprs.size() == 1; ++guard) {
    const bool over_budget = 4 * (1 + kloop_iterations(k.exprs[0])) > opt.max_loop_iterations;
    const bool too_serial = guard == 0 && latency_bound(n, kloop_iterations(k.exprs[0]), opt);
    // the tree first: its partial kernels are split again when over the budget
    const bool tree = guard == 0 && tree_bound(n, kloop_iterations(k.exprs[0]), opt);
    if (!over_budget && !too_serial && !tree) break;
    const SplitWhy why = tree ? SplitWhy::Tree : over_budget ? SplitWhy::Budget : SplitWhy::SplitK;
    if (why == SplitWhy::Tree && split_additive_group(st, k, name_nodes, suffix, guard)) continue;
    if (!split_once(st, k, name_nodes, suffix, guard, why)) break;
  }
  double iters = kloop_iterations(k.exprs);
  if (opt.union_invocation_blocks && k.blocks() > 1) {  // an invocation runs one block: the longest block's loops
    std::vector<std::vector<KExprPtr>> per(static_cast<size_t>(k.blocks()));
    for (size_t j = 0; j < k.exprs.size(); ++j) per[static_cast<size_t>(k.block_of(j))].push_back(k.exprs[j]);
    iters = 0;
    for (auto& b : per) iters = std::max(iters, kloop_iterations(b));
  }
  if (4 * (1 + iters) > opt.max_loop_iterations)
    throw UnsupportedError(fmt::format(
        "schedule: kernel computing {} needs {:.0f} loop iterations per invocation (limit {:.0f}) and its loops "
        "cannot be split (argmax and nested reductions are not split); GPUs such as llvmpipe silently stop long "
        "loops. Reduce the axis length (e.g. argmax over at most {} elements) or reshape first.",
        out_node->describe(), 4 * (1 + iters), opt.max_loop_iterations,
        static_cast<int64_t>(opt.max_loop_iterations / 4)));
  Plan& plan = st.plan;
  k.extent = {};  // the draw covers every output's layout
  for (int o : k.outputs) k.extent = k.extent.cover({plan.values[o].layout.width, plan.values[o].layout.height});
  k.name = kernel_name(static_cast<int>(plan.kernels.size()), name_nodes) + suffix;
  for (int o : k.outputs) plan.values[o].producer = static_cast<int>(plan.kernels.size());
  plan.kernels.push_back(std::move(k));
}

int append_copy_kernel(ScheduleState& st, const NodePtr& n, const NodePtr& source) {
  Kernel k;
  int vid = add_value(st, n, ValueKind::Temp, fmt::format("t{}", st.plan.kernels.size()), false);
  k.inputs.push_back(st.value_of.at(source.get()));
  std::vector<KExprPtr> idx;
  for (size_t i = 0; i < n->shape.size(); ++i) idx.push_back(kvar(fmt::format("i{}", i)));
  k.exprs = {kload(0, linearize(idx, n->shape))};
  k.outputs = {vid};
  append_kernel(st, std::move(k), {}, "");
  return vid;
}

bool tree_bound(int64_t numel, double loop_iterations, const ScheduleOptions& opt) {
  return !opt.unfused && opt.reduce_tree_workgroups > 0 && numel * 4 <= opt.reduce_tree_workgroups &&
         loop_iterations >= kTreeLoop;
}

bool latency_bound(int64_t numel, double loop_iterations, const ScheduleOptions& opt) {
  return !opt.unfused && opt.min_parallel_texels > 0 && (numel + 3) / 4 < opt.min_parallel_texels &&
         numel > opt.split_min_outputs && loop_iterations >= kLongLoop;
}

}  // namespace sg::sched
