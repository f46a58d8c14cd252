// Target-neutral: launch order, then the kernels with real value ids, then the program's outputs and updates.
//
// form_unions: one union (future kernel) per live fusion group; a target's launch pass (fragment:
// merge_union_domains) may merge unions into kernels of several domain blocks before order_launches.
// order_launches: a topological order of the union DAG (a union depends on the unions of the groups it reads),
// the union of the earliest-formed group first among the ready ones: deterministic, and close to program order.
// build_kernels: per union in launch order, its groups lowered again with real value ids: every stored member
// gets a Temp value (named after its role: program output, "<target>_next" for an update, else t<kernel>[_j]),
// its block index, its transposed storage; each block's sampler slots continue those of the earlier blocks. The
// kernel's comment lists the nodes it computes with their user source lines; append_kernel then applies the
// loop-budget / split-K rules.
// bind_updates: Plan::output_values, and Plan::updates: each update's value is a Temp no other update or output
// uses (else a copy kernel is appended), so it can live in its target's back texture or buffer.
#include "schedule/state.h"

#include <algorithm>

#include <fmt/format.h>

namespace sg::sched {

namespace {

std::string node_comment(const ScheduleState& st, const std::vector<NodePtr>& nodes) {
  std::string c;
  for (auto& x : nodes)
    c += fmt::format("//   n{:<4} {:<40} {:>12}  {}\n", st.node_index(x.get()), x->label().substr(0, 40),
                     shape_str(x->shape), x->loc.known() ? x->loc.str() : "");
  return c;
}

void by_position(const ScheduleState& st, std::vector<NodePtr>& nodes) {
  std::sort(nodes.begin(), nodes.end(), [&](const NodePtr& x, const NodePtr& y) {
    return st.node_index(x.get()) < st.node_index(y.get());
  });
}

/// The union's kernel being built.
struct KernelBuild {
  Kernel k;
  std::vector<NodePtr> all_inlined;
  std::unordered_set<const Node*> have;
  std::string comment;
};

/// The outputs of domain block bi of k take one layout (the draw addresses them alike): an update value's, whose
/// storage is its target's, else the first output's. Row-aligned layouts can differ for one number of elements (a
/// (1, N) output and an (N) parameter's next value); multi-output grouping keeps update values of different layouts
/// apart, and plan_memory checks the result.
void share_block_layout(ScheduleState& st, const Kernel& k, size_t bi) {
  auto in_block = [&](size_t j) { return k.block_of(j) == static_cast<int>(bi); };
  auto is_update = [&](size_t j) { return st.update_values.count(st.plan.values[k.outputs[j]].node.get()) > 0; };
  int keep = -1;  // an update value's layout, else the first output's
  for (size_t j = 0; j < k.outputs.size(); ++j)
    if (in_block(j) && (keep < 0 || (is_update(j) && !is_update(static_cast<size_t>(keep))))) keep = static_cast<int>(j);
  if (keep < 0) return;
  const TextureLayout layout = st.plan.values[k.outputs[keep]].layout;
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    Value& v = st.plan.values[k.outputs[j]];
    if (in_block(j) && !is_update(j) && !v.transposed) v.layout = layout;
  }
}

/// Adds the stored members of group g (domain block bi) as outputs of kernel b.k; returns which members are stored.
std::vector<bool> add_block_outputs(ScheduleState& st, KernelBuild& b, const Group& g, size_t bi, int kindex,
                                    const std::unordered_map<const Node*, std::string>& role_name) {
  const ScheduleOptions& opt = st.opt;
  Kernel& k = b.k;
  std::vector<bool> stored;
  for (size_t j = 0; j < g.members.size(); ++j) {
    const Node* m = g.members[j].get();
    stored.push_back(is_stored(st, g, g.members[j]));
    if (!stored.back()) continue;
    // readable names: a program output by its name, an update by its target ("fc1_weight_next"), else t<k>
    std::string base = k.outputs.empty() ? fmt::format("t{}", kindex) : fmt::format("t{}_{}", kindex, k.outputs.size());
    if (auto it = role_name.find(m); it != role_name.end()) base = it->second;
    k.outputs.push_back(add_value(st, g.members[j], ValueKind::Temp, base));
    k.block.push_back(static_cast<int>(bi));
    if (st.transposed.count(m)) {
      Value& v = st.plan.values[k.outputs.back()];
      v.transposed = true;
      Shape s = v.stored_shape();
      v.layout = opt.row_aligned_layout ? TextureLayout::for_shape(std::vector<int64_t>(s.begin(), s.end()),
                                                                   opt.max_texture_width, st.max_h)
                                        : v.layout;
    }
  }
  share_block_layout(st, k, bi);
  return stored;
}

void build_kernel(ScheduleState& st, const std::vector<int>& union_groups,
                  const std::unordered_map<const Node*, std::string>& role_name) {
  const int kindex = static_cast<int>(st.plan.kernels.size());
  KernelBuild b;
  Kernel& k = b.k;
  const bool union_kernel = union_groups.size() > 1;
  for (size_t bi = 0; bi < union_groups.size(); ++bi) {
    const Group& g = st.groups[union_groups[bi]];
    const size_t first = k.outputs.size();
    const std::vector<bool> stored = add_block_outputs(st, b, g, bi, kindex, role_name);
    // coordinates of the block's first output; sampler slots continue those of the earlier blocks
    Lowered l = lower_group(g.members, st.value_of, st.plan.values[k.outputs[first]].node.get(), &st.transposed,
                            std::move(k.inputs));
    by_position(st, l.inlined);
    for (size_t j = 0; j < g.members.size(); ++j)
      if (stored[j]) k.exprs.push_back(l.exprs[j]);
    k.inputs = std::move(l.inputs);
    if (union_kernel) {
      const Value& fv = st.plan.values[k.outputs[first]];
      Shape dom = fv.stored_shape();
      b.comment += st.opt.union_invocation_blocks
                       ? fmt::format("// block {} (domain {}, {} elements):\n", bi, shape_str(dom), numel(dom))
                       : fmt::format("// block {} (domain {}, texture {}x{}):\n", bi, shape_str(dom), fv.layout.width,
                                     fv.layout.height);
    }
    b.comment += node_comment(st, l.inlined);
    for (auto& x : l.inlined)
      if (b.have.insert(x.get()).second) b.all_inlined.push_back(x);
  }
  by_position(st, b.all_inlined);
  if (!union_kernel) k.block.clear();
  k.nodes = b.all_inlined;
  k.comment = b.comment;
  append_kernel(st, std::move(k), b.all_inlined, "");
}

}  // namespace

void form_unions(ScheduleState& st) {
  st.union_of.assign(st.groups.size(), -1);
  for (size_t gi = 0; gi < st.groups.size(); ++gi)
    if (!st.groups[gi].dead)
      st.union_of[gi] = static_cast<int>(st.unions.size()), st.unions.push_back({static_cast<int>(gi)});
}

void order_launches(ScheduleState& st) {
  const auto& unions = st.unions;
  std::vector<int> pending(unions.size(), 0);
  std::vector<std::vector<int>> users(unions.size());
  for (size_t u = 0; u < unions.size(); ++u) {
    std::set<int> deps;
    for (int gi : unions[u])
      for (int d : st.groups[gi].deps)
        if (st.union_of[d] >= 0 && st.union_of[d] != static_cast<int>(u)) deps.insert(st.union_of[d]);
    for (int d : deps) users[d].push_back(static_cast<int>(u)), ++pending[u];
  }
  std::set<std::pair<int, int>> ready;  // (first group, union)
  for (size_t u = 0; u < unions.size(); ++u)
    if (!unions[u].empty() && pending[u] == 0) ready.insert({unions[u][0], static_cast<int>(u)});
  while (!ready.empty()) {
    int u = ready.begin()->second;
    ready.erase(ready.begin());
    st.launch.push_back(u);
    for (int x : users[u])
      if (--pending[x] == 0) ready.insert({unions[x][0], x});
  }
}

void build_kernels(ScheduleState& st) {
  std::unordered_map<const Node*, std::string> role_name;
  for (auto& u : st.program.updates) role_name.emplace(u.value.get(), u.target->name + "_next");
  for (size_t i = 0; i < st.program.outputs.size(); ++i)
    role_name.emplace(st.program.outputs[i].get(), st.program.output_names[i]);
  for (int ui : st.launch) build_kernel(st, st.unions[ui], role_name);
}

void bind_updates(ScheduleState& st) {
  Plan& plan = st.plan;
  for (auto& o : st.program.outputs) plan.output_values.push_back(st.value_of.at(o.get()));
  std::unordered_set<int> used_as_update;
  for (auto& u : st.program.updates) {
    int target = st.value_of.at(u.target.get());
    if (u.value == u.target) continue;  // no change
    int vid = st.value_of.at(u.value.get());
    if (plan.values[vid].kind != ValueKind::Temp || used_as_update.count(vid) ||
        std::count(plan.output_values.begin(), plan.output_values.end(), vid))
      vid = append_copy_kernel(st, u.value, u.value);  // its own copy, so it can live in the target's back texture
    used_as_update.insert(vid);
    plan.values[vid].update_of = target;
    plan.updates.push_back({target, vid});
  }
}

}  // namespace sg::sched
