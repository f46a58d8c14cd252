// shadergrad — the fusion scheduler and the Plan (kernels + memory plan) it produces.
//
// schedule() is a pipeline of named passes (codegen/src/schedule.cpp; one file per pass in codegen/src/schedule/,
// listed in schedule/state.h, each with its invariants): target-neutral materialisation and fusion, the fragment
// target's storage and launch passes (transposed storage, union domains, row/column planes) when the options ask
// for them, then the memory plan. The options come from sg::schedule_options (sg/backend.h) for a Target
// (sg/target.h). It partitions a Program into Kernels (fusion groups). Every node is either *materialised* (it owns
// a texture: leaves, program outputs, update values, reductions/matmul/conv/pool that cannot be fused into
// their consumer, elementwise values too costly to recompute) or *inlined* into its consumers' expressions.
// Rules (each has a "schedule rule <name>" test in tests/test_schedule.cpp, besides the kernel counts there):
//  - Map and movement ops (reshape, permute, expand, slice, pad, one_hot) are inlined into every consumer
//    when their expression is cheap (no reduction inside, few ops) — into a matmul/reduce/conv consumer this is
//    the prologue; otherwise materialised.
//  - A reduction/matmul/conv/pool is inlined into its only consumer when that consumer is a Map of the same shape
//    (the epilogue: matmul + bias + relu is one kernel); otherwise it ends its group and is materialised.
//  - Scalar hoisting: a single-element value computed from single-element values only (no reduction inside) and
//    read by a kernel of more elements is materialised (once per step, not per element of its reader) when it
//    costs at least Options::hoist_scalar_min_cost scalar ops; multi-output fusion then computes it in the
//    program's single-element kernel (the step counter's update, the loss).
//  - Multi-output fusion (Options::max_outputs > 1): materialised values with the same number of elements are
//    computed by one kernel (one output per render target) when each reads the others only at its own element
//    (vertical: Adam's parameter update reads the new m and v it computes) or they share an input (horizontal:
//    m and v both read the gradient). A reduction read only by one such kernel is then computed inside it
//    instead of being stored (the weight gradient becomes a local of the optimizer kernel).
//  - Union-domain kernels (Options::union_domains): independent groups of different shapes (no member of one
//    reads a member of the other) become one draw over the largest output's extent with one block per domain;
//    every texture such a draw writes is allocated at that extent (Value::extent) while keeping its own layout.
//  - Options::unfused materialises every node (one kernel per node: debug mode).
// The memory plan assigns each temporary value a texture from a pool by liveness (a texture is reused once its
// last reader has run; a kernel never reads the texture it writes); persistent values (Param/State) own two
// textures (front/back) that swap after each step, so an update kernel never reads what it writes.
#pragma once

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sg/program.h"
#include "sg/kernel_ir.h"
#include "sg/texture_layout.h"

namespace sg {

/// How a value's storage is managed.
enum class ValueKind : uint8_t {
  Input,       ///< fed each step (uploaded)
  Persistent,  ///< Param/State: front/back textures, swapped after each step
  Constant,    ///< uploaded once
  Temp,        ///< produced by a kernel, lives in a pooled buffer
};

/// A texture extent in texels (width x height): a kernel's draw size, a texture's allocation.
struct Extent {
  int64_t width = 1;
  int64_t height = 1;
  /// The smallest extent covering both (componentwise max).
  Extent cover(const Extent& o) const { return {std::max(width, o.width), std::max(height, o.height)}; }
  bool covers(const Extent& o) const { return width >= o.width && height >= o.height; }
  int64_t texels() const { return width * height; }
  bool operator==(const Extent&) const = default;
};

/// The column coordinate variable of kernels with column planes (Value::col_planes): plane q's expressions read
/// the tensor column `jc + 4 * q + lane`; the emitter declares it from the last output coordinate.
inline constexpr const char* kColumnVar = "jc";

/// The part of a value's storage that only texture targets (StorageModel::Textures, sg/target.h) use: how the value
/// is spread over textures (transposed, row and column planes) and the extent its textures are allocated at. A buffer
/// target's plan (compute_schedule_options, sg/compute_kernel.h) keeps the defaults (not transposed, one plane) and
/// the compute emitters refuse any other; its storage ignores `extent` (a buffer holds numel floats).
struct ValueTextureStorage {
  /// The texture holds the transpose of this 2-D value (element (i, j) at flat index j * rows + i): chosen for
  /// temporaries that every reader reduces over axis 0 (a matmul's B operand, a sum over rows), so the readers'
  /// loops walk contiguous texels. Kernels, downloads and hooks account for it; never set for outputs/updates.
  bool transposed = false;
  /// Row planes (ScheduleOptions::row_planes): the value is stored in `planes` textures; viewed as a matrix of
  /// rows of its last axis ([numel / C, C], C = last dimension), row r lives in texture (plane) r % planes as that
  /// plane's row r / planes. `layout` is one plane's layout. Chosen for matmul-like kernels so that one fragment
  /// computes the same 4 columns of `planes` rows and writes them to `planes` render targets (a register tile:
  /// the shared operand's texels are fetched once for all rows). Readers' loads pick the plane; hooks and
  /// downloads interleave the rows back. Never set for inputs, persistent values or updates.
  ///
  /// With column planes (col_planes = Pc > 1, ScheduleOptions::col_planes) the texels of each row are dealt out
  /// as well: `planes` = Pr * Pc textures in all (Pr = row_planes() row planes), element (r, c) of the [rows, C]
  /// view lives in plane (r % Pr) * Pc + (c / 4) % Pc at that plane's row r / Pr, column ((c / 4) / Pc) * 4 + c % 4
  /// (C a multiple of 4 * Pc). One fragment then computes a Pr x 4*Pc register tile (Pr * Pc render targets).
  int planes = 1;
  /// Column planes (see `planes`): 1 (none) or the number Pc of column planes; `planes` is a multiple of it.
  int col_planes = 1;
  /// Row planes Pr (see `planes`): planes / col_planes.
  int row_planes() const { return planes / col_planes; }
  std::vector<int> plane_buffers;  ///< Temp with planes > 1: the pooled buffer of each plane (buffer == [0])
  /// The extent every texture holding this value must be ALLOCATED at (>= layout's width x height; addressing
  /// always follows `layout`): a draw of a union-domain kernel renders its Kernel::extent, which GLES clips to
  /// the intersection of its attachments, so a texture written by such a draw is allocated at least that large.
  /// Temp: its pooled buffer's extent (the largest draw writing that buffer); Persistent: the largest draw writing
  /// its next value (front and back swap after a step, so both get it), the same for that update value;
  /// Input/Constant: the layout's size. Set by the memory plan.
  Extent extent;
};

/// One materialised tensor. Every target stores its `layout.numel` elements (row-major; a temporary in pooled slot
/// `buffer`): texture targets in RGBA32F textures of `layout`'s width x height texels, spread as the fields of
/// ValueTextureStorage say; buffer targets (StorageModel::Buffers) as numel floats addressed by flat index (there
/// `layout`'s width and height are only the schedule's texel grid).
struct Value : ValueTextureStorage {
  int id = -1;
  NodePtr node;
  ValueKind kind = ValueKind::Temp;
  TextureLayout layout;
  std::string name;        ///< readable identifier used in shaders ("x", "fc1_weight", "t12")
  int buffer = -1;         ///< Temp: pooled buffer index; Persistent/Input/Constant: -1
  int update_of = -1;      ///< if this value is the next value of a persistent value: that value's id
  int producer = -1;       ///< kernel index writing it (Temp), -1 otherwise
  int last_use = -1;       ///< last kernel index reading it
  /// The shape one texture holds (the producing kernel's iteration domain): the node's shape, reversed when
  /// transposed; with row planes the second-to-last axis divided by row_planes(), with column planes the last
  /// axis divided by col_planes.
  Shape stored_shape() const {
    Shape s(node->shape.begin(), node->shape.end());
    if (transposed) std::reverse(s.begin(), s.end());
    if (row_planes() > 1 && s.size() >= 2) s[s.size() - 2] /= row_planes();
    if (col_planes > 1 && !s.empty()) s.back() /= col_planes;
    return s;
  }
};

/// One fusion group = one GPU launch. It renders one or more output values (multiple render targets), in one or
/// more *domain blocks*. Within a block all outputs have the same number of elements, hence the same texture
/// layout, and output j is computed by exprs[j] at the same element (coordinates i0.. of the stored shape of the
/// block's first output). A kernel whose outputs have row planes (Value::planes = P, then all of them; such a
/// kernel has one block) has P exprs per output, one per plane and render target: exprs[j * P + p] is output j at
/// row P * i + p of the coordinates i of the plane's shape; with column planes (Value::col_planes = Pc) P * Pc
/// exprs per output, exprs[j * P * Pc + p * Pc + q] (plane p * Pc + q) reading the tensor column kColumnVar + 4 q in
/// place of the last coordinate (kColumnVar is declared by the emitter). An output read by another output of the same block at
/// the same element is computed once (the expression is shared), so e.g. an optimizer's m, v and parameter
/// updates of one parameter are one pass. A union-domain kernel (ScheduleOptions::union_domains) has several
/// blocks of different domains that do not read each other (e.g. db2+Adam(b2) [10], dh [128,128] and dW2+Adam(W2)
/// [10,128] after dlogits): its draw covers `extent` and each block computes the fragments inside its own layout.
struct Kernel {
  std::string name;                    ///< stable readable name: "k03_matmul_add_relu"
  std::vector<int> outputs;            ///< value ids written; render target j = outputs[j] (with P planes: j * P + p)
  std::vector<KExprPtr> exprs;         ///< per output (and row plane): its value at element (i0, i1, ...) of its block's domain
  std::vector<int> inputs;             ///< value ids read, in sampler order (KExpr Load input index)
  std::vector<NodePtr> nodes;          ///< graph nodes this kernel computes (topological order)
  std::string comment;                 ///< the nodes and user source lines, for the generated source
  std::string notes;                   ///< how the kernel was transformed (split-K, row planes), for the header
  /// Per output: its domain block (0, 1, ...; the outputs of a block are contiguous, blocks in order). Empty
  /// means one block (all 0).
  std::vector<int> block;
  /// The draw size in texels: the widest x the tallest output layout (a single-domain kernel: its layout's).
  Extent extent;
  int output() const { return outputs.front(); }  ///< the first output (every kernel has at least one)
  int block_of(size_t j) const { return block.empty() ? 0 : block[j]; }  ///< domain block of output j
  int blocks() const { return block.empty() ? 1 : block.back() + 1; }    ///< number of domain blocks
};

// The options of schedule(), in three parts by the targets they concern (StorageModel, sg/target.h). A target's
// policy (sg::target_policy, runtime/src/schedule_policy.cpp) fills the neutral part (ScheduleCommon) for every
// target, the fragment part (FragmentScheduleOptions) for texture targets (texture_policy there) and the compute part
// (ComputeScheduleOptions) for buffer targets (compute_schedule_options, sg/compute_kernel.h); the host target (cpu)
// takes the defaults with `unfused`. The passes never ask which target they run for and read every field, so each
// of the two target parts defaults to its choices off: a texture target leaves the compute part at its defaults,
// and a buffer target the fragment part, except transposed storage, which is on by default and which
// compute_schedule_options turns off (transpose_row_reduced). The parts are plain bases of ScheduleOptions, so
// `opt.field` and ScheduleOptions::field name any of them.

/// The neutral part: fusion, inlining, loop and binding budgets every target's schedule uses (max_storage_buffers
/// only buffer targets set). max_texture_width and max_texture_height bound the texel grid of every value's
/// TextureLayout (buffer targets set a 2^24 grid, within which only numel matters).
struct ScheduleCommon {
  bool unfused = false;         ///< one kernel per node (debug mode)
  int64_t max_texture_width = 16384;
  int64_t max_texture_height = 0;  ///< 0 = max_texture_width
  double inline_cost_limit = 24;   ///< max scalar ops of an elementwise producer recomputed in several places
  /// Max scalar ops of an elementwise producer inlined into a convolution (Conv2d and its two gradient ops), which
  /// reads each input element from Cout/groups x KH x KW windows and so recomputes the producer that often; a
  /// costlier one is stored once (a BatchNorm's normalisation + ReLU before the next conv: docs/perf-log/20.md).
  double conv_prologue_cost_limit = 8;
  /// Max scalar ops of a chain of elementwise ops inlined into one kernel: a node whose inlined producers cost more
  /// is materialised, so a kernel's expression stays bounded however long the chain (GPU compilers' time grows
  /// faster than the shader's size; issue 19: 256 chained maps did not compile on llvmpipe within minutes).
  double max_inline_chain_cost = 256;
  /// Max code size (kcode_size: distinct kernel-IR nodes, a math-helper call counting 16) of a multi-output kernel
  /// or union-domain kernel: a node joins a fusion group (a group a union) only while the kernel stays within it (a
  /// single node over it is a kernel of its own). Drivers' compile time grows with a kernel's code (Mesa's llvmpipe
  /// and lavapipe: about a millisecond per node, 20-40 ms per tanh(softplus(x)) layer); a long chain of layers
  /// becomes many small kernels, most of them equal up to names, which a backend compiles once each
  /// (kernel_code_key, sg/emit.h). The MLP's and CNN's kernels are within 200.
  double max_kernel_size = 256;
  /// Scalar hoisting: a single-element elementwise value computed from single-element values only (no reduction
  /// inside) that costs at least this many scalar ops and is read by a kernel of more elements is materialised, so
  /// it is computed once per step instead of once per element of its reader (Adam's bias corrections 1 - beta^t
  /// from the step counter). Cheaper ones stay inlined: a store and a load would cost more than they save where no
  /// other single-element kernel can take them. Infinity turns the rule off.
  double hoist_scalar_min_cost = 8;
  /// Max loop iterations per kernel invocation (4 elements per fragment counted). Larger reductions are split
  /// into a partial-reduction kernel plus a final one. llvmpipe silently stops loops after 65535 iterations in
  /// total per invocation (a wrong-result trap, not an error); long loops also risk GPU watchdogs elsewhere.
  double max_loop_iterations = 32768;
  /// Max guarded reads of one kernel, 0 = no limit: reads of a zero-padded tensor (a Pad node: `in range ? load :
  /// 0`, a concat's operands, the adjoint of a slice), which a fragment shader compiles to one branch each in its loop
  /// over a texel's 4 elements. The WebGL2 bundle target sets kWebGL2MaxGuardedReads (sg/web_export.h): SwiftShader,
  /// Chromium's WebGL2 without a GPU, lost the GPU process or rendered zeros for shaders of 31 or more such branches.
  /// A node reading more has its inlined producers with the most guarded reads materialised (a Map of more zero-padded
  /// operands is split first, as for the binding budget); multi-output groups and sunk reductions keep within it.
  int max_guarded_reads = 0;
  /// Copies of a heavy op's loop body (its inlined prologue included) the target's emitter writes per loop iteration,
  /// with which the guarded reads of that prologue count against max_guarded_reads: the fragment emitter's tile mode
  /// unrolls a sum by 4 and, with row planes, computes row_planes rows (WebGL2 bundles: 4 x row_planes = 16); WGSL
  /// register tiles of CPU devices evaluate each factor for 4 steps of k x 4 rows or columns (16). A concat read by a
  /// contraction (the q/k/v gradients' concatenation before the in_proj gradients: 3 guarded reads, 48 as emitted) is
  /// then stored once instead of recomputed in its readers' loops (issue 37: SwiftShader took 215 s and 13 GB to
  /// compile the WebGL2 kernel with those 48 branches, over 4 minutes for the WebGPU one).
  int loop_body_copies = 1;
  /// Max outputs (render targets) of one kernel; 1 disables multi-output fusion. GLES 3.0 guarantees 4
  /// (GL_MAX_DRAW_BUFFERS); the GLES backend passes the device's value (at most 8).
  int max_outputs = 4;
  /// Max samplers of a kernel made by multi-output fusion or union (GLES 3.0 guarantees 16 texture units); an
  /// input with row planes takes one sampler per plane, and row planes are only given where every reader stays
  /// within this.
  int max_inputs = 16;
  /// Max inputs + outputs of one such kernel together, 0 = no joint limit (the fragment target: samplers and render
  /// targets are separate budgets). Buffer targets bind both as storage buffers under one per-kernel limit
  /// (WebGPU's maxStorageBuffersPerShaderStage): an optimizer's fused update (dW1 with m, v and W1: 7 inputs, 3
  /// outputs) fits a budget of 10 that a fixed split of 5 inputs + 5 outputs would refuse.
  int max_storage_buffers = 0;
  /// Split-K for parallelism: a single-output kernel with fewer output texels than this whose loops run 256 or
  /// more iterations per element is split into partial sums over chunks of its longest loop (each chunk at least
  /// 64 iterations) plus a final sum, so that about this many fragments run in parallel; such a reduction is
  /// also kept out of multi-output kernels (which are not split); docs/decisions.md has the case that motivated
  /// it. 0 = off (the default; the GLES backend turns it on
  /// for hardware GPUs, not for CPU rasterisers such as llvmpipe, where more fragments buy nothing).
  int64_t min_parallel_texels = 0;
  /// The inlining cost (in the scalar ops of inline_cost_limit and its siblings) of one call of exp, log, log1p, pow,
  /// sin, cos, tanh, sigmoid, erf or erfc in an elementwise producer; 1 = as any op (the default). The cpu plan sets
  /// more: in C and WebAssembly each is a scalar math-library call of several nanoseconds, and a producer inlined into
  /// a register-tiled contraction is recomputed once per tile along the other side (GELU's erfc in charlm's MLP
  /// matmuls: 8 times per element, 26-34 ms a kernel; docs/perf-log/P37.md), so such a producer is stored once.
  double math_call_cost = 1;
  /// Union-domain kernels: after multi-output grouping, groups of different iteration domains that do not read
  /// each other (directly or through inlined nodes) become one draw with one block per domain, within
  /// max_outputs, max_inputs and max_loop_iterations (the blocks' loops added up); groups sharing more inputs are
  /// merged first; kernels the split-K or loop-budget rules split, and kernels the row-planes rule will tile,
  /// are left alone. Textures written by such a
  /// draw are allocated at its extent (Value::extent); see union_max_extra_bytes. On by default; false gives one
  /// iteration domain per kernel.
  bool union_domains = true;
};

/// The fragment part (texture targets: StorageModel::Textures): storage spread over textures (transposed storage,
/// row-aligned layouts, row and column planes) and the allocation growth of union-domain draws. Off by default except
/// transpose_row_reduced; a buffer target keeps it all off.
struct FragmentScheduleOptions {
  /// Store 2-D temporaries whose every reader reduces over their axis 0 transposed (Value::transposed): the
  /// weight gradient x^T.dh then reads dh along contiguous texels (1 fetch per 4 rows instead of 4).
  bool transpose_row_reduced = true;
  /// Texture layouts from TextureLayout::for_shape (tensor rows kept whole inside texture rows: 2-D texture
  /// cache locality on GPUs) instead of TextureLayout::for_numel. Off by default (llvmpipe); the GLES backend
  /// turns it on for hardware GPUs.
  bool row_aligned_layout = false;
  /// Row planes (Value::planes) for one-block kernels (outputs x row_planes <= max_outputs) with a sum that the
  /// emitter's tile mode unrolls (matmul, x.W^T and their split-K partials), when every output is a temporary
  /// whose last axis is a multiple of 4, whose row count is a multiple of row_planes and whose planes keep at
  /// least `min_plane_texels` texels each, and every kernel reading it stays within max_inputs samplers: each
  /// fragment then computes a row_planes x 4 tile, its loads of the shared operand serving all rows (8 texel
  /// fetches per 64 multiply-adds with 4 planes instead of 5 per 16). 1 = off (the default); values above
  /// max_outputs are clamped to it.
  int row_planes = 1;
  /// Column planes (Value::col_planes): 1 = off (the default), 2 = a kernel given row planes also gets 2 column
  /// planes when its outputs x row planes x 2 <= max_outputs, the last axis of its (row-planed) stored shape is a
  /// multiple of 8 and each of the row planes x 2 textures keeps at least `min_plane_texels` texels: a fragment
  /// then computes a row_planes x 8 tile (two output texels per row), each texel of the row operand serving 8
  /// columns instead of 4 (with 4 row planes: 12 texel fetches per 128 multiply-adds instead of 8 per 64). Other
  /// values throw ValueError from schedule().
  int col_planes = 1;
  /// Row planes: the fewest texels one plane may have (fewer fragments per draw would leave a GPU idle).
  int64_t min_plane_texels = 1024;
  /// Union-domain kernels: max bytes a merged kernel's textures may be allocated beyond its outputs' own layouts
  /// (each output, front and back for a parameter's next value, covers the draw's extent; e.g. the MLP's
  /// db1+Adam(b1) [128] with dW1+Adam(W1) [128,784] costs 3 MiB). Keeps a bias of a large layer from being
  /// allocated at its weight's size.
  int64_t union_max_extra_bytes = int64_t{16} << 20;
};

/// The compute part (buffer targets: StorageModel::Buffers): the GPU reduction strategies (split-K's lower bound,
/// two-stage trees, one long reduction per kernel) and union-domain dispatches partitioned among their blocks. Off by
/// default; a texture target keeps it off.
struct ComputeScheduleOptions {
  /// Split-K applies only to kernels with more output elements than this (compute targets on GPUs: 8192, the
  /// outputs that the tree-reduction strategy already runs one workgroup each; 0 = any).
  int64_t split_min_outputs = 0;
  /// Two-stage tree reductions (compute targets on GPUs; 0 = off, the default): a single-output kernel of n output
  /// elements, each a reduction of at least 16384 loop iterations, with 4 n <= reduce_tree_workgroups, is split like
  /// split-K into about reduce_tree_workgroups / n partial reductions of contiguous chunks (at least 2048 iterations
  /// each; the outermost loop with enough iterations is cut, so a chunk of a reduction over all of a row-major tensor
  /// is whole rows) and a final reduction of the partials: stage 1 runs one workgroup per partial instead of one per
  /// output (a reduction to a scalar ran on one workgroup). Such reductions stay out of multi-output kernels.
  int64_t reduce_tree_workgroups = 0;
  /// One long reduction per multi-output kernel (compute targets on GPUs and the cpu plan; false = any number, the
  /// default): a group whose kernel would compute two distinct reductions of long_reduction_iterations or more loop
  /// iterations per element is not formed. The compute emitter's tree-reduction strategy gives one workgroup to the
  /// kernel's main reduction and leaves any other to the workgroup's first invocation alone: the two 16x16x3x3 conv
  /// weight gradients of a ResNet block fused side by side took 11.8 ms of a 15.9 ms train step on an H100, the second
  /// one's 50176 products per output summed by one invocation. The cpu plan's register tiles likewise tile one
  /// contraction and sum any other in the kernel's store, one output at a time (issue 37: charlm's two GELU weight
  /// gradients side by side, 290 of a 704 ms cpu-simd step; docs/perf-log/P37.md).
  bool one_long_reduction = false;
  /// The loop iterations per element from which one_long_reduction counts a reduction as long.
  double long_reduction_iterations = 256;
  /// One contraction per tiled kernel (GPU compute targets: the tiled strategy's shared-memory tiles; false = off, the
  /// default): a kernel the compute emitter would tile as a contraction takes no member adding another reduction of
  /// 32 or more steps, which the tiled strategy would sum in its store one element at a time (charlm's attention
  /// backward, docs/perf-log/23.md E and 24.md); rule in codegen/src/schedule/multi_output.cpp.
  bool one_contraction_per_tiled_kernel = false;
  /// Union-domain kernels of buffer (compute) targets: the dispatch's invocation range is partitioned into one range
  /// per block (each invocation computes one element of one block, so the loop budget is the largest block's and no
  /// buffer grows), and only groups of at most union_max_block_work (outputs x (1 + loop iterations per element))
  /// join: the emitter computes every block of such a kernel one invocation per element. False (the fragment target):
  /// every fragment runs every block.
  bool union_invocation_blocks = false;
  /// See union_invocation_blocks.
  double union_max_block_work = 131072;
};

/// What schedule() takes: the three parts (see above), filled by sg::target_policy for a Target.
struct ScheduleOptions : ScheduleCommon, FragmentScheduleOptions, ComputeScheduleOptions {};

/// The scheduled program: what a backend executes.
struct Plan {
  Program program;
  std::vector<Value> values;
  std::vector<Kernel> kernels;               ///< in launch order
  std::vector<int> output_values;            ///< value id per program output
  std::vector<std::pair<int, int>> updates;  ///< (persistent value id, value id holding its next value)
  std::vector<TextureLayout> buffers;        ///< pooled temp buffers (addressing; numel of the largest user)
  std::vector<Extent> buffer_extents;        ///< per pooled buffer: its allocation (covers every draw writing it)
  int64_t peak_bytes = 0;  ///< bytes of all textures as allocated: pooled temps + 2x persistent + inputs + consts
  int node_index(const Node* n) const;       ///< position of n in program.nodes() (stable node number), -1 if absent
  std::vector<NodePtr> order;                ///< program.nodes()
  /// node_index's lookup: each node of `order` with its position (filled by schedule(); without it node_index scans)
  std::unordered_map<const Node*, int> node_numbers;
  const Value& value_of(const Node* n) const;  ///< throws ValueError when n is not materialised
  nlohmann::json to_json() const;            ///< plan.json: kernels in order with inputs/outputs/layouts/nodes
};

/// Partitions `program` into kernels and plans memory. Throws ValueError for programs that cannot be planned
/// (e.g. a tensor larger than the texture limits allow; the message names the node).
Plan schedule(const Program& program, const ScheduleOptions& opt = {});

}  // namespace sg
