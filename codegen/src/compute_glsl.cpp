// The compute emitter's scalar kernel-IR printer (see compute_glsl.h).
#include "compute_glsl.h"
#include "glsl_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

#include <fmt/format.h>

namespace sg::compute {

// Same semantics as the fragment emitter's emit_math (emit.cpp), scalar form. To be unified with it.
bool is_bool_op(KOp op) {
  switch (op) {
    case KOp::ILt:
    case KOp::ILe:
    case KOp::IEq:
    case KOp::IGe:
    case KOp::IAnd: return true;
    default: return false;
  }
}

KPrinter::KPrinter(const Plan& plan, const Kernel& k, const std::vector<KExprPtr>& roots, std::string prefix,
                   const Lang& lang)
    : plan_(plan), k_(k), prefix_(std::move(prefix)), lang_(lang) {
  for (auto& r : roots) count(r);
}

void KPrinter::count(const KExprPtr& e) {
  if (!e) return;
  if (refs_[e.get()]++ > 0) return;
  count(e->a), count(e->b), count(e->c);
}

void KPrinter::new_scope() { scopes_.assign(1, {}); }

std::string KPrinter::take_code() { return std::exchange(code_, std::string()); }

void KPrinter::line(const std::string& s) { code_ += std::string(indent * 2, ' ') + s + "\n"; }

std::string KPrinter::print(const KExprPtr& e) {
  if (auto b = bound_.find(e.get()); b != bound_.end()) return b->second;
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (auto f = it->find(e.get()); f != it->end()) return f->second;
  std::string s = raw(e);
  const bool trivial = e->op == KOp::IntConst || e->op == KOp::FloatConst || e->op == KOp::Var;
  if (!trivial && e->op != KOp::Reduce && refs_[e.get()] > 1) {
    const bool b = is_bool_op(e->op);
    std::string name = fmt::format("{}{}{}", prefix_, e->type == KType::Int ? (b ? "c" : "j") : "v", temp_++);
    line(lang_.let(b ? LType::Bool : e->type == KType::Int ? LType::Int : LType::Float, name, s));
    s = name;
  }
  if (!trivial) scopes_.back()[e.get()] = s;
  return s;
}

/// A condition as a bool (integer 0/1 values compared with 0).
std::string KPrinter::cond(const KExprPtr& e) {
  if (e->op == KOp::IntConst) return e->ivalue ? "true" : "false";
  std::string s = print(e);
  return is_bool_op(e->op) ? s : fmt::format("({} != 0)", s);
}

bool in_range_by_construction(const KExprPtr& root) {
  std::unordered_set<const KExpr*> seen;
  std::function<bool(const KExprPtr&, bool)> ok = [&](const KExprPtr& e, bool in_index) -> bool {
    if (!e) return true;
    switch (e->op) {
      case KOp::ISelect:
      case KOp::FToInt:
      case KOp::ISub: return false;
      case KOp::IntConst: return e->ivalue >= 0;
      case KOp::FMath:
        if (e->sop == SOp::Select) return false;
        break;
      case KOp::Load:
        if (in_index) return false;  // an index read from data
        return ok(e->a, true);
      default: break;
    }
    if (!in_index && !seen.insert(e.get()).second) return true;
    return ok(e->a, in_index) && ok(e->b, in_index) && ok(e->c, in_index);
  };
  return ok(root, false);
}

namespace {

/// Whether an integer expression is non-negative by its form: constants >= 0 and variables (output coordinates and
/// loop variables, all counted from 0) combined by +, *, /, %, min, max and select; a difference may be negative.
bool non_negative(const KExprPtr& e) {
  switch (e->op) {
    case KOp::IntConst: return e->ivalue >= 0;
    case KOp::Var: return true;
    case KOp::IAdd:
    case KOp::IMul:
    case KOp::IDiv:
    case KOp::IMod:
    case KOp::IMin:
    case KOp::IMax: return non_negative(e->a) && non_negative(e->b);
    case KOp::ISelect: return non_negative(e->b) && non_negative(e->c);
    default: return false;
  }
}

}  // namespace

std::string KPrinter::raw(const KExprPtr& e) {
  switch (e->op) {
    case KOp::IntConst: return std::to_string(e->ivalue);
    case KOp::FloatConst: return lang_.float_literal(e->fvalue);
    case KOp::Var: {
      auto it = subst_.find(e->name);
      return it != subst_.end() ? it->second : e->name;
    }
    case KOp::Load: {
      (unclamped_loads ? unclamped_ : loaded_).insert(e->input);
      return lang_.call((unclamped_loads ? "loadu_" : "load_") + plan_.values[k_.inputs[e->input]].name, print(e->a));
    }
    case KOp::FMath: {
      std::string a = print(e->a), b = e->b ? print(e->b) : std::string(), c = e->c ? print(e->c) : std::string();
      return float_math(lang_.language(), e->sop, a, b, c, helpers_);
    }
    case KOp::Reduce: return reduce(e);
    case KOp::RandomUniform: {
      const std::string index = print(e->a), step = print(e->b);  // sequenced: print() names shared subexpressions
      return random_uniform_call(e->seed, e->stream, index, step, helpers_);
    }
    case KOp::ISelect: {
      std::string c = cond(e->a), t = print(e->b), f = print(e->c);
      return lang_.select(c, t, f);
    }
    case KOp::IAnd: {
      // sequenced (print() names shared subexpressions as it goes; argument order is unspecified): b first, the
      // order GCC evaluated the two arguments in, so GCC builds print what they did and clang builds the same
      std::string b = cond(e->b), a = cond(e->a);
      return fmt::format("({} && {})", a, b);
    }
    case KOp::ToFloat: return lang_.to_float(print(e->a));
    case KOp::FToInt: return lang_.to_int(print(e->a));
    default: break;
  }
  const std::string a = print(e->a), b = print(e->b);
  switch (e->op) {
    case KOp::IAdd: return fmt::format("({} + {})", a, b);
    case KOp::ISub: return fmt::format("({} - {})", a, b);
    case KOp::IMul: return fmt::format("({} * {})", a, b);
    case KOp::IDiv:
      if (e->b->op == KOp::IntConst && non_negative(e->a)) return lang_.div_const(a, e->b->ivalue);
      return fmt::format("({} / {})", a, b);
    case KOp::IMod:
      if (e->b->op == KOp::IntConst && non_negative(e->a)) return fmt::format("({})", lang_.mod_const(a, e->b->ivalue));
      return fmt::format("({} % {})", a, b);
    case KOp::IMin: return fmt::format("min({}, {})", a, b);
    case KOp::IMax: return fmt::format("max({}, {})", a, b);
    case KOp::ILt: return fmt::format("({} < {})", a, b);
    case KOp::ILe: return fmt::format("({} <= {})", a, b);
    case KOp::IEq: return fmt::format("({} == {})", a, b);
    case KOp::IGe: return fmt::format("({} >= {})", a, b);
    default: break;
  }
  return "0.0";
}

std::string KPrinter::reduce(const KExprPtr& e) {
  // reductions in the body that do not read this loop's variables: once, before the loop
  std::vector<KExprPtr> invariant;
  kloop_invariant_reductions(e->a, std::set<std::string>(e->loop_vars.begin(), e->loop_vars.end()), free_vars_, invariant);
  for (auto& r : invariant) print(r);
  const int id = temp_++;
  const std::string acc = fmt::format("{}acc{}", prefix_, id);
  std::string loops;
  for (size_t i = 0; i < e->loop_vars.size(); ++i)
    loops += fmt::format("{}{}<{}", i ? ", " : "", e->loop_vars[i], e->extents[i]);
  line(fmt::format("// {} over {}", reduce_name(e->reduce), loops));
  const ReduceKind kind = e->reduce;
  if (kind == ReduceKind::ArgMax) {
    line(lang_.var(LType::Float, acc, "0.0"));
    line(lang_.var(LType::Float, fmt::format("{}best{}", prefix_, id), lang_.float_literal(-INFINITY)));
    line(lang_.var(LType::Int, fmt::format("{}it{}", prefix_, id), "0"));
  } else {
    line(lang_.var(LType::Float, acc,
                   kind == ReduceKind::Sum ? "0.0" : lang_.float_literal(kind == ReduceKind::Min ? INFINITY : -INFINITY)));
  }
  std::map<std::string, std::string> saved;
  const bool lanes = lane_combine && reduce_depth_ == 0 && kind != ReduceKind::ArgMax;
  if (lanes) {  // one loop over the flat iteration space, strided over the lanes
    int64_t total = 1;
    for (int64_t x : e->extents) total *= x;
    const std::string f = e->loop_vars.size() == 1 ? e->loop_vars[0] : fmt::format("{}f{}", prefix_, id);
    for (auto& v : e->loop_vars)
      if (auto it = subst_.find(v); it != subst_.end()) saved[v] = it->second, subst_.erase(it);
    line(fmt::format("for (int {0} = {1}; {0} < {2}; {0} += {3}) {{", f, lane_start, total, lane_step));
    ++indent;
    if (e->loop_vars.size() > 1) {
      int64_t stride = total;
      for (size_t i = 0; i < e->loop_vars.size(); ++i) {
        stride /= e->extents[i];
        std::string x = stride == 1 ? f : lang_.div_const(f, stride);
        if (i > 0) x = lang_.mod_const(x, e->extents[i]);
        line(lang_.let(LType::Int, e->loop_vars[i], x));
      }
    }
  } else {
    for (size_t i = 0; i < e->loop_vars.size(); ++i) {
      const std::string& v = e->loop_vars[i];
      if (auto it = subst_.find(v); it != subst_.end()) saved[v] = it->second, subst_.erase(it);  // rebound here
      line(lang_.for_open(v, "0", std::to_string(e->extents[i])));
      ++indent;
    }
  }
  ++reduce_depth_;
  scopes_.emplace_back();
  const std::string x = print(e->a);
  switch (kind) {
    case ReduceKind::Sum: line(fmt::format("{} += {};", acc, x)); break;
    case ReduceKind::Max:
    case ReduceKind::Min:
      line(fmt::format("{} = {};", acc, reduce_step(lang_.language(), kind == ReduceKind::Max, acc, x, helpers_)));
      break;
    case ReduceKind::ArgMax:
      line(lang_.let(LType::Float, fmt::format("{}x{}", prefix_, id), x));
      line(fmt::format("if ({0}it{1} == 0 || {3}) {{ {0}best{1} = {0}x{1}; {2} = {4}; }}", prefix_, id, acc,
                       glsl_argmax_better(fmt::format("{}x{}", prefix_, id), fmt::format("{}best{}", prefix_, id), helpers_),
                       lang_.to_float(fmt::format("{}it{}", prefix_, id))));
      line(lang_.increment(fmt::format("{}it{}", prefix_, id)));
      break;
  }
  scopes_.pop_back();
  --reduce_depth_;
  for (size_t i = 0; i < (lanes ? 1 : e->loop_vars.size()); ++i) {
    --indent;
    line("}");
  }
  if (lanes) code_ += lane_combine(kind, acc);
  for (auto& [v, s] : saved) subst_[v] = s;
  return acc;
}

}  // namespace sg::compute
