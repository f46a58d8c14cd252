// Compute kernels for buffer-storage targets: the schedule options (the emitter is emit_compute.cpp).
#include "sg/compute_kernel.h"

#include <algorithm>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

ScheduleOptions compute_schedule_options(const ComputeLimits& limits) {
  if (limits.max_storage_buffers < 2)
    throw ValueError(fmt::format("compute target: {} storage buffers per kernel; a kernel needs at least 2 (one input, one output)",
                                 limits.max_storage_buffers));
  ScheduleOptions o;
  o.max_outputs = std::clamp(limits.max_storage_buffers / 2, 1, 8);
  o.max_inputs = limits.max_storage_buffers - o.max_outputs;
  o.row_planes = 1;
  o.col_planes = 1;
  o.union_domains = false;
  o.row_aligned_layout = false;
  o.transpose_row_reduced = false;
  o.min_parallel_texels = 0;
  // Buffers have no 2-D size limit; the layout only records numel. Keep the texel grid within int64 range.
  o.max_texture_width = int64_t{1} << 24;
  o.max_texture_height = int64_t{1} << 24;
  // Mesa's gallivm (llvmpipe, lavapipe) stops every loop of an invocation after 65535 iterations in total, compute
  // shaders included (a silent wrong result: a 4x70000 min came back as a partial min): such devices keep the
  // fragment target's budget, so that long reductions are split into partial and final kernels.
  o.max_loop_iterations = limits.cpu_device ? 32768 : 1 << 24;
  return o;
}

}  // namespace sg
