// shadergrad — the contract between compute codegen and the compute runtimes (Vulkan, GLES 3.1 compute).
//
// A compute target stores every materialised value in a storage buffer of floats (std430, row-major, the
// value's stored shape; a transposed temporary holds its transpose, as on the fragment target). A kernel is
// one dispatch, printed from the same kernel IR in the language of its target's emitter (ComputeLanguage;
// make_emitter, sg/emitter.h): GLSL 4.50 (Vulkan flavour, glslang's input for the Vulkan and GLES 3.1 compute
// backends), WGSL (WebGPU) or C (cpu-simd: buffers are its entry's arguments). Its source declares, in `set = 0`
// (GLSL) / `@group(0)` (WGSL):
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
#include <optional>
#include <string>
#include <string_view>
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
  /// The device runs GL_KHR_shader_subgroup_arithmetic (with _basic and _vote) in compute shaders: tree reductions
  /// of the GLSL 4.50 (Vulkan) language then combine within subgroups first (emit_tiled.cpp). Set by the Vulkan
  /// backend only (VkPhysicalDeviceSubgroupProperties; GLES 3.1 and WGSL have no subgroup operations).
  bool subgroup_arithmetic = false;
  /// Multiprocessors (NVIDIA SMs, from VK_NV_shader_sm_builtins) or compute units of the device; 0 = unknown (the
  /// schedule then assumes 128, a large GPU). Sizes split-K (compute_schedule_options).
  int compute_units = 0;
  bool cpu_device = false;                ///< a CPU implementation (lavapipe, llvmpipe): fewer, larger invocations pay
  /// Contractions as register tiles read straight from the buffers, no workgroup memory or barriers, and no tree
  /// reductions (strategy "register-tiled", codegen/src/emit_regtile.cpp): the webgpu plan for CPU implementations
  /// of WebGPU (SwiftShader), where every barrier switches all fibers of a workgroup. Off elsewhere.
  bool register_tiles = false;
  /// With register_tiles, in WGSL: the lanes of a subgroup of this many invocations share one factor's loads (4 =
  /// SwiftShader's subgroups). An invocation loads 1/4 of the shared side's factor values of a step and takes the
  /// others from the lanes beside it with `subgroupBroadcast` (codegen/src/emit_regtile.cpp): the kernels need the
  /// 'subgroups' feature and subgroups of exactly 4 consecutive invocations (the runtime checks both before it picks
  /// the plan). 0 = off; only 4 is supported.
  int broadcast_lanes = 0;
  /// Consecutive output elements one invocation of a per-element kernel computes, along the innermost dimension (1 =
  /// one element each). The webgpu cpu plans take 4 (stdlib/src/web_webgpu.cpp): a CPU implementation pays per
  /// invocation for the flat index's split into coordinates and for every load's lane-by-lane address, which a run
  /// of 4 shares (codegen/src/emit_compute.cpp element_run says where it applies).
  int element_run = 1;
};

/// The language a compute kernel is printed in.
enum class ComputeLanguage {
  Glsl450,  ///< GLSL 4.50, Vulkan flavour: glslang -> SPIR-V (Vulkan) -> SPIRV-Cross GLSL ES 3.10 (GLES compute)
  Wgsl,     ///< WGSL (W3C WebGPU Shading Language), entry point `main`; f32 only
  /// C11 for the cpu-simd target (the cpu plan only: ComputeLimits::register_tiles; no workgroup memory, barriers or
  /// subgroups, UnsupportedError otherwise): every kernel a set of static functions prefixed with its name and one
  /// exported entry point `void ENTRY(float* const* buf, int64_t begin, int64_t end)` (ComputeKernel::entry) that
  /// runs workgroups [begin, end) of the grid (flat index x + gx (y + gy z)), each workgroup's invocations in turn,
  /// over the kernel's buffers in binding order (inputs, then outputs). Many kernels concatenate into one
  /// translation unit (the prelude and the math helpers are include-guarded); freestanding but for <math.h>.
  C,
};

/// "glsl450", "wgsl" or "c".
const char* compute_language_name(ComputeLanguage language);

/// How a tiled contraction maps onto a workgroup (codegen/src/emit_tiled.cpp's file comment has the kernel's
/// structure). A workgroup of tx x ty invocations computes a bm() x bn() tile of C; each invocation a tm x tn
/// register tile. Chosen by the heuristic default_tile_config or by a backend's autotuner among tile_candidates.
struct TileConfig {
  int tx = 16, ty = 16;  ///< invocations per workgroup along n (x) and m (y)
  int tm = 8, tn = 8;    ///< outputs per invocation along m and n (the register tile)
  int bk = 8;            ///< k values per chunk staged in shared memory
  /// Workgroup order: 1 = row-major over the tile grid; G > 1 = groups of G tile rows, walked column by column
  /// within a group (Triton's GROUP_SIZE_M), so that the workgroups running at once share A's rows and B's columns
  /// in the L2 cache. Applied only when the grid's tiles fit one dispatch dimension.
  int group_m = 1;
  /// Register tiles of 4 adjacent rows (columns) per group of 4 registers, read from shared memory as one vec4
  /// (a side whose tm (tn) is not a multiple of 4 keeps scalar reads).
  bool vec4 = false;
  /// Register double buffering: the next chunk's global loads are issued before the current chunk's FMAs.
  bool prefetch = false;
  /// K rotation: the workgroups of tile row r start their k loop at chunk r mod (K / BK) and wrap around, so the
  /// rows of A read at one moment lie in different columns (against DRAM-channel and cache-set conflicts of
  /// power-of-2 row strides); the sums add their chunks in another order (rounding differs by tile row).
  bool k_rotate = false;
  int bm() const { return ty * tm; }
  int bn() const { return tx * tn; }
  int threads() const { return tx * ty; }
  /// "16x16.8x8.k8.g8.v4.pf.kr" (invocations, register tile, chunk, group, flags); parse_tile_config reads it back.
  std::string str() const;
  bool operator==(const TileConfig&) const = default;
};

/// The TileConfig written as TileConfig::str(), or nullopt when `s` is not one (or has a field out of range).
std::optional<TileConfig> parse_tile_config(std::string_view s);

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
  /// (one workgroup per output element, partial results combined in shared memory) or "union-blocks" (a union-domain
  /// kernel: its workgroups partitioned among its domain blocks, one invocation per element of its block).
  std::string strategy;
  /// Shared (workgroup) memory the kernel declares, bytes (<= ComputeLimits::max_shared_bytes).
  int64_t shared_bytes = 0;
  /// "tiled-contraction": the tile configuration used (after fitting it to the shape: bk <= K, group_m 1 where the
  /// grid does not fit one dispatch dimension); empty for other strategies.
  std::optional<TileConfig> tiles;
  /// How the tile configuration was picked, set by the backend: "" (heuristic), "autotuned" (timed on the device
  /// now) or "autotune cache" (a winner stored earlier in the kernel cache).
  std::string tuning;
  /// Wall time the backend spent picking the configuration (timing candidates, or reading the cache record), ms;
  /// 0 for the heuristic.
  double tuning_ms = 0;
  /// ComputeLanguage::C: the exported function running a range of workgroups ("sg_" + the kernel's name); else empty.
  std::string entry;
  /// The subgroup size the kernel's subgroup operations assume (ComputeLimits::broadcast_lanes; WGSL `enable
  /// subgroups;`), 0 = it uses none.
  int subgroup_size = 0;
};

/// Schedule options for a buffer-storage target: multi-output fusion within the device's storage-buffer
/// budget, two-stage tree reductions on GPUs (reduce_tree_workgroups), union-domain kernels of small independent
/// groups with the invocation range partitioned among their blocks (union_invocation_blocks), no texture-specific
/// passes (no row/column planes, transposed temporaries or row-aligned layouts), no per-invocation loop budget on GPUs (on cpu_device the fragment target's 32768: Mesa's gallivm stops loops after
/// 65535 iterations per invocation, so longer reductions are split). Throws ValueError when the device allows
/// fewer than 2 storage buffers per kernel.
ScheduleOptions compute_schedule_options(const ComputeLimits& limits);

/// Stage-1 workgroups of a two-stage tree reduction on this device (ScheduleOptions::reduce_tree_workgroups): 8 per
/// compute unit, 128 units when unknown. compute_schedule_options turns the tree on with it on GPUs (not on
/// cpu_device, where the loop budget already splits long reductions).
int64_t reduce_tree_workgroups(const ComputeLimits& limits);

/// The compute kernel for kernel `k` of a plan made with compute_schedule_options(limits), printed in `language`
/// (codegen/src/emit_compute.cpp: strategies per-element, tiled-contraction, tree-reduction; see
/// ComputeKernel::strategy; both languages get the same strategy, tiles, workgroups, bindings and workgroup memory;
/// a contraction whose tiles do not fit `limits` is per-element, its source's header saying which limit).
/// Tile sizes and workgroup sizes follow `limits` (shared memory, invocations, cpu_device). Throws
/// UnsupportedError (naming the kernel and the limit: max_storage_buffers, max_workgroup_count,
/// max_workgroup_invocations, max_buffer_bytes) when the kernel cannot fit the device, and for plans whose values
/// use texture-plane storage (row/column planes, transposed temporaries). A kernel of several domain blocks (a
/// union-domain kernel of union_invocation_blocks) has strategy "union-blocks": its workgroups partitioned among
/// the blocks, one invocation per element of its block (codegen/src/emit_union.cpp).
/// `language`: GLSL 4.50, WGSL or C (the same kernel in each; C for the cpu plan only).
/// `tiles`: the tile configuration of a "tiled-contraction" kernel (ignored for the other strategies); empty = the
/// heuristic (default_tile_config). UnsupportedError (max_workgroup_invocations, max_shared_bytes) when a given
/// configuration does not fit the device.
/// Backends, dumps and exports call it through their target's Emitter (make_emitter, sg/emitter.h: glsl-es-compute
/// and spirv-vulkan print GLSL 4.50, wgsl WGSL, cpu-simd C), whose EmitOptions give `limits` and `tiles`.
ComputeKernel emit_compute_kernel(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                  ComputeLanguage language = ComputeLanguage::Glsl450,
                                  const std::optional<TileConfig>& tiles = std::nullopt);
/// GLSL 4.50 with a given tile configuration (the autotuner's candidates come from Emitter::compute_kernel(plan, k,
/// tiles), which calls the form above).
inline ComputeKernel emit_compute_kernel(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                         const std::optional<TileConfig>& tiles) {
  return emit_compute_kernel(plan, k, limits, ComputeLanguage::Glsl450, tiles);
}

/// The tile configurations an autotuner may time for kernel `k` (the heuristic's first, then variants of tile shape,
/// chunk, workgroup order, vec4 and prefetch that fit `limits` and the contraction's extents; at most 16, in a fixed
/// order); empty when emit_compute_kernel would not emit `k` as a tiled contraction.
/// (At most 20 candidates.)
std::vector<TileConfig> tile_candidates(const Plan& plan, const Kernel& k, const ComputeLimits& limits);

}  // namespace sg
