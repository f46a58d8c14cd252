// shadergrad — the state the scheduling passes share (private to codegen/src/schedule*).
//
// schedule() (codegen/src/schedule.cpp) runs the passes below in this order over one ScheduleState; each pass
// documents in its own file what it reads, what it decides and the invariants it leaves:
//   binding budgets      split_wide_maps (wide_maps.cpp), before the state exists: it may rewrite the program
//   target-neutral       analyse_uses, decide_materialisation (materialise.cpp),
//                        choose_transposed_storage (transposed_storage.cpp), create_leaf_values (values.cpp),
//                        group_multi_output (multi_output.cpp), sink_reductions + mark_stored_members
//                        (sink_reductions.cpp), order_launches + build_kernels + bind_updates (launch.cpp), with
//                        append_kernel's loop-budget / split-K split (split_reductions.cpp) and the Lowerer
//                        (lower.cpp) underneath
//   fragment target      merge_union_domains (union_domains.cpp), assign_row_planes (row_planes.cpp)
//   all targets          plan_memory (memory_plan.cpp)
// A target-neutral pass never asks which target it runs for: what it must know of a target's later passes
// comes through ScheduleState::tiles_alone (a kernel the target will register-tile stays alone).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "schedule/lower.h"
#include "sg/schedule.h"

namespace sg::sched {

/// Loop iterations per output element from which a kernel with few output texels counts as latency-bound
/// (ScheduleOptions::min_parallel_texels).
inline constexpr double kLongLoop = 256;

/// Two-stage tree (ScheduleOptions::reduce_tree_workgroups): loop iterations per output from which a reduction
/// of few outputs is split, and the fewest iterations of one stage-1 chunk.
inline constexpr double kTreeLoop = 16384;
inline constexpr double kTreeChunk = 2048;

/// Value ids >= kPseudo name materialised non-leaf nodes during grouping (trial lowerings), before their values
/// exist: kPseudo + index in ScheduleState::mat_nodes.
inline constexpr int kPseudo = 1 << 28;

/// Reductions and the ops lowered to loops (matmul, convolutions, pooling and their gradients).
bool is_heavy(Op op);

/// The split-K rule's test: few output texels, long loops (see ScheduleOptions::min_parallel_texels).
bool latency_bound(int64_t numel, double loop_iterations, const ScheduleOptions& opt);

/// The two-stage tree rule's test: few outputs, each a long reduction (see ScheduleOptions::reduce_tree_workgroups).
bool tree_bound(int64_t numel, double loop_iterations, const ScheduleOptions& opt);

/// One fusion group: materialised nodes computed by one kernel at the same element (multi-output fusion).
struct Group {
  std::vector<NodePtr> members;  ///< topological order; members[0] gives the domain
  Lowered lowered;               ///< trial lowering (pseudo value ids for materialised nodes)
  std::set<int> deps;            ///< groups whose values it reads
  bool dead = false;             ///< sunk into its reader (sink_reductions)
};

struct ScheduleState {
  ScheduleState(const Program& p, const ScheduleOptions& o);

  const Program& program;
  const ScheduleOptions& opt;
  Plan plan;
  int64_t max_h = 0;  ///< opt.max_texture_height, or the width when 0

  // analyse_uses
  std::unordered_map<const Node*, std::vector<const Node*>> consumers;  ///< with multiplicity
  std::unordered_set<const Node*> external;       ///< program outputs and update values
  std::unordered_set<const Node*> update_values;  ///< next values of persistent leaves
  // decide_materialisation, sink_reductions (erases sunk reductions)
  std::unordered_set<const Node*> mat;
  // choose_transposed_storage
  std::unordered_set<const Node*> transposed;
  // values (create_leaf_values, append_kernel, build_kernels)
  std::unordered_map<const Node*, int> value_of;
  std::unordered_set<std::string> names;
  // group_multi_output, sink_reductions
  std::vector<NodePtr> mat_nodes;                 ///< materialised non-leaf nodes, topological order
  std::unordered_map<const Node*, int> trial_of;  ///< leaves: value ids; mat_nodes: pseudo ids
  std::vector<Group> groups;
  std::unordered_map<const Node*, int> group_of;
  int max_out = 1;  ///< outputs per kernel (1 when unfused)
  // mark_stored_members
  std::set<const Node*> read_elsewhere;
  // unions: one per kernel, each a list of groups (its domain blocks); merge_union_domains merges them
  std::vector<std::vector<int>> unions;
  std::vector<int> union_of;
  std::vector<int> launch;  ///< order_launches: union indices in launch order

  /// Set by the pipeline when the target register-tiles kernels (fragment: row planes): true for a materialised
  /// value whose lowering `expr` the target's tiling pass would tile; fusion then keeps it out of kernels that
  /// could not be tiled.
  std::function<bool(const ScheduleState&, const NodePtr&, const KExprPtr&)> tiles_alone;

  /// The node's index in program.nodes() (stable node number).
  int node_index(const Node* n) const { return plan.node_index(n); }
};

// --- values.cpp ---
/// The texture layout of a value of shape `shape` (row-aligned or flat per the options). Throws Error when too
/// large for the texture limits.
TextureLayout value_layout(ShapeRef shape, const ScheduleState& st);
/// Adds a value for node n (named after `base`, made unique and a valid identifier); `reg`: n's value from now on.
int add_value(ScheduleState& st, const NodePtr& n, ValueKind kind, const std::string& base, bool reg = true);

// --- split_reductions.cpp ---
/// Appends kernel k (named after `name_nodes` + suffix), first splitting reductions over the loop budget or
/// latency-bound (split-K) into partial kernels. Throws UnsupportedError when a loop cannot be split.
void append_kernel(ScheduleState& st, Kernel&& k, const std::vector<NodePtr>& name_nodes, const std::string& suffix);
/// Appends a kernel copying `source`'s value into a new value for node n; returns the new value id.
int append_copy_kernel(ScheduleState& st, const NodePtr& n, const NodePtr& source);

// --- multi_output.cpp (group queries, also used by the later fusion passes) ---
/// A kernel of `inputs` bound values and `outputs` stored ones stays within max_inputs and max_storage_buffers.
bool within_bindings(const ScheduleOptions& opt, size_t inputs, size_t outputs);
bool reads(const Lowered& l, int id);
std::set<int> deps_of(const ScheduleState& st, const Lowered& l, int self);
/// A group's trial lowering as `members` under value ids `vo`, or nullopt when a member is read at another
/// element than its own.
std::optional<Lowered> try_lower(const ScheduleState& st, const std::vector<NodePtr>& members,
                                 const std::unordered_map<const Node*, int>& vo);
/// A kernel the split-K rule would split (see ScheduleOptions::min_parallel_texels) stays on its own.
bool split_k_candidate(const ScheduleState& st, const NodePtr& n, const Lowered& l);
/// One contraction per tiled kernel (see multi_output.cpp): on GPU compute targets, group g's kernel lowered with
/// `added` (a node or a sunk reduction, lowered alone) as `joined` would sum a reduction beside its contraction in its
/// store, serially per element, that neither computed alone.
bool adds_store_reduction(const ScheduleState& st, const Group& g, const Lowered& added, const Lowered& joined);
/// A member is stored (owns a texture or buffer): a single member, program outputs/updates, values other kernels
/// read (after mark_stored_members).
bool is_stored(const ScheduleState& st, const Group& g, const NodePtr& m);

// --- wide_maps.cpp (binding budgets) ---
/// The most distinct inputs a single-output kernel may bind: max_inputs, within max_storage_buffers with its output.
int input_budget(const ScheduleOptions& opt);
/// `program` with every Map of more than `budget` distinct inputs, or (max_guarded_reads > 0) more zero-padded
/// inputs (padding Pad nodes) than `max_guarded`, split into Maps within both (the program itself when there is
/// none). Throws UnsupportedError when one operation of a body reads more than `budget` inputs.
Program split_wide_maps(const Program& program, int budget, int max_guarded = 0);
/// A Pad node that pads (its reads are guarded: `in range ? load : value`).
bool pads(const Node& n);
/// Guarded reads of a kernel's expressions: selects one of whose branches loads (each a branch in a fragment shader).
int guarded_reads(const std::vector<KExprPtr>& exprs);
/// Within ScheduleOptions::max_guarded_reads (always, when it is 0).
bool within_guards(const ScheduleOptions& opt, const std::vector<KExprPtr>& exprs);

// --- the passes, in pipeline order ---
void analyse_uses(ScheduleState& st);
void decide_materialisation(ScheduleState& st);
void choose_transposed_storage(ScheduleState& st);
void create_leaf_values(ScheduleState& st);
void group_multi_output(ScheduleState& st);
void sink_reductions(ScheduleState& st);
void mark_stored_members(ScheduleState& st);
void form_unions(ScheduleState& st);
void merge_union_domains(ScheduleState& st);
void order_launches(ScheduleState& st);
void build_kernels(ScheduleState& st);
void bind_updates(ScheduleState& st);
/// Row planes (row_planes.cpp): value m can be stored in P = min(row_planes, max_outputs) row planes (not
/// transposed; rows a multiple of P, whole texels per row, min_plane_texels per plane).
bool row_planes_fit(const ScheduleState& st, const NodePtr& m);
/// ScheduleState::tiles_alone of the fragment target: row planes fit `value` and `expr` has an unrollable sum.
bool row_planes_tile_alone(const ScheduleState& st, const NodePtr& value, const KExprPtr& expr);
void assign_row_planes(ScheduleState& st);
void plan_memory(ScheduleState& st);

}  // namespace sg::sched
