// Private to codegen: what each float op (SOp) of the kernel IR is in GLSL — one table for the fragment emitter
// (glsl_expr.h, which adds its vec4 forms of pow, max/min, comparisons and select) and the compute emitter
// (compute_glsl.cpp). Semantics are the CPU reference's where GLSL allows: torch-style pow through sg_pow, tanh
// clamped to +-15 (GLSL's tanh overflows to NaN past ~|x| 44 on some drivers), roundEven (torch.round), GLSL's
// max/min (which do not promise NaN propagation: docs/RELIABILITY.md).
#pragma once

#include <string>

#include "sg/scalar_expr.h"

namespace sg {

/// The GLSL expression of float op `op` over operand expressions a, b, c (scalars, or vec4s for the ops whose GLSL
/// function is overloaded for both). Sets `uses_pow` when the result calls sg_pow.
std::string glsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c, bool& uses_pow);

/// sg_pow's definition (torch.pow: negative bases with integer exponents), for kernels that call it.
const char* sg_pow_source();

}  // namespace sg
