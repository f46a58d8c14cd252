// When a kernel of the cpu-simd plan is worth splitting over threads: the rule of the native cpu-simd backend's thread
// pool (runtime/src/cpu_simd_backend.cpp) as one definition, which the bundle's wasm plan writes into bundle.json
// (`wasm.threads.parallel_work`, each kernel's `work`) for the JavaScript runtime's worker pool (runtime/web/wasm_pool.js).
#pragma once

#include "sg/kernel_ir.h"
#include "sg/schedule.h"

namespace sg {

/// The work of kernel `k` of `plan`: output elements x (1 + loop iterations per element).
inline double cpu_simd_kernel_work(const Plan& plan, const Kernel& k) {
  double elements = 0;
  for (int o : k.outputs) elements += static_cast<double>(plan.values[o].node->numel());
  return elements * (1 + kloop_iterations(k.exprs));
}

/// Work below which a kernel runs on the calling thread (and a kernel of one workgroup always does): waking the pool
/// costs some microseconds, what an elementwise kernel of ~10^4 elements takes.
inline constexpr double kCpuSimdParallelWork = 32768;

/// A split kernel's workgroups are cut into min(workgroups, threads x this) contiguous chunks, taken in turn.
inline constexpr int kCpuSimdChunksPerThread = 4;

}  // namespace sg
