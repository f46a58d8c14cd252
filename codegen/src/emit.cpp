// GLSL 4.50 emitter for the kernel IR (fragment and compute stages).
#include "sg/emit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

namespace sg {

namespace {

std::string flit(double v) {
  if (std::isnan(v)) return "uintBitsToFloat(0x7fc00000u)";
  if (std::isinf(v)) return v > 0 ? "uintBitsToFloat(0x7f800000u)" : "uintBitsToFloat(0xff800000u)";
  float f = static_cast<float>(v);
  if (std::isinf(f)) return f > 0 ? "uintBitsToFloat(0x7f800000u)" : "uintBitsToFloat(0xff800000u)";
  std::string s = fmt::format("{:.9g}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

/// Emits kernel IR as GLSL. Besides plain scalar code it can vectorise one integer variable over 4 consecutive
/// values (the output's last coordinate across the 4 elements of a texel: "lane mode"; or the innermost loop
/// variable of a sum reduction stepped by 4: "reduce mode"). Values depending on that variable become vec4;
/// a load whose index is var + (multiple of 4) reads one whole texel instead of 4 scalars.
class Emitter {
 public:
  struct Code {
    std::string s;
    bool vec = false;
  };

  Emitter(const Plan& plan, const Kernel& k) : plan_(plan), k_(k) {
    for (auto& e : k.exprs) count_refs(e);
  }

  /// Emits statements for `e` into body_ at the current indentation; returns a GLSL expression.
  Code emit(const KExprPtr& e) {
    bool gathering = !subst_.empty();
    bool var_dep = !vvar_.empty() && varies(e);
    if (!(gathering && var_dep)) {
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        auto f = it->find(e.get());
        if (f != it->end()) return f->second;
      }
    }
    Code c = emit_raw(e);
    bool trivial = e->op == KOp::IntConst || e->op == KOp::FloatConst || e->op == KOp::Var;
    if (!trivial && refs_[e.get()] > 1 && !(gathering && var_dep)) {
      std::string name = fmt::format("{}{}", e->type == KType::Int ? (is_bool(e) ? "c" : "j") : "v", temp_++);
      line(fmt::format("{} {} = {};", type_name(e, c.vec), name, c.s));
      c.s = name;
      scopes_.back()[e.get()] = c;
    }
    return c;
  }

  void line(const std::string& s) { body_ += std::string(indent_ * 2, ' ') + s + "\n"; }

  /// Lane mode: vectorise output coordinate `var` (whose lane-0 value is `base`, a multiple of 4).
  void set_vector_var(const std::string& var, const std::string& base) {
    vvar_ = var;
    vbase_ = base;
    varies_.clear();
  }
  /// True when some load of `e` reads 4 consecutive elements along `var` (worth vectorising).
  bool has_unit_load(const KExprPtr& e, const std::string& var) {
    std::string saved = vvar_;
    vvar_ = var;
    varies_.clear();
    bool r = find_unit_load(e);
    vvar_ = saved;
    varies_.clear();
    return r;
  }
  /// The outermost sum reduction whose innermost loop variable can be vectorised (or nullptr).
  const KExpr* pick_vector_reduce(const KExprPtr& e) {
    if (!e) return nullptr;
    if (e->op == KOp::Reduce) {
      if (e->reduce == ReduceKind::Sum && e->extents.back() % 4 == 0 && !kcontains_reduce(e->a) &&
          has_unit_load(e->a, e->loop_vars.back()))
        return e.get();
      return nullptr;  // do not look inside other reductions
    }
    for (auto* x : {&e->a, &e->b, &e->c})
      if (auto* r = pick_vector_reduce(*x)) return r;
    return nullptr;
  }
  void set_vector_reduce(const KExpr* r) { vreduce_ = r; }
  /// Reductions whose innermost loop steps by 4 (their body already sums the 4 iterations v, v+1, v+2, v+3):
  /// the loop variable is then a multiple of 4, which lets loads of v + d share one texel fetch.
  void set_step4_reduces(std::set<const KExpr*> r) { step4_ = std::move(r); }

  std::string body_;
  int indent_ = 2;
  bool uses_pow_ = false;
  std::set<std::string> texel_loads_;  // inputs read as whole texels

 private:
  const Plan& plan_;
  const Kernel& k_;
  std::unordered_map<const KExpr*, int> refs_;
  std::vector<std::unordered_map<const KExpr*, Code>> scopes_{1};
  int temp_ = 0;
  std::string vvar_, vbase_;                       // vectorised variable and its lane-0 value
  std::map<std::string, std::string> subst_;       // scalar gather: variable -> replacement
  std::unordered_map<const KExpr*, bool> varies_;  // depends on vvar_
  const KExpr* vreduce_ = nullptr;
  std::set<const KExpr*> step4_;
  std::set<std::string> aligned_vars_;                         // integer variables known to be multiples of 4
  std::vector<std::map<std::string, std::string>> texels_{1};  // per scope: "input|texel index" -> vec4 local

  /// Integer variables `e` reads that it does not bind itself (a Reduce binds its loop variables).
  const std::set<std::string>& free_vars(const KExprPtr& e) {
    auto it = free_vars_.find(e.get());
    if (it != free_vars_.end()) return it->second;
    std::set<std::string> s;
    if (e->op == KOp::Var) s.insert(e->name);
    for (auto* x : {&e->a, &e->b, &e->c})
      if (*x) {
        auto& f = free_vars(*x);
        s.insert(f.begin(), f.end());
      }
    if (e->op == KOp::Reduce)
      for (auto& v : e->loop_vars) s.erase(v);
    return free_vars_[e.get()] = std::move(s);
  }
  /// Reductions inside `e` that read none of the loop variables `bound` (those of the loop being opened and of
  /// any reduction between it and them), outermost first; each once.
  void collect_invariant(const KExprPtr& e, std::set<std::string> bound, std::vector<KExprPtr>& out) {
    if (!e) return;
    if (e->op == KOp::Reduce) {
      const auto& fv = free_vars(e);
      bool invariant = std::none_of(fv.begin(), fv.end(), [&](const std::string& v) { return bound.count(v) > 0; });
      if (invariant) {
        if (std::none_of(out.begin(), out.end(), [&](const KExprPtr& x) { return x.get() == e.get(); })) out.push_back(e);
        return;
      }
      bound.insert(e->loop_vars.begin(), e->loop_vars.end());
      collect_invariant(e->a, bound, out);
      return;
    }
    collect_invariant(e->a, bound, out);
    collect_invariant(e->b, bound, out);
    collect_invariant(e->c, bound, out);
  }
  std::unordered_map<const KExpr*, std::set<std::string>> free_vars_;

  void count_refs(const KExprPtr& e) {
    if (!e) return;
    if (refs_[e.get()]++ > 0) return;
    count_refs(e->a), count_refs(e->b), count_refs(e->c);
  }

  bool varies(const KExprPtr& e) {
    if (!e || vvar_.empty()) return false;
    auto it = varies_.find(e.get());
    if (it != varies_.end()) return it->second;
    bool v = (e->op == KOp::Var && e->name == vvar_) || varies(e->a) || varies(e->b) || varies(e->c);
    varies_[e.get()] = v;
    return v;
  }

  struct Lin {
    bool ok = false;
    int64_t coeff = 0;     // of the vectorised variable
    bool aligned = false;  // the rest is a multiple of 4
  };
  Lin linear(const KExprPtr& e) {
    if (!varies(e)) return {true, 0, e->op == KOp::IntConst && e->ivalue % 4 == 0};
    switch (e->op) {
      case KOp::Var: return {true, 1, true};
      case KOp::IAdd:
      case KOp::ISub: {
        Lin a = linear(e->a), b = linear(e->b);
        if (!a.ok || !b.ok) return {};
        return {true, e->op == KOp::IAdd ? a.coeff + b.coeff : a.coeff - b.coeff, a.aligned && b.aligned};
      }
      case KOp::IMul: {
        const KExprPtr& k = e->a->op == KOp::IntConst ? e->a : e->b;
        const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
        if (k->op != KOp::IntConst) return {};
        Lin a = linear(x);
        if (!a.ok) return {};
        return {true, a.coeff * k->ivalue, a.aligned || k->ivalue % 4 == 0};
      }
      default: return {};
    }
  }
  // Lin for terms that do not vary: aligned only if provably a multiple of 4
  Lin linear_rest(const KExprPtr& e) {
    if (varies(e)) return linear(e);
    switch (e->op) {
      case KOp::IntConst: return {true, 0, e->ivalue % 4 == 0};
      case KOp::IAdd:
      case KOp::ISub: {
        Lin a = linear_rest(e->a), b = linear_rest(e->b);
        return {a.ok && b.ok, 0, a.aligned && b.aligned};
      }
      case KOp::IMul: {
        Lin a = linear_rest(e->a), b = linear_rest(e->b);
        bool k4 = (e->a->op == KOp::IntConst && e->a->ivalue % 4 == 0) ||
                  (e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0);
        return {true, 0, k4 || a.aligned || b.aligned};
      }
      default: return {true, 0, false};
    }
  }
  Lin analyse_index(const KExprPtr& e) {
    // split into varying part (linear) and invariant part (alignment)
    if (!varies(e)) return {true, 0, false};
    if (e->op == KOp::Var) return {true, 1, true};
    if (e->op == KOp::IAdd || e->op == KOp::ISub) {
      Lin a = analyse_index(e->a), b = analyse_index(e->b);
      if (!varies(e->a)) a = linear_rest(e->a);
      if (!varies(e->b)) b = linear_rest(e->b);
      if (!a.ok || !b.ok) return {};
      return {true, e->op == KOp::IAdd ? a.coeff + b.coeff : a.coeff - b.coeff, a.aligned && b.aligned};
    }
    if (e->op == KOp::IMul) {
      const KExprPtr& k = e->a->op == KOp::IntConst ? e->a : e->b;
      const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
      if (k->op != KOp::IntConst) return {};
      Lin a = analyse_index(x);
      if (!a.ok) return {};
      return {true, a.coeff * k->ivalue, a.aligned || k->ivalue % 4 == 0};
    }
    return {};
  }

  bool find_unit_load(const KExprPtr& e) {
    if (!e) return false;
    if (e->op == KOp::Load && varies(e->a)) {
      Lin l = analyse_index(e->a);
      if (l.ok && l.coeff == 1 && l.aligned) return true;
    }
    return find_unit_load(e->a) || find_unit_load(e->b) || find_unit_load(e->c);
  }

  static bool is_bool(const KExprPtr& e) {
    switch (e->op) {
      case KOp::ILt:
      case KOp::ILe:
      case KOp::IEq:
      case KOp::IGe:
      case KOp::IAnd: return true;
      default: return false;
    }
  }
  static std::string type_name(const KExprPtr& e, bool vec) {
    if (is_bool(e)) return vec ? "bvec4" : "bool";
    if (e->type == KType::Int) return vec ? "ivec4" : "int";
    return vec ? "vec4" : "float";
  }
  static std::string fvec(const Code& c) { return c.vec ? c.s : fmt::format("vec4({})", c.s); }
  static std::string ivec(const Code& c) { return c.vec ? c.s : fmt::format("ivec4({})", c.s); }

  /// Emits `e` as scalar code with the vectorised variable replaced by base + lane.
  std::string emit_lane(const KExprPtr& e, int lane) {
    auto saved = subst_;
    subst_[vvar_] = lane ? fmt::format("({} + {})", vbase_, lane) : vbase_;
    std::string saved_var = vvar_;
    Code c = emit(e);
    subst_ = saved;
    vvar_ = saved_var;
    return c.s;
  }

  Code emit_raw(const KExprPtr& e) {
    auto E = [&](const KExprPtr& x) { return emit(x); };
    auto S = [](std::string s) { return Code{std::move(s), false}; };
    switch (e->op) {
      case KOp::IntConst: return S(std::to_string(e->ivalue));
      case KOp::FloatConst: return S(flit(e->fvalue));
      case KOp::Var: {
        auto it = subst_.find(e->name);
        if (it != subst_.end()) return S(it->second);
        if (e->name == vvar_) return {fmt::format("(ivec4({}) + ivec4(0, 1, 2, 3))", vbase_), true};
        return S(e->name);
      }
      default: break;
    }
    if (e->op == KOp::Load) return emit_load(e);
    if (e->op == KOp::FMath) return emit_math(e);
    if (e->op == KOp::Reduce) return emit_reduce(e);
    Code a = E(e->a);
    Code b = e->b ? E(e->b) : Code{};
    bool v = a.vec || b.vec;
    auto bin = [&](const char* op) {
      return Code{fmt::format("({} {} {})", a.s, op, b.s), v};
    };
    auto cmp = [&](const char* op, const char* fn) {
      if (!v) return bin(op);
      return Code{fmt::format("{}({}, {})", fn, ivec(a), ivec(b)), true};
    };
    switch (e->op) {
      case KOp::IAdd: return bin("+");
      case KOp::ISub: return bin("-");
      case KOp::IMul: return bin("*");
      case KOp::IDiv: return bin("/");
      case KOp::IMod: return bin("%");
      case KOp::IMin: return {fmt::format("min({}, {})", v ? ivec(a) : a.s, v ? ivec(b) : b.s), v};
      case KOp::IMax: return {fmt::format("max({}, {})", v ? ivec(a) : a.s, v ? ivec(b) : b.s), v};
      case KOp::ILt: return cmp("<", "lessThan");
      case KOp::ILe: return cmp("<=", "lessThanEqual");
      case KOp::IEq: return cmp("==", "equal");
      case KOp::IGe: return cmp(">=", "greaterThanEqual");
      case KOp::IAnd:
        if (!v) return bin("&&");
        return {fmt::format("notEqual(ivec4({}) * ivec4({}), ivec4(0))", a.s, b.s), true};
      case KOp::ToFloat: return {fmt::format("{}({})", a.vec ? "vec4" : "float", a.s), a.vec};
      case KOp::FToInt: return {fmt::format("{}({})", a.vec ? "ivec4" : "int", a.s), a.vec};
      case KOp::ISelect: {
        // scalar: only the chosen branch is evaluated; vector: both, then a per-lane select
        Code t = E(e->b), f = E(e->c);
        if (!(a.vec || t.vec || f.vec)) return S(fmt::format("({} ? {} : {})", a.s, t.s, f.s));
        std::string cond = a.vec ? a.s : fmt::format("bvec4({})", a.s);
        return {fmt::format("mix({}, {}, {})", fvec(f), fvec(t), cond), true};
      }
      default: break;
    }
    return S("0.0");
  }

  /// Splits an index into (base, constant offset) over its top-level additions.
  static std::pair<KExprPtr, int64_t> split_offset(const KExprPtr& e) {
    if (e->op == KOp::IntConst) return {nullptr, e->ivalue};
    if (e->op == KOp::IAdd) {
      auto [ba, oa] = split_offset(e->a);
      auto [bb, ob] = split_offset(e->b);
      KExprPtr base = !ba ? bb : !bb ? ba : kibin(KOp::IAdd, ba, bb);
      return {base, oa + ob};
    }
    return {e, 0};
  }
  /// True when the (scalar) value of `e` is provably a multiple of 4.
  bool aligned(const KExprPtr& e) const {
    if (!e) return true;
    switch (e->op) {
      case KOp::IntConst: return e->ivalue % 4 == 0;
      case KOp::Var: return subst_.count(e->name) == 0 && e->name != vvar_ && aligned_vars_.count(e->name) > 0;
      case KOp::IAdd:
      case KOp::ISub: return aligned(e->a) && aligned(e->b);
      case KOp::IMul:
        return (e->a->op == KOp::IntConst && e->a->ivalue % 4 == 0) || (e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0) ||
               aligned(e->a) || aligned(e->b);
      default: return false;
    }
  }
  /// A scalar load. When the index is (multiple of 4) + constant, the texel is fetched once per scope and
  /// shared by the loads of its 4 elements (an unrolled loop reads v, v+1, v+2, v+3 from one texel).
  Code scalar_load(const KExprPtr& e, const std::string& name) {
    auto [base, off] = split_offset(e->a);
    if (base && aligned(base)) {
      int64_t comp = ((off % 4) + 4) % 4;
      KExprPtr tb = off - comp == 0 ? base : kibin(KOp::IAdd, base, kint(off - comp));
      std::string idx = emit(tb).s;
      std::string key = name + "|" + idx;
      for (auto it = texels_.rbegin(); it != texels_.rend(); ++it)
        if (auto f = it->find(key); f != it->end()) return {fmt::format("{}[{}]", f->second, comp), false};
      std::string var = fmt::format("tx{}", temp_++);
      texel_loads_.insert(name);
      line(fmt::format("vec4 {} = load4_{}({});", var, name, idx));
      texels_.back()[key] = var;
      return {fmt::format("{}[{}]", var, comp), false};
    }
    return {fmt::format("load_{}({})", name, emit(e->a).s), false};
  }

  Code emit_load(const KExprPtr& e) {
    const std::string& name = plan_.values[k_.inputs[e->input]].name;
    if (!subst_.empty() || !varies(e->a)) return scalar_load(e, name);
    Lin l = analyse_index(e->a);
    if (l.ok && l.coeff == 1 && l.aligned) {
      texel_loads_.insert(name);
      return {fmt::format("load4_{}({})", name, emit_lane(e->a, 0)), true};
    }
    std::string g = "vec4(";
    for (int lane = 0; lane < 4; ++lane) g += fmt::format("{}{}", lane ? ", " : "", emit_lane(e, lane));
    return {g + ")", true};
  }

  Code emit_math(const KExprPtr& e) {
    Code A = emit(e->a);
    Code B = e->b ? emit(e->b) : Code{};
    Code C = e->c ? emit(e->c) : Code{};
    bool v = A.vec || B.vec || C.vec;
    std::string a = A.s, b = B.s;
    auto R = [&](std::string s) { return Code{std::move(s), v}; };
    auto both = [&](const char* fn) {  // functions that need matching operand types
      return R(v ? fmt::format("{}({}, {})", fn, fvec(A), fvec(B)) : fmt::format("{}({}, {})", fn, a, b));
    };
    auto cmp = [&](const char* op, const char* fn) {
      return R(v ? fmt::format("vec4({}({}, {}))", fn, fvec(A), fvec(B)) : fmt::format("float({} {} {})", a, op, b));
    };
    switch (e->sop) {
      case SOp::Neg: return R(fmt::format("(-{})", a));
      case SOp::Abs: return R(fmt::format("abs({})", a));
      case SOp::Exp: return R(fmt::format("exp({})", a));
      case SOp::Log: return R(fmt::format("log({})", a));
      case SOp::Sqrt: return R(fmt::format("sqrt({})", a));
      case SOp::Rsqrt: return R(fmt::format("inversesqrt({})", a));
      case SOp::Sin: return R(fmt::format("sin({})", a));
      case SOp::Cos: return R(fmt::format("cos({})", a));
      case SOp::Tanh: return R(fmt::format("tanh(clamp({}, -15.0, 15.0))", a));  // avoids exp overflow -> NaN
      case SOp::Sigmoid: return R(fmt::format("(1.0 / (1.0 + exp(-{})))", a));
      case SOp::Relu: return R(fmt::format("max({}, 0.0)", a));
      case SOp::Sign: return R(fmt::format("sign({})", a));
      case SOp::Floor: return R(fmt::format("floor({})", a));
      case SOp::Round: return R(fmt::format("roundEven({})", a));
      case SOp::Recip: return R(fmt::format("(1.0 / {})", a));
      case SOp::Add: return R(fmt::format("({} + {})", a, b));
      case SOp::Sub: return R(fmt::format("({} - {})", a, b));
      case SOp::Mul: return R(fmt::format("({} * {})", a, b));
      case SOp::Div: return R(fmt::format("({} / {})", a, b));
      case SOp::Pow: uses_pow_ = true; return both("sg_pow");
      case SOp::Max: return R(fmt::format("max({}, {})", A.vec || !v ? a : fvec(A), b));
      case SOp::Min: return R(fmt::format("min({}, {})", A.vec || !v ? a : fvec(A), b));
      case SOp::Lt: return cmp("<", "lessThan");
      case SOp::Le: return cmp("<=", "lessThanEqual");
      case SOp::Gt: return cmp(">", "greaterThan");
      case SOp::Ge: return cmp(">=", "greaterThanEqual");
      case SOp::Eq: return cmp("==", "equal");
      case SOp::Ne: return cmp("!=", "notEqual");
      case SOp::Select:
        if (!v) return R(fmt::format("({} != 0.0 ? {} : {})", a, b, C.s));
        return R(fmt::format("mix({}, {}, notEqual({}, vec4(0.0)))", fvec(C), fvec(B), fvec(A)));
      default: break;
    }
    return R("0.0");
  }

  Code emit_reduce(const KExprPtr& e) {
    auto g = fused_.find(e.get());
    if (g == fused_.end()) return emit_reduces({e}).front();
    // one loop nest for the whole group of sibling reductions; every member's result is known from here on
    std::vector<KExprPtr> members = g->second;
    std::vector<Code> codes = emit_reduces(members);
    Code mine;
    for (size_t i = 0; i < members.size(); ++i) {
      scopes_.back()[members[i].get()] = codes[i];
      fused_.erase(members[i].get());
      if (members[i].get() == e.get()) mine = codes[i];
    }
    return mine;
  }

  /// Emits reductions that share one loop nest (same loop variables and extents; one member unless sibling
  /// loops are fused) as one set of loops with one accumulator each; returns each member's result.
  std::vector<Code> emit_reduces(const std::vector<KExprPtr>& rs) {
    const KExprPtr& e0 = rs.front();
    const bool vreduce = rs.size() == 1 && e0.get() == vreduce_;
    const bool unrolled = step4_.count(e0.get()) > 0;
    std::string saved_var = vvar_, saved_base = vbase_;
    if (vreduce) set_vector_var(e0->loop_vars.back(), e0->loop_vars.back());
    // loop-invariant reductions inside the bodies (e.g. a softmax's sum of exps read in a loss loop) are computed
    // once, before the loop, instead of once per iteration
    std::vector<KExprPtr> invariant;
    for (auto& e : rs) collect_invariant(e->a, std::set<std::string>(e->loop_vars.begin(), e->loop_vars.end()), invariant);
    for (auto& r : invariant) {
      Code c = emit(r);
      scopes_.back()[r.get()] = c;
    }
    std::string loops;
    for (size_t i = 0; i < e0->loop_vars.size(); ++i)
      loops += fmt::format("{}{}<{}", i ? ", " : "", e0->loop_vars[i], e0->extents[i]);
    struct Acc {
      int id;
      std::string name, ty;
      bool v;  // lane mode: per-lane accumulators
    };
    std::vector<Acc> accs;
    for (auto& e : rs) {
      Acc a;
      a.id = temp_++;
      a.name = fmt::format("acc{}", a.id);
      a.v = !vreduce && varies(e->a);
      a.ty = a.v || vreduce ? "vec4" : "float";
      accs.push_back(a);
    }
    std::string what;
    for (size_t i = 0; i < rs.size(); ++i) what += fmt::format("{}{}", i ? ", " : "", reduce_name(rs[i]->reduce));
    line(fmt::format("// {} over {}{}{}", what, loops,
                     vreduce ? " (4 at a time)"
                     : unrolled ? (vvar_ == "elem" ? " (unrolled by 4)" : " (unrolled by 4: one texel serves 4 iterations)")
                                : "",
                     rs.size() > 1 ? fmt::format(" -- {} reductions in one loop (register tile: loads shared)", rs.size())
                                   : std::string()));
    for (size_t i = 0; i < rs.size(); ++i) {
      const Acc& a = accs[i];
      ReduceKind k = rs[i]->reduce;
      std::string init = k == ReduceKind::Sum ? "0.0" : k == ReduceKind::Min ? flit(INFINITY) : flit(-INFINITY);
      if (k == ReduceKind::ArgMax) {
        line(fmt::format("{0} {1} = {0}(0.0);", a.ty, a.name));
        line(fmt::format("{0} best{1} = {0}({2});", a.ty, a.id, flit(-INFINITY)));
        line(fmt::format("int it{} = 0;", a.id));
      } else {
        line(fmt::format("{0} {1} = {0}({2});", a.ty, a.name, init));
      }
    }
    for (size_t i = 0; i < e0->loop_vars.size(); ++i) {
      bool step4 = (vreduce || unrolled) && i + 1 == e0->loop_vars.size();
      if (unrolled && step4) aligned_vars_.insert(e0->loop_vars[i]);
      line(fmt::format("for (int {0} = 0; {0} < {1}; {0} += {2}) {{", e0->loop_vars[i], e0->extents[i], step4 ? 4 : 1));
      ++indent_;
    }
    scopes_.emplace_back();
    texels_.emplace_back();
    for (size_t i = 0; i < rs.size(); ++i) {
      const Acc& a = accs[i];
      Code body = emit(rs[i]->a);
      std::string x = (a.v || vreduce) ? fvec(body) : body.s;
      switch (rs[i]->reduce) {
        case ReduceKind::Sum: line(fmt::format("{} += {};", a.name, x)); break;
        case ReduceKind::Max: line(fmt::format("{0} = max({0}, {1});", a.name, x)); break;
        case ReduceKind::Min: line(fmt::format("{0} = min({0}, {1});", a.name, x)); break;
        case ReduceKind::ArgMax:
          line(fmt::format("{} x{} = {};", a.ty, a.id, x));
          if (a.v) {
            line(fmt::format("bvec4 better{0} = bvec4(ivec4(greaterThan(x{0}, best{0})) + ivec4(it{0} == 0));", a.id));
            line(fmt::format("best{0} = mix(best{0}, x{0}, better{0}); {1} = mix({1}, vec4(float(it{0})), better{0});",
                             a.id, a.name));
          } else {
            line(fmt::format("if (it{0} == 0 || x{0} > best{0}) {{ best{0} = x{0}; {1} = float(it{0}); }}", a.id, a.name));
          }
          line(fmt::format("++it{};", a.id));
          break;
      }
    }
    scopes_.pop_back();
    texels_.pop_back();
    if (unrolled) aligned_vars_.erase(e0->loop_vars.back());
    for (size_t i = 0; i < e0->loop_vars.size(); ++i) {
      --indent_;
      line("}");
    }
    std::vector<Code> out;
    if (vreduce) {
      vvar_ = saved_var;
      vbase_ = saved_base;
      varies_.clear();
      out.push_back({fmt::format("dot({}, vec4(1.0))", accs[0].name), false});
      return out;
    }
    for (auto& a : accs) out.push_back({a.name, a.v});
    return out;
  }

 public:
  /// Sibling loop fusion: top-level reductions of `roots` (not inside another loop) with the same loop variables,
  /// extents and unrolling, none containing another, are emitted as one loop nest with one accumulator each.
  /// A kernel computing several rows of a matmul per fragment (row planes) then loads each texel of the shared
  /// operand once per loop step for all rows: a register tile.
  void fuse_sibling_loops(const std::vector<KExprPtr>& roots) {
    std::vector<KExprPtr> tops;
    std::set<const KExpr*> seen;
    std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
      if (!e || !seen.insert(e.get()).second) return;
      if (e->op == KOp::Reduce) {
        if (e.get() != vreduce_) tops.push_back(e);
        return;
      }
      walk(e->a), walk(e->b), walk(e->c);
    };
    for (auto& r : roots) walk(r);
    auto contains = [](const KExprPtr& hay, const KExpr* needle) {
      std::set<const KExpr*> vis;
      std::function<bool(const KExprPtr&)> f = [&](const KExprPtr& x) -> bool {
        if (!x || !vis.insert(x.get()).second) return false;
        return x.get() == needle || f(x->a) || f(x->b) || f(x->c);
      };
      return f(hay->a);
    };
    std::vector<bool> used(tops.size(), false);
    for (size_t i = 0; i < tops.size(); ++i) {
      if (used[i]) continue;
      std::vector<KExprPtr> group{tops[i]};
      for (size_t j = i + 1; j < tops.size(); ++j) {
        if (used[j] || tops[j]->loop_vars != tops[i]->loop_vars || tops[j]->extents != tops[i]->extents ||
            step4_.count(tops[j].get()) != step4_.count(tops[i].get()))
          continue;
        bool independent = true;
        for (auto& m : group) independent = independent && !contains(m, tops[j].get()) && !contains(tops[j], m.get());
        if (!independent) continue;
        group.push_back(tops[j]);
        used[j] = true;
      }
      if (group.size() > 1)
        for (auto& m : group) fused_[m.get()] = group;
    }
  }

 private:
  std::unordered_map<const KExpr*, std::vector<KExprPtr>> fused_;
};

std::string header(const Plan& plan, const Kernel& k, ShaderStage stage) {
  std::string s = "#version 450\n";
  s += fmt::format("// shadergrad kernel {} ({} stage)\n", k.name, stage_name(stage));
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const Value& out = plan.values[k.outputs[j]];
    const int ni = plan.node_index(out.node.get());
    std::string label = out.node->label();
    if (label.size() > 40) label = label.substr(0, 40) + "...";
    s += fmt::format("// output {}{}{}: {}{} ({} elements{}{})\n",
                     k.outputs.size() > 1 ? fmt::format("{} ", j) : std::string(), out.name,
                     ni >= 0 ? fmt::format(" = n{} {}", ni, label) : std::string(),
                     shape_str(out.node->shape),
                     out.transposed ? ", stored transposed (rows are read in loops)"
                     : out.col_planes > 1
                         ? fmt::format(", in {0}x{1} planes: element (r, c) in plane (r % {0}) * {1} + (c / 4) % {1}; per plane",
                                       out.row_planes(), out.col_planes)
                     : out.planes > 1 ? fmt::format(", in {0} row planes: row r in plane r % {0}; per plane", out.planes)
                                      : std::string(),
                     out.layout.numel,
                     stage == ShaderStage::Fragment
                         ? fmt::format(", RGBA32F texture {}x{}", out.layout.width, out.layout.height)
                         : std::string(),
                     k.blocks() > 1 ? fmt::format(", block {}", k.block_of(j)) : std::string());
  }
  if (k.blocks() > 1)
    s += stage == ShaderStage::Fragment
             ? fmt::format("// union-domain kernel: {} blocks of different domains drawn over {}x{} texels; each block "
                           "computes the fragments inside its own texture layout and writes 0 elsewhere\n",
                           k.blocks(), k.extent.width, k.extent.height)
             : fmt::format("// union-domain kernel: {} blocks of different domains; each block computes the "
                           "invocations below its own element count\n",
                           k.blocks());
  s += k.notes + "// graph nodes computed here (node, op, shape, user source):\n" + k.comment;
  return s;
}

/// Tile mode rewrite: every top-level unrollable sum reduction's innermost loop sums 4 iterations per step
/// (v, v+1, v+2, v+3; the emitter steps v by 4). Shared subtrees stay shared across `roots`.
std::vector<KExprPtr> unroll_reductions(const std::vector<KExprPtr>& roots, std::set<const KExpr*>& unrolled) {
  // v -> v + d with one memo for all reductions: a subtree shared by several of them (the B operand's load in
  // the row-plane copies of a matmul) stays shared after unrolling, so the emitter loads it once per step
  std::map<std::tuple<const KExpr*, std::string, int>, KExprPtr> memo;
  std::function<KExprPtr(const KExprPtr&, const std::string&, int)> shift = [&](const KExprPtr& e, const std::string& v,
                                                                                int d) -> KExprPtr {
    if (!e) return e;
    auto key = std::make_tuple(e.get(), v, d);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    KExprPtr r = e->op == KOp::Var ? (e->name == v ? kibin(KOp::IAdd, e, kint(d)) : e)
                                   : kwith_children(e, shift(e->a, v, d), shift(e->b, v, d), shift(e->c, v, d));
    return memo[key] = r;  // (unrolled bodies contain no reductions, so v is never rebound below)
  };
  return krewrite(roots, [&](const KExprPtr& e) -> KExprPtr {
    if (e->op != KOp::Reduce) return nullptr;
    if (!kunrollable_sum(e)) return e;  // other reductions are left alone (nested loops inside are not unrolled)
    const std::string& v = e->loop_vars.back();
    std::vector<KExprPtr> t;
    for (int d = 0; d < 4; ++d) t.push_back(d == 0 ? e->a : shift(e->a, v, d));
    KExprPtr r = kreduce(ReduceKind::Sum, e->loop_vars, e->extents,
                         kmath(SOp::Add, kmath(SOp::Add, t[0], t[1]), kmath(SOp::Add, t[2], t[3])));
    unrolled.insert(r.get());
    return r;
  });
}

/// `text` with two more spaces at the start of every line.
std::string indent2(const std::string& text) {
  std::string r;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size() - 1;
    r += "  " + text.substr(pos, e + 1 - pos);
    pos = e + 1;
  }
  return r;
}

/// One domain block of a kernel emitted: main()'s statements computing and writing its outputs, and what the file
/// scope needs for them.
struct BlockSource {
  std::string mode;  ///< the vectorisation comment line ("" for scalar code)
  std::string main;  ///< statements of main() (2-space indented), including the texel guard
  std::set<std::string> texel_loads;
  bool uses_pow = false;
};

/// Emits `kernel`, whose outputs share one iteration domain (one block; exprs in the coordinates of the stored
/// shape of its first output), writing render target j to `onames[j]` (compute: `out_<obase[j]>`). In a
/// union-domain kernel (`in_union`) the draw covers a larger extent: fragments outside the block's layout (x >=
/// its width, or past its texels) write 0 and the block does not return from main().
BlockSource emit_block(const Plan& plan, const Kernel& kernel, ShaderStage stage,
                       const std::vector<std::string>& onames, const std::vector<std::string>& obase, bool in_union) {
  const Value& out = plan.values[kernel.output()];  // all outputs share its layout and iteration domain
  const Shape shape = out.stored_shape();
  const size_t nout = kernel.exprs.size();  // render targets: one per output, or per row plane of the output
  // Vectorisation (fragment stage), first match wins:
  //  - tile mode: the output's last axis is a multiple of 4 and a sum reduction's loop length too (matmul and
  //    friends): 4 output elements of a texel as vec4 (lanes) x 4 loop iterations per step, so each texel read
  //    along the loop serves 4 iterations and each texel read along the output row serves 4 lanes (x.W^T:
  //    5 fetches per 16 multiply-adds instead of 8);
  //  - reduce mode: a sum reduction over contiguous elements reads whole texels;
  //  - lane mode: the output's last axis is a multiple of 4 and some input is read along it: the four elements
  //    of a texel are computed together as vec4.
  Kernel k = kernel;
  // column planes (Value::col_planes): the expressions read column kColumnVar + 4 q (+ lane) instead of the last
  // coordinate; kColumnVar = Pc * (i_last - i_last % 4) + i_last % 4 (in lane mode i_last is a multiple of 4) is
  // then the vectorised variable
  const int Pc = out.col_planes;
  const std::string last_var = shape.empty() ? std::string() : fmt::format("i{}", shape.size() - 1);
  const std::string vector_var = Pc > 1 ? std::string(kColumnVar) : last_var;
  std::set<const KExpr*> unrolled;
  bool tile_mode = false;
  if (stage == ShaderStage::Fragment && !shape.empty() && shape.back() % 4 == 0) {
    for (auto& e : k.exprs) tile_mode |= khas_unrollable_sum(e);
    if (tile_mode) k.exprs = unroll_reductions(k.exprs, unrolled);
  }
  auto emp = std::make_unique<Emitter>(plan, k);
  emp->set_step4_reduces(unrolled);
  bool lane_mode = tile_mode;
  bool jam_mode = false;
  if (stage == ShaderStage::Fragment && !tile_mode) {
    const KExpr* r = nullptr;
    for (auto& e : k.exprs)
      if (!r) r = emp->pick_vector_reduce(e);
    if (r) {
      emp->set_vector_reduce(r);
    } else {
      if (!shape.empty() && shape.back() % 4 == 0)
        for (auto& e : k.exprs) lane_mode |= emp->has_unit_load(e, vector_var);
      if (!lane_mode)
        for (auto& e : k.exprs) jam_mode |= kcontains_reduce(e);
    }
  }
  if (jam_mode) {
    // Jam mode: the texel's 4 elements (which may straddle rows) are computed together, their loops jammed into
    // one loop with a vec4 accumulator: 4 independent loads per iteration instead of 4 loops run one after the
    // other (a fragment's serial work, i.e. its latency, drops 4x; measured on the H200: bias gradients of 10
    // outputs were 512 dependent iterations per fragment). Coordinates become functions of the element index
    // `elem`, the vectorised variable; lanes past the end are clamped to the last element and zeroed on output.
    const int64_t n = out.layout.numel;
    KExprPtr elemc = n > 1 ? kibin(KOp::IMin, kvar("elem"), kint(n - 1)) : kint(0);
    Shape st = contiguous_strides(shape);
    std::map<std::string, KExprPtr> subs;
    for (size_t i = 0; i < shape.size(); ++i) {
      KExprPtr q = kibin(KOp::IDiv, elemc, kint(st[i]));
      subs[fmt::format("i{}", i)] = i == 0 ? q : kibin(KOp::IMod, q, kint(shape[i]));
    }
    if (Pc > 1) {
      const KExprPtr& l = subs.at(last_var);
      KExprPtr m = kibin(KOp::IMod, l, kint(4));
      subs[kColumnVar] = kibin(KOp::IAdd, kibin(KOp::IMul, kint(Pc), kibin(KOp::ISub, l, m)), m);
    }
    k.exprs = krewrite(k.exprs, [&](const KExprPtr& e) -> KExprPtr {
      if (e->op != KOp::Var) return nullptr;
      auto it = subs.find(e->name);
      return it == subs.end() ? e : it->second;
    });
    // sums are unrolled by 4 as in tile mode, here for latency: 16 independent loads in flight per step instead
    // of 4 (on the H200 a 10-output bias gradient looping 128 times took 0.118 ms, ~0.9 us per iteration)
    k.exprs = unroll_reductions(k.exprs, unrolled);
    emp = std::make_unique<Emitter>(plan, k);
    emp->set_step4_reduces(unrolled);
  }
  Emitter& em = *emp;
  std::string coords;
  {
    Shape st = contiguous_strides(shape);
    int ind = lane_mode ? 2 : em.indent_;
    for (size_t i = 0; i < shape.size(); ++i) {
      std::string q = st[i] == 1 ? "elem" : fmt::format("(elem / {})", st[i]);
      std::string v = i == 0 ? q : fmt::format("{} % {}", q, shape[i]);
      coords += fmt::format("{}int i{} = {};\n", std::string(ind * 2, ' '), i, v);
    }
    if (Pc > 1)
      coords += lane_mode ? fmt::format("{}int {} = {} * {};  // column of lane 0 in column plane 0 (+ 4 q in plane q)\n",
                                        std::string(ind * 2, ' '), kColumnVar, Pc, last_var)
                          : fmt::format("{0}int {1} = {2} * ({3} - {3} % 4) + {3} % 4;  // column in column plane 0 (+ 4 q in plane q)\n",
                                        std::string(ind * 2, ' '), kColumnVar, Pc, last_var);
  }
  if (lane_mode) {
    em.indent_ = 2;
    em.set_vector_var(vector_var, vector_var);
  } else if (jam_mode) {
    em.indent_ = 2;
    em.set_vector_var("elem", "elem");
  }
  em.fuse_sibling_loops(k.exprs);
  std::vector<Emitter::Code> values;
  for (auto& e : k.exprs) values.push_back(em.emit(e));
  BlockSource bs;
  bs.texel_loads = em.texel_loads_;
  bs.uses_pow = em.uses_pow_;
  if (tile_mode)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together (vec4), and loops are unrolled by 4\n";
  else if (lane_mode)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together (vec4)\n";
  else if (jam_mode)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together, their loops jammed into one (vec4 accumulators)\n";
  std::string& src = bs.main;
  // the fragment's texel of this block's layout; in a union-domain draw, columns past the layout's width are
  // sent past the end (their outputs are 0) instead of wrapping into the next row
  const std::string texel_line =
      in_union ? fmt::format("  int texel = int(gl_FragCoord.x) < {0} ? int(gl_FragCoord.y) * {0} + int(gl_FragCoord.x) : {1};\n",
                             out.layout.width, out.layout.texels)
               : fmt::format("  int texel = int(gl_FragCoord.y) * {} + int(gl_FragCoord.x);\n", out.layout.width);
  if (stage == ShaderStage::Fragment && (lane_mode || jam_mode)) {
    const int64_t n = out.layout.numel;
    src += texel_line;
    src += lane_mode ? "  int elem = texel * 4;  // first of the 4 elements (same row: the last axis is a multiple of 4)\n"
                     : "  int elem = texel * 4;  // first of the texel's 4 elements\n";
    std::string zero;
    for (size_t j = 0; j < nout; ++j) zero += fmt::format(" {} = vec4(0.0);", onames[j]);
    std::string rest = lane_mode ? coords + em.body_ : em.body_;
    for (size_t j = 0; j < nout; ++j) {
      std::string v = values[j].vec ? values[j].s : fmt::format("vec4({})", values[j].s);
      if (jam_mode && n % 4 != 0)  // the last texel's lanes past the end hold 0, as after an upload
        v = fmt::format("mix(vec4(0.0), {}, lessThan(ivec4(elem) + ivec4(0, 1, 2, 3), ivec4({})))", v, n);
      rest += fmt::format("  {} = {};\n", onames[j], v);
    }
    if (!in_union)
      src += fmt::format("  if (elem >= {}) {{{} return; }}\n", n, zero) + rest;
    else
      src += fmt::format("  if (elem >= {}) {{{} }} else {{\n", n, zero) + indent2(rest) + "  }\n";
  } else if (stage == ShaderStage::Fragment) {
    src += texel_line;
    for (size_t j = 0; j < nout; ++j) src += fmt::format("  vec4 result{} = vec4(0.0);\n", nout == 1 ? std::string() : std::to_string(j));
    src += "  for (int lane = 0; lane < 4; ++lane) {\n";
    src += "    int elem = texel * 4 + lane;\n";
    src += fmt::format("    if (elem >= {}) break;\n", out.layout.numel);
    src += coords + em.body_;
    for (size_t j = 0; j < nout; ++j)
      src += fmt::format("    result{}[lane] = {};\n", nout == 1 ? std::string() : std::to_string(j), values[j].s);
    src += "  }\n";
    for (size_t j = 0; j < nout; ++j) src += fmt::format("  {} = result{};\n", onames[j], nout == 1 ? std::string() : std::to_string(j));
  } else {
    std::string rest = coords + em.body_;
    for (size_t j = 0; j < nout; ++j) rest += fmt::format("  out_{}.data[elem] = {};\n", obase[j], values[j].s);
    if (!in_union)
      src += fmt::format("  if (elem >= {}) return;\n", out.layout.numel) + rest;
    else
      src += fmt::format("  if (elem < {}) {{\n", out.layout.numel) + indent2(rest) + "  }\n";
  }
  return bs;
}

}  // namespace

std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage) {
  const size_t nout = k.exprs.size();  // render targets: one per output, or per row plane of the output
  const int nblocks = k.blocks();      // domain blocks (union-domain kernels; they have no row planes)
  // output variable names: "out_texel" for a single output, else one per render target named after its value
  // (and row plane)
  std::vector<std::string> onames, odesc, obase;
  for (int o : k.outputs) {
    const Value& ov = plan.values[o];
    for (int p = 0; p < ov.planes; ++p) {
      obase.push_back(ov.planes > 1 ? fmt::format("{}_p{}", ov.name, p) : ov.name);
      onames.push_back(nout == 1 ? std::string("out_texel") : "out_" + obase.back());
      odesc.push_back(ov.col_planes > 1
                          ? fmt::format("{}: rows {} mod {}, texels {} mod {} of each row, of {}", ov.name,
                                        p / ov.col_planes, ov.row_planes(), p % ov.col_planes, ov.col_planes,
                                        shape_str(ov.node->shape))
                      : ov.planes > 1 ? fmt::format("{}: rows {} mod {} of {}", ov.name, p, ov.planes, shape_str(ov.node->shape))
                                      : shape_str(ov.node->shape));
    }
  }
  // one domain block at a time: a sub-kernel with the block's outputs (and all inputs, so Load slots hold)
  std::vector<BlockSource> blocks;
  std::vector<std::vector<size_t>> block_outputs(nblocks);
  for (size_t j = 0; j < k.outputs.size(); ++j) block_outputs[k.block_of(j)].push_back(j);
  if (nblocks == 1) {
    blocks.push_back(emit_block(plan, k, stage, onames, obase, false));
  } else {
    for (int b = 0; b < nblocks; ++b) {
      Kernel sub;
      sub.name = k.name;
      sub.inputs = k.inputs;
      std::vector<std::string> names, bases;
      for (size_t j : block_outputs[b]) {
        sub.outputs.push_back(k.outputs[j]);
        sub.exprs.push_back(k.exprs[j]);
        names.push_back(onames[j]);
        bases.push_back(obase[j]);
      }
      blocks.push_back(emit_block(plan, sub, stage, names, bases, true));
    }
  }
  std::set<std::string> texel_loads;
  bool uses_pow = false;
  for (auto& b : blocks) {
    texel_loads.insert(b.texel_loads.begin(), b.texel_loads.end());
    uses_pow |= b.uses_pow;
  }
  std::string src = header(plan, k, stage);
  if (nblocks == 1) src += blocks[0].mode;
  std::string decls, loads;
  int binding = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Value& v = plan.values[k.inputs[i]];
    std::string desc = fmt::format("{} {}", v.name, shape_str(v.node->shape));
    if (v.planes > 1) {
      // row planes: row r of [numel / C, C] is row r / P of plane r % P (Value::planes); with column planes element
      // (r, c) is in plane (r % Pr) * Pc + (c / 4) % Pc, at its row r / Pr, column ((c / 4) / Pc) * 4 + c % 4
      const int P = v.planes;
      const int64_t C = v.node->shape.back();
      const bool frag = stage == ShaderStage::Fragment;
      const int Pc = v.col_planes, Pr = v.row_planes();
      for (int p = 0; p < P; ++p) {
        const std::string which = Pc > 1 ? fmt::format("rows {} mod {}, texels {} mod {} of each row", p / Pc, Pr, p % Pc, Pc)
                                         : fmt::format("rows {} mod {}", p, P);
        decls += frag ? fmt::format("layout(set = 0, binding = {}) uniform sampler2D in_{}_p{};  // {}: {}, texture {}x{}\n",
                                    binding++, v.name, p, desc, which, v.layout.width, v.layout.height)
                      : fmt::format("layout(std430, set = 0, binding = {}) readonly buffer buf_{}_p{} {{ float data[]; }} in_{}_p{};  // {}: {}\n",
                                    binding++, v.name, p, v.name, p, desc, which);
      }
      std::string locate =
          Pc > 1 ? fmt::format("  int e = max(i, 0);\n  int r = e / {0};  // row of [rows, {0}]\n  int c = e - r * {0};  // its "
                               "column: texel c >> 2 of the row is in plane (r % {1}) * {2} + (c >> 2) % {2}\n"
                               "  int j = (r / {1}) * {3} + ((c >> 2) / {2}) * 4 + (c & 3);\n  int p = (r % {1}) * {2} + (c >> 2) % {2};\n",
                               C, Pr, Pc, C / Pc)
                 : fmt::format("  int e = max(i, 0);\n  int r = e / {0};  // row of [rows, {0}]: plane r % {1}, its row r / {1}\n"
                               "  int j = (r / {1}) * {0} + (e - r * {0});\n  int p = r % {1};\n", C, P);
      if (frag) {
        std::string pick = fmt::format("  int t = j >> 2;\n  ivec2 xy = ivec2(t % {}, t / {});\n  vec4 v;\n", v.layout.width, v.layout.width);
        for (int p = 0; p < P; ++p)
          pick += fmt::format("  {}v = texelFetch(in_{}_p{}, xy, 0);\n", p == 0 ? "if (p == 0) " : p + 1 < P ? fmt::format("else if (p == {}) ", p) : "else ", v.name, p);
        loads += fmt::format("float load_{}(int i) {{\n{}{}  return sg_component(v, i & 3);\n}}\n", v.name, locate, pick);
        if (texel_loads.count(v.name))
          loads += fmt::format("vec4 load4_{}(int i) {{  // elements i..i+3, i a multiple of 4: one texel\n{}{}  return v;\n}}\n",
                               v.name, locate, pick);
      } else {
        std::string pick;
        for (int p = 0; p < P; ++p)
          pick += fmt::format("  {}return in_{}_p{}.data[j];\n", p + 1 < P ? fmt::format("if (p == {}) ", p) : "", v.name, p);
        loads += fmt::format("float load_{}(int i) {{\n{}{}}}\n", v.name, locate, pick);
        if (texel_loads.count(v.name))
          loads += fmt::format("vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4\n"
                               "  return vec4(load_{0}(i), load_{0}(i + 1), load_{0}(i + 2), load_{0}(i + 3));\n}}\n",
                               v.name);
      }
      continue;
    }
    const int i_binding = binding++;
    if (stage == ShaderStage::Fragment) {
      decls += fmt::format("layout(set = 0, binding = {}) uniform sampler2D in_{};  // {}, texture {}x{}\n", i_binding,
                           v.name, desc, v.layout.width, v.layout.height);
      loads += fmt::format(
          "float load_{0}(int i) {{\n  int t = max(i, 0) >> 2;\n  return sg_component(texelFetch(in_{0}, ivec2(t % {1}, t / {1}), 0), i & 3);\n}}\n",
          v.name, v.layout.width);
      if (texel_loads.count(v.name))
        loads += fmt::format(
            "vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4: one texel\n  int t = max(i, 0) >> 2;\n"
            "  return texelFetch(in_{0}, ivec2(t % {1}, t / {1}), 0);\n}}\n",
            v.name, v.layout.width);
    } else {
      decls += fmt::format("layout(std430, set = 0, binding = {0}) readonly buffer buf_{1} {{ float data[]; }} in_{1};  // {2}\n",
                           i_binding, v.name, desc);
      loads += fmt::format("float load_{0}(int i) {{ return in_{0}.data[max(i, 0)]; }}\n", v.name);
      if (texel_loads.count(v.name))  // indices clamped into the buffer (texel-shared loads are whole-texel aligned)
        loads += fmt::format("vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4\n  int b = clamp(i, 0, {1});\n"
                             "  return vec4(in_{0}.data[b], in_{0}.data[min(b + 1, {1})], in_{0}.data[min(b + 2, {1})], "
                             "in_{0}.data[min(b + 3, {1})]);\n}}\n",
                             v.name, std::max<int64_t>(v.node->numel() - 1, 0));
    }
  }
  if (stage == ShaderStage::Fragment) {
    src += decls;
    for (size_t j = 0; j < nout; ++j)
      src += fmt::format("layout(location = {}) out vec4 {};{}\n", j, onames[j],
                         nout > 1 ? fmt::format("  // {}{}", odesc[j],
                                                nblocks > 1 ? fmt::format(", block {}", k.block_of(j)) : std::string())
                                  : "");
    src += "\n";
  } else {
    src += fmt::format("layout(local_size_x = {}) in;\n", kComputeWorkgroupSize) + decls;
    for (size_t j = 0; j < nout; ++j)
      src += fmt::format("layout(std430, set = 0, binding = {}) writeonly buffer buf_out{} {{ float data[]; }} out_{};\n",
                         binding + static_cast<int>(j), nout == 1 ? std::string() : std::to_string(j), obase[j]);
    src += "\n";
  }
  // A texel's component chosen by selects, not by indexing the vec4 with a runtime value: NVIDIA's compiler
  // puts a dynamically indexed vector in local memory, which serialised the 16 scalar loads per iteration of a
  // bias-gradient loop (docs/PERFORMANCE.md, Run 7).
  if (loads.find("sg_component(") != std::string::npos)
    src += "float sg_component(vec4 v, int c) { return mix(mix(v.x, v.y, c == 1), mix(v.z, v.w, c == 3), c >= 2); }\n";
  src += loads;
  if (uses_pow) {
    src += "float sg_pow(float a, float b) {  // torch.pow: negative bases with integer exponents\n"
           "  if (b == 0.0) return 1.0;\n"
           "  float r = pow(abs(a), b);\n"
           "  if (a < 0.0) return (floor(b) == b) ? ((mod(b, 2.0) == 1.0) ? -r : r) : uintBitsToFloat(0x7fc00000u);\n"
           "  return r;\n}\n";
    if (stage == ShaderStage::Fragment)
      src += "vec4 sg_pow(vec4 a, vec4 b) { return vec4(sg_pow(a.x, b.x), sg_pow(a.y, b.y), sg_pow(a.z, b.z), sg_pow(a.w, b.w)); }\n";
  }
  src += "\nvoid main() {\n";
  if (stage == ShaderStage::Compute)
    src += fmt::format("  int elem = int(gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * {}u) + gl_GlobalInvocationID.x);\n",
                       kComputeWorkgroupSize);
  if (nblocks == 1) {
    src += blocks[0].main;
  } else {
    for (int b = 0; b < nblocks; ++b) {
      const Value& first = plan.values[k.outputs[block_outputs[b].front()]];
      std::string outs;
      for (size_t j : block_outputs[b]) outs += (outs.empty() ? "" : ", ") + plan.values[k.outputs[j]].name;
      src += fmt::format("  // block {}: {} over {} ({} elements, texture {}x{})\n", b, outs,
                         shape_str(first.stored_shape()), first.layout.numel, first.layout.width, first.layout.height);
      src += "  {\n" + indent2(indent2(blocks[b].mode) + blocks[b].main) + "  }\n";
    }
  }
  src += "}\n";
  return src;
}

}  // namespace sg
