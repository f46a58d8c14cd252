// The cpu-simd backend's C compiler driver and kernel cache (see cpu_simd_compiler.h).
#include "cpu_simd_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sg/atomic_file.h"
#include "sg/subprocess.h"
#include "sg/error.h"
#include "sg/kernel_cache.h"


namespace sg::cpu_simd {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

fs::path default_cache_dir() {
  if (std::string d = env("SG_KERNEL_CACHE"); !d.empty()) return fs::path(d) / "cpu-simd";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return fs::path(d) / "shadergrad" / "cpu-simd";
  if (std::string d = env("HOME"); !d.empty()) return fs::path(d) / ".cache" / "shadergrad" / "cpu-simd";
  return fs::temp_directory_path() / fmt::format("shadergrad-cpu-simd-{}", getuid());
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// This CPU's model name and feature flags (the first processor's lines of /proc/cpuinfo): -march=native code runs
/// only where these features are.
const std::string& cpu_signature() {
  static const std::string sig = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line) && (model.empty() || flags.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) flags = line;
    }
    return model + "|" + flags;
  }();
  return sig;
}

/// A name part no other run of any process uses at the same time: the process id and a counter.
std::string unique_id() {
  static std::atomic<uint64_t> n{0};
  return fmt::format("{}-{}", getpid(), n++);
}

std::string how_to_choose() {
  return "install a C compiler (scripts/setup.sh installs gcc) or choose one with SG_CC=<program> "
         "(BackendOptions::cpu_simd.compiler), or use another --backend";
}

}  // namespace

Library::~Library() {
  if (handle_) dlclose(handle_);
}

void* Library::symbol(const std::string& name) const {
  void* f = dlsym(handle_, name.c_str());
  if (!f) throw BackendError(fmt::format("cpu-simd: {} has no kernel entry point {}", path_, name));
  return f;
}

Compiler::Compiler(std::string compiler, std::string cache_dir)
    : compiler_(compiler.empty() ? env("SG_CC") : std::move(compiler)),
      dir_(cache_dir.empty() ? default_cache_dir() : fs::path(cache_dir)) {
  if (compiler_.empty()) compiler_ = "cc";
}

const std::vector<std::string>& Compiler::flags() {
  static const std::vector<std::string> f = {"-std=c11", "-O2", "-march=native", "-ffp-contract=off", "-fno-math-errno",
                                             "-fPIC", "-shared", "-fvisibility=hidden", "-w"};
  return f;
}

const std::string& Compiler::version() {
  std::lock_guard<std::mutex> l(version_mutex_);
  if (!version_.empty()) return version_;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const fs::path log = dir_ / fmt::format("version.{}.log", unique_id());
  const int rc = run_logged({compiler_, "--version"}, log);
  const std::string out = read_text(log);
  fs::remove(log, ec);
  if (rc == -ENOENT)
    throw BackendError(fmt::format("cpu-simd: the C compiler '{}' was not found; {}", compiler_, how_to_choose()));
  if (rc < 0)
    throw BackendError(fmt::format("cpu-simd: cannot run the C compiler '{}': {}; {}", compiler_, std::strerror(-rc),
                                   how_to_choose()));
  // a compiler that does not answer --version still gets its chance to compile (and to explain itself then)
  version_ = rc == 0 ? out.substr(0, out.find('\n')) : fmt::format("(--version: exit status {})", rc);
  return version_;
}

Build Compiler::build(const std::string& source, const std::string& what) {
  const std::string& ver = version();
  std::string tag = fmt::format("sg-cpu-simd v{}|{}|{}|", kFormatVersion, compiler_, ver);
  for (const std::string& f : flags()) tag += f + " ";
  tag += "|" + cpu_signature();
  const std::string key = hash_hex(fnv1a64(source, fnv1a64(tag)));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw BackendError(fmt::format("cpu-simd: cannot create the kernel cache directory {}: {} (set SG_KERNEL_CACHE or "
                                   "BackendOptions::cpu_simd.cache_dir)",
                                   dir_.string(), ec.message()));
  Build b;
  b.source_path = (dir_ / (key + ".c")).string();
  b.library_path = (dir_ / (key + ".so")).string();
  auto load = [&]() -> void* { return dlopen(b.library_path.c_str(), RTLD_NOW | RTLD_LOCAL); };
  if (fs::exists(b.library_path, ec)) {
    if (void* h = load()) {
      b.cache_hit = true;
      b.library = std::make_shared<Library>(h, b.library_path);
      return b;
    }
    fs::remove(b.library_path, ec);  // unloadable (truncated, another machine's): rebuild it
  }
  try {
    write_file_atomic(b.source_path, source);
  } catch (const IOError& e) {
    throw BackendError(fmt::format("cpu-simd: cannot write {}: {}", b.source_path, e.what()));
  }
  const std::string run_id = unique_id();  // threads of one process may build one key at once
  const std::string tmp = fmt::format("{}.tmp.{}", b.library_path, run_id);
  const fs::path log = dir_ / fmt::format("{}.{}.log", key, run_id);
  std::vector<std::string> argv = {compiler_};
  for (const std::string& f : flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", tmp, b.source_path, "-lm"});
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_logged(argv, log);
  b.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc == -ENOENT)
    throw BackendError(fmt::format("cpu-simd: the C compiler '{}' was not found; {}", compiler_, how_to_choose()));
  if (rc != 0) {
    fs::remove(tmp, ec);
    std::string msg = read_text(log);
    if (msg.size() > 4000) msg = msg.substr(0, 4000) + "\n...";
    throw BackendError(fmt::format("cpu-simd: the C compiler '{}' failed (exit status {}) on the kernels of {}: {} "
                                   "(compiler output in {}):\n{}\n{}",
                                   compiler_, rc, what, b.source_path, log.string(), msg.empty() ? "(no output)" : msg,
                                   how_to_choose()));
  }
  fs::remove(log, ec);
  fs::rename(tmp, b.library_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw BackendError(fmt::format("cpu-simd: cannot move the compiled library into {}: {}", b.library_path, ec.message()));
  }
  void* h = load();
  if (!h)
    throw BackendError(fmt::format("cpu-simd: cannot load {} (compiled from {}): {}", b.library_path, b.source_path,
                                   dlerror()));
  b.library = std::make_shared<Library>(h, b.library_path);
  return b;
}

}  // namespace sg::cpu_simd
