// libFuzzer target: kernel-cache disk entries (sg::KernelCache::parse_entry: the manifest JSON and the files it
// vouches for). Input: manifest, "\n--spv--\n", .spv bytes, "\n--gles--\n", .frag text, "\n--spvasm--\n", .spvasm.
// Contract: a shader or nullopt; never an exception, no sanitizer report. The entry is checked against one fixed
// kernel source; the seed corpus holds a valid entry of it (write one with SG_FUZZ_WRITE_SEED=FILE fuzz_kernel_cache).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "sg/kernel_cache.h"

namespace {

const std::string kSource = R"(#version 450
layout(location = 0) out vec4 out_y;
void main() { out_y = vec4(1.0, 2.0, 3.0, 4.0); }
)";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* out = std::getenv("SG_FUZZ_WRITE_SEED")) {  // writes a valid entry as one fuzz input, then exits
    std::filesystem::path dir = sg::fuzz::scratch_path("kc_seed");
    {
      sg::KernelCache cache(dir);
      cache.get_or_compile("seed", kSource, sg::ShaderStage::Fragment);
    }
    auto p = sg::KernelCache(dir).entry_paths(sg::KernelCache::key(kSource, sg::ShaderStage::Fragment, {}),
                                              sg::ShaderStage::Fragment);
    sg::fuzz::write_bytes(out, slurp(p.manifest) + "\n--spv--\n" + slurp(p.spv) + "\n--gles--\n" + slurp(p.gles) +
                                   "\n--spvasm--\n" + slurp(p.spvasm));
    std::filesystem::remove_all(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const uint64_t key = sg::KernelCache::key(kSource, sg::ShaderStage::Fragment, {});
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string_view manifest = sg::fuzz::split(in, "\n--spv--\n");
  std::string_view spv = sg::fuzz::split(in, "\n--gles--\n");
  std::string_view gles = sg::fuzz::split(in, "\n--spvasm--\n");
  auto s = sg::KernelCache::parse_entry(manifest, spv, gles, in, key, kSource, sg::ShaderStage::Fragment, {});
  if (s && (s->glsl450 != kSource || s->spirv.empty())) __builtin_trap();
  return 0;
}
