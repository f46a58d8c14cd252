// Compute kernels for buffer-storage targets: schedule options and dispatch geometry over the compute emitter.
#include "sg/compute_kernel.h"

#include <algorithm>

#include <fmt/format.h>

#include "sg/emit.h"
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
  o.max_loop_iterations = 1 << 24;
  return o;
}

ComputeKernel emit_compute_kernel(const Plan& plan, const Kernel& k, const ComputeLimits& limits) {
  ComputeKernel ck;
  ck.glsl450 = emit_glsl450(plan, k, ShaderStage::Compute);
  ck.local_size = {static_cast<uint32_t>(kComputeWorkgroupSize), 1, 1};
  const int nbind = static_cast<int>(k.inputs.size() + k.outputs.size());
  if (nbind > limits.max_storage_buffers)
    throw UnsupportedError(fmt::format("kernel {}: {} storage buffers, the device allows {} per kernel", k.name, nbind,
                                       limits.max_storage_buffers));
  for (int v : k.inputs) ck.bindings.push_back(v);
  for (int v : k.outputs) ck.bindings.push_back(v);
  // one invocation per element of the first output; the emitter flattens (x, y) as y * (groups.x * 64) + x
  const int64_t n = std::max<int64_t>(plan.values[k.output()].layout.numel, 1);
  const int64_t groups = (n + kComputeWorkgroupSize - 1) / kComputeWorkgroupSize;
  const int64_t gx = std::min(groups, limits.max_workgroup_count);
  const int64_t gy = (groups + gx - 1) / gx;
  if (gy > limits.max_workgroup_count)
    throw UnsupportedError(fmt::format("kernel {}: {} elements need {} workgroups, more than the device's {} x {}", k.name, n,
                                       groups, limits.max_workgroup_count, limits.max_workgroup_count));
  ck.workgroups = {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 1};
  return ck;
}

}  // namespace sg
