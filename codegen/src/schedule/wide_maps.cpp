// Binding budgets, pass 0 (before every other pass): no Map node reads more distinct inputs than one kernel may
// bind (input_budget: samplers on the fragment target, storage buffers less the output on a buffer target).
//
// A Map is one kernel's expression at most, and a kernel reads each distinct materialised input through one
// binding, so a Map of more distinct inputs than the budget (a sum of 12 tensors written as one expression, the
// adjoint of a tensor sliced 20 times) cannot be one kernel. split_wide_maps rewrites the program: the Map's body is
// walked bottom-up and, where a subexpression would read more inputs than the budget, its operand reading the most
// inputs becomes a Map node of its own (a *part*, broadcast over its inputs' shapes, at the wide Map's source line)
// read through one argument. Every part and the rewritten Map read at most the budget (an operation has at most 3
// operands, so a budget of 3 always fits; smaller budgets fit unless one operation's operands read more). Nodes
// downstream of a rewritten Map are rebuilt with their new inputs; a program without wide Maps is returned as it is,
// node for node, so its kernels and shaders do not change. The later passes treat parts like any other Map: they
// inline them back into one kernel where the budget allows (decide_materialisation's reads bound materialises
// them where it does not).
// Invariant left: every Map node of the program has at most input_budget distinct inputs.
#include "schedule/state.h"

#include <algorithm>

#include <fmt/format.h>

namespace sg::sched {

namespace {

/// A rewritten subexpression and the argument indices it reads (sorted, distinct).
struct Fitted {
  SExprPtr e;
  std::vector<int> args;
};

std::vector<int> merged(const std::vector<Fitted>& ops) {
  std::vector<int> r;
  for (const Fitted& f : ops) r.insert(r.end(), f.args.begin(), f.args.end());
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

/// Splits one wide Map: args[k] is the node of argument k (the Map's inputs with duplicates folded, then parts).
class MapSplitter {
 public:
  MapSplitter(const Node& wide, std::vector<NodePtr> inputs, int budget) : wide_(wide), budget_(budget) {
    std::vector<SExprPtr> canon;  // argument k -> the first argument holding the same node
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto first = std::find(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(k), inputs[k]);
      canon.push_back(sarg(static_cast<int>(first - inputs.begin())));
    }
    args_ = std::move(inputs);
    body_ = ssubstitute(wide.body, canon);
  }

  /// The wide Map rebuilt over at most `budget` inputs, its operands reading the rest through parts.
  NodePtr split() {
    const Fitted root = fit(body_);
    std::vector<SExprPtr> subs(args_.size());
    std::vector<NodePtr> ins;
    for (size_t k = 0; k < root.args.size(); ++k) {
      subs[root.args[k]] = sarg(static_cast<int>(k));
      ins.push_back(args_[root.args[k]]);
    }
    Node n = wide_;
    n.inputs = std::move(ins);
    n.body = ssubstitute(root.e, subs);
    return make_node(std::move(n));
  }

 private:
  Fitted fit(const SExprPtr& e) {
    if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
    Fitted r;
    if (e->op == SOp::Const) {
      r = {e, {}};
    } else if (e->op == SOp::Arg) {
      r = {e, {e->arg}};
    } else {
      std::vector<Fitted> ops;
      for (const SExprPtr* o : {&e->a, &e->b, &e->c})
        if (*o) ops.push_back(fit(*o));
      while (static_cast<int>(merged(ops).size()) > budget_) {
        auto widest = std::max_element(ops.begin(), ops.end(),
                                       [](const Fitted& x, const Fitted& y) { return x.args.size() < y.args.size(); });
        if (widest->args.size() <= 1)
          throw UnsupportedError(fmt::format(
              "schedule: {}: one operation of its body reads {} distinct inputs, more than the {} a kernel of this "
              "target may bind", wide_.describe(), merged(ops).size(), budget_));
        *widest = part(*widest);
      }
      auto at = [&](size_t i) { return i < ops.size() ? ops[i].e : nullptr; };
      r = {std::make_shared<const SExpr>(SExpr{e->op, e->value, e->arg, at(0), at(1), at(2)}), merged(ops)};
    }
    memo_.emplace(e.get(), r);
    return r;
  }

  /// `sub` as a Map node of its own, read through a new argument.
  Fitted part(const Fitted& sub) {
    std::vector<SExprPtr> subs(args_.size());
    Node n;
    n.op = Op::Map;
    for (size_t k = 0; k < sub.args.size(); ++k) {
      subs[sub.args[k]] = sarg(static_cast<int>(k));
      const NodePtr& in = args_[sub.args[k]];
      Shape s;
      broadcast_shapes(n.shape, in->shape, s);  // the wide Map's inputs broadcast together, so any subset does
      n.shape = s;
      n.inputs.push_back(in);
    }
    n.body = ssubstitute(sub.e, subs);
    n.loc = wide_.loc;
    args_.push_back(make_node(std::move(n)));
    return {sarg(static_cast<int>(args_.size() - 1)), {static_cast<int>(args_.size() - 1)}};
  }

  const Node& wide_;
  int budget_;
  std::vector<NodePtr> args_;
  SExprPtr body_;
  std::unordered_map<const SExpr*, Fitted> memo_;
};

size_t distinct_inputs(const std::vector<NodePtr>& inputs) {
  std::vector<const Node*> v;
  for (const NodePtr& i : inputs) v.push_back(i.get());
  std::sort(v.begin(), v.end());
  return static_cast<size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

}  // namespace

int input_budget(const ScheduleOptions& opt) {
  return opt.max_storage_buffers > 0 ? std::min(opt.max_inputs, opt.max_storage_buffers - 1) : opt.max_inputs;
}

Program split_wide_maps(const Program& program, int budget) {
  if (budget < 1) throw ValueError(fmt::format("schedule: a kernel of this target may bind {} inputs", budget));
  const std::vector<NodePtr> order = program.nodes();
  const bool any = std::any_of(order.begin(), order.end(), [&](const NodePtr& n) {
    return n->op == Op::Map && static_cast<int>(distinct_inputs(n->inputs)) > budget;
  });
  if (!any) return program;
  std::unordered_map<const Node*, NodePtr> now;  // node -> the node standing for it in the rewritten program
  for (const NodePtr& n : order) {
    std::vector<NodePtr> ins;
    bool changed = false;
    for (const NodePtr& i : n->inputs) {
      ins.push_back(now.at(i.get()));
      changed |= ins.back() != i;
    }
    if (n->op == Op::Map && static_cast<int>(distinct_inputs(ins)) > budget) {
      now[n.get()] = MapSplitter(*n, std::move(ins), budget).split();
    } else if (changed) {
      Node copy = *n;
      copy.inputs = std::move(ins);
      now[n.get()] = make_node(std::move(copy));
    } else {
      now[n.get()] = n;
    }
  }
  Program r = program;
  for (NodePtr& o : r.outputs) o = now.at(o.get());
  for (Update& u : r.updates) u.value = now.at(u.value.get());
  return r;
}

}  // namespace sg::sched
