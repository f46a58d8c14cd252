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

/// A learning-rate schedule, computed in the graph from the optimizer's step counter (a State leaf the step
/// updates), so a compiled train step changes its learning rate with no host round trip and no recompilation.
/// lr(t) is the learning rate of step t = 0, 1, 2, ... (t counts the steps the program ran before this one).
/// Each equals a torch scheduler stepped after each optimizer step, as torch's documentation orders it:
///
///     opt = torch.optim.AdamW(params, lr=base_lr); sched = <the scheduler below>
///     for t in range(steps): loss.backward(); opt.step(); sched.step(); opt.zero_grad()
///
/// so step t runs with lr(t) = sched.get_last_lr()[0] before that step's sched.step().
///  - constant(): lr(t) = base_lr (no scheduler).
///  - step(step_size, gamma): torch.optim.lr_scheduler.StepLR(opt, step_size, gamma):
///    lr(t) = base_lr * gamma^floor(t / step_size).
///  - warmup_cosine(warmup_steps W, total_steps T, min_lr): linear warmup, then a half cosine down to min_lr,
///    held there after T. torch.optim.lr_scheduler.LambdaLR(opt, f) with
///        f(t) = (t + 1) / W                                              for t < W
///        f(t) = (min_lr + (base_lr - min_lr) * (1 + cos(pi * min(t - W, T - W) / (T - W))) / 2) / base_lr
///                                                                         for t >= W (f = min_lr / base_lr if T = W)
///    The cosine part is CosineAnnealingLR's closed form (torch docs; SGDR, Loshchilov & Hutter 2017) with
///    T_max = T - W, eta_min = min_lr, T_cur = t - W: with W = 0 the schedule equals
///    CosineAnnealingLR(opt, T_max=T, eta_min=min_lr) for t <= T (torch's recursive form rounds differently by
///    ~1e-16 relative in float64); after T CosineAnnealingLR rises again, this schedule holds min_lr.
/// In f32 (every backend but the CPU reference, which is f64): the step counter is exact below 2^24 steps;
/// floor(t / step_size) is exact there (corrected by integer products, not left to a GPU's inexact division);
/// the cosine is evaluated as sin^2(pi/2 * (T - t) / (T - W)), so lr near the end keeps its relative precision
/// (no 1 + cos(x) cancellation near x = pi); gamma^k is exp(k ln gamma) with ln gamma in f64 on the host.
struct LRSchedule {
  enum class Kind { Constant, Step, WarmupCosine };
  Kind kind = Kind::Constant;
  int64_t step_size = 0;     ///< Step: decay every step_size steps
  double gamma = 0.1;        ///< Step: multiplicative factor
  int64_t warmup_steps = 0;  ///< WarmupCosine: W
  int64_t total_steps = 0;   ///< WarmupCosine: T
  double min_lr = 0.0;       ///< WarmupCosine: the floor (CosineAnnealingLR's eta_min)

  static LRSchedule constant() { return {}; }
  /// Throws ValueError (naming the caller's line): step_size < 1; gamma negative, NaN or infinite.
  static LRSchedule step(int64_t step_size, double gamma = 0.1, loc_t loc = loc_t::current());
  /// Throws ValueError (naming the caller's line): warmup_steps < 0; total_steps < 1; warmup_steps > total_steps;
  /// min_lr negative, NaN or infinite.
  static LRSchedule warmup_cosine(int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0,
                                  loc_t loc = loc_t::current());
  /// lr(t) in f64 (the formula above, for host-side logging and tests).
  double at(double base_lr, int64_t t) const;
  /// "constant", "StepLR(step_size=10, gamma=0.5)", "warmup_cosine(warmup_steps=5, total_steps=100, min_lr=0)".
  std::string describe() const;
};

/// An optimizer turns (params, grads) into update nodes (and creates its own State leaves, once per parameter:
/// several programs built by one optimizer share its state).
/// Formulas are torch.optim's, so one step equals PyTorch's step for the same hyper-parameters.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::vector<Update> updates(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  virtual std::string describe() const = 0;
  /// The learning rate of the current step as a single-element f32 tensor (shape {}) of the graph: lr(t) of the
  /// optimizer's schedule at its step counter t before the step, i.e. torch's optimizer.param_groups[0]["lr"]
  /// during that step. A program may output it (make_train_step's TrainStepOptions::output_lr does). Returns the
  /// same node on every call. The default throws UnsupportedError (an optimizer without a learning rate).
  virtual Tensor lr();
};

/// torch.optim.SGD: g += wd*p; buf = momentum*buf + g (buf = g on the first step); p -= lr*buf
/// (nesterov: p -= lr*(g + momentum*buf)). With a schedule other than constant, lr is lr(t) of a step counter
/// State "sgd.step" (t = 0 on the first step) that the step increments.
struct SGDOptions {
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  LRSchedule schedule{};
};
/// Throws ValueError as torch.optim.SGD does: lr, momentum or weight_decay negative or NaN; nesterov without momentum.
std::unique_ptr<Optimizer> make_sgd(SGDOptions opt);

/// torch.optim.Adam (Kingma & Ba 2015, PyTorch's formula): g += wd*p; m = b1*m + (1-b1)*g;
/// v = b2*v + (1-b2)*g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps). The step counter t is a State.
/// The bias corrections 1 - b^t are computed as -expm1(t ln b) (ln b in f64 on the host, expm1 by a series near 0),
/// so f32 backends keep them to ~2e-7 relative: the first step equals torch's to 1e-6 (1 - pow(0.999, 1) in f32
/// was 1e-4 off on GPUs). With a schedule, lr is lr(t) of the counter's value t before the step (0 on the first
/// step; the bias corrections use t + 1, torch's 1-based step).
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  LRSchedule schedule{};
};
/// Throws ValueError as torch.optim.Adam does: lr, eps or weight_decay negative or NaN; beta1, beta2 outside [0, 1).
std::unique_ptr<Optimizer> make_adam(AdamOptions opt);

/// torch.optim.AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization"; torch 1.13's
/// _single_tensor_adamw): p *= 1 - lr*wd (decoupled: the decay does not enter m and v), then Adam's step on the
/// decayed p with the undecayed gradient: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
/// p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). torch's defaults (weight_decay 1e-2, not Adam's 0). With a
/// schedule the decay uses the step's lr(t) too, as torch's (its param group's lr). The same code as make_adam
/// (one Adam core, decay mode decoupled); its step counter is the State "adamw.step". amsgrad and maximize are not
/// supported (no option: torch's defaults, False).
struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  LRSchedule schedule{};
};
/// Throws ValueError as torch.optim.AdamW does: lr, eps or weight_decay negative or NaN; beta1, beta2 outside [0, 1).
std::unique_ptr<Optimizer> make_adamw(AdamWOptions opt);

/// torch.nn.utils.clip_grad_norm_ (torch 1.13, error_if_nonfinite=False) as graph nodes over a list of gradients:
///   total_norm = (sum over every element of every gradient of |g|^p)^(1/p)   (p = norm_type; all gradients viewed
///                as one vector), or max |g| for norm_type = infinity;
///   clip_coef  = min(max_norm / (total_norm + 1e-6), 1);   grads[i] * clip_coef.
/// torch computes the norm of the per-gradient norms, (sum_i ||g_i||_p^p)^(1/p): the same value up to rounding;
/// here each gradient's sum of |g|^p (of its squares for p = 2) is one reduction of its own (issue 35: one kernel
/// summing every gradient's squares, some of them nested reductions such as a bias gradient, overran the GPU loop
/// budget), added in parameter order. Shapes and dtypes: each grads[i] f32 of any shape, the results of the same
/// shape; total_norm has shape {}. No gradient flows through this function (it is applied to gradients).
/// NaN/Inf (as torch's with error_if_nonfinite=False, which raises nothing): a NaN anywhere makes total_norm NaN and
/// every returned gradient NaN (clip_coef = min(NaN, 1) is NaN: torch.clamp propagates NaN); an infinite element
/// (no NaN) makes total_norm inf, clip_coef 0: finite elements become 0 (-0 for negative ones), infinite ones NaN
/// (inf * 0). A sum of squares beyond f32's range (total_norm above ~1.8e19) also gives inf on the f32 backends,
/// with the same result (torch's CPU accumulates float32 norms in float64 and would not overflow there). All-zero
/// gradients give total_norm 0 and clip_coef 1: zeros stay zeros (no 0/0).
/// Throws ValueError (naming the caller's line): max_norm not positive and finite (torch does not check; a
/// negative max_norm would flip the gradients); norm_type not positive (finite) or +infinity; a gradient that is
/// not f32.
struct ClippedGrads {
  std::vector<Tensor> grads;  ///< the clipped gradients, in the order given
  Tensor total_norm;          ///< the norm before clipping, shape {} (what clip_grad_norm_ returns)
};
ClippedGrads clip_grad_norm(const std::vector<Tensor>& grads, double max_norm, double norm_type = 2.0,
                            loc_t loc = loc_t::current());

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

/// The options of a train step beyond the loss, parameters and optimizer, named with their type (a bare braced list
/// is ambiguous with the extra_outputs overload):
/// `make_train_step(loss, params, *opt, sg::TrainStepOptions{.clip_grad_norm = 1.0, .output_grad_norm = true})`.
struct TrainStepOptions {
  std::vector<std::pair<std::string, Tensor>> extra_outputs;  ///< outputs after "loss"
  /// Global-norm gradient clipping between the backward pass and the optimizer, as torch's
  /// `loss.backward(); torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type); opt.step()`
  /// (sg::clip_grad_norm's semantics, NaN/Inf included). 0 = no clipping.
  double clip_grad_norm = 0.0;
  double clip_norm_type = 2.0;    ///< p of the norm; std::numeric_limits<double>::infinity() for the max norm
  bool output_grad_norm = false;  ///< output "grad_norm": the total norm before clipping (needs clip_grad_norm > 0)
  bool output_lr = false;         ///< output "lr": Optimizer::lr(), the learning rate this step uses
  /// If set: the backward pass's gradients before clipping (TrainStepGradients: params, then `also`)
  TrainStepGradients* inspect = nullptr;
};
/// make_train_step with options. Outputs in order: "loss", extra_outputs, "grad_norm" (if asked), "lr" (if asked).
/// Throws ValueError: output_grad_norm without clip_grad_norm; clip_grad_norm negative or not finite, a bad
/// clip_norm_type (clip_grad_norm's errors); what make_train_step throws.
Program make_train_step(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
                        const TrainStepOptions& options, loc_t loc = loc_t::current());

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
