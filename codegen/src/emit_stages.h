// shadergrad — one emitter per stage behind emit_glsl450 (private to codegen/src/emit*).
#pragma once

#include <string>

#include "sg/emit.h"

namespace sg {

/// The fragment emitter (emit_fragment.cpp): textures, one texel of every render target per fragment.
std::string emit_fragment(const Plan& plan, const Kernel& k);

}  // namespace sg
