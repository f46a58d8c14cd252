// Program: roots, topological order, inputs and persistent leaves of a program's graph.
#include "sg/program.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace sg {

void Program::add_output(const std::string& name, const Tensor& t) {
  output_names.push_back(name);
  outputs.push_back(t.node());
  add_effects_of(t.node());
}

void Program::add_effects_of(const NodePtr& root) {
  // an effect's value may itself depend on nodes with effects (a counter read by a running average): a worklist
  std::vector<NodePtr> pending = {root};
  while (!pending.empty()) {
    std::vector<NodePtr> roots = std::move(pending);
    pending.clear();
    for (auto& n : topo_order(roots))
      for (auto& effect : n->effects) {
        const NodePtr& target = effect.first;  // named, not a structured binding: clang 14 cannot capture those
        const NodePtr& value = effect.second;
        auto same = std::find_if(updates.begin(), updates.end(), [&](const Update& u) { return u.target == target; });
        if (same != updates.end()) {
          if (same->value != value)
            throw ValueError(fmt::format("program: state '{}' gets two next values in one step ({} and {}); a "
                                         "layer that updates state (BatchNorm in train mode) was called twice",
                                         target->name, same->value->describe(), value->describe()));
          continue;
        }
        updates.push_back({target, value});
        pending.push_back(value);
      }
  }
}

std::vector<NodePtr> Program::roots() const {
  std::vector<NodePtr> r = outputs;
  for (auto& u : updates) r.push_back(u.value);
  return r;
}

std::vector<NodePtr> Program::nodes() const { return topo_order(roots()); }

std::vector<NodePtr> Program::inputs() const {
  std::vector<NodePtr> r;
  for (auto& n : nodes())
    if (n->op == Op::Input) r.push_back(n);
  std::sort(r.begin(), r.end(), [](const NodePtr& a, const NodePtr& b) { return a->name < b->name; });
  return r;
}

std::vector<NodePtr> Program::persistent() const {
  std::vector<NodePtr> r;
  std::unordered_set<const Node*> seen;
  for (auto& n : nodes())
    if ((n->op == Op::Param || n->op == Op::State) && seen.insert(n.get()).second) r.push_back(n);
  for (auto& u : updates)
    if (seen.insert(u.target.get()).second) r.push_back(u.target);
  return r;
}

}  // namespace sg
