// shadergrad — the shader toolchain: GLSL 4.50 -> glslang -> SPIR-V -> (spirv-opt) -> SPIRV-Cross -> GLSL ES.
//
// Every kernel is written once as Vulkan-flavoured GLSL 4.50 (samplers as `layout(set=0, binding=N) uniform
// sampler2D in_x;`, SSBOs as `layout(std430, set=0, binding=N) buffer`, fragment output
// `layout(location = 0) out vec4 out_texel;`). compile_shader() turns it into:
//   - SPIR-V 1.0 for a Vulkan 1.0 client, validated with SPIRV-Tools (spirv-val rules for SPV_ENV_VULKAN_1_0),
//   - its SPIRV-Tools disassembly (for dumps and debugging),
//   - GLSL ES through SPIRV-Cross's CompilerGLSL: ES 3.00 for fragment kernels (WebGL2 / GLES3), ES 3.10 for
//     compute kernels (GLES 3.1). Bindings that ES 3.00 cannot express are dropped (the runtime binds samplers
//     by name), variable names are kept (SPIR-V OpName), and default precision is highp for float and int
//     (SPIRV-Cross defaults to `precision mediump float;` in ES fragment shaders: a silent precision trap on
//     mobile GPUs; llvmpipe ignores precision so it never shows on this machine).
//
// Errors: a generated shader that fails to compile is a bug in shadergrad, reported as sg::CompileError with the
// kernel name, the compiler's log and the source with line numbers, the failing lines marked `>>`.
// Thread safety: compile_shader() and check_gles_compiles() may be called from several threads at once
// (glslang's process-wide initialisation happens once, under std::call_once).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

/// Pipeline stage of a kernel. Fragment kernels render one RGBA32F texel per invocation (WebGL2-style);
/// compute kernels read/write SSBOs (GLES 3.1 / Vulkan).
enum class ShaderStage { Fragment, Compute };

/// "fragment" / "compute".
const char* stage_name(ShaderStage stage);
/// File extension used for the GLSL ES output of a stage: "frag" / "comp" (no dot).
const char* stage_extension(ShaderStage stage);

/// Options of compile_shader(). Both fields are part of the kernel-cache key.
struct ShaderCompileOptions {
  /// Run spirv-opt's performance recipe (spvtools::Optimizer::RegisterPerformancePasses, i.e. `spirv-opt -O`)
  /// on the SPIR-V before cross-compiling. The optimised module is validated again when `validate` is set.
  bool optimize = false;
  /// Validate the SPIR-V with spvtools::SpirvTools::Validate (Vulkan 1.0 environment); a failure throws
  /// CompileError with the validator's message.
  bool validate = true;
};

/// What a kernel's GLSL ES declares, read from its SPIR-V by SPIRV-Cross's reflection (never by scanning text).
struct ShaderInterface {
  std::vector<std::string> samplers;  ///< sampler uniforms, in binding order, named as in the GLSL ES
  int outputs = 0;  ///< fragment colour outputs: 1 + the highest Location (an array takes one per element); compute: 0
  bool operator==(const ShaderInterface&) const = default;
};

/// The ShaderInterface of a SPIR-V module (spirv_cross::Compiler::get_shader_resources: sampled images, stage
/// outputs). Throws CompileError when SPIRV-Cross cannot parse the module.
ShaderInterface reflect_interface(const std::vector<uint32_t>& spirv);

/// Everything the toolchain produced for one kernel.
struct CompiledShader {
  std::string glsl450;          ///< the input: Vulkan-flavoured GLSL 4.50
  /// SPIR-V 1.0 words (validated when options.validate); SPIR-V 1.3 (Vulkan 1.1 rules) when the source enables a
  /// GL_KHR_shader_subgroup extension (the Vulkan target's subgroup reductions; `gles` is then only a comment)
  std::vector<uint32_t> spirv;
  std::string spvasm;           ///< SPIRV-Tools disassembly of `spirv` (friendly names, no header)
  /// GLSL ES: fragment -> `#version 300 es` with `precision highp float; precision highp int;`;
  /// compute -> `#version 310 es`. Names of samplers, buffers and outputs are those of the GLSL 4.50 source.
  std::string gles;
  /// The samplers and colour outputs `gles` declares (reflect_interface of `spirv`); the GLES runtime binds and
  /// checks a program's textures by it.
  ShaderInterface declared;
  /// Wall time (ms) of the whole pipeline that produced this object (for a kernel-cache disk hit: the time to
  /// load it from disk).
  double compile_ms = 0;
};

/// Compiles `glsl450` (a complete GLSL 4.50 shader with a `#version 450` line) for `stage`:
/// glslang C++ API (EShLangFragment / EShLangCompute, Vulkan 1.0 client, SPIR-V 1.0 target) -> SPIR-V ->
/// spvtools validation -> optional spvtools::Optimizer performance passes (+ validation again) -> disassembly ->
/// SPIRV-Cross CompilerGLSL {es = true, version 300 (fragment) / 310 (compute), vulkan_semantics = false,
/// fragment.default_float_precision = fragment.default_int_precision = Highp}.
/// `name` is the kernel's readable name, used only in error messages.
/// Throws sg::CompileError when glslang rejects the source (message: kernel name, stage, glslang's info log,
/// the numbered source with the failing lines marked `>>` and 2 lines of context), when SPIR-V validation fails
/// (the SPIRV-Tools message), when spirv-opt fails, or when SPIRV-Cross throws.
CompiledShader compile_shader(const std::string& name, const std::string& glsl450, ShaderStage stage,
                              const ShaderCompileOptions& opt = {});

/// Compiles GLSL ES source (`#version 300 es` / `#version 310 es` on its first line) with glslang as an ES
/// shader of `stage` (no SPIR-V target) and links it, to prove the generated ES source is valid ES.
/// Throws sg::CompileError (kernel name, glslang's log, marked source) when it is not.
void check_gles_compiles(const std::string& name, const std::string& gles_source, ShaderStage stage);

/// The one shader-log line marker of the code base (glslang's errors here, the GL driver's in the GLES runtime).
/// Numbers the lines of `source` ("  12 | text") and marks with ">>" the lines error_lines_from_log finds in the
/// info `log`, showing `context` lines around each marked line ("..." for skipped runs; kAllSourceLines shows the
/// whole source). When the log names no line, the whole source is numbered (nothing marked).
std::string mark_source_lines(std::string_view source, std::string_view log, int context = 2);

/// mark_source_lines' context that shows every line of the source.
inline constexpr int kAllSourceLines = 1 << 20;

/// The 1-based line numbers named by the error entries of a shader info log, sorted, without duplicates. Formats:
/// glslang and ANGLE "ERROR: <string>:<line>: ...", Mesa "<string>:<line>(<column>): error: ...", NVIDIA
/// "<string>(<line>) : error C0000: ...". Warnings are not errors.
std::vector<int> error_lines_from_log(std::string_view log);

}  // namespace sg
