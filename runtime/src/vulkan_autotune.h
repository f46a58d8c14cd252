// Private to the Vulkan backend: the autotuner of tiled contractions (BackendOptions::autotune).
#pragma once

#include "sg/compute_kernel.h"
#include "sg/kernel_cache.h"
#include "sg/vulkan_device.h"

namespace sg::vk {

/// Kernel `k` emitted with the fastest of tile_candidates(plan, k, limits) on `dev`, or `heuristic` unchanged when
/// it is not a tiled contraction or the device has no timestamps.
///  - Key: FNV-1a 64 of the tuner's version, the device (name, driver, vendor and device id), `limits` and the
///    heuristic kernel's source (which names the shapes, the epilogue and the heuristic tiles). A record under the
///    key in `cache` (KernelCache::get_record: memory, or DIR/HASH.tune of SG_KERNEL_CACHE) is reused without timing
///    (ComputeKernel::tuning "autotune cache: ...").
///  - Otherwise every candidate is compiled and dispatched on zero-filled buffers of the kernel's bindings: one
///    untimed dispatch, then up to 5 timed by timestamps around each dispatch (fewer when one takes over 50 ms), the
///    median counted; candidates after the first stop once the kernel's tuning has taken 6 s. Then the heuristic and the fastest are
///    timed again, alternating, 3 rounds after ~20 ms of warm-up dispatches each (an idle GPU runs at low clocks);
///    the fastest wins only when its median is below 0.97 of the heuristic's. The winner is stored
///    (put_record) and returned (ComputeKernel::tuning "autotuned: ..." with the candidates' count and times).
/// Compile errors of a candidate propagate (CompileError: an emitter bug).
ComputeKernel autotune_kernel(Device& dev, KernelCache& cache, const Plan& plan, const Kernel& k,
                              const ComputeLimits& limits, ComputeKernel heuristic);

}  // namespace sg::vk
