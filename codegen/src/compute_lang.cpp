// The compute emitter's language layer: GLSL 4.50 and WGSL spellings (see compute_lang.h).
#include "compute_lang.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "glsl_math.h"
#include "sg/error.h"

namespace sg::compute {

namespace {

struct BuiltinName {
  const char* glsl;     // GLSL's global
  const char* wgsl;     // WGSL builtin value name (also the private variable's name)
};
constexpr BuiltinName kBuiltins[] = {
    {"gl_WorkGroupID", "workgroup_id"},
    {"gl_LocalInvocationID", "local_invocation_id"},
    {"gl_GlobalInvocationID", "global_invocation_id"},
};

bool uses(const std::string& source, const std::string& what) { return source.find(what) != std::string::npos; }

}  // namespace

std::string Lang::type(LType t) const {
  switch (t) {
    case LType::Float: return wgsl() ? "f32" : "float";
    case LType::Int: return wgsl() ? "i32" : "int";
    case LType::Bool: return "bool";
    case LType::Void: return "void";
    case LType::Vec4: return wgsl() ? "vec4<f32>" : "vec4";
  }
  return "?";
}

std::string Lang::version_line() const { return wgsl() ? std::string() : "#version 450\n"; }

namespace {
bool power_of_two(int64_t d) { return d > 0 && (d & (d - 1)) == 0; }
int log2_of(int64_t d) {
  int s = 0;
  while ((int64_t{1} << s) < d) ++s;
  return s;
}
}  // namespace

std::string Lang::div_const(const std::string& x, int64_t d) const {
  if (shift_divisions_ && power_of_two(d)) return fmt::format("({} >> {})", x, log2_of(d));
  return fmt::format("({} / {})", x, d);
}

std::string Lang::mod_const(const std::string& x, int64_t d) const {
  if (shift_divisions_ && power_of_two(d)) return fmt::format("({} & {})", x, d - 1);
  return fmt::format("{} % {}", x, d);
}

std::string Lang::let(LType t, const std::string& name, const std::string& value) const {
  return wgsl() ? fmt::format("let {}: {} = {};", name, type(t), value) : fmt::format("{} {} = {};", type(t), name, value);
}

std::string Lang::var(LType t, const std::string& name, const std::string& value) const {
  return wgsl() ? fmt::format("var {}: {} = {};", name, type(t), value) : fmt::format("{} {} = {};", type(t), name, value);
}

std::string Lang::lets(LType t, const std::vector<std::pair<std::string, std::string>>& names_values, bool mutable_) const {
  std::string s;
  for (auto& [n, v] : names_values) {
    if (wgsl()) s += fmt::format("{}{} {}: {} = {};", s.empty() ? "" : " ", mutable_ ? "var" : "let", n, type(t), v);
    else s += fmt::format("{}{} = {}", s.empty() ? type(t) + " " : ", ", n, v);
  }
  return wgsl() || s.empty() ? s : s + ";";
}

namespace {
std::string for_header(bool wgsl, const std::string& v, const std::string& begin, const std::string& end, int64_t step,
                       bool explicit_step = false) {
  const std::string inc = step == 1 && !explicit_step ? (wgsl ? v + "++" : "++" + v) : fmt::format("{} += {}", v, step);
  return wgsl ? fmt::format("for (var {0}: i32 = {1}; {0} < {2}; {3})", v, begin, end, inc)
              : fmt::format("for (int {0} = {1}; {0} < {2}; {3})", v, begin, end, inc);
}
}  // namespace

std::string Lang::for_open(const std::string& v, const std::string& begin, const std::string& end, int64_t step,
                           bool explicit_step) const {
  return for_header(wgsl(), v, begin, end, step, explicit_step) + " {";
}

std::string Lang::for_stmt(const std::string& v, const std::string& begin, const std::string& end, int64_t step,
                           const std::string& stmt) const {
  const std::string h = for_header(wgsl(), v, begin, end, step);
  return wgsl() ? h + " { " + stmt + " }" : h + " " + stmt;
}

std::string Lang::increment(const std::string& x) const { return wgsl() ? x + "++;" : "++" + x + ";"; }

std::string Lang::if_then(const std::string& cond, const std::string& stmt) const {
  return wgsl() ? fmt::format("if ({}) {{ {} }}", cond, stmt) : fmt::format("if ({}) {}", cond, stmt);
}

std::string Lang::assign_if(const std::string& cond, const std::string& x, const std::string& value) const {
  return wgsl() ? fmt::format("if ({}) {{ {} = {}; }}", cond, x, value) : fmt::format("{} = {} ? {} : 0.0;", x, cond, value);
}

std::string Lang::to_float(const std::string& x) const { return fmt::format("{}({})", type(LType::Float), x); }
std::string Lang::to_int(const std::string& x) const { return fmt::format("{}({})", type(LType::Int), x); }

std::string Lang::select(const std::string& c, const std::string& t, const std::string& f) const {
  return wgsl() ? fmt::format("select({}, {}, {})", f, t, c) : fmt::format("({} ? {} : {})", c, t, f);
}

std::string Lang::float_bits(uint32_t bits) const {
  return fmt::format("{}(0x{:08x}u)", wgsl() ? "sg_f32_bits" : "uintBitsToFloat", bits);
}

std::string Lang::float_literal(double v) const {
  if (std::isnan(v)) return float_bits(0x7fc00000u);
  const float f = static_cast<float>(v);
  if (std::isinf(f)) return float_bits(f > 0 ? 0x7f800000u : 0xff800000u);
  std::string s = fmt::format("{:.9g}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string Lang::function_open(LType ret, const std::string& name,
                                const std::vector<std::pair<LType, std::string>>& params) const {
  std::string ps;
  for (auto& [t, n] : params)
    ps += (ps.empty() ? "" : ", ") + (wgsl() ? fmt::format("{}: {}", n, type(t)) : fmt::format("{} {}", type(t), n));
  if (!wgsl()) return fmt::format("{} {}({}) {{", type(ret), name, ps);
  return ret == LType::Void ? fmt::format("fn {}({}) {{", name, ps) : fmt::format("fn {}({}) -> {} {{", name, ps, type(ret));
}

std::string Lang::shared_array(const std::string& name, int64_t n, const std::string& comment, LType element) const {
  std::string s = wgsl() ? fmt::format("var<workgroup> {}: array<{}, {}>;", name, type(element), n)
                         : fmt::format("shared {} {}[{}];", type(element), name, n);
  return comment.empty() ? s + "\n" : s + "  // " + comment + "\n";
}

std::string Lang::local_array(const std::string& name, int64_t n, const std::string& comment) const {
  std::string s = wgsl() ? fmt::format("var {}: array<f32, {}>;", name, n)
                         : fmt::format("float {0}[{1}]; for (int {0}_i = 0; {0}_i < {1}; ++{0}_i) {0}[{0}_i] = 0.0;", name, n);
  return comment.empty() ? s : s + "  // " + comment;
}

std::string Lang::barrier() const { return wgsl() ? "workgroupBarrier();" : "barrier();"; }

std::string Lang::builtin(Builtin b, int axis) const {
  const char c = "xyz"[axis];
  const BuiltinName& n = kBuiltins[static_cast<int>(b)];
  return wgsl() ? fmt::format("i32({}.{})", n.wgsl, c) : fmt::format("int({}.{})", n.glsl, c);
}

std::string Lang::buffer_binding(int binding, const std::string& name, bool readonly, const std::string& comment) const {
  if (wgsl())
    return fmt::format("@group(0) @binding({}) var<storage, {}> {}_{}: array<f32>;  // {}\n", binding,
                       readonly ? "read" : "read_write", readonly ? "in" : "out", name, comment);
  return readonly ? fmt::format("layout(std430, set = 0, binding = {0}) readonly buffer buf_{1} {{ float data[]; }} in_{1};  // {2}\n",
                                binding, name, comment)
                  : fmt::format("layout(std430, set = 0, binding = {0}) writeonly buffer buf_out_{1} {{ float data[]; }} out_{1};  // {2}\n",
                                binding, name, comment);
}

std::string Lang::store(const std::string& name, const std::string& idx, const std::string& v) const {
  return wgsl() ? fmt::format("out_{}[{}] = {};", name, idx, v) : fmt::format("out_{}.data[{}] = {};", name, idx, v);
}

std::string Lang::load_function(const std::string& name, int64_t last, bool clamped) const {
  if (wgsl() && !clamped)
    return fmt::format("fn load_{0}(i: i32) -> f32 {{ return in_{0}[i]; }}  // i in [0, {1}] or masked: WGSL bounds "
                       "every access\n", name, last);
  return wgsl() ? fmt::format("fn load_{0}(i: i32) -> f32 {{ return in_{0}[clamp(i, 0, {1})]; }}\n", name, last)
                : fmt::format("float load_{0}(int i) {{ return in_{0}.data[clamp(i, 0, {1})]; }}\n", name, last);
}

std::string Lang::workgroup_size_layout(uint32_t x, uint32_t y, bool print_y) const {
  if (wgsl()) return {};
  return y > 1 || print_y ? fmt::format("layout(local_size_x = {}, local_size_y = {}) in;\n", x, y)
               : fmt::format("layout(local_size_x = {}) in;\n", x);
}

std::string Lang::subgroups_enable() const {
  if (!wgsl()) throw UnsupportedError("compute kernels: subgroup operations are emitted in WGSL only");
  return "enable subgroups;\n";
}

std::string Lang::subgroup_lane() const {
  if (!wgsl()) throw UnsupportedError("compute kernels: subgroup operations are emitted in WGSL only");
  return "i32(subgroup_invocation_id)";
}

std::string Lang::subgroup_broadcast(const std::string& x, int lane) const {
  if (!wgsl()) throw UnsupportedError("compute kernels: subgroup operations are emitted in WGSL only");
  return fmt::format("subgroupBroadcast({}, {}u)", x, lane);
}

std::string Lang::entry_open(uint32_t x, uint32_t y, const std::string& body) const {
  if (!wgsl()) return "\nvoid main() {\n";
  std::string params, copies;
  for (const BuiltinName& b : kBuiltins) {
    if (!uses(body, std::string(b.wgsl) + ".")) continue;
    params += fmt::format("{}@builtin({}) {}_in: vec3<u32>", params.empty() ? "" : ", ", b.wgsl, b.wgsl);
    copies += fmt::format("  {0} = {0}_in;\n", b.wgsl);
  }
  // the subgroup lane: a u32 parameter read by main only (subgroup_lane), no private copy
  if (uses(body, "subgroup_invocation_id)"))
    params += fmt::format("{}@builtin(subgroup_invocation_id) subgroup_invocation_id: u32", params.empty() ? "" : ", ");
  return fmt::format("\n@compute @workgroup_size({})\nfn main({}) {{\n{}", y > 1 ? fmt::format("{}, {}", x, y) : std::to_string(x),
                     params, copies);
}

std::string Lang::helpers(const MathHelpers& math, const std::string& source) const {
  if (!wgsl()) return math.source(false);
  std::string s;
  for (const BuiltinName& b : kBuiltins)
    if (uses(source, std::string(b.wgsl) + "."))
      s += fmt::format("var<private> {}: vec3<u32>;  // @builtin({}), set by main\n", b.wgsl, b.wgsl);
  const std::string fns = math.wgsl_source();
  if (uses(source + fns, "sg_f32_bits("))
    s += "fn sg_f32_bits(bits: u32) -> f32 { return bitcast<f32>(bits); }  // NaN/Inf: a runtime value in WGSL\n";
  return s + fns;
}

}  // namespace sg::compute
