// Private to codegen: what each float op (SOp) of the kernel IR is in WGSL — the compute emitter's second language
// (compute_lang.h). Same numeric semantics as the GLSL table (glsl_math.h) and the CPU reference: torch-style pow
// through sg_pow, tanh clamped to +-15, round ties to even (WGSL's round), comparisons as 0/1 floats.
// WGSL lets implementations assume no NaN/Inf (W3C WGSL "Floating Point Evaluation"), so NaN tests are bit tests
// (`(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u`), never x != x, and NaN/Inf values are runtime values
// (sg_f32_bits, compute_lang.h), never constant expressions (a shader-creation error in WGSL).
#pragma once

#include <string>

#include "sg/scalar_expr.h"

namespace sg {

/// The WGSL expression of float op `op` over f32 operand expressions a, b, c.
std::string wgsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c);

/// The WGSL helper functions (sg_pow, ...) that `source` calls, definitions in a fixed order.
std::string wgsl_helpers(const std::string& source);

}  // namespace sg
