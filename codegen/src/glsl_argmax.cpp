// argmax's "does candidate x replace the best value so far?" in GLSL and WGSL (glsl_math.h: ArgmaxForm), in the
// formulations tried against the NVIDIA GLES compiler, which dropped the NaN test of the first one ("or": argmax
// of [1, NaN, 3] was 2 on the H200's gles and gles-compute, 1 on its Vulkan driver and on Mesa; issue 19).
//
// Every form computes the same function (torch.argmax: NaN is the maximum and the first NaN wins, else the first
// maximum; -0 and +0 tie); they differ only in what a compiler sees:
//   or      !isnan(best) && (x > best || isnan(x))   the NaN tests next to an ordered compare of the same operand
//   ugt     !isnan(best) && !(x <= best)             one unordered compare: the form "or" folds into, if it does
//   branch  if (isnan(best)) false; if (isnan(x)) true; x > best   separate returns
//   arith   the NaN tests as integer arithmetic on the bits (no compare), or'ed with uint(x > best)
//   maxbits the bits of sg_max(best, x) against those of sg_max(best, best) (sg_max's select, which the NVIDIA
//           compiler keeps: NaN propagated through max reductions there)
//   intkey  no float compare at all: NaN tests on the bits, then an integer compare of order keys (the float
//           order as an unsigned order: sign-magnitude to biased, -0 made +0)
// The NaN tests are bit tests in every form (sg_isnan, glsl_math.cpp).
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "glsl_math.h"
#include "sg/error.h"

namespace sg {

namespace {

struct FormDef {
  const char* name;
  const char* glsl;  // the scalar definition of sg_argmax_better (and of helpers only it calls)
};

const FormDef& form_def(ArgmaxForm f) {
  static const FormDef defs[] = {
      {"or", "bool sg_argmax_better(float x, float best) { return !sg_isnan(best) && (x > best || sg_isnan(x)); }\n"},
      {"ugt", "bool sg_argmax_better(float x, float best) { return !sg_isnan(best) && !(x <= best); }\n"},
      {"branch",
       "bool sg_argmax_better(float x, float best) {\n"
       "  if (sg_isnan(best)) return false;\n"
       "  if (sg_isnan(x)) return true;\n"
       "  return x > best;\n}\n"},
      {"arith",
       "uint sg_nan_bit(float x) { return ((floatBitsToUint(x) & 0x7fffffffu) + 0x007fffffu) >> 31; }  // 1 for NaN\n"
       "bool sg_argmax_better(float x, float best) {\n"
       "  return ((sg_nan_bit(x) | uint(x > best)) & (sg_nan_bit(best) ^ 1u)) != 0u;\n}\n"},
      {"maxbits",
       "bool sg_argmax_better(float x, float best) {  // max(best, x) is no longer best (sg_max: NaN wins); zeros tie\n"
       "  bool zeros = ((floatBitsToUint(x) | floatBitsToUint(best)) & 0x7fffffffu) == 0u;\n"
       "  return !zeros && floatBitsToUint(sg_max(best, x)) != floatBitsToUint(sg_max(best, best));\n}\n"},
      {"intkey",
       "// the float order as an unsigned order (non-NaN x): negative values reversed below positive ones, -0 as +0\n"
       "uint sg_order_key(float x) {\n"
       "  uint u = floatBitsToUint(x);\n"
       "  if ((u & 0x7fffffffu) == 0u) u = 0u;\n"
       "  return u >= 0x80000000u ? ~u : u | 0x80000000u;\n}\n"
       "bool sg_argmax_better(float x, float best) {  // integer operations only: nothing for a no-NaN assumption to fold\n"
       "  if ((floatBitsToUint(best) & 0x7fffffffu) > 0x7f800000u) return false;  // best is NaN: the first NaN stays\n"
       "  if ((floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u) return true;      // the first NaN\n"
       "  return sg_order_key(x) > sg_order_key(best);\n}\n"},
  };
  static_assert(sizeof(defs) / sizeof(defs[0]) == static_cast<size_t>(ArgmaxForm::kCount));
  return defs[static_cast<size_t>(f)];
}

constexpr const char* kComment =
    "// argmax: does candidate x replace best? NaN is the maximum (the first NaN wins), else the first maximum\n";

// WGSL has the chosen form only (the probe concerns GLSL compilers): intkey, mirrored
constexpr const char* kWgsl =
    "// the float order as an unsigned order (non-NaN x): negative values reversed below positive ones, -0 as +0\n"
    "fn sg_order_key(x: f32) -> u32 {\n"
    "  var u = bitcast<u32>(x);\n"
    "  if ((u & 0x7fffffffu) == 0u) { u = 0u; }\n"
    "  return select(u | 0x80000000u, ~u, u >= 0x80000000u);\n"
    "}\n"
    "fn sg_argmax_better(x: f32, best: f32) -> bool {  // integer operations only: nothing for a no-NaN assumption to fold\n"
    "  if ((bitcast<u32>(best) & 0x7fffffffu) > 0x7f800000u) { return false; }  // best is NaN: the first NaN stays\n"
    "  if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return true; }      // the first NaN\n"
    "  return sg_order_key(x) > sg_order_key(best);\n"
    "}\n";

// C has the chosen form only too (intkey, mirrored; C compilers without -ffast-math keep NaN compares, but one form
// everywhere is one thing to test)
constexpr const char* kC =
    "// the float order as an unsigned order (non-NaN x): negative values reversed below positive ones, -0 as +0\n"
    "static inline uint32_t sg_order_key(float x) {\n"
    "  uint32_t u = sg_f32_u(x);\n"
    "  if ((u & 0x7fffffffu) == 0u) u = 0u;\n"
    "  return u >= 0x80000000u ? ~u : u | 0x80000000u;\n"
    "}\n"
    "static inline bool sg_argmax_better(float x, float best) {  // integer operations only\n"
    "  if ((sg_f32_u(best) & 0x7fffffffu) > 0x7f800000u) return false;  // best is NaN: the first NaN stays\n"
    "  if ((sg_f32_u(x) & 0x7fffffffu) > 0x7f800000u) return true;      // the first NaN\n"
    "  return sg_order_key(x) > sg_order_key(best);\n"
    "}\n";

}  // namespace

std::string argmax_helper_c_source() { return std::string(kComment) + kC; }

const char* argmax_form_name(ArgmaxForm f) { return form_def(f).name; }

ArgmaxForm argmax_form() {
  static const ArgmaxForm form = [] {
    const char* e = std::getenv("SG_ARGMAX_FORM");
    if (e == nullptr || *e == '\0') return ArgmaxForm::IntKey;
    std::string names;
    for (unsigned i = 0; i < static_cast<unsigned>(ArgmaxForm::kCount); ++i) {
      if (form_def(static_cast<ArgmaxForm>(i)).name == std::string(e)) return static_cast<ArgmaxForm>(i);
      names += fmt::format("{}{}", i ? ", " : "", form_def(static_cast<ArgmaxForm>(i)).name);
    }
    throw ValueError(fmt::format("SG_ARGMAX_FORM={}: no such argmax formulation (one of {}; unset for intkey)", e, names));
  }();
  return form;
}

std::string argmax_helper_source(ArgmaxForm f, bool wgsl) {
  if (wgsl) return std::string(kComment) + kWgsl;
  return std::string(kComment) + form_def(f).glsl +
         "bvec4 sg_argmax_better(vec4 x, vec4 best) {\n"
         "  return bvec4(sg_argmax_better(x.x, best.x), sg_argmax_better(x.y, best.y), sg_argmax_better(x.z, best.z),\n"
         "               sg_argmax_better(x.w, best.w));\n}\n";
}

}  // namespace sg
