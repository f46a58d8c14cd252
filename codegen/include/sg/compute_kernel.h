// shadergrad — the contract between compute codegen and the compute runtimes (Vulkan, GLES 3.1 compute).
//
// A compute target stores every materialised value in a storage buffer of floats (std430, row-major, the
// value's stored shape; a transposed temporary holds its transpose, as on the fragment target). A kernel is
// one dispatch, printed in one of two languages from the same kernel IR (ComputeLanguage): GLSL 4.50 (Vulkan
// flavour, glslang's input for the Vulkan and GLES 3.1 compute backends) or WGSL (WebGPU). Its source declares,
// in `set = 0` (GLSL) / `@group(0)` (WGSL):
//   binding b for b < kernel.inputs.size():   readonly buffer of value kernel.inputs[b] (WGSL: var<storage, read>)
//   binding inputs.size() + j:                writeonly buffer of value kernel.outputs[j] (WGSL: read_write)
// (ComputeKernel::bindings lists the value id of every binding in that order; a WGSL runtime must create explicit
// bind group layouts from it: a binding the entry point does not read is absent from a `layout: 'auto'` layout). No push constants, no
// uniforms: shapes are baked in. The runtime dispatches `workgroups` groups of `local_size` invocations;
// what each invocation computes (one element, or a register tile of a workgroup tile) is the emitter's
// business, and it guards every store, so extra invocations are harmless.
//
// Buffers: a pooled temporary buffer b holds Plan::buffers[b].numel floats (the largest value it serves);
// a value's buffer holds at least value.node->numel() floats; the runtime rounds every allocation up to a
// whole vec4 (16 bytes) so kernels may read 4 floats at once at a multiple-of-4 index below numel.
// Persistent values own a front and a back buffer, swapped after every step (update kernels write the back
// one: no kernel reads what it writes).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sg/schedule.h"

namespace sg {

/// What a compute device allows a kernel (from vkGetPhysicalDeviceProperties / GL_MAX_COMPUTE_*).
struct ComputeLimits {
  int max_storage_buffers = 8;            ///< storage buffers per kernel (bindings); GLES 3.1 guarantees 4
  int max_workgroup_invocations = 128;    ///< local_size x*y*z
  int64_t max_shared_bytes = 16384;       ///< shared (workgroup) memory per workgroup, bytes
  int64_t max_workgroup_count = 65535;    ///< per dispatch dimension
  int64_t max_buffer_bytes = int64_t{128} << 20;  ///< largest storage buffer binding, bytes
  int subgroup_size = 0;                  ///< 0 = unknown / no subgroup ops
  bool cpu_device = false;                ///< a CPU implementation (lavapipe, llvmpipe): fewer, larger invocations pay
};

/// The language a compute kernel is printed in.
enum class ComputeLanguage {
  Glsl450,  ///< GLSL 4.50, Vulkan flavour: glslang -> SPIR-V (Vulkan) -> SPIRV-Cross GLSL ES 3.10 (GLES compute)
  Wgsl,     ///< WGSL (W3C WebGPU Shading Language), entry point `main`; f32 only
};

/// "glsl450" or "wgsl".
const char* compute_language_name(ComputeLanguage language);

/// One compute kernel ready to compile and dispatch.
struct ComputeKernel {
  std::string source;                     ///< the kernel's source in `language`
  ComputeLanguage language = ComputeLanguage::Glsl450;
  std::array<uint32_t, 3> local_size{64, 1, 1};
  std::array<uint32_t, 3> workgroups{1, 1, 1};
  std::vector<int> bindings;              ///< value id per binding: kernel.inputs, then kernel.outputs
  /// How the emitter maps the kernel onto invocations (also named in the source's first comment line):
  /// "per-element" (one invocation per output element), "tiled-contraction" (a workgroup computes a tile of a
  /// matmul-like sum through shared memory, each invocation a register tile of outputs) or "tree-reduction"
  /// (one workgroup per output element, partial results combined in shared memory).
  std::string strategy;
  /// Shared (workgroup) memory the kernel declares, bytes (<= ComputeLimits::max_shared_bytes).
  int64_t shared_bytes = 0;
};

/// Schedule options for a buffer-storage target: multi-output fusion within the device's storage-buffer
/// budget, no texture-specific passes (no row/column planes, union-domain draws or row-aligned layouts), no
/// per-invocation loop budget on GPUs (on cpu_device the fragment target's 32768: Mesa's gallivm stops loops after
/// 65535 iterations per invocation, so longer reductions are split). Throws ValueError when the device allows
/// fewer than 2 storage buffers per kernel.
ScheduleOptions compute_schedule_options(const ComputeLimits& limits);

/// The compute kernel for kernel `k` of a plan made with compute_schedule_options(limits), printed in `language`
/// (codegen/src/emit_compute.cpp: strategies per-element, tiled-contraction, tree-reduction; see
/// ComputeKernel::strategy; both languages get the same strategy, tiles, workgroups and bindings).
/// Tile sizes and workgroup sizes follow `limits` (shared memory, invocations, cpu_device). Throws
/// UnsupportedError (naming the kernel and the limit: max_storage_buffers, max_workgroup_count,
/// max_workgroup_invocations, max_buffer_bytes) when the kernel cannot fit the device, and for plans whose values
/// use texture-plane storage (row/column planes, transposed temporaries, union-domain kernels).
ComputeKernel emit_compute_kernel(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                  ComputeLanguage language = ComputeLanguage::Glsl450);

}  // namespace sg
