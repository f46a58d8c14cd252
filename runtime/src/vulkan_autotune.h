// Private to the Vulkan backend: the autotuner of tiled contractions (BackendOptions::autotune).
#pragma once

#include "sg/compute_kernel.h"
#include "sg/emitter.h"
#include "sg/kernel_cache.h"
#include "sg/vulkan_device.h"

namespace sg::vk {

/// Kernel `k` emitted by `emitter` (the backend's spirv-vulkan emitter, sg/emitter.h) with the fastest of its
/// tile_candidates(plan, k) on `dev`, or `heuristic` unchanged when it is not a tiled contraction or the device has no
/// timestamps.
///  - Key: FNV-1a 64 of the tuner's version, the device (name, driver, vendor and device id), the emitter's limits
///    and the heuristic kernel's source (which names the shapes, the epilogue and the heuristic tiles). A record under
///    the key in `cache` (KernelCache::get_record: memory, or DIR/HASH.tune of SG_KERNEL_CACHE) is reused without timing
///    (ComputeKernel::tuning "autotune cache: ...").
///  - Otherwise (see vulkan_autotune.cpp's comment for why each step is there): the candidates are compiled first and
///    bound to scratch buffers of the kernel's bindings and sizes holding pseudo-random values; the heuristic runs
///    back to back for 250 ms (clock ramp); then 3 round-robin rounds over the candidates, each a few ms of untimed
///    dispatches and 5 timed ones (timestamps around each dispatch, barriers between), the median counted (one
///    round of one dispatch when a dispatch takes over 50 ms; candidates beyond an estimated 6 s dropped). The
///    fastest replaces the heuristic only when, in 5 alternating rounds against it, its median is >= 5 % below the
///    heuristic's and it won most rounds. The pick is stored (put_record) and returned (ComputeKernel::tuning
///    "autotuned: ..." with the times; ComputeKernel::tuning_ms the tuning's wall time).
/// Compile errors of a candidate propagate (CompileError: an emitter bug).
ComputeKernel autotune_kernel(Device& dev, KernelCache& cache, const Plan& plan, const Kernel& k,
                              const Emitter& emitter, ComputeKernel heuristic);

}  // namespace sg::vk
