// shadergrad — dumping a Plan for people who read generated shaders.
//
// For every kernel: NAME.glsl (GLSL 4.50, glslang's input), NAME.spv (SPIR-V binary), NAME.spvasm (SPIRV-Tools
// disassembly), NAME.frag (GLSL ES 3.00, fragment) and/or NAME.comp (GLSL ES 3.10, compute) and/or NAME.wgsl (the
// compute kernel printed as WGSL, written as emitted: no glslang there); plus plan.json
// (Plan::to_json: kernels in launch order, inputs/outputs, shapes, texture layouts, graph nodes).
// Compute sources are written with a "_cs" suffix in their NAME (NAME_cs.glsl ...) when both stages are dumped.
// Files are written atomically (sg/atomic_file.h). Kernel files of an earlier dump in `dir` (k*.glsl, .spv,
// .spvasm, .frag, .comp, .wgsl) are removed first so the directory matches plan.json. Throws IOError naming the path.
#pragma once

#include <string>
#include <string_view>

#include "sg/atomic_file.h"  // write_file_atomic, used by every writer
#include "sg/compute_kernel.h"
#include "sg/kernel_cache.h"
#include "sg/schedule.h"

namespace sg {

struct DumpOptions {
  bool fragment = true;  ///< NAME.glsl/.spv/.spvasm/.frag for the fragment stage
  bool compute = false;  ///< NAME[_cs].glsl/.spv/.spvasm/.comp for the compute stage (a plan for a compute target)
  ComputeLimits compute_limits{};  ///< compute: the limits the kernels are emitted for (emit_compute_kernel)
  bool glsl450 = true;   ///< write NAME.glsl (the GLSL 4.50 glslang compiles)
  bool spirv = true;     ///< write NAME.spv and NAME.spvasm
  bool gles = true;      ///< write NAME.frag / NAME.comp (GLSL ES, what the GPU runs)
  bool wgsl = false;     ///< compute: write NAME.wgsl (emit_compute_kernel(.., ComputeLanguage::Wgsl))
  bool c = false;        ///< compute: write NAME.c (emit_compute_kernel(.., ComputeLanguage::C), the cpu-simd kernels)
};

/// Compiles (through `cache`) and writes every kernel of `plan` into `dir` (created if missing).
void dump_plan(const Plan& plan, const std::string& dir, KernelCache& cache, const DumpOptions& opt = {});

/// `gles` with the comment block of `glsl450` (kernel name, graph nodes, user source lines) inserted after its
/// #version line: SPIRV-Cross drops comments, and a reader of the .frag wants them.
std::string with_header_comment(const std::string& gles, const std::string& glsl450);

}  // namespace sg
