// shadergrad — one emitter per stage behind emit_glsl450 (private to codegen/src/emit*).
#pragma once

#include <string>

#include "sg/emit.h"

namespace sg {

/// The fragment emitter (emit_fragment.cpp): textures, one texel of every render target per fragment.
std::string emit_fragment(const Plan& plan, const Kernel& k);

/// The per-element compute emitter kept for `dump --target glsl-es-compute` (emit_compute_legacy.cpp); the
/// buffer-storage compute emitter is emit_compute_kernel (sg/compute_kernel.h).
std::string emit_compute_legacy(const Plan& plan, const Kernel& k);

}  // namespace sg
