// Private to runtime: the cpu-simd backend's C compiler driver and kernel cache (runtime/src/cpu_simd_compiler.cpp).
//
// One translation unit of C kernels (emit_compute_kernel(.., ComputeLanguage::C)) becomes one shared library:
//   key  = FNV-1a 64 of (cache format version, the compiler's path and `--version` line, the flags, this CPU's
//          /proc/cpuinfo model and flags (-march=native code is only valid on a CPU with those features), source)
//   DIR/KEY.c    the translation unit (kept: a compiler error names it, and a reader can look at what ran)
//   DIR/KEY.so   the library, written by the compiler to a temporary name and renamed into place (atomic: a
//                concurrent process sees a whole library or none)
//   DIR/KEY.PID-N.log  the compiler's output when it failed (a name per build: concurrent builds of one key)
// A library that exists is a hit: the compiler does not run. A library that dlopen refuses (truncated, another
// architecture) is rebuilt once.
//
// Flags, and why: -std=c11 -O2 (gcc 12 vectorises at -O2 with its very-cheap cost model; the kernels' loops are
// simple); -march=native (the host's SIMD width: AVX2/AVX-512 where present; the key names the CPU);
// -ffp-contract=off (no fused multiply-add: every product rounded before it is added, as C's own semantics say and
// as the kernel IR means it; the same bits on every machine whether or not its CPU has FMA units);
// -fno-math-errno (sqrtf inlines to one instruction; errno is not a result: the values are IEEE's either way); no
// -ffast-math, -ffinite-math-only or -fassociative-math: NaN, infinities, signed zeros and the summation order are
// the kernel's. -fPIC -shared for dlopen; -fvisibility=hidden with the entry points exported (SG_EXPORT).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sg::cpu_simd {

/// A loaded library of kernels (dlclose on destruction).
class Library {
 public:
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  /// The address of exported function `name`; BackendError naming the library when it has none.
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

/// What build() did.
struct Build {
  std::shared_ptr<Library> library;
  std::string source_path, library_path;
  bool cache_hit = false;
  double compile_ms = 0;
};

class Compiler {
 public:
  /// `compiler`: a program name or path ("" = env SG_CC, else "cc"); `cache_dir` "" = the default (sg/backend.h:
  /// CpuSimdOptions::cache_dir). Runs nothing yet.
  Compiler(std::string compiler, std::string cache_dir);
  /// The library of translation unit `source` (`what` names it in messages): from the cache directory, else
  /// compiled. Throws BackendError when the compiler is missing or fails (its message, the source's path, and how
  /// to choose another compiler). Thread-safe; concurrent builds of one source (threads or processes) each compile and
  /// rename their library into place, one of them is kept.
  Build build(const std::string& source, const std::string& what);
  const std::string& compiler() const { return compiler_; }
  const std::filesystem::path& cache_dir() const { return dir_; }
  /// The flags every translation unit is compiled with (besides -o).
  static const std::vector<std::string>& flags();

 private:
  /// The compiler's `--version` first line (run once); BackendError when the program does not exist.
  const std::string& version();
  std::string compiler_;
  std::filesystem::path dir_;
  std::mutex version_mutex_;
  std::string version_;
};

}  // namespace sg::cpu_simd
