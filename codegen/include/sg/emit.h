// shadergrad — kernel IR -> Vulkan-flavoured GLSL 4.50 (the input of glslang) for the fragment stage
// (codegen/src/emit_fragment.cpp, over the shared expression printer codegen/src/glsl_expr.h). The compute stage
// has its own emitter over buffer storage: emit_compute_kernel in sg/compute_kernel.h. Callers do not choose
// between them: make_emitter (sg/emitter.h) picks the one of a Target (the glsl-es-fragment target's emitter calls
// emit_glsl450; Emitter::code_key calls kernel_code_key over its source).
//
// Fragment (for GLSL ES 3.00 / WebGL2): each fragment renders one RGBA32F texel = 4 consecutive output
// elements; inputs are `uniform sampler2D in_<value>` read with texelFetch at integer coordinates
// (texel = element / 4, x = texel % width, y = texel / width; see TextureLayout). Shapes are baked in as
// constants, so a kernel needs no uniforms besides its samplers.
// The generated source names the kernel, every graph node it computes with the user's source line, and each
// input's shape and texture; it is deterministic (same program -> byte-identical source).
#pragma once

#include <functional>
#include <string>

#include "sg/schedule.h"
#include "sg/shader_compiler.h"

namespace sg {

/// GLSL 4.50 source of kernel `k` of `plan` for `stage` (Fragment; Compute throws UnsupportedError: use
/// emit_compute_kernel of sg/compute_kernel.h on a plan made for a compute target).
std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage);

/// The code of kernel k up to the names of the values it binds: `emit` (which prints kernel k of `plan`) is called
/// with k's inputs and outputs renamed sgk0, sgk1, ... in binding order (restored afterwards, also on an
/// exception), and its source without comments is returned. Kernels with equal keys differ only in those names and
/// in comments: one compiled shader serves all of them, bound by position (samplers or buffers in the kernel's
/// input order, then its outputs). Backends compile a program's kernels once per key: the N identical segments of
/// a deep chain of layers cost one driver compile, not N.
std::string kernel_code_key(Plan& plan, const Kernel& k, const std::function<std::string()>& emit);

}  // namespace sg
