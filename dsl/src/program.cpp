// Program: roots, topological order, inputs and persistent leaves of a program's graph.
#include "sg/program.h"

#include <algorithm>
#include <unordered_set>

namespace sg {

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
