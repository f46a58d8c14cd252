// The SOp -> GLSL / WGSL table the emitters print float math with, and its helper functions (glsl_math.h): each
// formula is written for both languages side by side here; each helper is a pair of shader source files,
// codegen/shaders/math/NAME.glsl and NAME.wgsl (the WGSL one mirroring the GLSL one), embedded at build time
// (shader_files.h) and printed verbatim.
//
// The helpers' constants: pi/2 = 1.5703125 + 4.84466553e-4 - 6.40749931e-7 + 9.92093518e-10 (the first three of 8 significant
// bits, so k * part is exact for |k| < 2^16), ln 2 = 0.693145752 + 1.42860677e-6 (16 bits, then the rest); the
// polynomials are the Taylor series of sin, cos and tanh (coefficients 1/n!, and tanh's from its series in the
// Bernoulli numbers) and of 2 atanh(s) = log((1 + s) / (1 - s)), truncated where the next term is below 1e-8
// relative on their intervals.
#include "glsl_math.h"

#include <fmt/format.h>

#include "sg/philox.h"
#include "shader_files.h"

namespace sg {

namespace {

constexpr const char* kNaN = "uintBitsToFloat(0x7fc00000u)";

struct HelperDef {
  const char* names;  // the functions it defines, comma-separated (for the vec4 overloads)
  int arity;          // of each function (1 or 2); 0: no vec4 overload
  const char* file;   // its sources: codegen/shaders/math/FILE.glsl and FILE.wgsl (nullptr: ArgBetter, glsl_argmax.cpp)
};

// In dependency order: a helper only calls helpers defined above it. The WGSL file mirrors the GLSL one (NaN/Inf
// through sg_f32_bits: WGSL rejects non-finite constants).
const HelperDef& helper_def(MathHelper h) {
  static const HelperDef defs[] = {
      {"", 0, "isnan"},
      {"sg_max", 2, "max"},
      {"sg_min", 2, "min"},
      {"sg_relu,sg_sign", 1, "relu"},
      {"", 0, nullptr},  // ArgBetter: argmax_helper_source (glsl_argmax.cpp)
      {"sg_times_zero,sg_times_negzero,sg_over_zero,sg_over_negzero,sg_zero_over,sg_negzero_over", 1, "zero_arith"},
      {"sg_exp", 1, "exp"},
      {"sg_log", 1, "log"},
      {"sg_log1p", 1, "log1p"},
      {"sg_sqrt", 1, "sqrt"},
      {"sg_rsqrt", 1, "rsqrt"},
      {"sg_pow", 2, "pow"},
      {"sg_sin,sg_cos", 1, "sincos"},
      {"sg_tanh", 1, "tanh"},
      {"sg_sigmoid", 1, "sigmoid"},
      {"sg_erf,sg_erfc", 1, "erf"},
      {"sg_philox_uniform", 0, "philox"},  // its vec4 overload (int operands): philox_vec4_overload
  };
  static_assert(sizeof(defs) / sizeof(defs[0]) == static_cast<size_t>(MathHelper::kCount));
  return defs[static_cast<size_t>(h)];
}

/// The GLSL (`wgsl` false) or WGSL definitions of helper `d` (not ArgBetter), from codegen/shaders/math/.
std::string_view helper_text(const HelperDef& d, bool wgsl) {
  return shaders::shader_file(fmt::format("math/{}.{}", d.file, wgsl ? "wgsl" : "glsl"));
}

/// The C definitions of helper `h` (math/FILE.c; ArgBetter: glsl_argmax.cpp) behind their include guard.
std::string c_helper_text(MathHelper h) {
  const HelperDef& d = helper_def(h);
  const std::string name = d.file ? d.file : "argmax";
  std::string guard = "SG_MATH_";
  for (char ch : name) guard += static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  const std::string body = h == MathHelper::ArgBetter ? argmax_helper_c_source()
                                                      : std::string(shaders::shader_file(fmt::format("math/{}.c", name)));
  return fmt::format("#ifndef {0}\n#define {0}\n{1}#endif\n", guard, body);
}

/// The helpers `h` calls (besides itself).
MathHelpers dependencies(MathHelper h) {
  MathHelpers d;
  switch (h) {
    case MathHelper::IsNan:
    case MathHelper::Philox: break;
    case MathHelper::ArgBetter:
      d.use(MathHelper::IsNan);
      if (argmax_form() == ArgmaxForm::MaxBits) d.use(MathHelper::Max);
      break;
    case MathHelper::Log1p: d.use(MathHelper::Log); [[fallthrough]];
    case MathHelper::Log: d.use(MathHelper::IsNan); break;
    case MathHelper::Tanh:
    case MathHelper::Erf:
    case MathHelper::Pow:  // sg_exp2i
    case MathHelper::Sigmoid: d.use(MathHelper::Exp); [[fallthrough]];
    default: d.use(MathHelper::IsNan); break;
  }
  return d;
}

std::string vec4_overloads(const HelperDef& d) {
  std::string out, names = d.names;
  size_t pos = 0;
  while (d.arity > 0 && pos < names.size()) {
    size_t end = names.find(',', pos);
    if (end == std::string::npos) end = names.size();
    const std::string f = names.substr(pos, end - pos);
    if (d.arity == 1)
      out += fmt::format("vec4 {0}(vec4 x) {{ return vec4({0}(x.x), {0}(x.y), {0}(x.z), {0}(x.w)); }}\n", f);
    else
      out += fmt::format("vec4 {0}(vec4 a, vec4 b) {{ return vec4({0}(a.x, b.x), {0}(a.y, b.y), {0}(a.z, b.z), {0}(a.w, b.w)); }}\n", f);
    pos = end + 1;
  }
  return out;
}

/// The fragment emitter's vec4 form of sg_philox_uniform: 4 elements (a texel's, or 4 iterations of a vectorised
/// reduction) at once.
constexpr const char* kPhiloxVec4 =
    "vec4 sg_philox_uniform(ivec4 i, ivec4 s, uint stream, uint k0, uint k1) { return vec4("
    "sg_philox_uniform(i.x, s.x, stream, k0, k1), sg_philox_uniform(i.y, s.y, stream, k0, k1), "
    "sg_philox_uniform(i.z, s.z, stream, k0, k1), sg_philox_uniform(i.w, s.w, stream, k0, k1)); }\n";

/// +1 / -1 when `s` is the literal +0.0 / -0.0 (as both printers write zero constants), else 0.
int zero_literal(const std::string& s) { return s == "0.0" || s == "0.0f" ? 1 : s == "-0.0" || s == "-0.0f" ? -1 : 0; }

}  // namespace

MathHelpers MathHelpers::closure() const {
  MathHelpers all = *this;
  for (int pass = 0; pass < 3; ++pass)  // dependencies are at most 3 deep (tanh -> exp -> isnan)
    for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i)
      if (all.uses(static_cast<MathHelper>(i))) all |= dependencies(static_cast<MathHelper>(i));
  return all;
}

std::string MathHelpers::source(bool vec4) const {
  const MathHelpers all = closure();
  std::string src;
  for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i) {
    if (!all.uses(static_cast<MathHelper>(i))) continue;
    const HelperDef& d = helper_def(static_cast<MathHelper>(i));
    if (static_cast<MathHelper>(i) == MathHelper::ArgBetter) {
      src += argmax_helper_source(argmax_form(), false);  // its vec4 overload included
      continue;
    }
    src += helper_text(d, false);
    if (vec4) src += static_cast<MathHelper>(i) == MathHelper::Philox ? std::string(kPhiloxVec4) : vec4_overloads(d);
  }
  return src;
}

std::string MathHelpers::wgsl_source() const {
  const MathHelpers all = closure();
  std::string src;
  for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i)
    if (all.uses(static_cast<MathHelper>(i)))
      src += static_cast<MathHelper>(i) == MathHelper::ArgBetter
                 ? argmax_helper_source(argmax_form(), true)
                 : std::string(helper_text(helper_def(static_cast<MathHelper>(i)), true));
  return src;
}

std::string MathHelpers::c_source() const {
  const MathHelpers all = closure();
  std::string src;
  for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i)
    if (all.uses(static_cast<MathHelper>(i))) src += c_helper_text(static_cast<MathHelper>(i));
  return src;
}

std::string math_helper_source(MathHelper h, ComputeLanguage language) {
  if (language == ComputeLanguage::C) return c_helper_text(h);
  return math_helper_source(h, language == ComputeLanguage::Wgsl);
}

std::string math_helper_source(MathHelper h, bool wgsl) {
  if (h == MathHelper::ArgBetter) return argmax_helper_source(argmax_form(), wgsl);
  return std::string(helper_text(helper_def(h), wgsl));
}


std::string float_math(bool wgsl, SOp op, const std::string& a, const std::string& b, const std::string& c,
                       MathHelpers& used) {
  return float_math(wgsl ? ComputeLanguage::Wgsl : ComputeLanguage::Glsl450, op, a, b, c, used);
}

std::string float_math(ComputeLanguage language, SOp op, const std::string& a, const std::string& b,
                       const std::string& c, MathHelpers& used) {
  const bool wgsl = language == ComputeLanguage::Wgsl;
  if (language == ComputeLanguage::C) {  // C's own spellings; the helpers are the same calls
    switch (op) {
      case SOp::Abs: return fmt::format("fabsf({})", a);
      case SOp::Floor: return fmt::format("floorf({})", a);
      case SOp::Round: return fmt::format("rintf({})", a);  // the default rounding mode: halfway cases to even
      case SOp::Recip: return fmt::format("(1.0f / {})", a);
      case SOp::Lt: return fmt::format("((float)({} < {}))", a, b);
      case SOp::Le: return fmt::format("((float)({} <= {}))", a, b);
      case SOp::Gt: return fmt::format("((float)({} > {}))", a, b);
      case SOp::Ge: return fmt::format("((float)({} >= {}))", a, b);
      case SOp::Eq: return fmt::format("((float)({} == {}))", a, b);
      case SOp::Ne: return fmt::format("((float)({} != {}))", a, b);
      case SOp::Select: return fmt::format("({} != 0.0f ? {} : {})", a, b, c);
      case SOp::Const:
      case SOp::Arg: return "sg_f32_bits(0x7fc00000u)";
      default: break;
    }
  }
  auto call = [&](MathHelper h, const char* fn, int arity) {
    used.use(h);
    return arity == 1 ? fmt::format("{}({})", fn, a) : fmt::format("{}({}, {})", fn, a, b);
  };
  auto zero_call = [&](const char* fn, const std::string& x) {
    used.use(MathHelper::ZeroArith);
    return fmt::format("{}({})", fn, x);
  };
  if (op == SOp::Mul && (zero_literal(a) || zero_literal(b))) {
    const bool lit_a = zero_literal(a) != 0;
    return zero_call((lit_a ? zero_literal(a) : zero_literal(b)) > 0 ? "sg_times_zero" : "sg_times_negzero", lit_a ? b : a);
  }
  if (op == SOp::Div && zero_literal(b)) return zero_call(zero_literal(b) > 0 ? "sg_over_zero" : "sg_over_negzero", a);
  if (op == SOp::Div && zero_literal(a)) return zero_call(zero_literal(a) > 0 ? "sg_zero_over" : "sg_negzero_over", b);
  switch (op) {
    case SOp::Neg: return fmt::format("(-{})", a);
    case SOp::Abs: return fmt::format("abs({})", a);
    case SOp::Exp: return call(MathHelper::Exp, "sg_exp", 1);
    case SOp::Log: return call(MathHelper::Log, "sg_log", 1);
    case SOp::Log1p: return call(MathHelper::Log1p, "sg_log1p", 1);
    case SOp::Sqrt: return call(MathHelper::Sqrt, "sg_sqrt", 1);
    case SOp::Rsqrt: return call(MathHelper::Rsqrt, "sg_rsqrt", 1);
    case SOp::Sin: return call(MathHelper::SinCos, "sg_sin", 1);
    case SOp::Cos: return call(MathHelper::SinCos, "sg_cos", 1);
    case SOp::Tanh: return call(MathHelper::Tanh, "sg_tanh", 1);
    case SOp::Sigmoid: return call(MathHelper::Sigmoid, "sg_sigmoid", 1);
    case SOp::Erf: return call(MathHelper::Erf, "sg_erf", 1);
    case SOp::Erfc: return call(MathHelper::Erf, "sg_erfc", 1);
    case SOp::Relu: return call(MathHelper::Relu, "sg_relu", 1);
    case SOp::Sign: return call(MathHelper::Relu, "sg_sign", 1);
    case SOp::Floor: return fmt::format("floor({})", a);
    case SOp::Round: return fmt::format(fmt::runtime(wgsl ? "round({})" : "roundEven({})"), a);  // both: halfway cases to even
    case SOp::Recip: return fmt::format("(1.0 / {})", a);
    case SOp::Add: return fmt::format("({} + {})", a, b);
    case SOp::Sub: return fmt::format("({} - {})", a, b);
    case SOp::Mul: return fmt::format("({} * {})", a, b);
    case SOp::Div: return fmt::format("({} / {})", a, b);
    case SOp::Pow: return call(MathHelper::Pow, "sg_pow", 2);
    case SOp::Max: return call(MathHelper::Max, "sg_max", 2);
    case SOp::Min: return call(MathHelper::Min, "sg_min", 2);
    case SOp::Lt: return fmt::format(fmt::runtime(wgsl ? "f32({} < {})" : "float({} < {})"), a, b);
    case SOp::Le: return fmt::format(fmt::runtime(wgsl ? "f32({} <= {})" : "float({} <= {})"), a, b);
    case SOp::Gt: return fmt::format(fmt::runtime(wgsl ? "f32({} > {})" : "float({} > {})"), a, b);
    case SOp::Ge: return fmt::format(fmt::runtime(wgsl ? "f32({} >= {})" : "float({} >= {})"), a, b);
    case SOp::Eq: return fmt::format(fmt::runtime(wgsl ? "f32({} == {})" : "float({} == {})"), a, b);
    case SOp::Ne: return fmt::format(fmt::runtime(wgsl ? "f32({} != {})" : "float({} != {})"), a, b);
    case SOp::Select:
      return wgsl ? fmt::format("select({}, {}, {} != 0.0)", c, b, a) : fmt::format("({} != 0.0 ? {} : {})", a, b, c);
    case SOp::Const:
    case SOp::Arg: break;
  }
  return wgsl ? "sg_f32_bits(0x7fc00000u)" : kNaN;
}

std::string random_uniform_call(uint64_t seed, uint32_t stream, const std::string& index, const std::string& step,
                                MathHelpers& used) {
  used.use(MathHelper::Philox);
  const PhiloxKey k = philox_key(seed);
  return fmt::format("sg_philox_uniform({}, {}, {}u, 0x{:08x}u, 0x{:08x}u)", index, step, stream, k[0], k[1]);
}

std::string glsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c, MathHelpers& used) {
  return float_math(false, op, a, b, c, used);
}

std::string reduce_step(bool wgsl, bool max, const std::string& acc, const std::string& x, MathHelpers& used) {
  return float_math(wgsl, max ? SOp::Max : SOp::Min, acc, x, "", used);
}

std::string reduce_step(ComputeLanguage language, bool max, const std::string& acc, const std::string& x,
                        MathHelpers& used) {
  return float_math(language, max ? SOp::Max : SOp::Min, acc, x, "", used);
}

std::string glsl_reduce_step(bool max, const std::string& acc, const std::string& x, MathHelpers& used) {
  return reduce_step(false, max, acc, x, used);
}

std::string glsl_argmax_better(const std::string& x, const std::string& best, MathHelpers& used) {
  used.use(MathHelper::ArgBetter);
  return fmt::format("sg_argmax_better({}, {})", x, best);
}

}  // namespace sg
