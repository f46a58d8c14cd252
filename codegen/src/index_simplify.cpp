// Range-aware simplification of integer division and modulo in kernel IR (see index_simplify.h).
#include "index_simplify.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

namespace sg {

namespace {

struct Range {
  bool ok = false;
  int64_t lo = 0, hi = 0;
};
constexpr int64_t kLimit = int64_t{1} << 40;  // beyond this the analysis gives up (no overflow in products)

Range known(int64_t lo, int64_t hi) {
  if (lo < -kLimit || hi > kLimit) return {};
  return {true, lo, hi};
}

bool pos_const(const KExprPtr& e) { return e && e->op == KOp::IntConst && e->ivalue > 0; }

class Simplifier {
 public:
  explicit Simplifier(const std::map<std::string, KVarRange>& free_vars) {
    for (auto& [n, r] : free_vars) vars_[n] = known(r.first, r.second);
  }

  void bind_loops(const std::vector<KExprPtr>& roots) {
    std::set<const KExpr*> seen;
    std::function<void(const KExprPtr&)> go = [&](const KExprPtr& e) {
      if (!e || !seen.insert(e.get()).second) return;
      if (e->op == KOp::Reduce)
        for (size_t i = 0; i < e->loop_vars.size(); ++i) hull(e->loop_vars[i], 0, e->extents[i] - 1);
      go(e->a), go(e->b), go(e->c);
    };
    for (auto& r : roots) go(r);
  }

  KExprPtr rewrite(const KExprPtr& e) { return go(e, 0); }

 private:
  // contexts: 0 = none; others narrow the ranges of some nodes (by node, and variables by name) inside an ISelect's
  // taken branch
  struct Context {
    int parent = 0;
    std::map<const KExpr*, Range> nodes;
    std::map<std::string, Range> names;
  };
  std::map<std::string, Range> vars_;
  std::vector<Context> ctx_{Context{}};
  std::map<std::pair<int, const KExpr*>, int> child_ctx_;  // (context, ISelect) -> context of its taken branch
  std::map<std::pair<int, const KExpr*>, KExprPtr> memo_;
  std::map<std::pair<int, const KExpr*>, Range> range_memo_;
  std::vector<KExprPtr> keep_;  // every node whose address a memo holds stays alive

  void hull(const std::string& n, int64_t lo, int64_t hi) {
    auto it = vars_.find(n);
    if (it == vars_.end()) vars_[n] = known(lo, hi);
    else if (it->second.ok) it->second = known(std::min(it->second.lo, lo), std::max(it->second.hi, hi));
  }

  static Range meet(Range a, const Range& b) {
    if (!b.ok) return a;
    if (!a.ok) return b;
    return {true, std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
  }

  Range range(const KExprPtr& e, int c) {
    if (!e || e->type != KType::Int) return {};
    auto key = std::make_pair(c, e.get());
    if (auto it = range_memo_.find(key); it != range_memo_.end()) return it->second;
    Range r = raw_range(e, c);
    for (int x = c; x != 0; x = ctx_[static_cast<size_t>(x)].parent) {  // narrowings of this context and outer ones
      const Context& cx = ctx_[static_cast<size_t>(x)];
      if (auto it = cx.nodes.find(e.get()); it != cx.nodes.end()) r = meet(r, it->second);
      if (e->op == KOp::Var)
        if (auto it = cx.names.find(e->name); it != cx.names.end()) r = meet(r, it->second);
    }
    if (r.ok && r.lo > r.hi) r = {true, r.lo, r.lo};  // an empty range (a branch never taken): any value will do
    keep_.push_back(e);
    return range_memo_[key] = r;
  }

  Range raw_range(const KExprPtr& e, int c) {
    switch (e->op) {
      case KOp::IntConst: return {true, e->ivalue, e->ivalue};
      case KOp::Var: {
        auto it = vars_.find(e->name);
        return it == vars_.end() ? Range{} : it->second;
      }
      case KOp::ILt: case KOp::ILe: case KOp::IEq: case KOp::IGe: case KOp::IAnd: return {true, 0, 1};
      case KOp::ISelect: {
        const Range b = range(e->b, c), d = range(e->c, c);
        if (!b.ok || !d.ok) return {};
        return {true, std::min(b.lo, d.lo), std::max(b.hi, d.hi)};
      }
      default: break;
    }
    if (!e->a || !e->b) return {};
    const Range a = range(e->a, c), b = range(e->b, c);
    if (!a.ok || !b.ok) return {};
    switch (e->op) {
      case KOp::IAdd: return known(a.lo + b.lo, a.hi + b.hi);
      case KOp::ISub: return known(a.lo - b.hi, a.hi - b.lo);
      case KOp::IMul: {
        const int64_t p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        return known(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
      }
      case KOp::IDiv:
        if (!pos_const(e->b) || a.lo < 0) return {};
        return {true, a.lo / e->b->ivalue, a.hi / e->b->ivalue};
      case KOp::IMod:
        if (!pos_const(e->b) || a.lo < 0) return {};
        return a.hi < e->b->ivalue ? a : Range{true, 0, e->b->ivalue - 1};
      case KOp::IMin: return {true, std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      case KOp::IMax: return {true, std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      default: return {};
    }
  }

  bool nonneg(const KExprPtr& e, int c) {
    Range r = range(e, c);
    return r.ok && r.lo >= 0;
  }

  /// The context of ISelect `s`'s taken branch in context c (narrowed by its condition `conds`: the original and the
  /// rewritten one), or c when it narrows nothing.
  int branch_context(const KExprPtr& s, const std::vector<KExprPtr>& conds, int c) {
    auto key = std::make_pair(c, s.get());
    if (auto it = child_ctx_.find(key); it != child_ctx_.end()) return it->second;
    Context n;
    n.parent = c;
    std::function<void(const KExprPtr&)> conj = [&](const KExprPtr& x) {
      if (x->op == KOp::IAnd) return conj(x->a), conj(x->b);
      if (!x->a || !x->b || x->b->op != KOp::IntConst || x->a->type != KType::Int) return;
      const int64_t k = x->b->ivalue;
      Range r;
      switch (x->op) {
        case KOp::IGe: r = {true, k, kLimit}; break;
        case KOp::ILt: r = {true, -kLimit, k - 1}; break;
        case KOp::ILe: r = {true, -kLimit, k}; break;
        case KOp::IEq: r = {true, k, k}; break;
        default: return;
      }
      KExprPtr y = x->a;
      for (;;) {  // y's range, and through y = z + k, z - k, z * k (k > 0) its variable's
        if (y->op == KOp::Var) {
          n.names[y->name] = meet(n.names.count(y->name) ? n.names[y->name] : Range{}, r);
          break;
        }
        n.nodes[y.get()] = meet(n.nodes.count(y.get()) ? n.nodes[y.get()] : Range{}, r);
        keep_.push_back(y);
        if ((y->op == KOp::IAdd || y->op == KOp::ISub) && y->b->op == KOp::IntConst) {
          const int64_t k = y->op == KOp::IAdd ? y->b->ivalue : -y->b->ivalue;
          r = {true, r.lo - k, r.hi - k};
          y = y->a;
        } else if (y->op == KOp::IMul && pos_const(y->b)) {
          const int64_t k = y->b->ivalue;  // z * k in [lo, hi]: z in [ceil(lo / k), floor(hi / k)]
          auto floor_div = [](int64_t p, int64_t q) { return p / q - ((p % q != 0) && (p < 0)); };
          r = {true, -floor_div(-r.lo, k), floor_div(r.hi, k)};
          y = y->a;
        } else {
          break;
        }
      }
    };
    for (auto& cond : conds) conj(cond);
    int id = c;
    if (!n.names.empty() || !n.nodes.empty()) {
      id = static_cast<int>(ctx_.size());
      ctx_.push_back(std::move(n));
    }
    return child_ctx_[key] = id;
  }

  KExprPtr go(const KExprPtr& e, int c) {
    if (!e) return e;
    auto key = std::make_pair(c, e.get());
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    KExprPtr r;
    if (e->op == KOp::ISelect) {
      KExprPtr cond = go(e->a, c);
      // the condition's rewritten nodes narrow too (the same values under other nodes)
      const int tc = branch_context(e, {e->a, cond}, c);
      r = kwith_children(e, cond, go(e->b, tc), go(e->c, c));
    } else {
      r = kwith_children(e, go(e->a, c), go(e->b, c), go(e->c, c));
      if (r->op == KOp::IDiv || r->op == KOp::IMod) r = divmod(r, c);
    }
    keep_.push_back(e);
    keep_.push_back(r);
    return memo_[key] = r;
  }

  /// The terms of a sum (through IAdd and the subtraction of a constant), each with its constant factor (1 when
  /// none; a constant term is 1 times its value).
  static void terms(const KExprPtr& e, std::vector<std::pair<KExprPtr, int64_t>>& out) {
    if (e->op == KOp::IAdd) return terms(e->a, out), terms(e->b, out);
    if (e->op == KOp::ISub && e->b->op == KOp::IntConst) return terms(e->a, out), out.emplace_back(kint(1), -e->b->ivalue), void();
    if (e->op == KOp::IntConst) return out.emplace_back(kint(1), e->ivalue), void();
    if (e->op == KOp::IMul && e->b->op == KOp::IntConst) return out.emplace_back(e->a, e->b->ivalue), void();
    if (e->op == KOp::IMul && e->a->op == KOp::IntConst) return out.emplace_back(e->b, e->a->ivalue), void();
    out.emplace_back(e, 1);
  }
  /// sum of `xs` (terms x * k) plus constant `k0`, the constant last (subtracted when negative).
  static KExprPtr sum(const std::vector<std::pair<KExprPtr, int64_t>>& xs, int64_t k0) {
    KExprPtr r = kint(0);
    for (auto& [x, k] : xs) r = kibin(KOp::IAdd, r, kibin(KOp::IMul, x, kint(k)));
    return k0 < 0 ? kibin(KOp::ISub, r, kint(-k0)) : kibin(KOp::IAdd, r, kint(k0));
  }

  /// IDiv / IMod node `e` (children already rewritten) simplified in context c.
  KExprPtr divmod(const KExprPtr& e, int c) {
    KExprPtr r = divmod_raw(e, c);
    const Range rr = range(r, c);
    if (rr.ok && rr.lo == rr.hi && r->op != KOp::IntConst) return kint(rr.lo);  // one value in this context
    return r;
  }
  KExprPtr divmod_raw(const KExprPtr& e, int c) {
    if (!pos_const(e->b)) return e;
    const int64_t d = e->b->ivalue;
    const KExprPtr& a = e->a;
    const Range ra = range(a, c);
    if (!ra.ok || ra.lo < 0) return e;  // truncating division of a possibly negative value: as it is
    const bool div = e->op == KOp::IDiv;
    if (ra.hi < d) return div ? kint(0) : a;
    if (!div && ra.lo / d == ra.hi / d) return kibin(KOp::ISub, a, kint(ra.lo / d * d));  // one quotient
    if (div && a->op == KOp::IDiv && pos_const(a->b) && nonneg(a->a, c) && a->b->ivalue <= kLimit / d)
      return divmod(kibin(KOp::IDiv, a->a, kint(a->b->ivalue * d)), c);
    if (!div && a->op == KOp::IMod && pos_const(a->b) && a->b->ivalue % d == 0 && nonneg(a->a, c))
      return divmod(kibin(KOp::IMod, a->a, e->b), c);
    if (a->op != KOp::IAdd && !(a->op == KOp::ISub && a->b->op == KOp::IntConst)) return e;
    std::vector<std::pair<KExprPtr, int64_t>> ts, m, rest;
    terms(a, ts);
    int64_t cm = 0, cr = 0;  // the constant terms of m and rest
    for (auto& [x, k] : ts) {
      const Range rx = range(x, c);
      const bool constant = rx.ok && rx.lo == rx.hi;
      const int64_t v = constant ? rx.lo * k : 0;
      if (constant && v % d == 0) cm += v / d;
      else if (constant) cr += v;
      else if (k % d == 0) m.emplace_back(x, k / d);
      else rest.emplace_back(x, k);
    }
    if (m.empty() && cm == 0) return e;
    const KExprPtr rs = sum(rest, cr);
    if (!nonneg(rs, c)) return e;
    KExprPtr q = divmod(kibin(e->op, rs, e->b), c);
    if (!div) return q;
    if (q->op == KOp::IntConst) return sum(m, cm + q->ivalue);
    m.emplace_back(q, 1);
    return sum(m, cm);
  }
};

}  // namespace

std::vector<KExprPtr> ksimplify_index(const std::vector<KExprPtr>& roots, const std::map<std::string, KVarRange>& free_vars) {
  Simplifier s(free_vars);
  s.bind_loops(roots);
  std::vector<KExprPtr> out;
  out.reserve(roots.size());
  for (auto& r : roots) out.push_back(s.rewrite(r));
  return out;
}

}  // namespace sg
