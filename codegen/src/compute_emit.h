// Private to codegen: the pieces of the buffer-storage compute emitter (emit_compute.cpp, emit_tiled.cpp); each
// prints in the language of its Lang (compute_lang.h).
#pragma once

#include <array>
#include <optional>
#include <set>
#include <string>

#include "compute_glsl.h"
#include "compute_lang.h"
#include "sg/compute_kernel.h"

namespace sg::compute {

struct Contraction;  // contraction.h

/// `#version 450` (GLSL) and the comment naming the kernel, its strategy, outputs, notes, graph nodes and source lines.
std::string kernel_header(const Plan& plan, const Kernel& k, const std::string& strategy, const Lang& lang);
/// The storage-buffer declarations (binding order: inputs, then outputs) and load_<value>(i) for the inputs in
/// `loaded` (kernel input slots), each index clamped into its buffer.
/// C: `unclamped` (when given) are the inputs also read through loadu_<value> (Lang::load_function).
std::string buffer_declarations(const Plan& plan, const Kernel& k, const std::set<int>& loaded, const Lang& lang,
                                bool clamped = true, const std::set<int>* unclamped = nullptr);
/// `int iD = ...;` lines decomposing the row-major flat index `flat` of `shape` into coordinates i0.. (the innermost
/// named i<D><last_suffix>).
std::string coordinates(const Shape& shape, const std::string& flat, int indent, const Lang& lang,
                        const std::string& last_suffix = "");
/// A grid of `groups` workgroups as x (<= max_workgroup_count) by y; UnsupportedError when it does not fit.
std::array<uint32_t, 3> grid_for(const Kernel& k, int64_t groups, const ComputeLimits& limits);

/// The shared-memory tiled kernel of a matmul-like contraction (emit_tiled.cpp), or nullopt when the kernel has
/// none or its grid / tiles do not fit `limits` (then `*not_tiled`, when given, says which limit). `tiles` empty =
/// default_tile_config. The same kernel in both languages (GLSL 4.50 and WGSL).
std::optional<ComputeKernel> emit_tiled_contraction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                    const std::optional<TileConfig>& tiles, const Lang& lang,
                                                    std::string* not_tiled = nullptr);
/// The register-tiled kernel of a matmul-like contraction (emit_regtile.cpp): each invocation computes a small
/// register tile of C over the whole K from global memory, no workgroup memory and no barriers (CPU
/// implementations of WebGPU: ComputeLimits::register_tiles), or nullopt when the kernel has no contraction or its
/// grid does not fit (then `*not_tiled` says why).
std::optional<ComputeKernel> emit_register_tiled(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang, std::string* not_tiled = nullptr);
/// Invocations per workgroup of a cpu-plan kernel (ComputeLimits::register_tiles; emit_regtile.cpp) of `invocations`
/// per batch and `batch` batches: 64 (SIMD lanes times a few fibers on a CPU implementation), halved down to 16 while
/// the dispatch would have fewer than 4 workgroups. A CPU implementation spreads a dispatch over its threads by
/// workgroups (SwiftShader: whole workgroups per worker, each workgroup's SIMD groups in turn): one workgroup of 64
/// register tiles (the MLP b=32's x.W1^T, docs/perf-log/W12b.md) or 64 LayerNorm weight-gradient sums
/// (docs/perf-log/W23.md) ran on one thread.
int cpu_plan_workgroup_size(int64_t invocations, int64_t batch, const ComputeLimits& limits);
/// emit_tiled.cpp: `int <prefix><d> = ...;` lines splitting flat index `flat` over the dims `dims` of `shape`
/// (row-major among them), indented by `indent` levels.
std::string split_dims(const Shape& shape, const std::vector<int>& dims, const std::string& flat, const char* prefix,
                       int indent, const Lang& lang);
/// emit_tiled.cpp: `int r0 = ...;` lines splitting flat loop index `flat` over reduction r's loop variables
/// (row-major), indented by `indent` levels.
std::string split_loop(const KExprPtr& r, const std::string& flat, int indent, const Lang& lang);
/// emit_tiled.cpp: a function `float NAME(int idx, int k)` evaluating `factor` (of contraction `c` of kernel `k`,
/// output stored shape `shape`) at flat side index idx over `dims` and flat loop index k (`guarded`: 0 outside
/// [0, extent) x [0, K); else the callers keep idx and k inside); batch coordinates come from the workgroup id's z.
/// `coord_args` (unguarded only): `float NAME(int i<d>..., int <loop var>...)` instead, the coordinates of `dims`
/// and the reduction's loop variables split by the caller (once per register row, and by nested loops).
/// Records the inputs it loads and the helpers it needs. `unclamped` (C only, when given): a factor whose indices
/// are in range by construction loads unclamped (loadu_<value>), its inputs recorded there.
std::string factor_function(const Plan& plan, const Kernel& k, const Contraction& c, const Shape& shape,
                            const KExprPtr& factor, const std::vector<int>& dims, int64_t extent, const char* name,
                            std::set<int>& loaded, MathHelpers& helpers, const Lang& lang, bool guarded = true,
                            bool coord_args = false, std::set<int>* unclamped = nullptr);
/// emit_tiled.cpp: `signature` + `guard_and_coords` + the epilogue of every output of `k` at one element, with `acc`
/// standing for reduction r, each output stored at the element's flat index.
std::string epilogue_function(const Plan& plan, const Kernel& k, const KExprPtr& r, const std::string& signature,
                              const std::string& guard_and_coords, const Shape& shape, std::set<int>& loaded,
                              MathHelpers& helpers, const Lang& lang);
/// emit_tiled.cpp: the functions a tiled or register-tiled contraction kernel calls: `factor_a(idx, k)` and
/// `factor_b(idx, k)` (factor_function, `guarded` as there) and `store_tile(m, n, acc)` (the epilogue of every output
/// at tile element (m, n), returning when it is outside M x N; batch coordinates from the workgroup id's z).
/// `coord_args`: the factors take split coordinates and loop variables (factor_function).
std::string tile_functions(const Plan& plan, const Kernel& k, const Contraction& c, const Shape& shape,
                           std::set<int>& loaded, MathHelpers& helpers, const Lang& lang, bool guarded,
                           bool coord_args = false, std::set<int>* unclamped = nullptr);
/// Shared memory a tiled kernel of configuration `t` declares for contraction `c`, bytes (emit_tiled.cpp: the
/// tiles' padding depends on how each factor is staged).
int64_t tile_shared_bytes(const TileConfig& t, const Contraction& c);
/// tile_config.cpp: `t` fitted to the contraction and the device (bk <= K and within max_shared_bytes, group_m 1
/// where the tile grid has no more rows than a group or does not fit one dispatch dimension).
TileConfig fit_tile_config(TileConfig t, const ComputeLimits& l, const Contraction& c);
/// tile_config.cpp: the heuristic tile configuration (see that file's comment).
TileConfig default_tile_config(const ComputeLimits& l, const Contraction& c);
/// tile_config.cpp: the autotuner's candidates, the heuristic's first (see that file's comment).
std::vector<TileConfig> candidate_configs(const ComputeLimits& l, const Contraction& c);
/// A workgroup tree reduction per output element for kernels of few outputs (<= 1024) with a long (>= 128, >= the
/// element count) sum/max/min reduction, on GPUs also for <= 8192 outputs of >= 512 iterations (emit_tiled.cpp), or
/// nullopt.
std::optional<ComputeKernel> emit_tree_reduction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang);
/// One subgroup per output element (emit_tiled.cpp; GLSL on GPUs with subgroup arithmetic): for kernels of fewer
/// elements than 256 per compute unit whose reductions (outside any other) reach 32 iterations, such as LayerNorm's
/// row statistics: each such reduction strided over the lanes and combined by a subgroup operation, or nullopt.
std::optional<ComputeKernel> emit_subgroup_rows(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                const Lang& lang);
/// A union-domain kernel (several domain blocks, ScheduleOptions::union_invocation_blocks) as one dispatch whose
/// workgroups are partitioned among the blocks, one invocation per element of its block (emit_union.cpp).
ComputeKernel emit_union_blocks(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang);
/// Window blocks (window_blocks.cpp; the webgpu cpu plan): per output coordinate D its block factor sD (1 = not
/// blocked) where every use of iD is iD / sD, iD % sD or iD itself and some reduction depends on the blocked
/// coordinates only through the quotients iD / sD (a max-pool gradient over windows that do not overlap: the
/// window's argmax). One invocation then computes the block's elements, that reduction once.
struct WindowBlocking {
  std::vector<int64_t> factor;                ///< per coordinate of the stored shape: sD (1 = not blocked)
  Shape grid;                                 ///< the stored shape divided by the factors: one invocation each
  std::vector<int64_t> offsets;               ///< per element of a block: its flat offset from the block's first
  std::vector<std::vector<KExprPtr>> exprs;   ///< per element of a block: the kernel's exprs there (over wD, iD)
  std::vector<KExprPtr> all_exprs() const;    ///< every element's exprs, for a KPrinter's roots
};
/// The window blocking of `exprs` over the output's stored shape `shape`, or nullopt where none applies or gains
/// (no reduction free of the offsets within a block, more than 16 elements per block).
std::optional<WindowBlocking> window_blocking(const std::vector<KExprPtr>& exprs, const Shape& shape);
/// The statements of one invocation of a window-blocked kernel at grid index `elem`: its coordinates (wD for the
/// blocked ones, iD for the others), `<prefix>base` (the block's first flat element), the printed values, and the
/// stores of every output (names `outputs`, in the exprs' order) of every element of the block.
std::string window_block_code(const WindowBlocking& wb, const Shape& shape, const std::vector<std::string>& outputs,
                              KPrinter& p, int indent, const std::string& prefix, const Lang& lang);
/// A header comment line body describing `wb` (factors and elements per invocation).
std::string window_block_note(const WindowBlocking& wb);

/// One invocation per output element (always applicable). `not_tiled`: why a contraction is not tiled (a line of the
/// kernel's header comment when not empty).
ComputeKernel emit_per_element(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang,
                               const std::string& not_tiled = "");

}  // namespace sg::compute
