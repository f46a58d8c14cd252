// Kernel IR builders with integer constant folding, cost estimate, printing.
#include "sg/kernel_ir.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "kernel_analysis.h"

namespace sg {

namespace {
KExprPtr mk(KExpr e) { return std::make_shared<const KExpr>(std::move(e)); }
KExpr base(KOp op) {
  KExpr e;
  e.op = op;
  return e;
}
bool is_iconst(const KExprPtr& e) { return e->op == KOp::IntConst; }
}  // namespace

KExprPtr kint(int64_t v) {
  KExpr e = base(KOp::IntConst);
  e.type = KType::Int;
  e.ivalue = v;
  return mk(std::move(e));
}
KExprPtr kfloat(double v) {
  KExpr e = base(KOp::FloatConst);
  e.fvalue = v;
  return mk(std::move(e));
}
KExprPtr kvar(const std::string& name) {
  KExpr e = base(KOp::Var);
  e.type = KType::Int;
  e.name = name;
  return mk(std::move(e));
}
bool kis_int(const KExprPtr& e, int64_t v) { return e->op == KOp::IntConst && e->ivalue == v; }

KExprPtr kmath(SOp op, KExprPtr a, KExprPtr b, KExprPtr c) {
  auto fc = [](const KExprPtr& x) { return !x || x->op == KOp::FloatConst; };
  if (fc(a) && fc(b) && fc(c))
    return kfloat(seval_op(op, a->fvalue, b ? b->fvalue : 0, c ? c->fvalue : 0));
  KExpr e = base(KOp::FMath);
  e.sop = op;
  e.a = std::move(a);
  e.b = std::move(b);
  e.c = std::move(c);
  return mk(std::move(e));
}

KExprPtr kibin(KOp op, KExprPtr a, KExprPtr b) {
  if (is_iconst(a) && is_iconst(b)) {
    int64_t x = a->ivalue, y = b->ivalue;
    switch (op) {
      case KOp::IAdd: return kint(x + y);
      case KOp::ISub: return kint(x - y);
      case KOp::IMul: return kint(x * y);
      case KOp::IDiv: if (y != 0 && x >= 0 && y > 0) return kint(x / y); break;
      case KOp::IMod: if (y > 0 && x >= 0) return kint(x % y); break;
      case KOp::IMin: return kint(std::min(x, y));
      case KOp::IMax: return kint(std::max(x, y));
      case KOp::ILt: return kint(x < y);
      case KOp::ILe: return kint(x <= y);
      case KOp::IEq: return kint(x == y);
      case KOp::IGe: return kint(x >= y);
      case KOp::IAnd: return kint(x && y);
      default: break;
    }
  }
  switch (op) {
    case KOp::IAdd:
      if (kis_int(a, 0)) return b;
      if (kis_int(b, 0)) return a;
      break;
    case KOp::ISub:
      if (kis_int(b, 0)) return a;
      break;
    case KOp::IMul:
      if (kis_int(a, 0) || kis_int(b, 0)) return kint(0);
      if (kis_int(a, 1)) return b;
      if (kis_int(b, 1)) return a;
      break;
    case KOp::IDiv:
      if (kis_int(b, 1)) return a;
      if (kis_int(a, 0)) return kint(0);
      break;
    case KOp::IMod:
      if (kis_int(b, 1)) return kint(0);
      break;
    case KOp::IAnd:
      if (kis_int(a, 1)) return b;
      if (kis_int(b, 1)) return a;
      if (kis_int(a, 0) || kis_int(b, 0)) return kint(0);
      break;
    default: break;
  }
  KExpr e = base(op);
  e.type = KType::Int;
  e.a = std::move(a);
  e.b = std::move(b);
  return mk(std::move(e));
}

KExprPtr kto_float(KExprPtr a) {
  if (is_iconst(a)) return kfloat(static_cast<double>(a->ivalue));
  KExpr e = base(KOp::ToFloat);
  e.a = std::move(a);
  return mk(std::move(e));
}
KExprPtr kto_int(KExprPtr a) {
  KExpr e = base(KOp::FToInt);
  e.type = KType::Int;
  e.a = std::move(a);
  return mk(std::move(e));
}
KExprPtr kselect(KExprPtr cond, KExprPtr a, KExprPtr b) {
  if (is_iconst(cond)) return cond->ivalue ? a : b;
  KExpr e = base(KOp::ISelect);
  e.type = a->type;
  e.a = std::move(cond);
  e.b = std::move(a);
  e.c = std::move(b);
  return mk(std::move(e));
}
KExprPtr kload(int input, KExprPtr flat_index) {
  KExpr e = base(KOp::Load);
  e.input = input;
  e.a = std::move(flat_index);
  return mk(std::move(e));
}
KExprPtr kreduce(ReduceKind kind, std::vector<std::string> vars, std::vector<int64_t> extents, KExprPtr body) {
  // an empty reduction is its initial value as a literal (sum 0, max -inf, min inf, argmax 0, as the CPU
  // reference): a loop that never runs leaves a 0.0 the GPU compiler folds (0 * inf -> 0 in Mesa; the mean of an
  // empty tensor must be NaN), while a literal operand gets the emitters' IEEE zero arithmetic (glsl_math.h)
  if (std::find(extents.begin(), extents.end(), int64_t{0}) != extents.end())
    return kfloat(kind == ReduceKind::Max ? -INFINITY : kind == ReduceKind::Min ? INFINITY : 0.0);
  KExpr e = base(KOp::Reduce);
  e.type = kind == ReduceKind::ArgMax ? KType::Float : KType::Float;
  e.reduce = kind;
  e.loop_vars = std::move(vars);
  e.extents = std::move(extents);
  e.a = std::move(body);
  return mk(std::move(e));
}

KExprPtr krandom_uniform(uint64_t seed, uint32_t stream, KExprPtr index, KExprPtr step) {
  KExpr e = base(KOp::RandomUniform);
  e.seed = seed;
  e.stream = stream;
  e.a = std::move(index);
  e.b = std::move(step);
  return mk(std::move(e));
}

// Every walk below visits each node of the shared DAG once (a memo keyed by node): chains of elementwise layers
// whose bodies read their input twice (softplus, x * sigmoid(x)) make DAGs of N nodes with 2^N root-to-leaf paths,
// and a walk of the tree view took exponential time (a chain of 30 maps did not compile within a minute). The
// values returned are unchanged: tree semantics where the docstring says so, computed by summing memoised children.
namespace {
/// Trip count and the iterations of every level of a reduce's loop nest (outer trips count too).
void nest_counts(const KExpr& e, double& trip, double& levels) {
  trip = 1, levels = 0;
  for (int64_t x : e.extents) {
    trip *= static_cast<double>(x);
    levels += trip;
  }
}
}  // namespace

double kcost(const KExprPtr& root) {
  std::unordered_map<const KExpr*, double> memo;
  std::function<double(const KExprPtr&)> go = [&](const KExprPtr& e) -> double {
    if (!e) return 0;
    if (auto m = memo.find(e.get()); m != memo.end()) return m->second;
    double c = 0;
    if (e->op == KOp::Reduce) {
      double trip = 1, levels = 0;
      nest_counts(*e, trip, levels);
      c = 1 + trip * go(e->a);
    } else {
      c = 1 + go(e->a) + go(e->b) + go(e->c);
    }
    memo.emplace(e.get(), c);
    return c;
  };
  return go(root);
}

double kloop_iterations(const KExprPtr& root) {
  std::unordered_map<const KExpr*, double> memo;
  std::function<double(const KExprPtr&)> go = [&](const KExprPtr& e) -> double {
    if (!e) return 0;
    if (auto m = memo.find(e.get()); m != memo.end()) return m->second;
    double c = 0;
    if (e->op == KOp::Reduce) {
      double trip = 1, levels = 0;
      nest_counts(*e, trip, levels);
      c = levels + trip * go(e->a);
    } else {
      c = go(e->a) + go(e->b) + go(e->c);
    }
    memo.emplace(e.get(), c);
    return c;
  };
  return go(root);
}

namespace {

}  // namespace

double kloop_iterations(const std::vector<KExprPtr>& roots) {
  // Roots are evaluated in order; a reduction met outside any loop is computed once and its value reused,
  // also where a later loop body refers to it (the emitters keep it in a local of the enclosing scope). A
  // reduction inside a loop body that reads none of that loop's variables is computed once, before the loop (the
  // emitters hoist it: var's mean inside its sum of squared deviations), not once per iteration. Only the hoists
  // before a top-level loop are counted so (their locals live in the kernel's scope, reused by every later root);
  // deeper ones are counted per iteration, an overestimate (the budget must not be underestimated: llvmpipe stops
  // long loops silently).
  // `inside` is memoised per node; its memo is valid while `computed` is unchanged, so it is cleared when a
  // reduction is added: O(nodes x reductions).
  int depth = 0;  // loops open around the node `inside` is looking at
  std::unordered_set<const KExpr*> seen, computed;
  std::unordered_map<const KExpr*, double> memo;
  KFreeVars fv;
  std::function<double(const KExprPtr&)> inside = [&](const KExprPtr& e) -> double {  // one loop iteration
    if (!e) return 0;
    if (auto m = memo.find(e.get()); m != memo.end()) return m->second;
    double c = 0;
    if (e->op == KOp::Reduce) {
      if (!computed.count(e.get())) {
        std::vector<KExprPtr> hoisted;
        if (depth == 0)
          kloop_invariant_reductions(e->a, std::set<std::string>(e->loop_vars.begin(), e->loop_vars.end()), fv, hoisted);
        for (const KExprPtr& r : hoisted) {
          if (computed.count(r.get())) continue;
          c += inside(r);
          computed.insert(r.get());
          memo.clear();
        }
        double trip = 1, levels = 0;
        nest_counts(*e, trip, levels);
        ++depth;
        c += levels + trip * inside(e->a);
        --depth;
      }
    } else {
      c = inside(e->a) + inside(e->b) + inside(e->c);
    }
    memo.emplace(e.get(), c);
    return c;
  };
  double total = 0;
  std::function<void(const KExprPtr&)> go = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Reduce) {
      total += inside(e);
      computed.insert(e.get());
      memo.clear();
      return;
    }
    go(e->a), go(e->b), go(e->c);
  };
  for (auto& r : roots) go(r);
  return total;
}

double kcode_size(const std::vector<KExprPtr>& roots) {
  std::unordered_set<const KExpr*> seen;
  double size = 0;
  std::vector<const KExpr*> stack;
  for (auto& r : roots) stack.push_back(r.get());
  while (!stack.empty()) {
    const KExpr* e = stack.back();
    stack.pop_back();
    if (!e || !seen.insert(e).second) continue;
    bool helper = false;
    if (e->op == KOp::FMath) switch (e->sop) {
        case SOp::Exp: case SOp::Log: case SOp::Log1p: case SOp::Pow: case SOp::Sin: case SOp::Cos: case SOp::Tanh:
        case SOp::Sigmoid: case SOp::Erf: case SOp::Erfc: helper = true; break;
        default: break;
      }
    if (e->op == KOp::RandomUniform) helper = true;
    size += helper ? kHelperCallSize : 1;
    stack.push_back(e->a.get()), stack.push_back(e->b.get()), stack.push_back(e->c.get());
  }
  return size;
}

bool kunrollable_sum(const KExprPtr& r) {
  return r && r->op == KOp::Reduce && r->reduce == ReduceKind::Sum && r->extents.back() % 4 == 0 &&
         r->extents.back() >= 8 && !kcontains_reduce(r->a);
}

bool khas_unrollable_sum(const KExprPtr& root) {
  std::unordered_set<const KExpr*> seen;  // a node seen once answered false (a true answer ends the walk)
  std::function<bool(const KExprPtr&)> go = [&](const KExprPtr& e) -> bool {
    if (!e || !seen.insert(e.get()).second) return false;
    if (e->op == KOp::Reduce) return kunrollable_sum(e);  // reductions nested in another are not unrolled
    return go(e->a) || go(e->b) || go(e->c);
  };
  return go(root);
}

namespace {
bool kequal_memo(const KExprPtr& a, const KExprPtr& b, std::set<std::pair<const KExpr*, const KExpr*>>& equal) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (equal.count({a.get(), b.get()})) return true;  // shared subtrees are compared once
  if (a->op != b->op || a->type != b->type) return false;
  switch (a->op) {
    case KOp::IntConst: return a->ivalue == b->ivalue;
    case KOp::FloatConst: return a->fvalue == b->fvalue || (std::isnan(a->fvalue) && std::isnan(b->fvalue));
    case KOp::Var: return a->name == b->name;
    case KOp::FMath:
      if (a->sop != b->sop) return false;
      break;
    case KOp::Load:
      if (a->input != b->input) return false;
      break;
    case KOp::Reduce:
      if (a->reduce != b->reduce || a->loop_vars != b->loop_vars || a->extents != b->extents) return false;
      break;
    case KOp::RandomUniform:
      if (a->seed != b->seed || a->stream != b->stream) return false;
      break;
    default: break;
  }
  if (!kequal_memo(a->a, b->a, equal) || !kequal_memo(a->b, b->b, equal) || !kequal_memo(a->c, b->c, equal))
    return false;
  equal.insert({a.get(), b.get()});
  return true;
}
}  // namespace

bool kequal(const KExprPtr& a, const KExprPtr& b) {
  std::set<std::pair<const KExpr*, const KExpr*>> equal;
  return kequal_memo(a, b, equal);
}

KExprPtr kwith_children(const KExprPtr& e, KExprPtr a, KExprPtr b, KExprPtr c) {
  if (a == e->a && b == e->b && c == e->c) return e;
  KExpr n = *e;
  n.a = std::move(a);
  n.b = std::move(b);
  n.c = std::move(c);
  return std::make_shared<const KExpr>(std::move(n));
}

std::vector<KExprPtr> krewrite(const std::vector<KExprPtr>& roots,
                               const std::function<KExprPtr(const KExprPtr&)>& replace) {
  std::map<const KExpr*, KExprPtr> memo;
  std::function<KExprPtr(const KExprPtr&)> go = [&](const KExprPtr& x) -> KExprPtr {
    if (!x) return x;
    auto m = memo.find(x.get());
    if (m != memo.end()) return m->second;
    KExprPtr r = replace(x);
    if (!r) r = kwith_children(x, go(x->a), go(x->b), go(x->c));
    memo[x.get()] = r;
    return r;
  };
  std::vector<KExprPtr> out;
  for (auto& r : roots) out.push_back(go(r));
  return out;
}

KExprPtr ksubstitute(const KExprPtr& e, const std::map<std::string, KExprPtr>& subs) {
  return krewrite({e}, [&](const KExprPtr& x) -> KExprPtr {
    if (x->op != KOp::Var) return nullptr;
    auto it = subs.find(x->name);
    return it == subs.end() ? x : it->second;
  })[0];
}

KExprPtr kreplace(const KExprPtr& e, const KExpr* target, const KExprPtr& replacement) {
  return krewrite({e}, [&](const KExprPtr& x) { return x.get() == target ? replacement : nullptr; })[0];
}

bool kcontains_reduce(const KExprPtr& root) {
  std::unordered_set<const KExpr*> seen;  // nodes already known to hold no reduction
  std::function<bool(const KExprPtr&)> go = [&](const KExprPtr& e) -> bool {
    if (!e || !seen.insert(e.get()).second) return false;
    return e->op == KOp::Reduce || go(e->a) || go(e->b) || go(e->c);
  };
  return go(root);
}

std::string kexpr_str(const KExprPtr& e) {
  auto s = [](const KExprPtr& x) { return kexpr_str(x); };
  switch (e->op) {
    case KOp::IntConst: return std::to_string(e->ivalue);
    case KOp::FloatConst: return fmt::format("{}f", e->fvalue);
    case KOp::Var: return e->name;
    case KOp::FMath:
      if (sop_arity(e->sop) == 1) return fmt::format("{}({})", sop_name(e->sop), s(e->a));
      if (sop_arity(e->sop) == 2) return fmt::format("{}({}, {})", sop_name(e->sop), s(e->a), s(e->b));
      return fmt::format("where({}, {}, {})", s(e->a), s(e->b), s(e->c));
    case KOp::IAdd: return fmt::format("({} + {})", s(e->a), s(e->b));
    case KOp::ISub: return fmt::format("({} - {})", s(e->a), s(e->b));
    case KOp::IMul: return fmt::format("({} * {})", s(e->a), s(e->b));
    case KOp::IDiv: return fmt::format("({} / {})", s(e->a), s(e->b));
    case KOp::IMod: return fmt::format("({} % {})", s(e->a), s(e->b));
    case KOp::IMin: return fmt::format("min({}, {})", s(e->a), s(e->b));
    case KOp::IMax: return fmt::format("max({}, {})", s(e->a), s(e->b));
    case KOp::ILt: return fmt::format("({} < {})", s(e->a), s(e->b));
    case KOp::ILe: return fmt::format("({} <= {})", s(e->a), s(e->b));
    case KOp::IEq: return fmt::format("({} == {})", s(e->a), s(e->b));
    case KOp::IGe: return fmt::format("({} >= {})", s(e->a), s(e->b));
    case KOp::IAnd: return fmt::format("({} && {})", s(e->a), s(e->b));
    case KOp::ToFloat: return fmt::format("float({})", s(e->a));
    case KOp::FToInt: return fmt::format("int({})", s(e->a));
    case KOp::ISelect: return fmt::format("({} ? {} : {})", s(e->a), s(e->b), s(e->c));
    case KOp::Load: return fmt::format("load{}[{}]", e->input, s(e->a));
    case KOp::RandomUniform:
      return fmt::format("random_uniform[seed {}, stream {}]({}, {})", e->seed, e->stream, s(e->a), s(e->b));
    case KOp::Reduce: {
      std::string loops;
      for (size_t i = 0; i < e->loop_vars.size(); ++i)
        loops += fmt::format("{}{}<{}", i ? "," : "", e->loop_vars[i], e->extents[i]);
      return fmt::format("{}[{}]({})", reduce_name(e->reduce), loops, s(e->a));
    }
  }
  return "?";
}

}  // namespace sg
