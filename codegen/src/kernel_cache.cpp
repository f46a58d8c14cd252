// shadergrad — kernel cache (see sg/kernel_cache.h).
#include "sg/kernel_cache.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <glslang/build_info.h>
#include <spirv-tools/libspirv.h>

#include "sg/atomic_file.h"
#include "sg/error.h"

namespace sg {

namespace fs = std::filesystem;

uint64_t fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hash_hex(uint64_t h) { return fmt::format("{:016x}", h); }

namespace {

constexpr int kFormatVersion = 1;
constexpr uint32_t kSpirvMagic = 0x07230203u;

// Changes whenever the cache format or a tool that shapes the output changes, so old entries become misses.
const std::string& toolchain_tag() {
  static const std::string tag =
      fmt::format("sg-kernel-cache v{}|glslang {}.{}.{}{}|{}", kFormatVersion, GLSLANG_VERSION_MAJOR,
                  GLSLANG_VERSION_MINOR, GLSLANG_VERSION_PATCH, GLSLANG_VERSION_FLAVOR, spvSoftwareVersionString());
  return tag;
}

std::string_view words_as_bytes(const std::vector<uint32_t>& w) {
  return {reinterpret_cast<const char*>(w.data()), w.size() * sizeof(uint32_t)};
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(ss).str();
}

// One cache file written with the code base's atomic writer; a failure (full disk, read-only directory) is
// counted, not thrown: the cache is an optimisation.
bool write_file_atomically(const fs::path& dst, std::string_view data) {
  try {
    write_file_atomic(dst.string(), data);
    return true;
  } catch (const IOError&) {
    return false;
  }
}

nlohmann::json file_record(std::string_view data) {
  return {{"size", data.size()}, {"fnv1a64", hash_hex(fnv1a64(data))}};
}

// Typed reads of manifest fields: a field of another JSON type (or a float out of an integer's range, whose
// conversion is undefined behaviour in nlohmann's get; found by fuzz_kernel_cache) is simply not a match.
bool is_string_field(const nlohmann::json& j, const char* key, const std::string& want) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == want;
}
bool is_uint_field(const nlohmann::json& j, const char* key, uint64_t want) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() && it->get<uint64_t>() == want;
}
bool is_bool_field(const nlohmann::json& j, const char* key, bool want) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>() == want;
}

bool matches_record(const nlohmann::json& rec, std::string_view data) {
  return rec.is_object() && is_uint_field(rec, "size", data.size()) &&
         is_string_field(rec, "fnv1a64", hash_hex(fnv1a64(data)));
}

}  // namespace

KernelCache::KernelCache() {
  if (const char* env = std::getenv("SG_KERNEL_CACHE"); env != nullptr && *env != '\0') disk_dir_ = env;
}

KernelCache::KernelCache(fs::path disk_dir) : disk_dir_(std::move(disk_dir)) {}

uint64_t KernelCache::key(const std::string& glsl450, ShaderStage stage, const ShaderCompileOptions& opt) {
  uint64_t h = fnv1a64(toolchain_tag());
  const std::string params = fmt::format("|stage={}|optimize={}|validate={}|", stage_name(stage),
                                         opt.optimize ? 1 : 0, opt.validate ? 1 : 0);
  h = fnv1a64(params, h);
  return fnv1a64(glsl450, h);
}

KernelCache::EntryPaths KernelCache::entry_paths(uint64_t key, ShaderStage stage) const {
  if (disk_dir_.empty()) return {};
  const std::string stem = hash_hex(key);
  return {disk_dir_ / (stem + ".spv"), disk_dir_ / (stem + "." + stage_extension(stage)),
          disk_dir_ / (stem + ".spvasm"), disk_dir_ / (stem + ".json")};
}

bool KernelCache::same_inputs(const Entry& e, const std::string& glsl450, ShaderStage stage,
                              const ShaderCompileOptions& opt) const {
  return e.stage == stage && e.opt.optimize == opt.optimize && e.opt.validate == opt.validate &&
         e.shader.glsl450 == glsl450;
}

std::optional<CompiledShader> KernelCache::parse_entry(std::string_view manifest, std::string_view spv,
                                                      std::string_view gles, std::string_view spvasm, uint64_t key,
                                                      const std::string& glsl450, ShaderStage stage,
                                                      const ShaderCompileOptions& opt) {
  // nlohmann's value()/get() throw type_error for a key of another type ("format": "x"): every field is read with
  // its type checked (is_*_field); the catch is a second line of defence. Never an exception out of get_or_compile.
  try {
    nlohmann::json m = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !is_uint_field(m, "format", kFormatVersion) || !is_string_field(m, "key", hash_hex(key)) ||
        !is_string_field(m, "stage", stage_name(stage)) || !is_bool_field(m, "optimize", opt.optimize) ||
        !is_bool_field(m, "validate", opt.validate) || !is_string_field(m, "toolchain", toolchain_tag()))
      return std::nullopt;
    // The full source is in the manifest: a 64-bit hash collision cannot return another kernel's shader.
    if (!is_string_field(m, "glsl450", glsl450)) return std::nullopt;
    if (!m.contains("spv") || !m.contains("gles") || !m.contains("spvasm") || !matches_record(m["spv"], spv) ||
        !matches_record(m["gles"], gles) || !matches_record(m["spvasm"], spvasm))
      return std::nullopt;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (spv.size() < 5 * sizeof(uint32_t) || spv.size() % sizeof(uint32_t) != 0) return std::nullopt;
  CompiledShader s;
  s.spirv.resize(spv.size() / sizeof(uint32_t));
  std::memcpy(s.spirv.data(), spv.data(), spv.size());
  if (s.spirv[0] != kSpirvMagic) return std::nullopt;
  s.glsl450 = glsl450;
  s.gles = std::string(gles);
  s.spvasm = std::string(spvasm);
  try {
    s.declared = reflect_interface(s.spirv);  // not stored: read again from the (hash-checked) SPIR-V
  } catch (const CompileError&) {
    return std::nullopt;
  }
  return s;
}

std::optional<CompiledShader> KernelCache::load_from_disk(uint64_t key, const std::string& glsl450,
                                                          ShaderStage stage, const ShaderCompileOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const EntryPaths p = entry_paths(key, stage);
  auto manifest_text = read_file(p.manifest);
  if (!manifest_text) return std::nullopt;  // a plain miss: no entry
  auto spv = read_file(p.spv);
  auto gles = read_file(p.gles);
  auto spvasm = read_file(p.spvasm);
  std::optional<CompiledShader> s;
  if (spv && gles && spvasm) s = parse_entry(*manifest_text, *spv, *gles, *spvasm, key, glsl450, stage, opt);
  if (!s) {
    std::lock_guard lock(mu_);
    ++stats_.disk_errors;
    return std::nullopt;
  }
  s->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

void KernelCache::store_to_disk(uint64_t key, ShaderStage stage, const ShaderCompileOptions& opt,
                                const CompiledShader& s) {
  const EntryPaths p = entry_paths(key, stage);
  std::error_code ec;
  fs::create_directories(disk_dir_, ec);
  if (ec || !fs::is_directory(disk_dir_)) {
    {
      std::lock_guard lock(mu_);
      ++stats_.disk_errors;
    }
    warn_unwritable(ec ? ec.message() : "not a directory");
    return;
  }
  const std::string_view spv = words_as_bytes(s.spirv);
  const nlohmann::json m = {{"format", kFormatVersion},
                            {"key", hash_hex(key)},
                            {"toolchain", toolchain_tag()},
                            {"stage", stage_name(stage)},
                            {"optimize", opt.optimize},
                            {"validate", opt.validate},
                            {"compile_ms", s.compile_ms},
                            {"spv", file_record(spv)},
                            {"gles", file_record(s.gles)},
                            {"spvasm", file_record(s.spvasm)},
                            {"glsl450", s.glsl450}};
  // Data files first, manifest last: a reader that sees the manifest sees complete files (or detects a mismatch
  // against the manifest's sizes and hashes when another writer raced).
  const bool ok = write_file_atomically(p.spv, spv) && write_file_atomically(p.gles, s.gles) &&
                  write_file_atomically(p.spvasm, s.spvasm) && write_file_atomically(p.manifest, m.dump(1));
  if (!ok) {
    {
      std::lock_guard lock(mu_);
      ++stats_.disk_errors;
    }
    warn_unwritable(std::strerror(errno));
  }
}

void KernelCache::warn_unwritable(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (stats_.disk_warnings > 0) return;
    ++stats_.disk_warnings;
  }
  std::cerr << fmt::format("shadergrad: warning: cannot write the kernel cache in {} ({}); shaders will be compiled "
                           "again by every run. Point SG_KERNEL_CACHE at a writable directory or unset it.\n",
                           disk_dir_.string(), why);
}

const CompiledShader& KernelCache::get_or_compile(const std::string& name, const std::string& glsl450,
                                                  ShaderStage stage, const ShaderCompileOptions& opt) {
  const uint64_t k = key(glsl450, stage, opt);
  bool collided = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(k); it != entries_.end()) {
      if (same_inputs(it->second, glsl450, stage, opt)) {
        ++stats_.hits;
        return it->second.shader;
      }
      collided = true;
      for (const Entry& e : collisions_) {
        if (same_inputs(e, glsl450, stage, opt)) {
          ++stats_.hits;
          return e.shader;
        }
      }
    }
  }

  // Not in memory: disk, then compile (outside the lock: compiles of different kernels run concurrently).
  std::optional<CompiledShader> loaded;
  if (!disk_dir_.empty() && !collided) loaded = load_from_disk(k, glsl450, stage, opt);
  const bool from_disk = loaded.has_value();
  if (!from_disk) {
    loaded = compile_shader(name, glsl450, stage, opt);
    if (!disk_dir_.empty() && !collided) store_to_disk(k, stage, opt, *loaded);
  }

  std::lock_guard lock(mu_);
  ++(from_disk ? stats_.disk_hits : stats_.misses);
  Entry entry{stage, opt, std::move(*loaded)};
  auto [it, inserted] = entries_.try_emplace(k, std::move(entry));
  if (inserted || same_inputs(it->second, glsl450, stage, opt)) return it->second.shader;  // (lost a race: keep first)
  for (const Entry& e : collisions_)
    if (same_inputs(e, glsl450, stage, opt)) return e.shader;
  collisions_.push_back(std::move(entry));
  return collisions_.back().shader;
}

std::optional<std::string> KernelCache::get_record(uint64_t key) {
  {
    std::lock_guard lock(mu_);
    if (auto it = records_.find(key); it != records_.end()) return it->second;
  }
  if (disk_dir_.empty()) return std::nullopt;
  auto text = read_file(disk_dir_ / (hash_hex(key) + ".tune"));
  if (!text) return std::nullopt;
  std::lock_guard lock(mu_);
  records_[key] = *text;
  return text;
}

void KernelCache::put_record(uint64_t key, const std::string& value) {
  {
    std::lock_guard lock(mu_);
    records_[key] = value;
  }
  if (disk_dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(disk_dir_, ec);
  if (!ec && write_file_atomically(disk_dir_ / (hash_hex(key) + ".tune"), value)) return;
  {
    std::lock_guard lock(mu_);
    ++stats_.disk_errors;
  }
  warn_unwritable(ec ? ec.message() : std::strerror(errno));
}

KernelCache::Stats KernelCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t KernelCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size() + collisions_.size();
}

void KernelCache::clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
  collisions_.clear();
}

}  // namespace sg
