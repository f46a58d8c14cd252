// Plan dumps: generated sources (through the targets' emitters, sg/emitter.h), SPIR-V and plan.json, written
// atomically (sg/atomic_file.h).
#include "sg/dump.h"

#include <cctype>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/emitter.h"
#include "sg/target.h"

namespace sg {

std::string with_header_comment(const std::string& gles, const std::string& glsl450) {
  // the "// ..." block after #version in the GLSL 4.50 source names the kernel, its graph nodes and user lines
  std::string header;
  size_t pos = glsl450.find('\n');
  while (pos != std::string::npos && glsl450.compare(pos + 1, 2, "//") == 0) {
    size_t end = glsl450.find('\n', pos + 1);
    header += glsl450.substr(pos + 1, end - pos);
    pos = end;
  }
  size_t first = gles.find('\n');
  if (header.empty() || first == std::string::npos) return gles;
  return gles.substr(0, first + 1) + header + gles.substr(first + 1);
}

void dump_plan(const Plan& plan, const std::string& dir, KernelCache& cache, const DumpOptions& opt) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IOError(fmt::format("cannot create dump directory {}: {}", dir, ec.message()));
  // files of an earlier dump (kernels this plan no longer has) would contradict plan.json: remove ours
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string(), ext = e.path().extension().string();
    bool kernel_file = f.size() > 4 && f[0] == 'k' && std::isdigit(static_cast<unsigned char>(f[1])) &&
                       (ext == ".glsl" || ext == ".spv" || ext == ".spvasm" || ext == ".frag" || ext == ".comp" ||
                        ext == ".wgsl" || ext == ".c");
    if (kernel_file) std::filesystem::remove(e.path(), ec);
  }
  // the emitters of the stages and languages asked for (sg/emitter.h): compute kernels for opt.compute_limits
  DeviceCaps caps;
  caps.compute = opt.compute_limits;
  const EmitOptions eo{.limits = opt.compute_limits};
  auto emitter = [&](bool on, TargetName name) -> std::unique_ptr<const Emitter> {
    if (!on) return nullptr;
    return make_emitter(make_target(name, caps), eo);
  };
  const bool glsl_files = opt.glsl450 || opt.spirv || opt.gles;
  const auto fragment_e = emitter(opt.fragment && glsl_files, TargetName::GlslEsFragment);
  const auto compute_e = emitter(opt.compute && glsl_files, TargetName::GlslEsCompute);
  const auto wgsl_e = emitter(opt.compute && opt.wgsl, TargetName::Wgsl);
  const auto c_e = emitter(opt.compute && opt.c, TargetName::CpuSimd);
  auto dump_glsl = [&](const Emitter& e, const Kernel& k, const std::string& base) {
    const ShaderStage stage = *e.shader_stage();
    const CompiledShader& c = cache.get_or_compile(k.name, e.source(plan, k), stage);
    std::string p = dir + "/" + base;
    if (opt.glsl450) write_file_atomic(p + ".glsl", c.glsl450);
    if (opt.spirv) {
      write_file_atomic(p + ".spv", std::string(reinterpret_cast<const char*>(c.spirv.data()), c.spirv.size() * 4));
      write_file_atomic(p + ".spvasm", c.spvasm);
    }
    if (opt.gles) write_file_atomic(p + "." + stage_extension(stage), with_header_comment(c.gles, c.glsl450));
  };
  auto dump_source = [&](const Emitter& e, const Kernel& k) {
    write_file_atomic(fmt::format("{}/{}.{}", dir, k.name, e.extension()), e.source(plan, k));
  };
  for (const Kernel& k : plan.kernels) {
    if (fragment_e) dump_glsl(*fragment_e, k, k.name);
    if (compute_e) dump_glsl(*compute_e, k, opt.fragment ? k.name + "_cs" : k.name);
    if (wgsl_e) dump_source(*wgsl_e, k);
    if (c_e) dump_source(*c_e, k);
  }
  write_file_atomic(dir + "/plan.json", plan.to_json().dump(2) + "\n");
}

}  // namespace sg
