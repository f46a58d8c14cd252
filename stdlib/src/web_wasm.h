// The wasm plan of a web bundle (bundle.json `wasm` and `programs.NAME.wasm`, docs/BUNDLE.md): every program
// scheduled like the native cpu-simd backend (sg::schedule_options over make_target(CpuSimd, preset_caps("cpu-simd"))),
// its kernels printed as C11 (emit_compute_kernel(.., ComputeLanguage::C)), one C file per program (wasm/PROGRAM.c)
// and one WebAssembly module for all of them (wasm/kernels.wasm: clang-14 --target=wasm32-wasi -msimd128, linked by
// wasm-ld against WASI's libm; no imports). Internal to sg_stdlib (web_export.cpp calls it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/compute_kernel.h"
#include "sg/schedule.h"
#include "sg/web_export.h"

namespace sg::web::wasm {

/// The module's path in the bundle (one module for every program: persistent values live once in its memory).
inline constexpr const char* kModulePath = "wasm/kernels.wasm";

/// Every program scheduled and emitted for the wasm plan; `entries[i][k]` is kernel k's exported function.
struct Plans {
  std::vector<Plan> plans;
  std::vector<std::vector<ComputeKernel>> kernels;
  std::vector<std::vector<std::string>> entries;
  std::string compiler;  ///< the compiler command that built the module (for bundle.json)
  double compile_ms = 0;
};

/// The ScheduleOptions of the wasm plan: the cpu-simd target's (no -march=native: the C is portable).
ScheduleOptions schedule_options();

/// Schedules and emits every program of `spec`, writes wasm/PROGRAM.c (i = program index) and compiles them into
/// DIR/wasm/kernels.wasm (appending the files to `files`). IOError for a file that cannot be written; CompileError
/// naming the packages when clang-14 or wasm-ld is missing, with the compiler's output when it fails.
Plans schedule_and_compile(const BundleSpec& spec, const std::string& dir, std::vector<std::string>& files);

/// bundle.json `programs.NAME.wasm`: the webgpu plan's values, pooled buffers and interface (describe_webgpu_program)
/// with the kernels as the wasm module runs them (entry, workgroups in all, bindings).
nlohmann::json describe_program(const Plan& plan, const std::vector<ComputeKernel>& kernels,
                                const std::vector<std::string>& entries, const std::string& c_file);

/// bundle.json `wasm`: the target it was made for and the module.
nlohmann::json section(const Plans& p);

}  // namespace sg::web::wasm
