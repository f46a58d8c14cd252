// shadergrad — GLSL 4.50 -> glslang -> SPIR-V -> spirv-opt -> SPIRV-Cross -> GLSL ES (see sg/shader_compiler.h).
#include "sg/shader_compiler.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>
#include <spirv_cross/spirv_glsl.hpp>

#include "sg/error.h"

namespace sg {

const char* stage_name(ShaderStage stage) { return stage == ShaderStage::Fragment ? "fragment" : "compute"; }
const char* stage_extension(ShaderStage stage) { return stage == ShaderStage::Fragment ? "frag" : "comp"; }

namespace {

void init_glslang_once() {
  static std::once_flag flag;
  std::call_once(flag, [] {
    if (!glslang::InitializeProcess())
      throw CompileError("glslang::InitializeProcess() failed: the shader compiler cannot start");
  });
}

EShLanguage to_glslang(ShaderStage stage) {
  return stage == ShaderStage::Fragment ? EShLangFragment : EShLangCompute;
}

// Parses a leading decimal number at `s[pos..]`; returns -1 when there is none.
int parse_int_at(std::string_view s, size_t pos, size_t* end) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() + pos) return -1;
  *end = static_cast<size_t>(p - s.data());
  return v;
}

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < s.size()) lines.push_back(s.substr(start));
      break;
    }
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

[[noreturn]] void throw_glslang_error(const std::string& what, const std::string& name, ShaderStage stage,
                                      std::string_view source, std::string_view log) {
  throw CompileError(fmt::format(
      "kernel '{}' ({} shader): {}.\nThis is a bug in shadergrad's code generator, not in your model: please "
      "report it with this message.\nglslang log:\n{}\nsource ('>>' marks the failing lines):\n{}",
      name, stage_name(stage), what, log, mark_source_lines(source, log, 2)));
}

std::string number_all(std::string_view source) {
  std::string out;
  auto lines = split_lines(source);
  for (size_t i = 0; i < lines.size(); ++i) out += fmt::format("   {:4} | {}\n", i + 1, lines[i]);
  return out;
}

}  // namespace

std::vector<int> error_lines_from_log(std::string_view log) {
  std::set<int> found;
  for (std::string_view line : split_lines(log)) {
    // glslang / ANGLE: "ERROR: 0:12: 'x' : undeclared identifier" (string may be a name instead of 0).
    if (line.starts_with("ERROR: ")) {
      size_t colon = line.find(':', 7);
      if (colon != std::string_view::npos) {
        size_t end = 0;
        int n = parse_int_at(line, colon + 1, &end);
        if (n > 0 && end < line.size() && line[end] == ':') found.insert(n);
      }
      continue;
    }
    if (line.find("error") == std::string_view::npos) continue;
    size_t end0 = 0;
    if (parse_int_at(line, 0, &end0) < 0 || end0 >= line.size()) continue;
    size_t end = 0;
    if (line[end0] == ':') {
      // Mesa's GLSL compiler: "0:12(5): error: ...".
      int n = parse_int_at(line, end0 + 1, &end);
      if (n > 0 && end < line.size() && line[end] == '(') found.insert(n);
    } else if (line[end0] == '(') {
      // NVIDIA: "0(12) : error C0000: ...".
      int n = parse_int_at(line, end0 + 1, &end);
      if (n > 0 && end < line.size() && line[end] == ')') found.insert(n);
    }
  }
  return {found.begin(), found.end()};
}

std::string mark_source_lines(std::string_view source, std::string_view log, int context) {
  auto lines = split_lines(source);
  std::vector<int> marked = error_lines_from_log(log);
  if (marked.empty()) return number_all(source);
  const int n = static_cast<int>(lines.size());
  context = std::max(context, 0);
  std::vector<char> show(static_cast<size_t>(n) + 1, 0), mark(static_cast<size_t>(n) + 1, 0);
  bool any_in_range = false;
  for (int l : marked) {
    if (l > n) continue;  // e.g. "end of file" errors may name the line after the last
    any_in_range = true;
    mark[l] = 1;
    for (int k = std::max(1, l - context); k <= std::min(n, l + context); ++k) show[k] = 1;
  }
  if (!any_in_range) return number_all(source);
  std::string out;
  bool skipped = false;
  for (int i = 1; i <= n; ++i) {
    if (!show[i]) {
      skipped = true;
      continue;
    }
    if (skipped) out += "   ...\n";
    skipped = false;
    out += fmt::format("{} {:4} | {}\n", mark[i] ? ">>" : "  ", i, lines[static_cast<size_t>(i - 1)]);
  }
  if (skipped) out += "   ...\n";
  return out;
}

CompiledShader compile_shader(const std::string& name, const std::string& glsl450, ShaderStage stage,
                              const ShaderCompileOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  init_glslang_once();
  CompiledShader result;
  result.glsl450 = glsl450;
  // subgroup operations are SPIR-V 1.3 (Vulkan 1.1) and have no GLSL ES 3.10 form; other kernels stay SPIR-V 1.0
  const bool vulkan11 = glsl450.find("#extension GL_KHR_shader_subgroup") != std::string::npos;
  const spv_target_env env = vulkan11 ? SPV_ENV_VULKAN_1_1 : SPV_ENV_VULKAN_1_0;

  // 1. GLSL 4.50 -> SPIR-V 1.0 (Vulkan 1.0 client) with glslang.
  {
    const EShLanguage lang = to_glslang(stage);
    glslang::TShader shader(lang);
    const char* text = glsl450.c_str();
    const int len = static_cast<int>(glsl450.size());
    shader.setStringsWithLengths(&text, &len, 1);
    shader.setEnvInput(glslang::EShSourceGlsl, lang, glslang::EShClientVulkan, 100);
    shader.setEnvClient(glslang::EShClientVulkan, vulkan11 ? glslang::EShTargetVulkan_1_1 : glslang::EShTargetVulkan_1_0);
    shader.setEnvTarget(glslang::EShTargetSpv, vulkan11 ? glslang::EShTargetSpv_1_3 : glslang::EShTargetSpv_1_0);
    const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
    if (!shader.parse(GetDefaultResources(), 450, ECoreProfile, false, false, messages)) {
      throw_glslang_error("GLSL 4.50 source does not compile (glslang)", name, stage, glsl450,
                          std::string(shader.getInfoLog()) + shader.getInfoDebugLog());
    }
    glslang::TProgram program;
    program.addShader(&shader);
    if (!program.link(messages)) {
      throw_glslang_error("GLSL 4.50 source does not link (glslang)", name, stage, glsl450,
                          std::string(program.getInfoLog()) + program.getInfoDebugLog());
    }
    spv::SpvBuildLogger logger;
    glslang::SpvOptions spv_options;
    spv_options.disableOptimizer = true;  // spirv-opt runs below, under our options
    spv_options.validate = false;         // validated below with the Vulkan 1.0 rules
    glslang::GlslangToSpv(*program.getIntermediate(lang), result.spirv, &logger, &spv_options);
    const std::string msgs = logger.getAllMessages();
    if (result.spirv.empty() || msgs.find("error") != std::string::npos) {
      throw CompileError(fmt::format(
          "kernel '{}' ({} shader): glslang could not emit SPIR-V (a bug in shadergrad's code generator):\n{}\n"
          "source:\n{}",
          name, stage_name(stage), msgs, number_all(glsl450)));
    }
  }

  // 2. Validate, 3. optimise (+ validate again).
  spvtools::SpirvTools tools(env);
  std::string tool_messages;
  tools.SetMessageConsumer([&tool_messages](spv_message_level_t, const char*, const spv_position_t& pos,
                                            const char* message) {
    tool_messages += fmt::format("  [word {}] {}\n", pos.index, message);
  });
  auto validate = [&](const char* when) {
    tool_messages.clear();
    if (!tools.Validate(result.spirv)) {
      throw CompileError(fmt::format(
          "kernel '{}' ({} shader): SPIR-V {} fails validation (SPIRV-Tools, Vulkan {} rules) — a bug in "
          "shadergrad's code generator or in glslang/spirv-opt:\n{}GLSL 4.50 source:\n{}",
          name, stage_name(stage), when, vulkan11 ? "1.1" : "1.0", tool_messages, number_all(glsl450)));
    }
  };
  if (opt.validate) validate("from glslang");
  if (opt.optimize) {
    spvtools::Optimizer optimizer(env);
    std::string opt_messages;
    optimizer.SetMessageConsumer([&opt_messages](spv_message_level_t level, const char*, const spv_position_t&,
                                                 const char* message) {
      if (level <= SPV_MSG_ERROR) opt_messages += fmt::format("  {}\n", message);
    });
    optimizer.RegisterPerformancePasses();
    std::vector<uint32_t> optimized;
    spvtools::ValidatorOptions vopts;
    spvtools::OptimizerOptions oopts;
    oopts.set_run_validator(false);  // we validate after optimising, with our own message consumer
    oopts.set_validator_options(vopts);
    if (!optimizer.Run(result.spirv.data(), result.spirv.size(), &optimized, oopts)) {
      throw CompileError(fmt::format("kernel '{}' ({} shader): spirv-opt (performance passes) failed:\n{}", name,
                                     stage_name(stage), opt_messages));
    }
    result.spirv = std::move(optimized);
    if (opt.validate) validate("after spirv-opt -O");
  }

  // 4. Disassemble.
  tool_messages.clear();
  if (!tools.Disassemble(result.spirv, &result.spvasm,
                         SPV_BINARY_TO_TEXT_OPTION_NO_HEADER | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES |
                             SPV_BINARY_TO_TEXT_OPTION_INDENT)) {
    throw CompileError(fmt::format("kernel '{}' ({} shader): SPIR-V disassembly failed:\n{}", name,
                                   stage_name(stage), tool_messages));
  }

  // 5. SPIRV-Cross -> GLSL ES (not for subgroup kernels: only the Vulkan backend runs them).
  if (vulkan11) {
    result.gles = "// no GLSL ES 3.10 form: the kernel uses GL_KHR_shader_subgroup operations (Vulkan 1.1 only)\n";
    result.declared = reflect_interface(result.spirv);
    result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }
  try {
    spirv_cross::CompilerGLSL cross(result.spirv);
    spirv_cross::CompilerGLSL::Options o = cross.get_common_options();
    o.es = true;
    o.version = stage == ShaderStage::Fragment ? 300 : 310;
    o.vulkan_semantics = false;
    o.fragment.default_float_precision = spirv_cross::CompilerGLSL::Options::Highp;
    o.fragment.default_int_precision = spirv_cross::CompilerGLSL::Options::Highp;
    cross.set_common_options(o);
    result.gles = cross.compile();
    result.declared = reflect_interface(result.spirv);
  } catch (const spirv_cross::CompilerError& e) {
    throw CompileError(fmt::format(
        "kernel '{}' ({} shader): SPIRV-Cross cannot express this SPIR-V as GLSL ES {}: {}\nGLSL 4.50 source:\n{}",
        name, stage_name(stage), stage == ShaderStage::Fragment ? "3.00" : "3.10", e.what(), number_all(glsl450)));
  }

  result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

ShaderInterface reflect_interface(const std::vector<uint32_t>& spirv) {
  try {
    spirv_cross::Compiler c(spirv);
    const spirv_cross::ShaderResources res = c.get_shader_resources();
    std::vector<std::pair<uint32_t, std::string>> samplers;
    for (const auto& r : res.sampled_images)
      samplers.emplace_back(c.get_decoration(r.id, spv::DecorationBinding), c.get_name(r.id));
    std::sort(samplers.begin(), samplers.end());
    ShaderInterface io;
    for (auto& s : samplers) io.samplers.push_back(std::move(s.second));
    if (c.get_execution_model() == spv::ExecutionModelFragment)
      for (const auto& r : res.stage_outputs) {
        const spirv_cross::SPIRType& t = c.get_type(r.type_id);
        const int len = t.array.empty() ? 1 : static_cast<int>(t.array[0]);
        io.outputs = std::max(io.outputs, static_cast<int>(c.get_decoration(r.id, spv::DecorationLocation)) + len);
      }
    return io;
  } catch (const spirv_cross::CompilerError& e) {
    throw CompileError(fmt::format("SPIRV-Cross cannot reflect this SPIR-V module: {}", e.what()));
  }
}

void check_gles_compiles(const std::string& name, const std::string& gles_source, ShaderStage stage) {
  init_glslang_once();
  const EShLanguage lang = to_glslang(stage);
  glslang::TShader shader(lang);
  const char* text = gles_source.c_str();
  const int len = static_cast<int>(gles_source.size());
  shader.setStringsWithLengths(&text, &len, 1);
  // No client / no target: plain GLSL ES as a GLES driver sees it; the #version line picks 300 es / 310 es.
  shader.setEnvInput(glslang::EShSourceGlsl, lang, glslang::EShClientNone, 0);
  if (!shader.parse(GetDefaultResources(), 100, EEsProfile, false, false, EShMsgDefault)) {
    throw_glslang_error("generated GLSL ES source is not valid GLSL ES (glslang)", name, stage, gles_source,
                        std::string(shader.getInfoLog()) + shader.getInfoDebugLog());
  }
  if (shader.getIntermediate()->getProfile() != EEsProfile) {
    throw CompileError(fmt::format("kernel '{}' ({} shader): source is not GLSL ES (its #version line must say "
                                   "'#version 300 es' or '#version 310 es'):\n{}",
                                   name, stage_name(stage), number_all(gles_source)));
  }
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(EShMsgDefault)) {
    throw_glslang_error("generated GLSL ES source does not link (glslang)", name, stage, gles_source,
                        std::string(program.getInfoLog()) + program.getInfoDebugLog());
  }
}

}  // namespace sg
