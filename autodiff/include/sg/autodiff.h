// shadergrad — reverse-mode autodiff, training Programs, optimizers as graph nodes, gradient check.
//
// sg::grad walks the graph in reverse topological order from the loss and appends backward nodes (one
// VJP rule per primitive op, see autodiff/src/vjp.cpp) to the same graph, accumulating adjoints where a value
// fans out. Broadcasting is undone with sum_to. Map bodies are differentiated symbolically (sg::diff), so a
// custom elementwise lambda needs no hand-written backward; sg::custom_vjp overrides the rule for any node.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sg/program.h"
#include "sg/tensor.h"

namespace sg {

/// d(expr)/d(Arg k), simplified. Derivative conventions (PyTorch's): relu'(0) = 0; |x|'(0) = 0;
/// max(a,b) splits ties 0.5/0.5 (torch.maximum); floor/round/sign/comparisons have zero derivative.
SExprPtr diff(const SExprPtr& e, int k);

/// Gradients of `y` with respect to each tensor in `wrt` (leaves or intermediates).
/// `y` must be a scalar unless `seed` (the adjoint of y, same shape as y) is given.
/// A tensor `y` does not depend on gets a zero gradient of its shape.
/// Throws ShapeError (non-scalar y without seed), UnsupportedError (differentiating through a node with no
/// VJP rule, e.g. argmax, or a backward-only op: gradients of gradients are not supported).
std::vector<Tensor> grad(const Tensor& y, const std::vector<Tensor>& wrt, const Tensor& seed = Tensor(),
                         loc_t loc = loc_t::current());

/// Returns a node computing the same value as `y` whose VJP is `rule` (e.g. a straight-through estimator).
/// `rule(node, adjoint)` returns one adjoint per input of `y`'s node (empty NodePtr: no gradient).
Tensor custom_vjp(const Tensor& y, CustomVJP rule, loc_t loc = loc_t::current());

/// Fake quantisation with a straight-through estimator, matching torch.fake_quantize_per_tensor_affine:
/// out = (clamp(round(x/scale) + zero_point, qmin, qmax) - zero_point) * scale (round half to even);
/// gradient = adjoint where qmin <= round(x/scale) + zero_point <= qmax, else 0.
Tensor fake_quant(const Tensor& x, double scale, int64_t zero_point, int64_t qmin, int64_t qmax,
                  loc_t loc = loc_t::current());

/// fake_quant with the quantisation parameters as tensors (computed in the graph, e.g. by an observer, and so
/// changing from step to step without recompiling), matching torch.fake_quantize_per_tensor_affine with tensor
/// qparams and torch.fake_quantize_per_channel_affine: scale and zero_point broadcast against x (per tensor: shape
/// {} or {1}; per output channel of a (O, ...) weight: shape (O, 1, ..., 1)); zero_point holds exact integers.
/// out = (clamp(round(x * (1/scale)) + zero_point, qmin, qmax) - zero_point) * scale (round half to even, 1/scale
/// in f32 as ATen's inv_scale). Gradient: the adjoint where qmin <= round(x * (1/scale)) + zero_point <= qmax, else
/// 0 (straight-through estimator); none flows into scale or zero_point. Throws ValueError (qmin > qmax), ShapeError
/// (scale or zero_point do not broadcast to x's shape).
Tensor fake_quant(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t qmin, int64_t qmax,
                  loc_t loc = loc_t::current());

/// An optimizer turns (params, grads) into update nodes (and creates its own State leaves, once per parameter:
/// several programs built by one optimizer share its state).
/// Formulas are torch.optim's, so one step equals PyTorch's step for the same hyper-parameters.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  virtual std::string describe() const = 0;
};

/// torch.optim.SGD: g += wd*p; buf = momentum*buf + g (buf = g on the first step); p -= lr*buf
/// (nesterov: p -= lr*(g + momentum*buf)).
struct SGDOptions {
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};
/// Throws ValueError as torch.optim.SGD does: lr, momentum or weight_decay negative or NaN; nesterov without momentum.
std::unique_ptr<Optimizer> make_sgd(SGDOptions opt);

/// torch.optim.Adam (Kingma & Ba 2015, PyTorch's formula): g += wd*p; m = b1*m + (1-b1)*g;
/// v = b2*v + (1-b2)*g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps). The step counter t is a State.
/// The bias corrections 1 - b^t are computed as -expm1(t ln b) (ln b in f64 on the host, expm1 by a series near 0),
/// so f32 backends keep them to ~2e-7 relative: the first step equals torch's to 1e-6 (1 - pow(0.999, 1) in f32
/// was 1e-4 off on GPUs).
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};
/// Throws ValueError as torch.optim.Adam does: lr, eps or weight_decay negative or NaN; beta1, beta2 outside [0, 1).
std::unique_ptr<Optimizer> make_adam(AdamOptions opt);

/// Builds a train-step Program: outputs `loss` (named "loss") and any `extra_outputs`; updates from `opt`
/// applied to the gradients of loss with respect to `params`.
Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const std::vector<std::pair<std::string, Tensor>>& extra_outputs = {});

/// What a train step's backward pass computed, for tools that inspect a step (sg::debug::make_train_step).
struct TrainStepGradients {
  std::vector<Tensor> also;   ///< in: intermediate tensors whose adjoints are wanted too
  std::vector<Tensor> grads;  ///< out: d(loss)/d(param) for each param, then d(loss)/d(t) for each t in `also`
};
/// make_train_step that also reports the gradients: one grad() call with wrt = params + inspect.also, so the
/// adjoints of `also` are the nodes the backward pass builds anyway (the update nodes are the same).
Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const std::vector<std::pair<std::string, Tensor>>& extra_outputs, TrainStepGradients& inspect);

/// Result of a finite-difference gradient check.
struct GradCheckResult {
  bool ok = true;
  double max_abs_err = 0, max_rel_err = 0;
  std::string worst_tensor;  ///< name or description of the tensor with the worst element
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  std::string report() const;  ///< one line: "ok" or the worst element with both values
};

/// Evaluates a graph exactly (for gradient checks): returns the values of `outputs` given values for leaves.
/// Implemented by the CPU reference executor (runtime/cpu); autodiff only declares the hook.
using GraphEvaluator = std::function<std::vector<std::vector<double>>(
    const std::vector<NodePtr>& outputs, const std::map<const Node*, std::vector<double>>& leaf_values)>;

/// Compares autodiff gradients of scalar `y` w.r.t. `wrt` (leaves) against f64 central finite differences
/// (step h scaled by max(1,|x|)), element by element: passes when |a-n| <= atol + rtol*|n|.
/// `values` gives every leaf's value (leaves not listed use their own data; Inputs must be listed).
GradCheckResult check_gradients(const Tensor& y, const std::vector<Tensor>& wrt,
                                const std::map<const Node*, std::vector<double>>& values,
                                const GraphEvaluator& eval, double h = 1e-6, double rtol = 1e-4,
                                double atol = 1e-6);

}  // namespace sg
