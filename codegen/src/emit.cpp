// GLSL 4.50 emitter for the kernel IR (fragment and compute stages).
#include "sg/emit.h"

#include <cmath>
#include <map>
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

class Emitter {
 public:
  Emitter(const Plan& plan, const Kernel& k) : plan_(plan), k_(k) { count_refs(k.expr); }

  /// Emits statements for `e` into body_ at the current indentation; returns a GLSL expression.
  std::string emit(const KExprPtr& e) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(e.get());
      if (f != it->end()) return f->second;
    }
    std::string s = emit_raw(e);
    bool trivial = e->op == KOp::IntConst || e->op == KOp::FloatConst || e->op == KOp::Var;
    if (!trivial && (refs_[e.get()] > 1 || e->op == KOp::Reduce) && e->op != KOp::Reduce) {
      std::string name = fmt::format("{}{}", e->type == KType::Int ? (is_bool(e) ? "c" : "j") : "v", temp_++);
      line(fmt::format("{} {} = {};", is_bool(e) ? "bool" : e->type == KType::Int ? "int" : "float", name, s));
      scopes_.back()[e.get()] = name;
      return name;
    }
    return s;
  }

  void line(const std::string& s) { body_ += std::string(indent_ * 2, ' ') + s + "\n"; }
  std::string body_;
  int indent_ = 2;
  bool uses_pow_ = false;

 private:
  const Plan& plan_;
  const Kernel& k_;
  std::unordered_map<const KExpr*, int> refs_;
  std::vector<std::unordered_map<const KExpr*, std::string>> scopes_{1};
  int temp_ = 0;

  void count_refs(const KExprPtr& e) {
    if (!e) return;
    if (refs_[e.get()]++ > 0) return;
    count_refs(e->a), count_refs(e->b), count_refs(e->c);
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

  std::string emit_raw(const KExprPtr& e) {
    auto E = [&](const KExprPtr& x) { return emit(x); };
    switch (e->op) {
      case KOp::IntConst: return std::to_string(e->ivalue);
      case KOp::FloatConst: return flit(e->fvalue);
      case KOp::Var: return e->name;
      case KOp::IAdd: return fmt::format("({} + {})", E(e->a), E(e->b));
      case KOp::ISub: return fmt::format("({} - {})", E(e->a), E(e->b));
      case KOp::IMul: return fmt::format("({} * {})", E(e->a), E(e->b));
      case KOp::IDiv: return fmt::format("({} / {})", E(e->a), E(e->b));
      case KOp::IMod: return fmt::format("({} % {})", E(e->a), E(e->b));
      case KOp::IMin: return fmt::format("min({}, {})", E(e->a), E(e->b));
      case KOp::IMax: return fmt::format("max({}, {})", E(e->a), E(e->b));
      case KOp::ILt: return fmt::format("({} < {})", E(e->a), E(e->b));
      case KOp::ILe: return fmt::format("({} <= {})", E(e->a), E(e->b));
      case KOp::IEq: return fmt::format("({} == {})", E(e->a), E(e->b));
      case KOp::IGe: return fmt::format("({} >= {})", E(e->a), E(e->b));
      case KOp::IAnd: return fmt::format("({} && {})", E(e->a), E(e->b));
      case KOp::ToFloat: return fmt::format("float({})", E(e->a));
      case KOp::FToInt: return fmt::format("int({})", E(e->a));
      case KOp::ISelect: {
        // evaluate the condition first; only the chosen branch is evaluated (GLSL ?: semantics)
        std::string c = E(e->a);
        std::string t = E(e->b), f = E(e->c);
        return fmt::format("({} ? {} : {})", c, t, f);
      }
      case KOp::Load:
        return fmt::format("load_{}({})", plan_.values[k_.inputs[e->input]].name, E(e->a));
      case KOp::FMath: return emit_math(e);
      case KOp::Reduce: return emit_reduce(e);
    }
    return "0.0";
  }

  std::string emit_math(const KExprPtr& e) {
    std::string a = emit(e->a);
    std::string b = e->b ? emit(e->b) : "";
    std::string c = e->c ? emit(e->c) : "";
    switch (e->sop) {
      case SOp::Neg: return fmt::format("(-{})", a);
      case SOp::Abs: return fmt::format("abs({})", a);
      case SOp::Exp: return fmt::format("exp({})", a);
      case SOp::Log: return fmt::format("log({})", a);
      case SOp::Sqrt: return fmt::format("sqrt({})", a);
      case SOp::Rsqrt: return fmt::format("inversesqrt({})", a);
      case SOp::Sin: return fmt::format("sin({})", a);
      case SOp::Cos: return fmt::format("cos({})", a);
      case SOp::Tanh: return fmt::format("tanh(clamp({}, -15.0, 15.0))", a);  // avoids exp overflow -> NaN
      case SOp::Sigmoid: return fmt::format("(1.0 / (1.0 + exp(-{})))", a);
      case SOp::Relu: return fmt::format("max({}, 0.0)", a);
      case SOp::Sign: return fmt::format("sign({})", a);
      case SOp::Floor: return fmt::format("floor({})", a);
      case SOp::Round: return fmt::format("roundEven({})", a);
      case SOp::Recip: return fmt::format("(1.0 / {})", a);
      case SOp::Add: return fmt::format("({} + {})", a, b);
      case SOp::Sub: return fmt::format("({} - {})", a, b);
      case SOp::Mul: return fmt::format("({} * {})", a, b);
      case SOp::Div: return fmt::format("({} / {})", a, b);
      case SOp::Pow: uses_pow_ = true; return fmt::format("sg_pow({}, {})", a, b);
      case SOp::Max: return fmt::format("max({}, {})", a, b);
      case SOp::Min: return fmt::format("min({}, {})", a, b);
      case SOp::Lt: return fmt::format("float({} < {})", a, b);
      case SOp::Le: return fmt::format("float({} <= {})", a, b);
      case SOp::Gt: return fmt::format("float({} > {})", a, b);
      case SOp::Ge: return fmt::format("float({} >= {})", a, b);
      case SOp::Eq: return fmt::format("float({} == {})", a, b);
      case SOp::Ne: return fmt::format("float({} != {})", a, b);
      case SOp::Select: return fmt::format("({} != 0.0 ? {} : {})", a, b, c);
      default: break;
    }
    return "0.0";
  }

  std::string emit_reduce(const KExprPtr& e) {
    int id = temp_++;
    std::string acc = fmt::format("acc{}", id);
    ReduceKind k = e->reduce;
    std::string init = k == ReduceKind::Sum ? "0.0" : k == ReduceKind::Min ? flit(INFINITY) : flit(-INFINITY);
    std::string loops;
    for (size_t i = 0; i < e->loop_vars.size(); ++i) loops += fmt::format("{}{}<{}", i ? ", " : "", e->loop_vars[i], e->extents[i]);
    line(fmt::format("// {} over {}", reduce_name(k), loops));
    if (k == ReduceKind::ArgMax) {
      line(fmt::format("float {} = 0.0;", acc));
      line(fmt::format("float best{} = {};", id, flit(-INFINITY)));
      line(fmt::format("int it{} = 0;", id));
    } else {
      line(fmt::format("float {} = {};", acc, init));
    }
    for (size_t i = 0; i < e->loop_vars.size(); ++i) {
      line(fmt::format("for (int {0} = 0; {0} < {1}; ++{0}) {{", e->loop_vars[i], e->extents[i]));
      ++indent_;
    }
    scopes_.emplace_back();
    std::string v = emit(e->a);
    switch (k) {
      case ReduceKind::Sum: line(fmt::format("{} += {};", acc, v)); break;
      case ReduceKind::Max: line(fmt::format("{0} = max({0}, {1});", acc, v)); break;
      case ReduceKind::Min: line(fmt::format("{0} = min({0}, {1});", acc, v)); break;
      case ReduceKind::ArgMax:
        line(fmt::format("float x{} = {};", id, v));
        line(fmt::format("if (it{0} == 0 || x{0} > best{0}) {{ best{0} = x{0}; {1} = float(it{0}); }}", id, acc));
        line(fmt::format("++it{};", id));
        break;
    }
    scopes_.pop_back();
    for (size_t i = 0; i < e->loop_vars.size(); ++i) {
      --indent_;
      line("}");
    }
    return acc;
  }
};

std::string header(const Plan& plan, const Kernel& k, ShaderStage stage) {
  const Value& out = plan.values[k.output];
  std::string s = "#version 450\n";
  s += fmt::format("// shadergrad kernel {} ({} stage)\n", k.name, stage_name(stage));
  s += fmt::format("// output {}: {} ({} elements{})\n", out.name, shape_str(out.node->shape), out.layout.numel,
                   stage == ShaderStage::Fragment
                       ? fmt::format(", RGBA32F texture {}x{}", out.layout.width, out.layout.height)
                       : std::string());
  s += "// graph nodes computed here (node, op, shape, user source):\n" + k.comment;
  return s;
}

}  // namespace

std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage) {
  const Value& out = plan.values[k.output];
  Emitter em(plan, k);
  std::string coords;
  {
    ShapeRef shape = out.node->shape;
    Shape st = contiguous_strides(shape);
    for (size_t i = 0; i < shape.size(); ++i) {
      std::string q = st[i] == 1 ? "elem" : fmt::format("(elem / {})", st[i]);
      std::string v = i == 0 ? q : fmt::format("{} % {}", q, shape[i]);
      coords += fmt::format("{}int i{} = {};\n", std::string(em.indent_ * 2, ' '), i, v);
    }
  }
  std::string value = em.emit(k.expr);
  std::string src = header(plan, k, stage);
  std::string decls, loads;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Value& v = plan.values[k.inputs[i]];
    std::string desc = fmt::format("{} {}", v.name, shape_str(v.node->shape));
    if (stage == ShaderStage::Fragment) {
      decls += fmt::format("layout(set = 0, binding = {}) uniform sampler2D in_{};  // {}, texture {}x{}\n", i,
                           v.name, desc, v.layout.width, v.layout.height);
      loads += fmt::format(
          "float load_{0}(int i) {{\n  int t = max(i, 0) >> 2;\n  return texelFetch(in_{0}, ivec2(t % {1}, t / {1}), 0)[i & 3];\n}}\n",
          v.name, v.layout.width);
    } else {
      decls += fmt::format("layout(std430, set = 0, binding = {0}) readonly buffer buf_{1} {{ float data[]; }} in_{1};  // {2}\n",
                           i, v.name, desc);
      loads += fmt::format("float load_{0}(int i) {{ return in_{0}.data[max(i, 0)]; }}\n", v.name);
    }
  }
  if (stage == ShaderStage::Fragment) {
    src += decls + "layout(location = 0) out vec4 out_texel;\n\n";
  } else {
    src += fmt::format("layout(local_size_x = {}) in;\n", kComputeWorkgroupSize) + decls;
    src += fmt::format("layout(std430, set = 0, binding = {}) writeonly buffer buf_out {{ float data[]; }} out_{};\n\n",
                       k.inputs.size(), out.name);
  }
  src += loads;
  if (em.uses_pow_)
    src += "float sg_pow(float a, float b) {  // torch.pow: negative bases with integer exponents\n"
           "  if (b == 0.0) return 1.0;\n"
           "  float r = pow(abs(a), b);\n"
           "  if (a < 0.0) return (floor(b) == b) ? ((mod(b, 2.0) == 1.0) ? -r : r) : uintBitsToFloat(0x7fc00000u);\n"
           "  return r;\n}\n";
  src += "\nvoid main() {\n";
  if (stage == ShaderStage::Fragment) {
    src += fmt::format("  int texel = int(gl_FragCoord.y) * {} + int(gl_FragCoord.x);\n", out.layout.width);
    src += "  vec4 result = vec4(0.0);\n";
    src += "  for (int lane = 0; lane < 4; ++lane) {\n";
    src += "    int elem = texel * 4 + lane;\n";
    src += fmt::format("    if (elem >= {}) break;\n", out.layout.numel);
    src += coords + em.body_;
    src += fmt::format("    result[lane] = {};\n", value);
    src += "  }\n  out_texel = result;\n}\n";
  } else {
    src += fmt::format("  int elem = int(gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * {}u) + gl_GlobalInvocationID.x);\n",
                       kComputeWorkgroupSize);
    src += fmt::format("  if (elem >= {}) return;\n", out.layout.numel);
    // compute bodies are one level less indented; re-indenting is cosmetic, keep as is
    src += coords + em.body_;
    src += fmt::format("  out_{}.data[elem] = {};\n}}\n", out.name, value);
  }
  return src;
}

}  // namespace sg
