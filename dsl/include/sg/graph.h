// shadergrad — the graph IR: SSA nodes shared by every stage.
//
// A Node is one value: an op applied to input nodes, with a shape, dtype, op attributes, and the user's
// source location. Nodes are immutable once built and shared (NodePtr); a Graph is the set of nodes
// reachable from some roots, in a deterministic topological order (creation order breaks ties).
// Leaves (Input, Param, Const) are never merged by value: two parameters holding 3.0 are two nodes.
//
// Primitive ops are few on purpose; the DSL composes the rest (softmax, cross_entropy, concat, mean...)
// from them, so autodiff (one VJP rule per primitive) and codegen (one lowering per primitive) stay small.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sg/error.h"
#include "sg/scalar_expr.h"
#include "sg/shape.h"

namespace sg {

enum class Op : uint8_t {
  Input,    ///< data fed at run time (batch images, labels); `name` identifies it
  Param,    ///< a trainable parameter; `data` holds its initial value; persists across steps
  State,    ///< persistent non-trainable state (optimizer moments, step counter); `data` = initial value
  Const,    ///< a constant tensor (`data`)
  Map,      ///< elementwise `body` over inputs with NumPy broadcasting
  Reduce,   ///< attrs.reduce over attrs.axes (keepdims per attrs.keepdims)
  MatMul,   ///< (..., M, K) @ (..., K, N) -> (..., M, N); batch dims broadcast
  Reshape,  ///< same elements, new shape (a view when the input is contiguous)
  Permute,  ///< out axis i = in axis attrs.perm[i]
  Expand,   ///< broadcast_to attrs.shape (size-1 axes stretch, new leading axes)
  Slice,    ///< out[i] = in[attrs.starts + i*attrs.steps] per axis, out extent = shape; a negative step walks
            ///< backwards (flip: starts = extent - 1, steps = -1)
  Pad,      ///< zero (attrs.value) padding: attrs.pads_before/pads_after per axis
  OneHot,   ///< integer labels (N) -> (N, attrs.num_classes) f32 of 0/1; out-of-range labels give all zeros
  Conv2d,   ///< x (N,C,H,W), w (O,C/G,KH,KW) -> (N,O,OH,OW); attrs.stride/padding/dilation (2 each), attrs.groups
            ///< G: output channel o reads input channels [g*C/G, (g+1)*C/G) with g = o / (O/G) (torch's groups)
  Conv2dGradInput,   ///< inputs (dy, w); output shape = attrs.shape (x's shape); attrs.groups as Conv2d
  Conv2dGradWeight,  ///< inputs (dy, x); output shape = attrs.shape (w's shape); attrs.groups as Conv2d
  MaxPool2d,         ///< x (N,C,H,W) -> (N,C,OH,OW); attrs.kernel/stride/padding; -inf padding
  MaxPool2dGrad,     ///< inputs (dy, x) -> dx; ties: first maximum in row-major window order (PyTorch)
  AvgPool2d,         ///< count_include_pad=True (PyTorch default)
  AvgPool2dGrad,     ///< inputs (dy) -> dx, output shape attrs.shape
  Gather,   ///< inputs (x, index i32): out[j] = x[j with axis attrs.axes[0] replaced by index[j]]; out shape =
            ///< index's (torch.gather). Indices are checked on the host when fed (sg/feeds.h); a kernel clamps a
            ///< computed out-of-range index into [0, x.shape[axis]) so it never reads outside x
  RandomUniform,  ///< inputs (step: one element, an integer in [0, 2^24]) -> uniform [0, 1) values of `shape`:
                  ///< element j = philox_uniform(attrs.seed, attrs.stream, step, j) (sg/philox.h). An elementwise
                  ///< leaf: recomputed inside every kernel that reads it, never stored (unless unfused)
  Iota,     ///< no inputs: out[j] = j[attrs.axes[0]], the element's coordinate along one axis (f32 or i32, exact
            ///< below 2^24); kernels compute it from their own coordinates (no stored data)
};

const char* op_name(Op op);

enum class ReduceKind : uint8_t { Sum, Max, Min, ArgMax };
const char* reduce_name(ReduceKind k);

/// Op attributes; each op reads only the fields its documentation names.
struct Attrs {
  ReduceKind reduce = ReduceKind::Sum;
  llvm::SmallVector<int, 4> axes;   ///< Reduce: sorted, normalised axes; Gather, Iota: {axis}
  bool keepdims = false;            ///< Reduce
  llvm::SmallVector<int, 4> perm;   ///< Permute
  Shape shape;                      ///< Expand target / grad ops' output shape
  Shape starts, steps;              ///< Slice
  Shape pads_before, pads_after;    ///< Pad
  double value = 0.0;               ///< Pad fill value
  int64_t num_classes = 0;          ///< OneHot
  int64_t stride[2] = {1, 1};       ///< Conv2d / pools
  int64_t padding[2] = {0, 0};      ///< Conv2d / pools
  int64_t dilation[2] = {1, 1};     ///< Conv2d
  int64_t groups = 1;               ///< Conv2d and its gradients: channel groups (1: a dense convolution)
  int64_t kernel[2] = {1, 1};       ///< pools
  uint64_t seed = 0;                ///< RandomUniform: the Philox key (sg/philox.h)
  uint32_t stream = 0;              ///< RandomUniform: word 3 of the Philox counter (one per random_uniform call)
};

struct Node;
using NodePtr = std::shared_ptr<const Node>;

/// A user-supplied vector-Jacobian product overriding autodiff's rule for one node
/// (e.g. a straight-through estimator). Given the node, its inputs and the adjoint of its output,
/// returns one adjoint per input (an empty NodePtr where no gradient flows).
using CustomVJP = std::function<std::vector<NodePtr>(const NodePtr& node, const NodePtr& adjoint)>;

struct Node {
  Op op;
  Shape shape;
  DType dtype = DType::f32;
  std::vector<NodePtr> inputs;
  Attrs attrs;
  SExprPtr body;                               ///< Map only
  std::shared_ptr<const std::vector<float>> data;  ///< Param/State/Const value (row-major)
  std::string name;                            ///< user name (inputs, params) or ""
  SourceLoc loc;                               ///< where the user created it
  uint64_t id = 0;                             ///< creation order (process-wide, unique)
  std::shared_ptr<const CustomVJP> custom_vjp; ///< overrides the VJP table when set
  /// State updates that evaluating this node implies, as (State leaf, its value after the step) pairs: a BatchNorm
  /// layer's running statistics, a Dropout layer's step counter (sg::with_state_updates). A Program collects the
  /// effects of every node it evaluates into Program::updates (sg/program.h).
  std::vector<std::pair<NodePtr, NodePtr>> effects;

  int64_t numel() const { return sg::numel(shape); }
  bool is_leaf() const { return op == Op::Input || op == Op::Param || op == Op::State || op == Op::Const; }
  /// "matmul#12 (32x10) at model.cpp:42" — for error messages and shader comments.
  std::string describe() const;
  /// Short label: op name, with the body for Map ("map[relu(a0 + a1)]"), or the user name for leaves.
  std::string label() const;
};

/// Creates a node: assigns a fresh id. Validates nothing (the DSL validates before calling).
NodePtr make_node(Node n);

/// The nodes reachable from `roots`, inputs before users; order is deterministic (by id among ready nodes).
std::vector<NodePtr> topo_order(const std::vector<NodePtr>& roots);

}  // namespace sg
