// shadergrad — what every stage emitter writes the same way (private to codegen/src/emit*): the kernel's header
// comment, its output names, its domain blocks, the helper functions a kernel may call.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "glsl_math.h"
#include "sg/schedule.h"
#include "sg/shader_compiler.h"

namespace sg::glsl {

/// Per render target / output buffer of a kernel (one per output, or per plane of an output with planes):
/// `base` the value's name (+ "_p<plane>"), `name` the GLSL output variable ("out_texel" for a kernel with a single
/// one, else "out_<base>"), `desc` what it holds (its rows / texels of the tensor, and its shape).
struct KernelOutputs {
  std::vector<std::string> base, name, desc;
};
KernelOutputs kernel_outputs(const Plan& plan, const Kernel& k);

/// Output indices (into Kernel::outputs) of each domain block, in block order.
std::vector<std::vector<size_t>> block_outputs(const Kernel& k);

/// The sub-kernel of block `outputs` (its outputs and exprs, all of k's inputs so Load slots hold).
Kernel block_kernel(const Kernel& k, const std::vector<size_t>& outputs);

/// The comment block every emitter writes after the #version line: `title` ("shadergrad kernel k03_... (fragment
/// stage)"), one line per output, "// output [J ]NAME[ = nN LABEL]: SHAPE" followed by `output_tail(j, value)` (the
/// emitter's element count and storage, e.g. " (128 elements, RGBA32F texture 32x1)"), then `extra` (a union-domain
/// kernel's note), the kernel's notes and its graph nodes with their user source lines (Kernel::comment).
std::string kernel_comment(const Plan& plan, const Kernel& k, const std::string& title,
                           const std::function<std::string(size_t, const Value&)>& output_tail, const std::string& extra);

/// "#version 450" and the fragment stage's kernel_comment (`storage(value)` appends the stage's storage, e.g.
/// ", RGBA32F texture 32x4"; `union_note` for union-domain kernels).
std::string kernel_header(const Plan& plan, const Kernel& k, ShaderStage stage,
                          const std::function<std::string(const Value&)>& storage, const std::string& union_note);

/// One domain block of a kernel emitted: main()'s statements computing and writing its outputs, and what the file
/// scope needs for them.
struct BlockSource {
  std::string mode;  ///< the vectorisation comment line ("" for scalar code)
  std::string main;  ///< statements of main() (2-space indented), including the texel guard
  std::set<std::string> texel_loads;
  std::set<std::string> unaligned_loads;  ///< inputs read as 4 consecutive elements at any index
  std::set<std::string> uv_inputs;        ///< inputs sampled by texture() (main declares uv_texel_<name>)
  MathHelpers helpers;  ///< the math helper functions its code calls
};

/// The statements of a load of a value with planes (Value::planes) that find element i: plane p and index j
/// within the plane (row planes: row r of [numel / C, C] is row r / P of plane r % P; with column planes element
/// (r, c) is in plane (r % Pr) * Pc + (c / 4) % Pc, at its row r / Pr, column ((c / 4) / Pc) * 4 + c % 4).
std::string plane_locate(const Value& v);

/// sg_component(v, c) when `loads` calls it: a texel's component chosen by masking the bits of the four (exact,
/// NaN payloads included), neither by indexing the vec4 with a runtime value (NVIDIA's compiler puts a dynamically
/// indexed vector in local memory) nor by selects (SPIRV-Cross prints them as nested ?:, which SwiftShader compiled
/// in time exponential in their number: a WebGL2 kernel of 34 such loads, `export --max-draw-buffers 1`, did not
/// finish compiling in 400 s; half of them took 26 s, the masked form 0.5 s; docs/RELIABILITY.md).
std::string component_helper(const std::string& loads);

}  // namespace sg::glsl
