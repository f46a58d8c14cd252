// shadergrad — kernel IR -> Vulkan-flavoured GLSL 4.50 (the input of glslang) for the fragment stage
// (codegen/src/emit_fragment.cpp, over the shared expression printer codegen/src/glsl_expr.h). The compute stage
// has its own emitter over buffer storage: emit_compute_kernel in sg/compute_kernel.h.
//
// Fragment (for GLSL ES 3.00 / WebGL2): each fragment renders one RGBA32F texel = 4 consecutive output
// elements; inputs are `uniform sampler2D in_<value>` read with texelFetch at integer coordinates
// (texel = element / 4, x = texel % width, y = texel / width; see TextureLayout). Shapes are baked in as
// constants, so a kernel needs no uniforms besides its samplers.
// The generated source names the kernel, every graph node it computes with the user's source line, and each
// input's shape and texture; it is deterministic (same program -> byte-identical source).
#pragma once

#include <string>

#include "sg/schedule.h"
#include "sg/shader_compiler.h"

namespace sg {

/// GLSL 4.50 source of kernel `k` of `plan` for `stage` (Fragment; Compute throws UnsupportedError: use
/// emit_compute_kernel of sg/compute_kernel.h on a plan made for a compute target).
std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage);

}  // namespace sg
