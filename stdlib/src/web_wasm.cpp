// The wasm plan of a bundle program (bundle.json `programs.NAME.wasm`, docs/BUNDLE.md): the kernels of the native
// cpu-simd backend (runtime/src/cpu_simd_backend.cpp: the cpu plan's schedule, emit_compute_kernel in C11) compiled
// to WebAssembly SIMD128 at export time, for the JavaScript runtime's wasm backend (runtime/web/wasm_executor.js).
// The memory contract is the compute one (sg/compute_kernel.h): one f32 array per value, row-major, bindings = the
// kernel's inputs then its outputs; the runtime places every array in the module's linear memory and calls each
// kernel's entry `void ENTRY(float* const* buf, int64_t begin, int64_t end)` for workgroups [0, workgroups), on one
// thread or split into contiguous ranges over a pool of Workers (runtime/web/wasm_pool.js).
//
// One module for one thread and for several: it imports its memory (env.memory, declared shared, at most 4 GiB), so
// that every Worker's instance runs on the same linear memory. Where the page is not cross-origin isolated (no
// SharedArrayBuffer) the runtime clears the shared flag of that import in its copy of the bytes (one byte, the same
// length) and gives it an ordinary memory; a module declaring a shared memory cannot take an ordinary one (checked in
// V8: "mismatch in shared state of memory"), and a second module would double the bundle's wasm bytes. The data
// segments are passive: the start function __wasm_init_memory (wasm-ld's, for --shared-memory) copies them once,
// guarded by an atomic flag in memory, so a Worker's instance leaves the memory as it is. Every instance has its own
// __stack_pointer (a wasm global, initialised to the module's one stack): the module exports it and each Worker's
// instance is given its own stack region (the register tiles and libm spill to the shadow stack: the matmul entries
// take 256 bytes of it).
//
// One module for every program (not one per program): the persistent values (parameters, Adam moments) are shared by
// the programs and must live once in one linear memory, and two modules importing one memory would place their own
// data (WASI libm's tables for expf, erff...) at the same addresses. Entries are renamed sg_pI_KERNEL (program I) so
// that the kernels of two programs never share a name; each program stays its own C file (static helpers per file).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/atomic_file.h"
#include "sg/subprocess.h"
#include "sg/backend.h"
#include "sg/cpu_simd_work.h"
#include "sg/target.h"
#include "web_wasm.h"


namespace sg::web::wasm {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// The C compiler for wasm32: $SG_WASM_CC, else clang-14 (Debian's; scripts/setup.sh installs it with lld-14's
/// wasm-ld, wasi-libc and libclang-rt-14-dev-wasm32).
std::string compiler() {
  if (const char* e = std::getenv("SG_WASM_CC"); e && *e) return e;
  return "clang-14";
}

/// Flags (why each): WASI's sysroot for <math.h> and libm (expf, erff, tanhf as C99 Annex F defines them, the CPU
/// reference's special cases); SIMD128 for the auto-vectorised loops of the register tiles; the cpu-simd backend's
/// IEEE flags (no contraction into fma, no -ffast-math: NaN, infinities, signed zeros and the kernel's summation
/// order as the reference has them); a library module: no entry point, no start files, the SG_EXPORT functions and
/// __heap_base exported (the runtime places its arrays above it and grows the memory), everything else hidden.
/// Threads: atomics and bulk memory (the memory may be shared: passive data segments, __wasm_init_memory), the memory
/// imported and shared (at most kMaxPages), __stack_pointer exported (each Worker's instance gets its own stack),
/// the stack size fixed (bundle.json `wasm.threads.stack_bytes`). --no-check-features: Debian's wasi-libc (libm) is
/// built without the atomics feature; its functions touch no memory but their stack and errno (a plain global here;
/// the kernels never read it), so its objects are safe in a shared memory.
constexpr int64_t kStackBytes = 65536;
constexpr int64_t kMaxPages = 65536;  // 4 GiB, all of wasm32
const std::vector<std::string>& compile_flags() {
  static const std::vector<std::string> f = {"--target=wasm32-wasi", "-O2", "-msimd128", "-matomics", "-mbulk-memory",
                                             "-std=c11", "-ffp-contract=off", "-fno-math-errno", "-fvisibility=hidden"};
  return f;
}
const std::vector<std::string>& link_flags() {
  static const std::vector<std::string> f = {
      "--target=wasm32-wasi", "-nostartfiles", "-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--export=__heap_base",
      "-Wl,--export=__stack_pointer", "-Wl,--import-memory", "-Wl,--shared-memory",
      fmt::format("-Wl,--max-memory={}", kMaxPages * 65536), fmt::format("-Wl,-z,stack-size={}", kStackBytes),
      "-Wl,--no-check-features", "-Wl,--strip-debug"};
  return f;
}

/// Source bytes per compiler job: the kernels of a program are cut (at kernel boundaries: every kernel's C carries
/// its own include-guarded prelude and helpers) into pieces compiled in parallel, then linked together. clang -O2
/// took 56 s for the 3 MB of the lstm train step's C as one file on the 2-core VM (load 6).
constexpr size_t kChunkBytes = 256 * 1024;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr const char* kPackages =
    "install clang-14, lld-14 (wasm-ld), wasi-libc and libclang-rt-14-dev-wasm32 (Debian packages; scripts/setup.sh), "
    "set SG_WASM_CC to another clang with a wasm32-wasi sysroot, or export without the wasm target (--targets "
    "webgpu,webgl2)";

}  // namespace

namespace {

/// The wasm plan's target: the cpu-simd preset, as the native cpu-simd backend schedules it.
Target wasm_target() { return make_target(TargetName::CpuSimd, preset_caps("cpu-simd")); }

}  // namespace

ScheduleOptions schedule_options() { return sg::schedule_options(wasm_target(), BackendOptions{}); }

Plans schedule_and_compile(const BundleSpec& spec, const std::string& dir, std::vector<std::string>& files) {
  const Target target = wasm_target();
  const TargetPolicy policy = target_policy(target, BackendOptions{});  // the one policy (sg/backend.h)
  const ScheduleOptions& so = policy.schedule;
  const auto emitter = make_emitter(target, policy.emit);  // C11 kernels (the cpu-simd target's emitter)
  const fs::path wdir = fs::path(dir) / "wasm";
  std::error_code ec;
  fs::remove_all(wdir, ec);  // an earlier export's
  fs::create_directories(wdir, ec);
  if (ec) throw IOError(fmt::format("cannot create {}: {}", wdir.string(), ec.message()));
  Plans out;
  std::vector<std::string> chunks;  // the sources the compiler jobs compile
  for (size_t i = 0; i < spec.programs.size(); ++i) {
    const BundleProgram& p = spec.programs[i];
    Plan plan = schedule(p.program, so);
    std::vector<ComputeKernel> ks;
    std::vector<std::string> entries;
    std::string tu = fmt::format("// shadergrad wasm plan: the kernels of program '{}' (C11 for clang --target=wasm32 "
                                 "-msimd128; the entries sg_p{}_KERNEL run workgroups [begin, end))\n", p.name, i);
    std::string chunk;
    for (const Kernel& k : plan.kernels) {
      ComputeKernel ck = emitter->compute_kernel(plan, k);
      const std::string entry = fmt::format("sg_p{}_{}", i, k.name);
      const std::string from = "SG_EXPORT void " + ck.entry + "(", to = "SG_EXPORT void " + entry + "(";
      const size_t at = ck.source.find(from);
      if (at == std::string::npos)
        throw CompileError(fmt::format("export (wasm): kernel {} of program '{}' has no entry '{}' in its C source",
                                       k.name, p.name, ck.entry));
      ck.source.replace(at, from.size(), to);
      ck.entry = entry;
      tu += ck.source + "\n";
      if (!chunk.empty() && chunk.size() + ck.source.size() > kChunkBytes) chunks.push_back(std::move(chunk)), chunk.clear();
      chunk += ck.source + "\n";
      entries.push_back(entry);
      ks.push_back(std::move(ck));
    }
    const std::string rel = fmt::format("wasm/{}.c", p.name);
    write_file_atomic((fs::path(dir) / rel).string(), tu);
    files.push_back(rel);
    if (!chunk.empty()) chunks.push_back(std::move(chunk));
    out.plans.push_back(std::move(plan));
    out.kernels.push_back(std::move(ks));
    out.entries.push_back(std::move(entries));
  }
  // compile the pieces in parallel (one job per hardware thread), then link them into the module
  const fs::path bdir = wdir / ".build";
  fs::create_directories(bdir, ec);
  if (ec) throw IOError(fmt::format("cannot create {}: {}", bdir.string(), ec.message()));
  const std::string cc = compiler();
  std::vector<std::vector<std::string>> jobs;
  std::vector<std::string> link = {cc};
  for (const std::string& f : link_flags()) link.push_back(f);
  link.push_back("-o");
  link.push_back((wdir / "kernels.wasm").string());
  for (size_t c = 0; c < chunks.size(); ++c) {
    const fs::path src = bdir / fmt::format("part{}.c", c), obj = bdir / fmt::format("part{}.o", c);
    write_file_atomic(src.string(), chunks[c]);
    std::vector<std::string> job = {cc};
    for (const std::string& f : compile_flags()) job.push_back(f);
    for (std::string a : {std::string("-c"), src.string(), std::string("-o"), obj.string()}) job.push_back(a);
    jobs.push_back(std::move(job));
    link.push_back(obj.string());
  }
  link.push_back("-lm");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> rcs(jobs.size() + 1, 0);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next++) < jobs.size();) rcs[j] = run_logged(jobs[j], bdir / fmt::format("part{}.log", j));
  };
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, jobs.size()); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  size_t failed = jobs.size();
  for (size_t j = 0; j < jobs.size() && failed == jobs.size(); ++j)
    if (rcs[j] != 0) failed = j;
  if (failed == jobs.size()) rcs.back() = run_logged(link, bdir / "link.log");
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int rc = failed == jobs.size() ? rcs.back() : rcs[failed];
  std::string text = read_text(bdir / (failed == jobs.size() ? std::string("link.log") : fmt::format("part{}.log", failed)));
  const std::string what = failed == jobs.size() ? "linking " + (wdir / "kernels.wasm").string()
                                                 : fmt::format("compiling part {} of the kernels of {}/*.c", failed,
                                                               wdir.string());
  fs::remove_all(bdir, ec);
  if (rc == -ENOENT)
    throw CompileError(fmt::format("export (wasm): the C compiler '{}' was not found: {}", cc, kPackages));
  if (rc != 0) {
    if (text.size() > 6000) text = text.substr(0, 6000) + "\n...";
    std::string hint = kPackages;
    if (text.find("wasm-ld") != std::string::npos) hint = "wasm-ld is missing: install lld-14 (" + hint + ")";
    else if (text.find("file not found") != std::string::npos || text.find("unable to find library") != std::string::npos)
      hint = "the wasm32-wasi sysroot (<math.h>, libm) is missing: install wasi-libc (" + hint + ")";
    throw CompileError(fmt::format("export (wasm): {} failed (exit status {}) {}:\n{}\n{}", cc, rc, what, text, hint));
  }
  files.push_back(kModulePath);
  std::string cmd = cc;
  for (const std::string& f : compile_flags()) cmd += " " + f;
  cmd += " -c PART.c (in parallel); " + cc;
  for (const std::string& f : link_flags()) cmd += " " + f;
  cmd += " PART.o... -lm";
  out.compiler = cmd;
  return out;
}

json describe_program(const Plan& plan, const std::vector<ComputeKernel>& kernels,
                      const std::vector<std::string>& entries, const std::string& c_file) {
  json j = describe_webgpu_program(plan, kernels, "");
  json ks = json::array();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const ComputeKernel& ck = kernels[i];
    json k = j["kernels"][i];
    json out = {{"name", k["name"]},
                {"entry", entries[i]},
                {"c", c_file},
                {"strategy", ck.strategy},
                {"workgroup_size", ck.local_size},
                {"grid", ck.workgroups},
                {"workgroups", int64_t{ck.workgroups[0]} * ck.workgroups[1] * ck.workgroups[2]},
                {"work", cpu_simd_kernel_work(plan, plan.kernels[i])},
                {"bindings", k["bindings"]},
                {"nodes", k["nodes"]}};
    ks.push_back(std::move(out));
  }
  j["kernels"] = ks;
  j["module"] = kModulePath;
  j["source"] = c_file;
  return j;
}

json section(const Plans& p) {
  const ComputeLimits l = preset_caps("cpu-simd").compute;
  return {{"target", {{"name", "wasm"},
                      {"preset", "cpu-simd"},
                      {"stage", "compute"},
                      {"language", "c11"},
                      {"storage", "linear-memory"},
                      {"register_tiles", l.register_tiles},
                      {"max_storage_buffers", l.max_storage_buffers},
                      {"max_workgroup_invocations", l.max_workgroup_invocations}}},
          {"module", kModulePath},
          {"memory", {{"import", "env.memory"}, {"shared", true}, {"maximum_pages", kMaxPages}}},
          {"threads", {{"parallel_work", kCpuSimdParallelWork},
                       {"chunks_per_thread", kCpuSimdChunksPerThread},
                       {"stack_bytes", kStackBytes}}},
          {"requires", {{"features", {"simd128", "bulk-memory", "atomics"}}}},
          {"compiler", p.compiler}};
}

}  // namespace sg::web::wasm
