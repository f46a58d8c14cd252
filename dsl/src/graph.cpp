// Graph nodes: creation, naming, deterministic topological order.
#include "sg/graph.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

namespace sg {

const char* op_name(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Param: return "param";
    case Op::State: return "state";
    case Op::Const: return "const";
    case Op::Map: return "map";
    case Op::Reduce: return "reduce";
    case Op::MatMul: return "matmul";
    case Op::Reshape: return "reshape";
    case Op::Permute: return "permute";
    case Op::Expand: return "expand";
    case Op::Slice: return "slice";
    case Op::Pad: return "pad";
    case Op::OneHot: return "one_hot";
    case Op::Conv2d: return "conv2d";
    case Op::Conv2dGradInput: return "conv2d_grad_input";
    case Op::Conv2dGradWeight: return "conv2d_grad_weight";
    case Op::MaxPool2d: return "max_pool2d";
    case Op::MaxPool2dGrad: return "max_pool2d_grad";
    case Op::AvgPool2d: return "avg_pool2d";
    case Op::AvgPool2dGrad: return "avg_pool2d_grad";
    case Op::Gather: return "gather";
    case Op::RandomUniform: return "random_uniform";
    case Op::Iota: return "iota";
  }
  return "?";
}

const char* reduce_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Max: return "max";
    case ReduceKind::Min: return "min";
    case ReduceKind::ArgMax: return "argmax";
  }
  return "?";
}

std::string Node::label() const {
  switch (op) {
    case Op::Map: return fmt::format("map[{}]", sexpr_str(body));
    case Op::Reduce: return fmt::format("{}", reduce_name(attrs.reduce));
    case Op::RandomUniform: return fmt::format("random_uniform[seed {}, stream {}]", attrs.seed, attrs.stream);
    case Op::Input:
    case Op::Param:
    case Op::State: return fmt::format("{} '{}'", op_name(op), name);
    default: return op_name(op);
  }
}

std::string Node::describe() const {
  std::string s = fmt::format("{}#{} ({})", op == Op::Reduce ? reduce_name(attrs.reduce) : op_name(op), id,
                              shape_str(shape));
  if (!name.empty()) s += fmt::format(" '{}'", name);
  if (loc.known()) s += " at " + loc.str();
  return s;
}

NodePtr make_node(Node n) {
  static std::atomic<uint64_t> next_id{1};
  n.id = next_id.fetch_add(1);
  return std::make_shared<const Node>(std::move(n));
}

std::vector<NodePtr> topo_order(const std::vector<NodePtr>& roots) {
  // Collect reachable nodes, count users, then Kahn's algorithm with a min-heap on id.
  std::unordered_map<const Node*, int> pending;  // inputs not yet emitted
  std::unordered_map<const Node*, std::vector<const Node*>> users;
  std::unordered_map<const Node*, NodePtr> owner;
  std::vector<const Node*> stack;
  for (auto& r : roots)
    if (r && !owner.count(r.get())) {
      owner[r.get()] = r;
      stack.push_back(r.get());
    }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    pending[n] = 0;
    for (auto& in : n->inputs) {
      users[in.get()].push_back(n);
      if (!owner.count(in.get())) {
        owner[in.get()] = in;
        stack.push_back(in.get());
      }
    }
  }
  for (auto& [n, _] : pending) pending[n] = static_cast<int>(n->inputs.size());
  auto cmp = [](const Node* a, const Node* b) { return a->id > b->id; };
  std::priority_queue<const Node*, std::vector<const Node*>, decltype(cmp)> ready(cmp);
  for (auto& [n, cnt] : pending)
    if (cnt == 0) ready.push(n);
  std::vector<NodePtr> order;
  order.reserve(pending.size());
  while (!ready.empty()) {
    const Node* n = ready.top();
    ready.pop();
    order.push_back(owner[n]);
    for (const Node* u : users[n])
      if (--pending[u] == 0) ready.push(u);
  }
  return order;
}

}  // namespace sg
