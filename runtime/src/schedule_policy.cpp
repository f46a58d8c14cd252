// The target policy: (Target, BackendOptions) -> ScheduleOptions and EmitOptions (see sg/backend.h).
#include <algorithm>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/compute_kernel.h"

namespace sg {

namespace {

void validate(const BackendOptions& opt) {
  if (opt.max_outputs && *opt.max_outputs < 1)
    throw ValueError(fmt::format("BackendOptions::max_outputs must be >= 1 (empty = device limit), got {}", *opt.max_outputs));
  if (opt.min_parallel_texels && *opt.min_parallel_texels < 0)
    throw ValueError(fmt::format("BackendOptions::min_parallel_texels must be >= 0 (0 = off, empty = auto), got {}",
                                 *opt.min_parallel_texels));
  if (opt.row_planes && (*opt.row_planes < 1 || *opt.row_planes > 8))
    throw ValueError(fmt::format("BackendOptions::row_planes must be 1..8 (empty = auto), got {}", *opt.row_planes));
  if (opt.col_planes && *opt.col_planes != 1 && *opt.col_planes != 2)
    throw ValueError(fmt::format("BackendOptions::col_planes must be 1 (off) or 2 (empty = auto), got {}", *opt.col_planes));
}

/// The fragment part (FragmentScheduleOptions) of the fragment target's policy: row-aligned layouts, row planes (at
/// most `max_outputs`, one render target each) and column planes; transposed storage stays on (its default).
FragmentScheduleOptions fragment_options(const Target& t, const BackendOptions& opt, int max_outputs) {
  FragmentScheduleOptions f;
  f.row_aligned_layout = opt.row_layout.value_or(!t.cpu_device);
  f.row_planes = std::min(opt.row_planes.value_or(4), max_outputs);
  f.col_planes = opt.col_planes.value_or(2);
  return f;
}

/// The fragment target's policy: the neutral part and fragment_options; the compute part keeps its defaults (off).
/// The auto values were measured (docs/decisions.md): row and column planes pay on the H200 and on llvmpipe; split-K,
/// row-aligned layouts and union-domain draws only on GPUs.
ScheduleOptions texture_policy(const Target& t, const BackendOptions& opt) {
  ScheduleOptions so;
  so.unfused = opt.unfused;
  so.max_texture_width = t.limits.max_texture_width;
  so.max_texture_height = t.limits.max_texture_height;
  so.max_outputs = t.limits.max_outputs;
  if (opt.max_outputs) so.max_outputs = std::min(so.max_outputs, *opt.max_outputs);
  so.max_inputs = t.limits.max_bindings;
  so.max_loop_iterations = t.limits.max_loop_iterations;
  so.min_parallel_texels = opt.min_parallel_texels.value_or(t.cpu_device ? 0 : 16384);
  so.union_domains = opt.union_domains.value_or(!t.cpu_device);
  static_cast<FragmentScheduleOptions&>(so) = fragment_options(t, opt, so.max_outputs);
  so.loop_body_copies = 4 * so.row_planes;  // the tile mode unrolls a sum by 4, for each of its row planes
  return so;
}

/// The schedule half of target_policy.
ScheduleOptions schedule_policy(const Target& target, const BackendOptions& opt) {
  switch (target.storage) {
    case StorageModel::Textures: return texture_policy(target, opt);
    case StorageModel::Buffers: {  // the neutral and compute parts; the fragment part stays off
      ScheduleOptions so = compute_schedule_options(target.compute);
      // cpu-simd: C loops have no iteration limit (the 32768 of CPU devices is Mesa gallivm's): a reduction is split
      // only for the threads. Split-K: a contraction of few outputs over a long loop (a conv weight gradient: 72
      // outputs over 50176 products at b=64) is otherwise a handful of register tiles on one thread; its partial sums
      // over slices of its longest loop (per-element kernels: the slices do not match as a contraction) plus their sum
      // spread over the pool and ran faster even on one thread (the 28x28 CNN's two weight gradients 26.6 -> 19.7 ms
      // on the VM). Kernels of 4096 outputs and more (the MLP's contractions) stay whole; no tree reductions here,
      // so no lower bound on outputs.
      if (target.name == TargetName::CpuSimd) {
        so.max_loop_iterations = 1 << 24;
        so.min_parallel_texels = 1024;
        so.split_min_outputs = 0;
      }
      // The WGSL cpu plans (register tiles on CPU implementations of WebGPU: SwiftShader), where every factor load of
      // a tile is a per-lane gather (emit_regtile.cpp), two rules beyond the cpu plan's (issue 37, docs/perf-log/W21.md):
      // - an elementwise producer costing more than 12 scalar ops is stored once where it has several readers or feeds
      //   a contraction (24 elsewhere): a LayerNorm's output (5 loads and a rsqrt per factor value, recomputed for
      //   every tile along the other side) is then one load; charlm's LN + linear1 + GELU kernel 93 -> 48 ms, its LN
      //   weight gradients 44-66 -> 23-30 ms, plus 3-5 ms per stored LN (SwiftShader in Chromium, load ~7);
      // - one_long_reduction counts reductions of 64 iterations as long (256 elsewhere): the register tile sums the
      //   kernel's other contraction in its store one output at a time, its prologue recomputed for every product
      //   (charlm's attention backward, the probabilities' and values' gradients over 64 keys side by side: 120-141
      //   ms a block; as two tiled kernels 15-20 + 13-16 ms).
      if (target.name == TargetName::Wgsl && target.compute.register_tiles) {
        so.inline_cost_limit = 12;
        so.long_reduction_iterations = 64;
      }
      so.unfused = opt.unfused;
      if (opt.min_parallel_texels) so.min_parallel_texels = *opt.min_parallel_texels;  // split-K forced on / off
      if (opt.max_outputs) so.max_outputs = std::min(so.max_outputs, *opt.max_outputs);
      if (opt.union_domains) so.union_domains = *opt.union_domains;
      if (opt.reduce_tree) so.reduce_tree_workgroups = *opt.reduce_tree ? reduce_tree_workgroups(target.compute) : 0;
      return so;
    }
    case StorageModel::Host: break;
  }
  ScheduleOptions so;
  so.unfused = opt.unfused;
  return so;
}

/// The emit half of target_policy: the limits the compute emitters see, the tile class and tiles `opt` forces.
EmitOptions emit_policy(const Target& target, const BackendOptions& opt) {
  EmitOptions eo = emit_options(target);
  if (target.storage != StorageModel::Buffers) return eo;
  // the schedule's loop budget follows the device; the tile sizes may be forced (tests run GPU tiles on llvmpipe)
  if (opt.gpu_tiles && target.name != TargetName::CpuSimd) eo.limits.cpu_device = !*opt.gpu_tiles;
  if (target.name == TargetName::SpirvVulkan) eo.tiles = opt.vulkan.tiles;
  return eo;
}

}  // namespace

TargetPolicy target_policy(const Target& target, const BackendOptions& opt) {
  validate(opt);
  return {schedule_policy(target, opt), emit_policy(target, opt)};
}

ScheduleOptions schedule_options(const Target& target, const BackendOptions& opt) {
  return target_policy(target, opt).schedule;
}

}  // namespace sg
