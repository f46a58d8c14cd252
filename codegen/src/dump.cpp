// Plan dumps: generated sources, SPIR-V and plan.json, written atomically.
#include "sg/dump.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/emit.h"

namespace sg {

void write_file_atomic(const std::string& path, const std::string& data) {
  namespace fs = std::filesystem;
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw IOError(fmt::format("cannot write {} (check the directory exists and is writable)", tmp));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) throw IOError(fmt::format("write to {} failed (disk full?)", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw IOError(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
  }
}

void dump_plan(const Plan& plan, const std::string& dir, KernelCache& cache, const DumpOptions& opt) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IOError(fmt::format("cannot create dump directory {}: {}", dir, ec.message()));
  auto dump_stage = [&](const Kernel& k, ShaderStage stage, const std::string& base) {
    std::string src = emit_glsl450(plan, k, stage);
    const CompiledShader& c = cache.get_or_compile(k.name, src, stage);
    std::string p = dir + "/" + base;
    write_file_atomic(p + ".glsl", c.glsl450);
    write_file_atomic(p + ".spv", std::string(reinterpret_cast<const char*>(c.spirv.data()), c.spirv.size() * 4));
    write_file_atomic(p + ".spvasm", c.spvasm);
    write_file_atomic(p + "." + stage_extension(stage), c.gles);
  };
  for (const Kernel& k : plan.kernels) {
    if (opt.fragment) dump_stage(k, ShaderStage::Fragment, k.name);
    if (opt.compute) dump_stage(k, ShaderStage::Compute, opt.fragment ? k.name + "_cs" : k.name);
  }
  write_file_atomic(dir + "/plan.json", plan.to_json().dump(2) + "\n");
}

}  // namespace sg
