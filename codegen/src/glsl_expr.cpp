// The shared GLSL expression printer's free helpers (see glsl_expr.h).
#include "glsl_expr.h"

namespace sg::glsl {

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


}  // namespace sg::glsl
