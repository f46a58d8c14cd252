// shadergrad — layers, models and initialisers (PyTorch-compatible names, shapes and default inits).
//
//   sg::nn::Rng rng(0);
//   sg::nn::Sequential net;
//   net.add<sg::nn::Linear>(784, 128).add<sg::nn::ReLU>().add<sg::nn::Linear>(128, 10);
//   net.build(rng);                          // creates parameters "0.weight", "0.bias", "2.weight", ...
//   sg::Tensor logits = net(x);              // x: (N, 784)
//
// Layouts follow torch.nn: Linear weight (out, in), y = x @ W^T + b; Conv2d weight (O, C, KH, KW), NCHW.
// Default initialisation follows torch.nn.Linear/Conv2d.reset_parameters: kaiming_uniform(a = sqrt(5)), i.e.
// weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from a seeded std::mt19937_64 (the values differ from
// PyTorch's generator; the distribution is the same).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sg/tensor.h"

namespace sg::nn {

/// Seeded random source for initialisers.
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  /// n values ~ U(lo, hi).
  std::vector<float> uniform(int64_t n, double lo, double hi);
  std::mt19937_64& engine() { return g_; }

 private:
  std::mt19937_64 g_;
};

/// A layer: builds its parameters once (names prefixed like a PyTorch state_dict), then maps tensors.
class Module {
 public:
  virtual ~Module() = default;
  /// Creates the parameters, named `prefix` + "weight" etc. Called once, before forward.
  virtual void build(const std::string& /*prefix*/, Rng& /*rng*/) {}
  virtual Tensor forward(const Tensor& x) = 0;
  /// Named parameters in state_dict order. Layers with parameters throw ValueError before build().
  virtual std::vector<std::pair<std::string, Tensor>> named_parameters() const { return {}; }
  /// "Linear(784, 128)" — like PyTorch's repr.
  virtual std::string describe() const = 0;
  /// forward(x), with every node it creates (and, through autodiff, their backward nodes) naming the caller's
  /// source line `loc` instead of the layer's code in nn.cpp: a Sequential called from model.cpp:30 names
  /// model.cpp:30 on all its layers' nodes (an enclosing sg::LocationOverride wins, as always).
  Tensor operator()(const Tensor& x, loc_t loc = loc_t::current()) {
    LocationOverride at_caller{SourceLoc(loc)};
    return forward(x);
  }
};

/// y = x @ W^T + b; x (N, in) -> (N, out). Throws ShapeError when x's last dim differs from `in`.
class Linear final : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true) : in_(in), out_(out), bias_(bias) {}
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t in_, out_;
  bool bias_;
};

/// How Conv2d::build draws its parameters (fan_in = in_channels * kernel * kernel).
enum class ConvInit {
  Torch,        ///< torch.nn.Conv2d.reset_parameters: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  KaimingRelu,  ///< torch.nn.init.kaiming_uniform_(nonlinearity='relu') (He et al. 2015): weight ~
                ///< U(-sqrt(6/fan_in), sqrt(6/fan_in)), bias 0; keeps the activations' scale through ReLU layers
};

/// 2-D convolution, square kernel (torch.nn.Conv2d with groups = 1).
class Conv2d final : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, ConvInit init = ConvInit::Torch)
      : c_(in_channels), o_(out_channels), k_(kernel), s_(stride), p_(padding), d_(dilation), init_(init) {}
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t c_, o_, k_, s_, p_, d_;
  ConvInit init_;
};

class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0) : k_(kernel), s_(stride), p_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  int64_t k_, s_, p_;
};

class AvgPool2d final : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0) : k_(kernel), s_(stride), p_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  int64_t k_, s_, p_;
};

class ReLU final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string describe() const override { return "ReLU()"; }
};
class Sigmoid final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string describe() const override { return "Sigmoid()"; }
};
class Tanh final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::string describe() const override { return "Tanh()"; }
};
/// GELU activation, elementwise over any shape (torch.nn.GELU, same `approximate` parameter and repr): sg::gelu(x,
/// approximate) — "none" (default): exact, x/2 * (1 + erf(x/sqrt(2))); "tanh": the tanh approximation. No parameters.
/// Throws ValueError at construction for another `approximate`.
class GELU final : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }
  /// "GELU(approximate='none')", as torch prints it.
  std::string describe() const override { return "GELU(approximate='" + approximate_ + "')"; }
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};
/// (N, ...) -> (N, prod(...)).
class Flatten final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return flatten(x, 1); }
  std::string describe() const override { return "Flatten()"; }
};

/// Layers applied in order; parameters named "<index>.<name>" (PyTorch's nn.Sequential state_dict).
class Sequential final : public Module {
 public:
  template <class M, class... Args>
  Sequential& add(Args&&... args) {
    layers_.push_back(std::make_unique<M>(std::forward<Args>(args)...));
    return *this;
  }
  void build(const std::string& prefix, Rng& rng) override;
  /// build("", rng); the parameters (and so the optimizer's update nodes, which name their parameter's line)
  /// name the caller's source line `loc`, not nn.cpp.
  void build(Rng& rng, loc_t loc = loc_t::current()) {
    LocationOverride at_caller{SourceLoc(loc)};
    build("", rng);
  }
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  /// Parameters only (in state_dict order), for optimizers.
  std::vector<Tensor> parameters() const;
  /// Total number of parameter elements.
  int64_t num_parameters() const;
  /// FNV-1a hash of the architecture (describe()) and every parameter's name and shape: checkpoints carry it
  /// so that loading into a different structure is refused.
  std::string structure_hash() const;
  size_t size() const { return layers_.size(); }
  /// "1: Linear(784, 128)" (the index is the parameter-name prefix).
  std::string layer_name(size_t i) const;
  /// forward(x) that also appends each layer's output to `outputs`: the nodes layer i creates are those created
  /// after outputs[i-1] (after x for layer 0) up to outputs[i] (Node::id is creation order), which is how
  /// sg::debug labels the nodes of each layer.
  Tensor forward_layers(const Tensor& x, std::vector<Tensor>& outputs);

 private:
  std::vector<std::unique_ptr<Module>> layers_;
};

/// Knowledge-distillation loss (Hinton et al. 2015, "Distilling the Knowledge in a Neural Network"; seed 002):
/// T^2 * kl_div(log_softmax(student/T), softmax(teacher/T)) with kl_div's batchmean reduction.
/// student, teacher: (N, C) logits; no gradient flows into the teacher. Throws ShapeError on differing shapes,
/// ValueError when T <= 0.
Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_logits, double temperature,
                         loc_t loc = loc_t::current());

/// The models the CLI trains. in_shape is (C, H, W) of one sample.
///  "mlp": Flatten, Linear(C*H*W, 128), ReLU, Linear(128, 10)            (784-128-10 on 28x28)
///  "cnn": seed 002's make_cnn(8, 16, 32) on 8x8 digits (3,658 parameters)
///  "cnn-large": make_cnn(64, 128, 256) (208,394 parameters)
/// make_cnn(c1, c2, hidden) = Conv2d(C,c1,3,pad 1) ReLU MaxPool2d(2) Conv2d(c1,c2,3,pad 1) ReLU MaxPool2d(2)
/// Flatten Linear(c2*(H/4)*(W/4), hidden) ReLU Linear(hidden, classes).
///  "cnn5": make_cnn5, the 128x128 five-conv CNN of the browser Worker demo (seed 003; on 1x128x128 "shapes" with
///  4 classes: 5,436 parameters). Throws ValueError for unknown names.
std::unique_ptr<Sequential> make_model(const std::string& name, int64_t channels, int64_t height, int64_t width,
                                       int64_t classes = 10);
/// Five blocks Conv2d(3x3, pad 1) ReLU MaxPool2d(2) with 4, 8, 8, 16, 16 channels, Flatten,
/// Linear(16*(H/32)*(W/32), classes): on 128x128 the feature maps are 64, 32, 16, 8, 4 pixels wide. The convs use
/// ConvInit::KaimingRelu: with the torch default the input-dependent part of the activations shrinks ~4x per
/// block, the logits differ by ~1e-4 between inputs and Adam stays at loss ln 4 (examples/web/README.md). Throws
/// ValueError unless H and W are multiples of 32.
std::unique_ptr<Sequential> make_cnn5(int64_t channels, int64_t height, int64_t width, int64_t classes = 10);
std::unique_ptr<Sequential> make_cnn(int64_t c1, int64_t c2, int64_t hidden, int64_t channels, int64_t height,
                                     int64_t width, int64_t classes = 10);

}  // namespace sg::nn
