// bench_ops' Vulkan pieces: the compute ALU and bandwidth probes (the roofline's ceilings), the per-kernel profile
// of a train step, and the FLOP / byte counts of a program (the roofline's x axis). Timings are only printed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/backend.h"

namespace bench_vk {

/// The device's measured ceilings (hand-written compute shaders, not our generated code).
struct Ceilings {
  double alu_gflops = 0;  ///< 8 independent vec4 FMA chains per invocation (2 flops per lane per step)
  double bw_gbs = 0;      ///< out[i] = 2 * in[i] over vec4 buffers larger than the L2 cache: (read + write) / time
  bool ok = true;         ///< both results checked against the CPU
  std::string check;
};

/// Runs both probes on the Vulkan backend's device (timestamps around each dispatch; median of the last 20 of 40, so
/// the GPU has clocked up), prints one line each.
Ceilings run_probes(sg::Backend& vulkan);

/// FLOPs and compulsory bytes of a program: matmul / conv / conv gradients 2 per multiply-add, reductions and
/// elementwise maps 1 per element read or written; bytes = the fed inputs, constants and persistent values read
/// once, their updates and the outputs written once (a kernel cannot move less).
struct Work {
  double flop = 0, bytes = 0;
};
Work program_work(const sg::Plan& plan);

/// The roofline line of one case: achieved FLOP/s and bytes/s next to the ceilings, the bound min(ALU, AI x BW) and
/// the fraction of it reached. Printed as a table row; returned as JSON.
nlohmann::json roofline_row(const std::string& label, const Work& w, double ms, const Ceilings& c);
void print_roofline_header();

/// Per-kernel profile of a train step on the profiled Vulkan backend (timestamps, a barrier between every dispatch):
/// kernel, strategy and tile config, its time, the gap before it (barrier + launch), the sums; beside them the
/// unprofiled step's wall time (`plain`: only the dependent dispatches separated by barriers). Median over `reps`.
nlohmann::json profile_step(sg::Backend& profiled, sg::Backend& plain, const sg::Program& step,
                            const std::vector<sg::Feed>& feeds, const std::string& label, int reps);

}  // namespace bench_vk
