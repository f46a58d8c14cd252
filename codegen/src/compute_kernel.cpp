// Compute kernels for buffer-storage targets: the schedule options (the emitter is emit_compute.cpp).
#include "sg/compute_kernel.h"

#include <algorithm>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

int64_t reduce_tree_workgroups(const ComputeLimits& limits) {
  return int64_t{8} * (limits.compute_units > 0 ? limits.compute_units : 128);
}

ScheduleOptions compute_schedule_options(const ComputeLimits& limits) {
  if (limits.max_storage_buffers < 2)
    throw ValueError(fmt::format("compute target: {} storage buffers per kernel; a kernel needs at least 2 (one input, one output)",
                                 limits.max_storage_buffers));
  ScheduleOptions o;
  ComputeScheduleOptions& compute = o;  // the compute part (sg/schedule.h), which texture targets leave off
  // The fragment part off: no row or column planes, row-aligned layouts or transposed temporaries (texture storage
  // only; the compute emitters refuse them). Transposed storage is the one choice it defaults on.
  static_cast<FragmentScheduleOptions&>(o) = {};
  o.transpose_row_reduced = false;
  // inputs and outputs are storage buffers of one budget: at most half of it outputs (8 at most), the rest of it
  // inputs, the two together within it
  o.max_outputs = std::clamp(limits.max_storage_buffers / 2, 1, 8);
  o.max_inputs = limits.max_storage_buffers - 1;
  o.max_storage_buffers = limits.max_storage_buffers;
  // Union-domain kernels with the invocation range partitioned among the blocks: small independent kernels (the
  // optimizer updates of biases and small layers, with their gradients) become one dispatch, one barrier.
  o.union_domains = true;
  compute.union_invocation_blocks = true;
  // Split-K on GPUs: a contraction with fewer outputs than ~4 workgroups of 256 per multiprocessor and a loop of
  // >= 256 iterations (the MLP's x @ W1 at batch 128: 128 x 128 outputs over K = 784, 64 workgroups of 16 x 16 that
  // each walk all of K, 0.040 of the step's 0.087 ms on the H200) becomes partial sums over K slices (one tiled
  // contraction with the slice as batch) plus a kernel summing the slices with the epilogue. Kernels of <= 8192
  // outputs are left to the tree-reduction strategy (one workgroup per output); CPU devices gain nothing.
  const int64_t units = limits.compute_units > 0 ? limits.compute_units : 128;
  o.min_parallel_texels = limits.cpu_device ? 0 : units * 256;  // texels of 4 outputs: 1024 outputs per unit
  compute.split_min_outputs = 8192;
  // Two-stage tree reductions on GPUs: a reduction to a few outputs over a long axis (a full sum of 1024 x 4095 ran on
  // one workgroup: ~13 GB/s on the H200) becomes about 8 workgroups per compute unit of partial sums, then one
  // workgroup per output. CPU devices already split such loops for the loop budget.
  compute.reduce_tree_workgroups = limits.cpu_device ? 0 : reduce_tree_workgroups(limits);
  // One long reduction per multi-output kernel on GPUs (the tree-reduction strategy parallelises one) and in the cpu
  // plan (register tiles: the strategy tiles one contraction and sums any other in its store, one output at a time,
  // its inlined producers recomputed for every product; charlm's two blocks' GELU weight gradients side by side took
  // 290 of a 704 ms cpu-simd step, docs/perf-log/P37.md). Other CPU devices (lavapipe, llvmpipe) run the same total
  // work either way.
  compute.one_long_reduction = !limits.cpu_device || limits.register_tiles;
  // GPUs tile a contraction in workgroup memory and sum any other reduction of the kernel in its store, serially per
  // element: one contraction per such kernel (the cpu plans' register tiles and CPU devices keep their kernels)
  compute.one_contraction_per_tiled_kernel = !limits.cpu_device && !limits.register_tiles;
  // The cpu plan: a math-library call (exp, erf, ...) weighs as much as inline_cost_limit, so that a producer calling
  // one is stored once rather than recomputed per register tile of its contraction (charlm's GELU: docs/perf-log/P37.md)
  if (limits.register_tiles) o.math_call_cost = 24;
  // The cpu plan: at most one zero-padding read in a register-tiled factor (loop_body_copies 16 copies of it count
  // against 16), so a concat read by a contraction (the q/k/v gradients before the in_proj gradients: 3 branches with
  // integer division and remainder per factor element and tile) is stored once and its readers load it; charlm's
  // in_proj weight gradient 36 -> 9.5 ms (docs/perf-log/P37.md)
  if (limits.register_tiles) o.max_guarded_reads = 16;
  // Buffers have no 2-D size limit; the layout only records numel. Keep the texel grid within int64 range.
  o.max_texture_width = int64_t{1} << 24;
  o.max_texture_height = int64_t{1} << 24;
  // Mesa's gallivm (llvmpipe, lavapipe) stops every loop of an invocation after 65535 iterations in total, compute
  // shaders included (a silent wrong result: a 4x70000 min came back as a partial min): such devices keep the
  // fragment target's budget, so that long reductions are split into partial and final kernels.
  o.max_loop_iterations = limits.cpu_device ? 32768 : 1 << 24;
  // register tiles evaluate each factor of a contraction for 4 steps of k and 4 rows or columns of the tile
  o.loop_body_copies = limits.register_tiles ? 16 : 1;
  return o;
}

}  // namespace sg
