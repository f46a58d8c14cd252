// The compute emitter's language layer: GLSL 4.50, WGSL and C11 spellings (see compute_lang.h).
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

/// C: the builtins as fields of the invocation's sg_inv.
constexpr const char* kCBuiltins[] = {"wg", "lid", "gid"};

/// C: what every kernel starts with, once per translation unit.
constexpr const char* kCPrelude =
    "#ifndef SG_C_PRELUDE\n"
    "#define SG_C_PRELUDE\n"
    "// shadergrad C kernels (cpu-simd): C11, freestanding but for <math.h>; once per translation unit\n"
    "#include <math.h>\n"
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "// one invocation: the kernel's buffers in binding order (inputs, then outputs) and its builtins\n"
    "typedef struct sg_inv { float* const* buf; int wg[3], lid[3], gid[3]; } sg_inv;\n"
    "// GLSL's integer builtins\n"
    "static inline int min(int a, int b) { return b < a ? b : a; }\n"
    "static inline int max(int a, int b) { return a < b ? b : a; }\n"
    "static inline int clamp(int x, int lo, int hi) { return min(max(x, lo), hi); }\n"
    "// float bits (a union: C11's type punning)\n"
    "static inline uint32_t sg_f32_u(float x) { union { float f; uint32_t u; } v; v.f = x; return v.u; }\n"
    "static inline float sg_f32_bits(uint32_t u) { union { float f; uint32_t u; } v; v.u = u; return v.f; }\n"
    "// GLSL's int(x) (truncation); 0 for NaN and outside int's range, where C's conversion is undefined\n"
    "static inline int sg_f2i(float x) { return x >= -2147483648.0f && x < 2147483648.0f ? (int)x : 0; }\n"
    "#ifndef SG_EXPORT\n"
    "#define SG_EXPORT __attribute__((visibility(\"default\")))\n"
    "#endif\n"
    "#endif\n";

[[noreturn]] void c_unsupported(const char* what) {
  throw UnsupportedError(fmt::format("compute kernels in C (cpu-simd): no {}; C kernels are emitted for the cpu plan "
                                     "only (ComputeLimits::register_tiles)", what));
}

}  // namespace

std::string c_identifier(const std::string& name) {
  std::string s;
  for (char ch : name)
    s += (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ? ch : '_';
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s = "_" + s;
  return s;
}

std::string Lang::call(const std::string& name, const std::string& args) const {
  if (c()) return fmt::format("{}(sg{}{})", fn(name), args.empty() ? "" : ", ", args);
  return fmt::format("{}({})", name, args);
}

std::string Lang::type(LType t) const {
  switch (t) {
    case LType::Float: return wgsl() ? "f32" : "float";
    case LType::Int: return wgsl() ? "i32" : "int";
    case LType::Bool: return "bool";
    case LType::Void: return "void";
    case LType::Vec4:
      if (c()) c_unsupported("vec4 type");
      return wgsl() ? "vec4<f32>" : "vec4";
  }
  return "?";
}

std::string Lang::version_line() const {
  if (c()) return kCPrelude;
  return wgsl() ? std::string() : "#version 450\n";
}

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

std::string Lang::to_float(const std::string& x) const {
  return c() ? fmt::format("((float)({}))", x) : fmt::format("{}({})", type(LType::Float), x);
}
std::string Lang::to_int(const std::string& x) const {
  return c() ? fmt::format("sg_f2i({})", x) : fmt::format("{}({})", type(LType::Int), x);
}

std::string Lang::select(const std::string& c, const std::string& t, const std::string& f) const {
  return wgsl() ? fmt::format("select({}, {}, {})", f, t, c) : fmt::format("({} ? {} : {})", c, t, f);
}

std::string Lang::float_bits(uint32_t bits) const {
  return fmt::format("{}(0x{:08x}u)", wgsl() || c() ? "sg_f32_bits" : "uintBitsToFloat", bits);
}

std::string Lang::float_literal(double v) const {
  if (std::isnan(v)) return float_bits(0x7fc00000u);
  const float f = static_cast<float>(v);
  if (std::isinf(f)) return float_bits(f > 0 ? 0x7f800000u : 0xff800000u);
  std::string s = fmt::format("{:.9g}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return c() ? s + "f" : s;  // C: a float literal (a double one would make the expression double)
}

std::string Lang::function_open(LType ret, const std::string& name,
                                const std::vector<std::pair<LType, std::string>>& params) const {
  std::string ps;
  for (auto& [t, n] : params)
    ps += (ps.empty() ? "" : ", ") + (wgsl() ? fmt::format("{}: {}", n, type(t)) : fmt::format("{} {}", type(t), n));
  if (c()) return fmt::format("static inline {} {}(const sg_inv* sg{}{}) {{", type(ret), fn(name), ps.empty() ? "" : ", ", ps);
  if (!wgsl()) return fmt::format("{} {}({}) {{", type(ret), name, ps);
  return ret == LType::Void ? fmt::format("fn {}({}) {{", name, ps) : fmt::format("fn {}({}) -> {} {{", name, ps, type(ret));
}

std::string Lang::shared_array(const std::string& name, int64_t n, const std::string& comment, LType element) const {
  if (c()) c_unsupported("workgroup (shared) memory");
  std::string s = wgsl() ? fmt::format("var<workgroup> {}: array<{}, {}>;", name, type(element), n)
                         : fmt::format("shared {} {}[{}];", type(element), name, n);
  return comment.empty() ? s + "\n" : s + "  // " + comment + "\n";
}

std::string Lang::local_array(const std::string& name, int64_t n, const std::string& comment) const {
  std::string s = wgsl() ? fmt::format("var {}: array<f32, {}>;", name, n)
                         : fmt::format("float {0}[{1}]; for (int {0}_i = 0; {0}_i < {1}; ++{0}_i) {0}[{0}_i] = 0.0;", name, n);
  return comment.empty() ? s : s + "  // " + comment;
}

std::string Lang::barrier() const {
  if (c()) c_unsupported("barriers");
  return wgsl() ? "workgroupBarrier();" : "barrier();";
}

std::string Lang::builtin(Builtin b, int axis) const {
  if (c()) return fmt::format("sg->{}[{}]", kCBuiltins[static_cast<int>(b)], axis);
  const char xyz = "xyz"[axis];
  const BuiltinName& n = kBuiltins[static_cast<int>(b)];
  return wgsl() ? fmt::format("i32({}.{})", n.wgsl, xyz) : fmt::format("int({}.{})", n.glsl, xyz);
}

std::string Lang::buffer_binding(int binding, const std::string& name, bool readonly, const std::string& comment) const {
  if (c())
    return fmt::format("static inline {}float* {}(const sg_inv* sg) {{ return sg->buf[{}]; }}  // {}\n",
                       readonly ? "const " : "", fn((readonly ? "in_" : "out_") + name), binding, comment);
  if (wgsl())
    return fmt::format("@group(0) @binding({}) var<storage, {}> {}_{}: array<f32>;  // {}\n", binding,
                       readonly ? "read" : "read_write", readonly ? "in" : "out", name, comment);
  return readonly ? fmt::format("layout(std430, set = 0, binding = {0}) readonly buffer buf_{1} {{ float data[]; }} in_{1};  // {2}\n",
                                binding, name, comment)
                  : fmt::format("layout(std430, set = 0, binding = {0}) writeonly buffer buf_out_{1} {{ float data[]; }} out_{1};  // {2}\n",
                                binding, name, comment);
}

std::string Lang::store(const std::string& name, const std::string& idx, const std::string& v) const {
  if (c()) return fmt::format("{}(sg)[{}] = {};", fn("out_" + name), idx, v);
  return wgsl() ? fmt::format("out_{}[{}] = {};", name, idx, v) : fmt::format("out_{}.data[{}] = {};", name, idx, v);
}

std::string Lang::load_function(const std::string& name, int64_t last, bool clamped) const {
  if (c() && !clamped)  // loadu_: for indices in range by construction (in_range_by_construction)
    return fmt::format("static inline float {}(const sg_inv* sg, int i) {{ return {}(sg)[i]; }}  // i in [0, {}] by "
                       "construction\n", fn("loadu_" + name), fn("in_" + name), last);
  if (c())  // clamped: an index past the buffer would read other memory
    return fmt::format("static inline float {}(const sg_inv* sg, int i) {{ return {}(sg)[clamp(i, 0, {})]; }}\n",
                       fn("load_" + name), fn("in_" + name), last);
  if (wgsl() && !clamped)
    return fmt::format("fn load_{0}(i: i32) -> f32 {{ return in_{0}[i]; }}  // i in [0, {1}] or masked: WGSL bounds "
                       "every access\n", name, last);
  return wgsl() ? fmt::format("fn load_{0}(i: i32) -> f32 {{ return in_{0}[clamp(i, 0, {1})]; }}\n", name, last)
                : fmt::format("float load_{0}(int i) {{ return in_{0}.data[clamp(i, 0, {1})]; }}\n", name, last);
}

std::string Lang::workgroup_size_layout(uint32_t x, uint32_t y, bool print_y) const {
  if (wgsl() || c()) return {};
  return y > 1 || print_y ? fmt::format("layout(local_size_x = {}, local_size_y = {}) in;\n", x, y)
               : fmt::format("layout(local_size_x = {}) in;\n", x);
}

std::string Lang::subgroups_enable() const {
  if (c()) c_unsupported("subgroup operations");
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
  if (c()) return fmt::format("\n// one invocation (its builtins in sg)\nstatic void {}(const sg_inv* sg) {{\n", fn("invocation"));
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

std::string Lang::c_entry(const std::string& entry, const std::array<uint32_t, 3>& local,
                          const std::array<uint32_t, 3>& workgroups) const {
  if (!c()) return {};
  const uint32_t gx = workgroups[0], gy = workgroups[1], lx = local[0], ly = local[1], lz = local[2];
  return fmt::format(
      "\n// the entry point: workgroups [begin, end) of the {0}x{1}x{2} grid (flat index x + {0} (y + {1} z)), each "
      "workgroup's {3}x{4}x{5} invocations in turn\n"
      "SG_EXPORT void {6}(float* const* buf, int64_t begin, int64_t end) {{\n"
      "  sg_inv inv;\n"
      "  inv.buf = buf;\n"
      "  for (int64_t w = begin; w < end; ++w) {{\n"
      "    inv.wg[0] = (int)(w % {0}); inv.wg[1] = (int)(w / {0} % {1}); inv.wg[2] = (int)(w / {7});\n"
      "    for (int z = 0; z < {5}; ++z)\n"
      "      for (int y = 0; y < {4}; ++y)\n"
      "        for (int x = 0; x < {3}; ++x) {{\n"
      "          inv.lid[0] = x; inv.lid[1] = y; inv.lid[2] = z;\n"
      "          inv.gid[0] = inv.wg[0] * {3} + x; inv.gid[1] = inv.wg[1] * {4} + y; inv.gid[2] = inv.wg[2] * {5} + z;\n"
      "          {8}(&inv);\n"
      "        }}\n"
      "  }}\n"
      "}}\n",
      gx, gy, workgroups[2], lx, ly, lz, entry, static_cast<uint64_t>(gx) * gy, fn("invocation"));
}

std::string Lang::helpers(const MathHelpers& math, const std::string& source) const {
  if (c()) return math.c_source();
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
