// shadergrad — kernel cache: compiled shaders keyed by a content hash, in memory and optionally on disk.
//
// The key is a 64-bit FNV-1a hash of (cache format version, toolchain versions, stage, compile options, GLSL 4.50
// source). A memory hit returns the same CompiledShader object every time; a disk hit loads the stored SPIR-V,
// disassembly and GLSL ES without running glslang, SPIRV-Tools or SPIRV-Cross.
//
// On-disk layout of directory DIR (created when missing), HASH = 16 lower-case hex digits:
//   DIR/HASH.spv     SPIR-V words (little-endian, as in a .spv file)
//   DIR/HASH.frag    GLSL ES 3.00 fragment source   (or DIR/HASH.comp: GLSL ES 3.10 compute source)
//   DIR/HASH.spvasm  SPIRV-Tools disassembly
//   DIR/HASH.json    manifest: format version, stage, options, the source's length and second hash, and the size
//                    and FNV-1a 64 of each file above; written last, so an entry is complete once it exists.
// Every file is written atomically (sg/atomic_file.h: temporary file in DIR, fsync, rename). A manifest or file that is
// missing, truncated, corrupted, or describes another source (hash collision) makes the entry a miss: the kernel is
// recompiled and the entry rewritten. Disk I/O failures never throw (they are counted in Stats::disk_errors);
// compile failures throw sg::CompileError as compile_shader() does.
//
// Thread safety: all member functions may be called concurrently; two threads missing on the same key may both
// compile, one result is kept.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sg/shader_compiler.h"

namespace sg {

/// FNV-1a 64-bit hash of `data` (offset basis 0xcbf29ce484222325, prime 0x100000001b3; Fowler/Noll/Vo,
/// http://www.isthe.com/chongo/tech/comp/fnv/). Pass a previous result as `seed` to hash several pieces in turn.
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);

/// `h` as 16 lower-case hex digits (the file-name stem of a disk-cache entry).
std::string hash_hex(uint64_t h);

/// Compiled-shader cache (see the file comment for the key, the disk layout and failure behaviour).
class KernelCache {
 public:
  /// Counters; every get_or_compile() call increments exactly one of hits / disk_hits / misses.
  struct Stats {
    uint64_t hits = 0;         ///< served from memory (no work)
    uint64_t disk_hits = 0;    ///< loaded from the disk directory (no glslang / SPIRV-Cross)
    uint64_t misses = 0;       ///< compiled with compile_shader()
    uint64_t disk_errors = 0;  ///< disk entries found unreadable/corrupt, or writes that failed (never thrown)
    /// Warnings printed to std::cerr because the disk directory could not be written (at most 1 per cache: the
    /// first failed write says which directory and why; later failures are only counted in disk_errors).
    uint64_t disk_warnings = 0;
  };

  /// Memory cache, plus a disk cache in $SG_KERNEL_CACHE when that environment variable is set and non-empty.
  KernelCache();
  /// Memory cache, plus a disk cache in `disk_dir` (created when missing) unless it is empty; the environment is
  /// not read. `KernelCache(std::filesystem::path{})` is a memory-only cache.
  explicit KernelCache(std::filesystem::path disk_dir);

  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  /// The compiled shader for (glsl450, stage, opt): from memory, else from disk, else compile_shader(name, ...).
  /// The reference stays valid until clear() or the cache's destruction. `name` is used only in error messages
  /// (two kernels with the same source but different names share one entry).
  /// Throws sg::CompileError when the source does not compile (nothing is cached then).
  const CompiledShader& get_or_compile(const std::string& name, const std::string& glsl450, ShaderStage stage,
                                       const ShaderCompileOptions& opt = {});

  /// The cache key of (glsl450, stage, opt): FNV-1a 64 over the format/toolchain version tag, stage, options and
  /// source.
  static uint64_t key(const std::string& glsl450, ShaderStage stage, const ShaderCompileOptions& opt);

  /// Paths of the entry files for `key` in the disk directory (empty paths when there is no disk cache).
  struct EntryPaths {
    std::filesystem::path spv, gles, spvasm, manifest;
  };
  EntryPaths entry_paths(uint64_t key, ShaderStage stage) const;

  /// A disk entry's content checked against what it must hold for (key, glsl450, stage, opt): the manifest JSON
  /// (format version, key, toolchain, stage, options, the full GLSL 4.50 source, size and FNV-1a 64 of each file)
  /// and the files' bytes (SPIR-V magic, whole words). nullopt when anything is missing, malformed or different;
  /// never throws (the fuzz target tests/fuzz/fuzz_kernel_cache.cpp checks that).
  static std::optional<CompiledShader> parse_entry(std::string_view manifest, std::string_view spv,
                                                   std::string_view gles, std::string_view spvasm, uint64_t key,
                                                   const std::string& glsl450, ShaderStage stage,
                                                   const ShaderCompileOptions& opt);

  /// Small text records kept beside the shaders (the Vulkan autotuner's winning tile configurations, keyed by device
  /// and kernel): in memory, and in the disk directory as DIR/HASH.tune (HASH = hash_hex(key); written atomically).
  /// `key` must hash everything the record depends on. get_record: nullopt when there is none (or its file cannot be
  /// read); put_record never throws for disk failures (counted in Stats::disk_errors, warned about once).
  std::optional<std::string> get_record(uint64_t key);
  void put_record(uint64_t key, const std::string& value);

  Stats stats() const;
  /// Number of shaders held in memory.
  size_t size() const;
  /// Drops the in-memory entries (invalidates references returned so far); the disk directory is kept.
  void clear();
  /// The disk directory, empty when the cache is memory-only.
  const std::filesystem::path& disk_dir() const { return disk_dir_; }

 private:
  struct Entry {
    ShaderStage stage;
    ShaderCompileOptions opt;
    CompiledShader shader;
  };
  bool same_inputs(const Entry& e, const std::string& glsl450, ShaderStage stage,
                   const ShaderCompileOptions& opt) const;
  std::optional<CompiledShader> load_from_disk(uint64_t key, const std::string& glsl450, ShaderStage stage,
                                               const ShaderCompileOptions& opt);
  void store_to_disk(uint64_t key, ShaderStage stage, const ShaderCompileOptions& opt, const CompiledShader& s);

  std::filesystem::path disk_dir_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;  // node-based: references survive rehashing
  std::deque<Entry> collisions_;                 // entries whose key was taken by another source (64-bit collision)
  std::unordered_map<uint64_t, std::string> records_;  // get_record / put_record
  Stats stats_;
  /// Prints the unwritable-directory warning unless this cache printed it already (caller holds no lock).
  void warn_unwritable(const std::string& why);
};

}  // namespace sg
