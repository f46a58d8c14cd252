// Target-neutral fusion, pass 1: which nodes are materialised (own a texture or buffer) and which are inlined
// into their consumers' expressions.
//
// analyse_uses: ScheduleState::consumers (every reader of a node, with multiplicity), external (program outputs
// and update values) and update_values.
// decide_materialisation, in topological order (rules of sg/schedule.h, tests/test_schedule.cpp names each):
//  - leaves, program outputs and update values are materialised; with ScheduleOptions::unfused every node is;
//  - a node with a reduction inside (a heavy op, or an inlined producer that has one) is inlined only into a
//    single consumer that is a Map of the same shape (the epilogue: matmul + bias + relu is one kernel);
//  - any other node (elementwise and movement ops) is inlined into every consumer unless it has several
//    consumers or feeds a heavy op and recomputing it costs more than ScheduleOptions::inline_cost_limit scalar
//    ops (the prologue of a matmul/conv stays inlined while cheap; into a convolution, which reads each element
//    from Cout/groups x KH x KW windows, only up to ScheduleOptions::conv_prologue_cost_limit); a lone Reduce
//    consumer reads each element
//    once, so a node read only by it is inlined whatever it costs (up to the chain limit below): gather's VJP,
//    a select over one_hot as large as table rows x tokens x features, is never stored;
//  - a Map's cost is its body's scalar ops, each call of a math-library function (exp, log, erf, ...) weighing
//    ScheduleOptions::math_call_cost (the cpu plan: a libm call that a register-tiled contraction would recompute
//    once per tile of the other side; issue 37's GELU before charlm's MLP matmuls is stored once there);
//  - a chain of inlined elementwise producers is cut where it costs more than
//    ScheduleOptions::max_inline_chain_cost scalar ops (bounded kernels for long chains of maps);
//  - random values (Op::RandomUniform, an elementwise leaf over its one-element step) are never materialised
//    unless they are a program output (or unfused): every reader regenerates them, so a dropout mask is never
//    stored. They weigh kRandomUniformCost scalar ops in the inlining cost of their readers (10 Philox rounds are
//    some 300 integer ops), so a Map over them (dropout's output, its gradient) that several kernels or a matmul's
//    loop would read is materialised once rather than recomputed there;
//  - binding budget: a node whose expression, with its inlined producers, would read more distinct materialised
//    values than one kernel may bind (input_budget: samplers, or storage buffers less the output) has its inlined
//    input reading the most values materialised, until it reads few enough (split_wide_maps has left no node with
//    more direct inputs than that); so every kernel of one output fits its target, and a sum of T per-step
//    gradient terms becomes several kernels instead of one the device refuses; likewise, where
//    ScheduleOptions::max_guarded_reads is set, for the zero-padding reads (Pad nodes) an expression branches on;
//  - guarded reads as emitted: the emitter writes a heavy op's loop body ScheduleOptions::loop_body_copies times (the
//    fragment tile mode: 4 unrolled steps x row planes; WGSL register tiles: 4 steps x 4 rows or columns), so the
//    guarded reads of its inlined prologue count that often against max_guarded_reads; over it, the inlined input
//    with the most is materialised (through reshapes, permutes and expands to the value they re-index: the
//    transformer's concat of the q/k/v gradients is stored once, and all three in_proj gradients load it; issue 37);
//  - scalar hoisting: a single-element node without a reduction inside whose inputs are all single-element values
//    (its inlined producers included) is materialised when a consumer has more elements and recomputing it costs
//    at least ScheduleOptions::hoist_scalar_min_cost scalar ops: it is computed once per step instead of once per
//    element of that consumer (Adam's bias corrections 1 - beta^t of the step counter); group_multi_output then
//    puts such values into one kernel with the program's other single-element values (the step counter's update,
//    the loss), and their readers load them at a constant address.
// Invariant left: ScheduleState::mat holds exactly the materialised nodes; a node's inlining cost counts the
// scalar ops of its inlined producers, which are recomputed wherever it is read.
#include "schedule/state.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace sg::sched {

namespace {
/// Recomputing one random value (Philox-4x32-10: 10 rounds of two 32x32 -> 64-bit products from 16-bit halves, about
/// 300 integer operations), in the scalar ops of the inlining costs: enough that any Map over it exceeds
/// ScheduleOptions::inline_cost_limit (24), far below max_inline_chain_cost (256).
constexpr double kRandomUniformCost = 32;
/// The convolutions: each reads an input element from many windows (Cout/groups x KH x KW taps).
bool is_conv(Op op) { return op == Op::Conv2d || op == Op::Conv2dGradInput || op == Op::Conv2dGradWeight; }

/// The calls of a math library function (exp, log, log1p, pow, sin, cos, tanh, sigmoid, erf, erfc) in a Map's body,
/// each distinct subexpression counted once.
int math_calls(const SExprPtr& body) {
  std::unordered_set<const SExpr*> seen;
  std::vector<const SExpr*> stack = {body.get()};
  int calls = 0;
  while (!stack.empty()) {
    const SExpr* e = stack.back();
    stack.pop_back();
    if (!e || !seen.insert(e).second) continue;
    switch (e->op) {
      case SOp::Exp: case SOp::Log: case SOp::Log1p: case SOp::Pow: case SOp::Sin: case SOp::Cos: case SOp::Tanh:
      case SOp::Sigmoid: case SOp::Erf: case SOp::Erfc: ++calls; break;
      default: break;
    }
    stack.push_back(e->a.get()), stack.push_back(e->b.get()), stack.push_back(e->c.get());
  }
  return calls;
}
}  // namespace

bool is_heavy(Op op) {
  switch (op) {
    case Op::Reduce:
    case Op::MatMul:
    case Op::Conv2d:
    case Op::Conv2dGradInput:
    case Op::Conv2dGradWeight:
    case Op::MaxPool2d:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2d:
    case Op::AvgPool2dGrad: return true;
    default: return false;
  }
}

void analyse_uses(ScheduleState& st) {
  for (auto& u : st.program.updates) st.update_values.insert(u.value.get());
  for (auto& n : st.plan.order)
    for (auto& i : n->inputs) st.consumers[i.get()].push_back(n.get());
  for (auto& o : st.program.outputs) st.external.insert(o.get());
  for (auto& u : st.program.updates) st.external.insert(u.value.get());
}

void decide_materialisation(ScheduleState& st) {
  const ScheduleOptions& opt = st.opt;
  std::unordered_map<const Node*, double> cost;  // scalar ops to recompute one element when inlined
  std::unordered_map<const Node*, bool> has_reduce;
  std::unordered_set<const Node*> scalar_only;  // inlined single-element nodes reading single-element values only
  // per node: the distinct materialised values its expression reads when it is inlined (its producers inlined too)
  std::unordered_map<const Node*, std::vector<const Node*>> reads;
  auto reads_of = [&](const Node* n) {
    std::vector<const Node*> r;
    for (auto& i : n->inputs) {
      if (st.mat.count(i.get())) r.push_back(i.get());
      else r.insert(r.end(), reads[i.get()].begin(), reads[i.get()].end());
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    return r;
  };
  // per node: the zero-padding reads (padding Pad nodes) of its expression when it is inlined
  std::unordered_map<const Node*, int> guards;
  auto guards_of = [&](const Node* n) {
    int g = pads(*n) ? 1 : 0;
    for (auto& i : n->inputs)
      if (!st.mat.count(i.get())) g += guards[i.get()];
    return g;
  };
  // the guarded reads of x's expression with its inlined producers, counted afresh (`guards` keeps what a node's
  // producers had when it was visited; a later materialisation may have stored some of them since)
  auto inlined_guards = [&](const Node* x) {
    std::unordered_map<const Node*, int> memo;
    std::function<int(const Node*)> go = [&](const Node* y) -> int {
      if (auto it = memo.find(y); it != memo.end()) return it->second;
      int b = pads(*y) ? 1 : 0;
      for (auto& i : y->inputs)
        if (!st.mat.count(i.get())) b += go(i.get());
      return memo[y] = b;
    };
    return go(x);
  };
  const size_t budget = static_cast<size_t>(input_budget(opt));
  const int max_guarded = opt.max_guarded_reads > 0 ? opt.max_guarded_reads : std::numeric_limits<int>::max();
  for (auto& np : st.plan.order) {
    const Node* n = np.get();
    std::vector<const Node*> r = reads_of(n);
    while (r.size() > budget) {  // binding budget: store the inlined input reading the most values
      const Node* widest = nullptr;
      for (auto& i : n->inputs)
        if (!st.mat.count(i.get()) && (!widest || reads[i.get()].size() > reads[widest].size())) widest = i.get();
      if (!widest) break;  // only direct inputs left: split_wide_maps keeps them within the budget
      st.mat.insert(widest);
      r = reads_of(n);
    }
    reads[n] = std::move(r);
    int g = guards_of(n);
    while (g > max_guarded) {  // guarded reads: store the inlined input with the most
      const Node* most = nullptr;
      for (auto& i : n->inputs)
        if (!st.mat.count(i.get()) && guards[i.get()] > 0 && (!most || guards[i.get()] > guards[most])) most = i.get();
      if (!most) break;  // only direct ones left: split_wide_maps keeps them within the budget
      st.mat.insert(most);
      g = guards_of(n);
    }
    if (is_heavy(n->op) && opt.loop_body_copies > 1 && max_guarded < std::numeric_limits<int>::max()) {
      // the emitter writes a heavy op's loop body loop_body_copies times: its prologue's guarded reads count that often
      auto body_guards = [&] {
        int b = 0;
        for (auto& i : n->inputs)
          if (!st.mat.count(i.get())) b += inlined_guards(i.get());
        return b;
      };
      while (body_guards() * opt.loop_body_copies > max_guarded) {
        const Node* most = nullptr;
        int most_guards = 0;
        for (auto& i : n->inputs)
          if (!st.mat.count(i.get()))
            if (const int b = inlined_guards(i.get()); b > most_guards) most = i.get(), most_guards = b;
        if (!most) break;
        // a reshape/permute/expand only re-indexes its input: store that input (the concat itself), so that every
        // other reader of it loads it too instead of recomputing it
        while (!pads(*most) && (most->op == Op::Reshape || most->op == Op::Permute || most->op == Op::Expand) &&
               !st.mat.count(most->inputs[0].get()))
          most = most->inputs[0].get();
        st.mat.insert(most);
      }
      g = (pads(*n) ? 1 : 0) + body_guards();
    }
    guards[n] = g;
    double c = 1;
    bool red = is_heavy(n->op);
    bool scalar = n->numel() == 1;
    if (n->op == Op::Map) c = sexpr_size(n->body) + (opt.math_call_cost - 1) * math_calls(n->body);
    if (n->op == Op::RandomUniform) c = kRandomUniformCost;
    for (auto& i : n->inputs) {
      scalar = scalar && i->numel() == 1;
      if (st.mat.count(i.get())) continue;
      c += cost[i.get()];
      red |= has_reduce[i.get()];
      scalar = scalar && scalar_only.count(i.get());
    }
    cost[n] = c;
    has_reduce[n] = red;
    const auto& cons = st.consumers[n];
    bool m = n->is_leaf() || st.external.count(n) || opt.unfused;
    if (n->op == Op::RandomUniform) {  // regenerated by every reader
      if (m) st.mat.insert(n);
      continue;
    }
    if (!m && !red && scalar) {
      scalar_only.insert(n);
      const bool into_larger = std::any_of(cons.begin(), cons.end(), [](const Node* u) { return u->numel() > 1; });
      m = into_larger && c >= opt.hoist_scalar_min_cost;
    }
    if (!m && red) {
      // a reduction may only be the prologue-free epilogue input of one same-shape elementwise consumer
      bool single = cons.size() == 1 && cons[0]->op == Op::Map && cons[0]->shape == n->shape;
      m = !single;
    } else if (!m) {
      // a lone Reduce consumer reads each element once: inlined there, nothing is recomputed (gather's VJP, a
      // select over one_hot of (table rows x tokens x features), is never stored: it would be that large)
      const bool once = cons.size() == 1 && cons[0]->op == Op::Reduce;
      bool into_heavy = std::any_of(cons.begin(), cons.end(), [](const Node* u) { return is_heavy(u->op); });
      if (!once && (cons.size() > 1 || into_heavy)) m = c > opt.inline_cost_limit;
      // a convolution reads each input element once per output channel and tap, from every invocation whose
      // window covers it: a prologue there is recomputed that often, so one costing more than
      // conv_prologue_cost_limit is stored once instead
      const bool into_conv = std::any_of(cons.begin(), cons.end(), [](const Node* u) { return is_conv(u->op); });
      if (!once && into_conv) m = m || c > opt.conv_prologue_cost_limit;
      m = m || c > opt.max_inline_chain_cost;
    }
    if (m) st.mat.insert(n);
  }
}

}  // namespace sg::sched
