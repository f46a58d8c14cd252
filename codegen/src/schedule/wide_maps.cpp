// Binding budgets, pass 0 (before every other pass): no Map node reads more distinct inputs than one kernel may
// bind (input_budget: samplers on the fragment target, storage buffers less the output on a buffer target), nor,
// where ScheduleOptions::max_guarded_reads is set, more zero-padded inputs (Pad nodes: one branch each).
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
// Invariant left: every Map node of the program has at most input_budget distinct inputs (and at most
// max_guarded_reads zero-padded ones, when set). guarded_reads counts what a kernel's expressions branch on.
#include "schedule/state.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

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
  MapSplitter(const Node& wide, std::vector<NodePtr> inputs, int budget, int max_guarded)
      : wide_(wide), budget_(budget), max_guarded_(max_guarded) {
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
      while (over(merged(ops))) {
        auto widest = std::max_element(ops.begin(), ops.end(),
                                       [](const Fitted& x, const Fitted& y) { return x.args.size() < y.args.size(); });
        if (widest->args.size() <= 1)
          throw UnsupportedError(fmt::format(
              "schedule: {}: one operation of its body reads {} distinct inputs, more than a kernel of this target "
              "may bind ({} inputs, {} of them zero-padded)", wide_.describe(), merged(ops).size(), budget_,
              max_guarded_));
        *widest = part(*widest);
      }
      auto at = [&](size_t i) { return i < ops.size() ? ops[i].e : nullptr; };
      r = {std::make_shared<const SExpr>(SExpr{e->op, e->value, e->arg, at(0), at(1), at(2)}), merged(ops)};
    }
    memo_.emplace(e.get(), r);
    return r;
  }

  /// More distinct inputs than the budget, or more zero-padded ones than max_guarded (when set).
  bool over(const std::vector<int>& args) const {
    if (static_cast<int>(args.size()) > budget_) return true;
    if (max_guarded_ <= 0) return false;
    const auto guarded = std::count_if(args.begin(), args.end(), [&](int k) { return pads(*args_[k]); });
    return guarded > max_guarded_;
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
  int budget_, max_guarded_;
  std::vector<NodePtr> args_;
  SExprPtr body_;
  std::unordered_map<const SExpr*, Fitted> memo_;
};

/// A Map reading more distinct inputs than `budget`, or more zero-padded ones than `max_guarded` (when set).
bool wide(const Node& n, const std::vector<NodePtr>& inputs, int budget, int max_guarded) {
  if (n.op != Op::Map) return false;
  std::vector<const Node*> v;
  for (const NodePtr& i : inputs) v.push_back(i.get());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  const auto guarded = std::count_if(v.begin(), v.end(), [](const Node* i) { return pads(*i); });
  return static_cast<int>(v.size()) > budget || (max_guarded > 0 && guarded > max_guarded);
}

}  // namespace

int input_budget(const ScheduleOptions& opt) {
  return opt.max_storage_buffers > 0 ? std::min(opt.max_inputs, opt.max_storage_buffers - 1) : opt.max_inputs;
}

bool pads(const Node& n) {
  if (n.op != Op::Pad) return false;
  for (size_t i = 0; i < n.attrs.pads_before.size(); ++i)
    if (n.attrs.pads_before[i] || n.attrs.pads_after[i]) return true;
  return false;
}

int guarded_reads(const std::vector<KExprPtr>& exprs) {
  std::unordered_map<const KExpr*, bool> loads;  // memo: the subexpression loads
  std::unordered_set<const KExpr*> seen;
  int guarded = 0;
  std::function<bool(const KExprPtr&)> walk = [&](const KExprPtr& e) -> bool {
    if (!e) return false;
    if (auto it = loads.find(e.get()); it != loads.end()) return it->second;
    const bool a = walk(e->a), b = walk(e->b), c = walk(e->c);
    if (e->op == KOp::ISelect && (b || c) && seen.insert(e.get()).second) ++guarded;
    return loads[e.get()] = e->op == KOp::Load || a || b || c;
  };
  for (const KExprPtr& e : exprs) walk(e);
  return guarded;
}

bool within_guards(const ScheduleOptions& opt, const std::vector<KExprPtr>& exprs) {
  return opt.max_guarded_reads <= 0 || guarded_reads(exprs) <= opt.max_guarded_reads;
}

Program split_wide_maps(const Program& program, int budget, int max_guarded) {
  if (budget < 1) throw ValueError(fmt::format("schedule: a kernel of this target may bind {} inputs", budget));
  const std::vector<NodePtr> order = program.nodes();
  const bool any = std::any_of(order.begin(), order.end(),
                               [&](const NodePtr& n) { return wide(*n, n->inputs, budget, max_guarded); });
  if (!any) return program;
  std::unordered_map<const Node*, NodePtr> now;  // node -> the node standing for it in the rewritten program
  for (const NodePtr& n : order) {
    std::vector<NodePtr> ins;
    bool changed = false;
    for (const NodePtr& i : n->inputs) {
      ins.push_back(now.at(i.get()));
      changed |= ins.back() != i;
    }
    if (wide(*n, ins, budget, max_guarded)) {
      now[n.get()] = MapSplitter(*n, std::move(ins), budget, max_guarded).split();
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
