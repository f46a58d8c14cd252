// shadergrad — the fusion scheduler and the Plan (kernels + memory plan) it produces.
//
// schedule() partitions a Program into Kernels (fusion groups). Every node is either *materialised* (it owns
// a texture: leaves, program outputs, update values, reductions/matmul/conv/pool that cannot be fused into
// their consumer, elementwise values too costly to recompute) or *inlined* into its consumers' expressions.
// Rules (asserted by tests/test_schedule.cpp kernel counts):
//  - Map and movement ops (reshape, permute, expand, slice, pad, one_hot) are inlined into every consumer
//    when their expression is cheap (no reduction inside, few ops) — into a matmul/reduce/conv consumer this is
//    the prologue; otherwise materialised.
//  - A reduction/matmul/conv/pool is inlined into its only consumer when that consumer is a Map of the same shape
//    (the epilogue: matmul + bias + relu is one kernel); otherwise it ends its group and is materialised.
//  - Options::unfused materialises every node (one kernel per node: debug mode).
// The memory plan assigns each temporary value a texture from a pool by liveness (a texture is reused once its
// last reader has run; a kernel never reads the texture it writes); persistent values (Param/State) own two
// textures (front/back) that swap after each step, so an update kernel never reads what it writes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sg/autodiff.h"
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

/// One materialised tensor.
struct Value {
  int id = -1;
  NodePtr node;
  ValueKind kind = ValueKind::Temp;
  TextureLayout layout;
  std::string name;        ///< readable identifier used in shaders ("x", "fc1_weight", "t12")
  int buffer = -1;         ///< Temp: pooled buffer index; Persistent/Input/Constant: -1
  int update_of = -1;      ///< if this value is the next value of a persistent value: that value's id
  int producer = -1;       ///< kernel index writing it (Temp), -1 otherwise
  int last_use = -1;       ///< last kernel index reading it
};

/// One fusion group = one GPU launch rendering one output value.
struct Kernel {
  std::string name;                    ///< stable readable name: "k03_matmul_add_relu"
  int output = -1;                     ///< value id written
  std::vector<int> inputs;             ///< value ids read, in sampler order (KExpr Load input index)
  std::vector<NodePtr> nodes;          ///< graph nodes this kernel computes (topological order)
  KExprPtr expr;                       ///< the value of one output element (coordinates i0.. of output shape)
  std::string comment;                 ///< the nodes and user source lines, for the generated source
};

struct ScheduleOptions {
  bool unfused = false;         ///< one kernel per node (debug mode)
  int64_t max_texture_width = 16384;
  int64_t max_texture_height = 0;  ///< 0 = max_texture_width
  double inline_cost_limit = 24;   ///< max scalar ops of an elementwise producer recomputed in several places
  /// Max loop iterations per kernel invocation (4 elements per fragment counted). Larger reductions are split
  /// into a partial-reduction kernel plus a final one. llvmpipe silently stops loops after 65535 iterations in
  /// total per invocation (a wrong-result trap, not an error); long loops also risk GPU watchdogs elsewhere.
  double max_loop_iterations = 32768;
};

/// The scheduled program: what a backend executes.
struct Plan {
  Program program;
  std::vector<Value> values;
  std::vector<Kernel> kernels;               ///< in launch order
  std::vector<int> output_values;            ///< value id per program output
  std::vector<std::pair<int, int>> updates;  ///< (persistent value id, value id holding its next value)
  std::vector<TextureLayout> buffers;        ///< pooled temp buffers (sized for the largest user)
  int64_t peak_bytes = 0;                    ///< bytes of all textures: pooled temps + 2x persistent + inputs + consts
  int node_index(const Node* n) const;       ///< position of n in program.nodes() (stable node number), -1 if absent
  std::vector<NodePtr> order;                ///< program.nodes()
  const Value& value_of(const Node* n) const;  ///< throws ValueError when n is not materialised
  nlohmann::json to_json() const;            ///< plan.json: kernels in order with inputs/outputs/layouts/nodes
};

/// Partitions `program` into kernels and plans memory. Throws ValueError for programs that cannot be planned
/// (e.g. a tensor larger than the texture limits allow; the message names the node).
Plan schedule(const Program& program, const ScheduleOptions& opt = {});

}  // namespace sg
