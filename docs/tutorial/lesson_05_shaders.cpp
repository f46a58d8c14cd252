// Lesson 5: reading the generated shaders (.glsl -> .spvasm -> .frag, and the compute form).
//
// Lesson 4 partitioned a program into kernels. Each kernel becomes shader source, and that source is a product
// surface: readable names, a header naming every graph node with the line of YOUR file that made it, and
// byte-identical output for the same program. This lesson walks one kernel through the toolchain:
//
//   kernel IR --emit_glsl450--> GLSL 4.50 (Vulkan flavour)          what shadergrad writes
//             --glslang------> SPIR-V (validated) + its disassembly  the portable binary form
//             --SPIRV-Cross--> GLSL ES 3.00 fragment shader          what the "gles" backend hands the driver
//
// and then shows the compute form of the same matmul (a compute shader over storage buffers, for Vulkan and
// GLES 3.1 compute). `shadergrad dump` writes all of these files for a model; here we call the same functions.
//
//   cmake --build build --target lesson_05_shaders && build/bin/lesson_05_shaders
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sg/compute_kernel.h"
#include "sg/emit.h"
#include "sg/shader_compiler.h"
#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

static bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The first `lines` lines of a source, indented, so that the lesson's output stays short.
static void show(const char* title, const std::string& src, int lines) {
  std::printf("---- %s (first %d of %zu bytes) ----\n", title, lines, src.size());
  size_t pos = 0;
  for (int i = 0; i < lines && pos < src.size(); ++i) {
    size_t end = src.find('\n', pos);
    if (end == std::string::npos) end = src.size();
    std::printf("  | %s\n", src.substr(pos, end - pos).c_str());
    pos = end + 1;
  }
}

int main() {
  // A layer large enough that the compute emitter tiles its matmul (lesson 4 used a toy one).
  const int layer_line = __LINE__ + 3;  // the line of `h` below: the shaders will name it
  sg::Tensor x = sg::input("x", {64, 32});
  sg::Tensor W = sg::param("W", {32, 16}, std::vector<float>(32 * 16, 0.05f));
  sg::Tensor h = sg::relu(sg::matmul(x, W) + 1.0);
  sg::Program prog;
  prog.add_output("h", h);
  const std::string here = "lesson_05_shaders.cpp:" + std::to_string(layer_line);

  // ---- the fragment form ----
  sg::Target frag = sg::make_target(sg::TargetName::GlslEsFragment, sg::preset_caps("llvmpipe"));
  sg::Plan plan = sg::schedule(prog, sg::schedule_options(frag, {}));
  expect(plan.kernels.size() == 1, "relu(x@W + 1) is one kernel (lesson 4: the epilogue is inlined)");
  const sg::Kernel& k = plan.kernels.front();

  // emit_glsl450 prints the kernel IR as GLSL 4.50. One fragment computes one RGBA32F texel, i.e. 4
  // consecutive output elements; inputs are samplers read with texelFetch; shapes are constants.
  // The header comment lists the graph nodes with their source lines: this file's line for h.
  std::string glsl = sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment);
  show((k.name + ".glsl").c_str(), glsl, 14);
  expect(has(glsl, "#version 450"), "the emitter writes GLSL 4.50");
  expect(has(glsl, "matmul") && has(glsl, "map"), "its header names the graph nodes it computes (matmul, map)");
  expect(has(glsl, here), ("it names the user's source line " + here).c_str());
  expect(glsl == sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment), "emitting twice gives the same bytes");

  // compile_shader runs the toolchain in-process: glslang to SPIR-V, SPIRV-Tools' validator, the disassembler,
  // and SPIRV-Cross to GLSL ES. It throws sg::CompileError with the marked source when a step fails.
  sg::CompiledShader cs = sg::compile_shader(k.name, glsl, sg::ShaderStage::Fragment);
  std::printf("SPIR-V: %zu words\n", cs.spirv.size());
  show((k.name + ".spvasm").c_str(), cs.spvasm, 8);
  expect(!cs.spirv.empty() && cs.spirv[0] == 0x07230203u, "SPIR-V starts with its magic number 0x07230203");
  expect(has(cs.spvasm, "OpEntryPoint Fragment"), "the disassembly shows a fragment entry point");

  // The GLSL ES 3.00 is what the GLES backend compiles with the driver (WebGL2 accepts the same dialect). ES
  // requires a default float precision; highp keeps f32 semantics equal to the CPU reference's rounding.
  // SPIRV-Cross drops comments; the debugger and `shadergrad dump` put the header back after #version.
  show((k.name + ".frag").c_str(), cs.gles, 8);
  expect(has(cs.gles, "#version 300 es"), "the GLES source is GLSL ES 3.00");
  expect(has(cs.gles, "precision highp float"), "and declares precision highp float");
  expect(cs.declared.samplers.size() == k.inputs.size(), "it declares one sampler per kernel input (reflection)");

  // ---- the compute form ----
  // The same program scheduled for a buffer target (Vulkan SPIR-V; GLES 3.1 compute uses the same kernels).
  // emit_compute_kernel chooses a strategy per kernel: a matmul-like sum becomes a "tiled-contraction" — a
  // workgroup stages tiles of x and W in shared memory and each invocation accumulates a register tile of
  // outputs. ComputeKernel also says how to dispatch it (local_size, workgroups) and which value each binding
  // holds (inputs first, then outputs).
  sg::Target comp = sg::make_target(sg::TargetName::SpirvVulkan, sg::preset_caps("llvmpipe"));
  sg::Plan cplan = sg::schedule(prog, sg::schedule_options(comp, {}));
  expect(cplan.kernels.size() == 1, "one kernel on the compute target too");
  sg::ComputeKernel ck = sg::emit_compute_kernel(cplan, cplan.kernels.front(), comp.compute);
  std::printf("compute kernel %s: strategy %s, local_size %ux%ux%u, workgroups %ux%ux%u, %zu bindings, %lld B shared\n",
              cplan.kernels.front().name.c_str(), ck.strategy.c_str(), ck.local_size[0], ck.local_size[1],
              ck.local_size[2], ck.workgroups[0], ck.workgroups[1], ck.workgroups[2], ck.bindings.size(),
              static_cast<long long>(ck.shared_bytes));
  show((cplan.kernels.front().name + ".comp.glsl").c_str(), ck.source, 12);
  expect(ck.strategy == "tiled-contraction", "the matmul is emitted as a tiled contraction");
  expect(ck.shared_bytes > 0 && has(ck.source, "shared"), "which declares shared (workgroup) memory");
  expect(ck.bindings.size() == cplan.kernels.front().inputs.size() + cplan.kernels.front().outputs.size(),
         "one storage-buffer binding per input and output");
  expect(has(ck.source, here), "the compute source names the same source line");

  sg::CompiledShader ccs = sg::compile_shader(cplan.kernels.front().name, ck.source, sg::ShaderStage::Compute);
  expect(has(ccs.spvasm, "OpEntryPoint GLCompute"), "it compiles to a GLCompute SPIR-V module");
  expect(has(ccs.gles, "#version 310 es"), "and cross-compiles to GLSL ES 3.10 compute");
  std::printf("lesson 5 done\n");
  return 0;
}
