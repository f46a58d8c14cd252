// shadergrad — the CPU reference executor: evaluates any graph exactly as defined.
//
// Ground truth for every other backend and the fallback backend. Values are held in f64; with
// f32_storage (the default) every node's result is rounded to f32 as a GPU stores it, while reductions,
// matmul and conv accumulate in f64. Deterministic (fixed loop orders, no threads).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "sg/autodiff.h"

namespace sg::cpu {

struct EvalOptions {
  bool f32_storage = true;  ///< round each node's result to float (false: pure f64, for gradient checks)
};

/// Leaf values keyed by node; Param/State/Const leaves not listed use their node's data.
using LeafValues = std::map<const Node*, std::vector<double>>;

/// Evaluates `outputs` (and everything they depend on). Every Input leaf must be in `leaves` with
/// numel(shape) values, else ValueError naming the input. Returns one row-major vector per output.
/// `on_node`, when set, is called after each non-leaf node is computed, in evaluation order.
std::vector<std::vector<double>> evaluate(
    const std::vector<NodePtr>& outputs, const LeafValues& leaves, EvalOptions opt = {},
    const std::function<void(const Node&, const std::vector<double>&)>& on_node = {});

/// Evaluates one node given its inputs' values (row-major). Used by evaluate() and by debug tools.
std::vector<double> eval_node(const Node& n, const std::vector<const std::vector<double>*>& inputs);

/// sg::check_gradients with the CPU reference in f64 as the evaluator.
GradCheckResult check_gradients(const Tensor& y, const std::vector<Tensor>& wrt, const LeafValues& values,
                                double h = 1e-6, double rtol = 1e-4, double atol = 1e-6);

}  // namespace sg::cpu
