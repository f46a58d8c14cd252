// Private to codegen: what each float op (SOp) of the kernel IR is in GLSL, in WGSL and in C — one table for the fragment
// emitter (glsl_expr.h, which adds its vec4 forms of comparisons and select) and the compute emitter
// (compute_glsl.cpp, which prints GLSL 4.50 or WGSL). Every formula and every helper function is written for both
// languages side by side (glsl_math.cpp), the WGSL one mirroring the GLSL one: same algorithm, same constants; NaN
// and infinities in WGSL are runtime values (sg_f32_bits of a bit pattern, compute_lang.h), because a WGSL constant
// expression that evaluates to NaN or an infinity is a shader-creation error, and WGSL too lets implementations
// assume no NaNs (W3C WGSL "Floating Point Evaluation"), so its NaN tests are bit tests as well.
//
// Semantics are the CPU reference's (docs/RELIABILITY.md), also where GLSL leaves a result undefined or loose:
// - NaN propagates through relu, maximum/minimum and the max/min/argmax accumulations (GLSL's max/min may return
//   either operand); NaN is detected with a bit test on floatBitsToUint, never with x != x or isnan(), which
//   compilers may fold away when they assume no NaNs;
// - log/log1p/sqrt/rsqrt/pow give IEEE's (C99's, torch's) values at 0, at negative arguments and at infinities,
//   where GLSL's builtins are undefined;
// - x * 0.0, x / 0.0 and 0.0 / x with a literal (signed) zero are computed from x's bits: compilers fold them to
//   0 (Mesa's inexact algebraic rules), which hides NaN and infinities (torch: NaN * 0 = NaN, 1 / 0 = inf);
// - accuracy: exp with a Cody-Waite reduction (GLSL's exp error bound grows with |x|), log and log1p near 1 by a
//   series (GLSL's log has only an absolute error bound on [0.5, 2]), tanh by its Taylor series for |x| < 0.55,
//   sigmoid and softplus without cancellation, sin/cos with an explicit range reduction and polynomials (the
//   NVIDIA driver's sin(100) is 0.04294 instead of 0.03575), erf/erfc by minimax polynomials fitted for f32
//   (scripts/fit_erf.py), erfc relative to its value out to its underflow (GELU's negative side).
// - erf/erfc follow C99 (torch): erf(+-inf) = +-1, erfc(-inf) = 2, erfc(inf) = 0, erf(-0) = -0, NaN propagates.
// Each formula is a helper function (sg_*) emitted once per shader, only when the shader calls it.
// C (the cpu-simd target, compiled without -ffast-math and with -ffp-contract=off): C99 Annex F's <math.h> functions
// have IEEE's and C99's values at every special case (torch's, the CPU reference's), so the C helpers
// (codegen/shaders/math/NAME.c) call them (expf, logf, log1pf, powf, sinf, erff, ...) where the GLSL and WGSL ones
// work around their languages' loose builtins; NaN tests stay bit tests, max/min/relu/argmax keep the GLSL forms'
// order of operands, and float literals carry `f` (an expression with a double literal is double in C).
#pragma once

#include <cstdint>
#include <string>

#include "sg/compute_kernel.h"
#include "sg/scalar_expr.h"

namespace sg {

/// The GLSL helper functions of the float math (sg_max, sg_exp, ...).
enum class MathHelper : uint8_t {
  IsNan, Max, Min, Relu, ArgBetter, ZeroArith, Exp, Log, Log1p, Sqrt, Rsqrt, Pow, SinCos, Tanh, Sigmoid, Erf,
  Philox,  ///< sg_philox_uniform: the counter-based generator of random_uniform (KOp::RandomUniform, sg/philox.h)
  kCount
};

/// The set of helpers a kernel's code calls; source() defines them (and the helpers they call) once each.
class MathHelpers {
 public:
  void use(MathHelper h) { bits_ |= 1u << static_cast<unsigned>(h); }
  bool uses(MathHelper h) const { return (bits_ >> static_cast<unsigned>(h)) & 1u; }
  bool empty() const { return bits_ == 0; }
  MathHelpers& operator|=(const MathHelpers& o) {
    bits_ |= o.bits_;
    return *this;
  }
  /// GLSL definitions of the used helpers and of those they call, in a fixed order (byte-stable), each a scalar
  /// function; with `vec4` also their vec4 overloads (componentwise), for the fragment emitter's vectorised code.
  std::string source(bool vec4) const;
  /// The same helpers in WGSL (scalar f32 functions; they call sg_f32_bits, which compute_lang.h defines).
  std::string wgsl_source() const;
  /// The same helpers in C (static inline functions, each behind an include guard `SG_MATH_<NAME>`: the kernels
  /// of a translation unit define each once; they call the C prelude's sg_f32_u / sg_f32_bits).
  std::string c_source() const;
  /// These helpers and every helper they call.
  MathHelpers closure() const;

 private:
  uint32_t bits_ = 0;
};

/// The formulations of argmax's comparison (glsl_argmax.cpp; the NVIDIA GLES compiler dropped the NaN test of
/// `Or`). All compute the same function; `SG_ARGMAX_FORM=<name>` picks one for GLSL (a probe of a driver's compiler:
/// scripts/device/phase_numerics.sh), unset is IntKey. WGSL always has IntKey.
enum class ArgmaxForm : uint8_t { Or, Ugt, Branch, Arith, MaxBits, IntKey, kCount };
/// The form of this process (SG_ARGMAX_FORM, read once). Throws ValueError for an unknown name.
ArgmaxForm argmax_form();
/// Its name as SG_ARGMAX_FORM spells it ("or", "ugt", "branch", "arith", "maxbits", "intkey").
const char* argmax_form_name(ArgmaxForm f);
/// The definitions of sg_argmax_better in form `f` (GLSL: scalar and bvec4; WGSL: scalar, always IntKey).
std::string argmax_helper_source(ArgmaxForm f, bool wgsl);
/// sg_argmax_better in C (the intkey form).
std::string argmax_helper_c_source();

/// One helper's definitions in GLSL (`wgsl` false) or WGSL (tests check that both exist for every helper).
std::string math_helper_source(MathHelper h, bool wgsl);
/// One helper's definitions in `language` (GLSL 4.50, WGSL or C).
std::string math_helper_source(MathHelper h, ComputeLanguage language);

/// The expression of float op `op` in GLSL (`wgsl` false) or WGSL over scalar operand expressions a, b, c; records
/// the helpers it calls.
std::string float_math(bool wgsl, SOp op, const std::string& a, const std::string& b, const std::string& c,
                       MathHelpers& used);
/// float_math in `language` (GLSL 4.50, WGSL or C).
std::string float_math(ComputeLanguage language, SOp op, const std::string& a, const std::string& b,
                       const std::string& c, MathHelpers& used);

/// The GLSL expression of float op `op` over operand expressions a, b, c (scalars; or vec4s of matching types
/// for the fragment emitter, whose helpers then need MathHelpers::source(true)). Records the helpers it calls.
std::string glsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c, MathHelpers& used);

/// The call of the random_uniform helper for element `index` (an int expression) at step `step` (an int expression)
/// of a random_uniform(seed, stream) node, alike in GLSL and WGSL (the fragment emitter's vec4 overload takes ivec4
/// operands); records the helper.
std::string random_uniform_call(uint64_t seed, uint32_t stream, const std::string& index, const std::string& step,
                                MathHelpers& used);

/// The accumulation step of a max/min reduction, `acc = <this>;` (NaN-propagating, torch's max/min), in GLSL or WGSL.
std::string reduce_step(bool wgsl, bool max, const std::string& acc, const std::string& x, MathHelpers& used);
std::string reduce_step(ComputeLanguage language, bool max, const std::string& acc, const std::string& x,
                        MathHelpers& used);
/// reduce_step in GLSL.
std::string glsl_reduce_step(bool max, const std::string& acc, const std::string& x, MathHelpers& used);

/// The condition under which argmax's candidate `x` replaces the best value so far `best` (neither the first
/// iteration's): torch.argmax counts NaN as the maximum and keeps the first maximum. Scalar: a bool; with vec4
/// operands: a bvec4.
std::string glsl_argmax_better(const std::string& x, const std::string& best, MathHelpers& used);

}  // namespace sg
