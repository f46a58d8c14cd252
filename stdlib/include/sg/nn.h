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

#include <initializer_list>
#include <memory>
#include <optional>
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
  /// n values ~ N(mean, std^2).
  std::vector<float> normal(int64_t n, double mean, double std);
  std::mt19937_64& engine() { return g_; }

 private:
  std::mt19937_64 g_;
};

/// A layer or a model: a node of a tree of modules, as torch.nn.Module. A module owns parameters (trainable,
/// sg::param) and buffers (persistent, not trained: sg::state, e.g. BatchNorm's running statistics), named by their
/// path in the tree as in a torch state_dict ("encoder.0.weight"), and child modules registered by name.
///
///   struct Block : sg::nn::Module {               // a residual block: forward is any C++ over tensors
///     sg::nn::LayerNorm norm{{64}};
///     sg::nn::Linear fc{64, 64};
///     Block() { register_module("norm", norm); register_module("fc", fc); }
///     sg::Tensor forward(const sg::Tensor& x) override { return x + fc(norm(x)); }
///     std::string type_name() const override { return "Block"; }
///   };
///
/// A torch model's state_dict loads into the same model written with sg::nn (names and layouts are torch's):
/// scripts/torch_state_dict.py writes it as safetensors, sg::train::load_state_dict reads it (strict).
/// Modules are not copyable (children are registered by address). Train/eval mode as torch's module.train()/eval():
/// layers whose forward differs (BatchNorm, Dropout) read training() when forward builds the graph, so a program built
/// after eval() is an inference program.
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Creates the parameters and buffers, named `prefix` + "weight" etc. Called once, before forward. The default
  /// builds the registered children in registration order with prefix + child name + "."; a module with parameters
  /// of its own overrides it (add_parameter/add_buffer) and calls Module::build(prefix, rng) for its children.
  virtual void build(const std::string& prefix, Rng& rng);
  /// build("", rng); the parameters (and so the optimizer's update nodes, which name their parameter's line) name
  /// the caller's source line `loc`, not nn.cpp. Throws ValueError, naming the first built module, when a module of
  /// the tree was built already (a second build would make new parameters that earlier graphs do not read).
  /// (A class that overrides build(prefix, rng) hides this overload: the library's layers say
  /// `using Module::build;`, a user's module can too.)
  void build(Rng& rng, loc_t loc = loc_t::current());
  virtual Tensor forward(const Tensor& x) = 0;
  /// forward(x), with every node it creates (and, through autodiff, their backward nodes) naming the caller's
  /// source line `loc` instead of the layer's code in nn.cpp: a Sequential called from model.cpp:30 names
  /// model.cpp:30 on all its layers' nodes (an enclosing sg::LocationOverride wins, as always). A ShapeError,
  /// ValueError or UnsupportedError thrown inside names that line too (" at model.cpp:30"), and a Sequential's the
  /// index and repr of the layer that threw ("2: Linear(32, 4): input last dimension must be 32, ...").
  Tensor operator()(const Tensor& x, loc_t loc = loc_t::current());

  /// Named parameters in state_dict order (the module's own, then each child's). Layers with parameters throw
  /// ValueError before build().
  virtual std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// Named buffers (State leaves: running statistics, counters) in state_dict order.
  virtual std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  /// Parameters and buffers, module by module (own parameters, own buffers, then each child's): torch's state_dict
  /// order, what checkpoints save and load.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Parameters only (in state_dict order), for optimizers.
  std::vector<Tensor> parameters() const;
  /// Total number of parameter elements.
  int64_t num_parameters() const;
  /// FNV-1a hash of the architecture (describe()) and every parameter's and buffer's name and shape: checkpoints
  /// carry it so that loading into a different structure is refused.
  std::string structure_hash() const;

  /// torch's repr: type_name() + "()" for a module without children, else one "(name): child" line per child.
  virtual std::string describe() const;
  /// The class name describe() prints ("Module" unless overridden).
  virtual std::string type_name() const { return "Module"; }

  /// Sets training mode on this module and every descendant (torch's module.train(mode)); returns *this.
  Module& train(bool mode = true);
  /// train(false) (torch's module.eval()).
  Module& eval() { return train(false); }
  /// True unless eval() was called (torch's module.training); read by forward when it builds the graph.
  bool training() const { return training_; }

  /// The registered children, in registration order.
  const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }

 protected:
  /// Registers `child` (owned by the caller, usually a member of this module) under `name`. Throws ValueError for an
  /// empty name, a name with '.', or a name already registered.
  Module& register_module(const std::string& name, Module& child);
  /// Creates a child owned by this module (a Sequential's layers).
  template <class M, class... Args>
  M& add_module(const std::string& name, Args&&... args) {
    auto m = std::make_unique<M>(std::forward<Args>(args)...);
    M& r = *m;
    owned_.push_back(std::move(m));
    register_module(name, r);
    return r;
  }
  /// Creates a parameter prefix + name (sg::param) listed by named_parameters as this module's own.
  Tensor add_parameter(const std::string& prefix, const std::string& name, ShapeRef shape, std::vector<float> data);
  /// Creates a buffer prefix + name (sg::state) listed by named_buffers as this module's own.
  Tensor add_buffer(const std::string& prefix, const std::string& name, ShapeRef shape, std::vector<float> data);

 private:
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::unique_ptr<Module>> owned_;
  std::vector<std::pair<std::string, Tensor>> own_parameters_, own_buffers_;
  bool training_ = true;
};

/// y = x @ W^T + b (torch.nn.Linear): x (*, in) -> (*, out), W (out, in), b (out). Throws ShapeError when x's last
/// dim differs from `in`.
class Linear final : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true) : in_(in), out_(out), bias_(bias) {}
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t in_, out_;
  bool bias_;
};

/// 2-D transposed convolution, square kernel (torch.nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
/// stride, padding, output_padding, groups, bias, dilation)): sg::conv_transpose2d. Parameters "weight"
/// (in_channels, out_channels / groups, kernel, kernel) (torch's layout) and "bias" (out_channels), both
/// ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with torch's fan_in = out_channels / groups * kernel * kernel (its weight's
/// dimension 1 times the receptive field). Input (N, in_channels, H, W) -> (N, out_channels, (H-1)*stride -
/// 2*padding + dilation*(kernel-1) + output_padding + 1, ...). Throws ValueError when in_channels or out_channels is
/// not divisible by groups (torch's check), and as sg::conv_transpose2d (output_padding must be < stride).
class ConvTranspose2d final : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
                  int64_t output_padding = 0, int64_t groups = 1, bool bias = true, int64_t dilation = 1);
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  /// torch's repr: "ConvTranspose2d(16, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))"
  /// (", groups=G" when not 1).
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t c_, o_, k_, s_, p_, op_, g_, d_;
  bool bias_;
};

/// Upsampling of (N, C, H, W) (torch.nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None)):
///  - mode "nearest": sg::upsample_nearest2d by whole scale factors (size is not supported: UnsupportedError);
///  - mode "bilinear": sg::upsample_bilinear2d(x, {size or scale_factor, align_corners (None: false)}), torch's
///    source-index formulas (a given scale factor is the one used, as torch without recompute_scale_factor).
/// Other modes throw UnsupportedError naming the mode; ValueError unless exactly one of size and scale_factor is
/// given, for a size < 1 or a scale factor <= 0, a non-whole factor with "nearest", or align_corners with "nearest"
/// (torch: "align_corners option can only be set with the interpolating modes").
class Upsample final : public Module {
 public:
  explicit Upsample(int64_t scale_factor, std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt);
  Upsample(std::optional<std::array<int64_t, 2>> size, std::optional<std::array<double, 2>> scale_factor,
           std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt);
  Tensor forward(const Tensor& x) override;
  /// torch's repr: "Upsample(scale_factor=2.0, mode='nearest')", "Upsample(size=(5, 7), mode='bilinear')",
  /// "Upsample(scale_factor=(1.5, 2.5), mode='bilinear')" (mode quoted as torch >= 2.0 prints it; align_corners is
  /// not shown, as in torch).
  std::string describe() const override;

 private:
  std::optional<std::array<int64_t, 2>> size_;
  std::optional<std::array<double, 2>> scale_;
  bool scalar_scale_ = false;  // constructed from one whole factor: shown as "2.0", not "(2.0, 2.0)"
  std::string mode_;
  std::optional<bool> align_corners_;
};

/// How Conv2d::build draws its parameters (fan_in = in_channels * kernel * kernel).
enum class ConvInit {
  Torch,        ///< torch.nn.Conv2d.reset_parameters: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  KaimingRelu,  ///< torch.nn.init.kaiming_uniform_(nonlinearity='relu') (He et al. 2015): weight ~
                ///< U(-sqrt(6/fan_in), sqrt(6/fan_in)), bias 0; keeps the activations' scale through ReLU layers
  /// torch.nn.init.kaiming_normal_(mode='fan_out', nonlinearity='relu'), torchvision's ResNet init: weight ~
  /// N(0, 2/fan_out) with torch's fan_out = out_channels * kernel * kernel (the weight's dimension 0 times the
  /// receptive field), bias 0.
  KaimingNormalFanOut,
};

/// 2-D convolution, square kernel (torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
/// dilation, groups, bias)): sg::conv2d. Parameters "weight" (out_channels, in_channels / groups, kernel, kernel)
/// (torch's layout) and "bias" (out_channels) unless bias = false; fan_in = in_channels / groups * kernel * kernel
/// (torch's, the weight's dimension 1 times the receptive field) for both inits (ConvInit). groups = in_channels is
/// the depthwise convolution (out_channels = k * in_channels: channel multiplier k). Input (N, in_channels, H, W) ->
/// (N, out_channels, (H + 2*padding - dilation*(kernel-1) - 1)/stride + 1, ...). Throws ValueError when in_channels or
/// out_channels is not divisible by groups or groups < 1 (torch's "in_channels must be divisible by groups"), and as
/// sg::conv2d in forward.
class Conv2d final : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true, ConvInit init = ConvInit::Torch);
  /// The constructor before groups and bias: groups 1, with a bias.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation,
         ConvInit init)
      : Conv2d(in_channels, out_channels, kernel, stride, padding, dilation, 1, true, init) {}
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  /// torch's repr: "Conv2d(8, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=4)" (padding shown
  /// when not 0, dilation when not 1, groups when not 1, "bias=False" without a bias).
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t c_, o_, k_, s_, p_, d_, g_;
  bool bias_;
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

/// A lookup table (torch.nn.Embedding): forward(indices) with i32 indices of any shape S gives weight rows,
/// shape S + (embedding_dim,): out[s.., :] = weight[indices[s..], :] (sg::take along axis 0; the gradient is a
/// deterministic scatter-add, repeated indices add up, rows never looked up get 0).
/// Parameter "weight" (num_embeddings, embedding_dim), initialised N(0, 1) as torch's reset_parameters. With
/// padding_idx (negative counts from the end, as torch), that row starts at zero and gets no gradient (its output
/// is the row's value; torch's padding_idx). Errors: ValueError for sizes < 1, a padding_idx outside
/// [-num_embeddings, num_embeddings), non-i32 indices, forward before build(); run() refuses fed indices outside
/// [0, num_embeddings) naming the input, the element, the value and the line that called the layer.
class Embedding final : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& indices) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  Tensor weight;
  /// The normalised padding_idx (0..num_embeddings-1), or nullopt.
  std::optional<int64_t> padding_idx() const { return pad_; }

 private:
  int64_t num_, dim_;
  std::optional<int64_t> pad_;
};

/// Batch normalisation over the channel axis 1 (torch.nn.BatchNorm1d / BatchNorm2d; Ioffe & Szegedy 2015), same
/// parameters, buffers, names and formulas so a torch state_dict loads:
///   parameters "weight" (C) = 1, "bias" (C) = 0 (affine); buffers "running_mean" (C) = 0, "running_var" (C) = 1,
///   "num_batches_tracked" (shape {}) = 0 (track_running_stats; torch's is int64, here an f32 exact to 2^24 steps).
/// Train mode (or track_running_stats = false): y = (x - mean) / sqrt(var + eps) * weight + bias with the batch's mean
/// and biased variance over every axis but 1; the step also updates, in the same compiled program (State updates,
/// sg::with_state_updates): running_mean = (1 - m) running_mean + m mean, running_var = (1 - m) running_var +
/// m var * n / (n - 1) (unbiased, n = elements per channel), num_batches_tracked += 1, with m = momentum, or
/// 1 / num_batches_tracked after the increment when momentum is nullopt (torch's cumulative average).
/// Eval mode (eval()): y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
/// Shapes: BatchNorm1d takes (N, C) or (N, C, L); BatchNorm2d (N, C, H, W). Throws ShapeError for another rank or
/// channel count, ValueError for num_features < 1, eps <= 0, momentum outside [0, 1], one value per channel in train
/// mode (torch: "Expected more than 1 value per channel when training"), forward before build().
class BatchNorm : public Module {
 public:
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const override;
  std::string describe() const override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNorm(const char* type, std::vector<int> ranks, int64_t num_features, double eps, std::optional<double> momentum,
            bool affine, bool track_running_stats);

 private:
  const char* type_;
  std::vector<int> ranks_;
  int64_t c_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_, track_;
};
class BatchNorm1d final : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", {2, 3}, num_features, eps, momentum, affine, track_running_stats) {}
  std::string type_name() const override { return "BatchNorm1d"; }
};
class BatchNorm2d final : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", {4}, num_features, eps, momentum, affine, track_running_stats) {}
  std::string type_name() const override { return "BatchNorm2d"; }
};

/// What a recurrent layer's forward_state returns: torch's (output, h_n) for GRU, (output, (h_n, c_n)) for LSTM.
struct RecurrentOutput {
  Tensor output;  ///< (N, T, H) with batch_first, else (T, N, H); (T, H) for an unbatched (T, I) input
  Tensor h_n;     ///< (num_layers, N, H) ((num_layers, H) unbatched): the last step's hidden state of each layer
  Tensor c_n;     ///< LSTM only, shaped as h_n: the last step's cell state; empty for GRU
};

/// The shared part of LSTM and GRU: torch's parameter names, shapes and initialisation, input checks, the unrolled
/// loop over a fixed sequence length (the length of the input the graph is built for; each step is a few fused
/// kernels, the input projection of all steps is one matmul per layer) and torch's `dropout` between layers: in
/// training, the output sequence of every layer but the last is sg::dropout(output, dropout) before it enters the
/// next layer (torch's _VF.lstm / gru: one mask over the whole (T, N, H) sequence of that layer, none after the last
/// layer; h_n and c_n are the undropped states). The masks' step is the layer's step counter `dropout_step` (a State
/// prefix + "dropout_step", shape {}, created by build() when dropout > 0 and num_layers > 1; not a buffer: torch's
/// RNNs have no such state_dict entry), whose increment rides on the outputs (sg::with_state_updates) as in
/// nn::Dropout; the seed is the FNV-1a hash of the layer's type and path unless given, and each layer boundary takes
/// its own stream of it (sg::dropout), so the masks of the boundaries and of the steps are independent. Eval mode,
/// dropout = 0 or num_layers = 1 (torch warns about it; here it is silently no dropout): no dropout.
class RecurrentLayer : public Module {
 public:
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  /// forward_state(x).output.
  Tensor forward(const Tensor& x) override { return forward_state(x).output; }
  /// Runs the layers over x: (N, T, input_size) with batch_first, (T, N, input_size) without, or (T, input_size)
  /// unbatched. h0 (and c0 for LSTM): (num_layers, N, hidden_size) ((num_layers, H) unbatched), zeros when empty.
  /// Throws ShapeError for other shapes (naming the layer), ValueError before build() or when c0 is given to a GRU.
  RecurrentOutput forward_state(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                                loc_t loc = loc_t::current());
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string describe() const override;
  /// Per layer k: weight_ih_l{k} (G*H, I_k), weight_hh_l{k} (G*H, H), bias_ih_l{k}, bias_hh_l{k} (G*H), G = 4 (LSTM)
  /// or 3 (GRU), I_0 = input_size, I_k = hidden_size above.
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;
  /// The dropout between layers' step counter (see above); empty unless dropout > 0 and num_layers > 1.
  Tensor dropout_step;
  double dropout() const { return dropout_; }
  /// The Philox key of the dropout masks between layers (known after build()).
  uint64_t dropout_seed() const { return seed_; }

 protected:
  /// Throws ValueError for sizes < 1 and a dropout outside [0, 1] or NaN (torch: "dropout should be a number in
  /// range [0, 1]").
  RecurrentLayer(const char* type, int gates, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
                 bool batch_first, double dropout, std::optional<uint64_t> seed);
  /// One step of layer k: the input projection xw_t = x_t W_ih^T + b_ih (N, G*H), h and c (N, H) -> next (h, c).
  virtual std::pair<Tensor, Tensor> cell(size_t k, const Tensor& xw_t, const Tensor& h, const Tensor& c) const = 0;
  int64_t hidden_size() const { return h_; }

 private:
  const char* type_;
  int gates_;
  int64_t in_, h_, layers_;
  bool bias_, batch_first_;
  double dropout_;
  std::optional<uint64_t> given_seed_;
  uint64_t seed_ = 0;
  Tensor next_step_;  ///< dropout_step + 1 (one node: a program commits one next value)
};

/// torch.nn.LSTM (Hochreiter & Schmidhuber 1997; torch's formulation and gate order i, f, g, o):
///   i = sigmoid(W_ii x + b_ii + W_hi h + b_hi), f = sigmoid(.. f ..), g = tanh(.. g ..), o = sigmoid(.. o ..),
///   c' = f * c + i * g, h' = o * tanh(c').
/// Parameters as torch (weight_ih_l0 (4H, I) = [W_ii; W_if; W_ig; W_io], ...), initialised U(-1/sqrt(H), 1/sqrt(H)),
/// so a torch state_dict loads. Arguments in torch's order (input_size, hidden_size, num_layers, bias, batch_first,
/// dropout), then the dropout masks' seed (RecurrentLayer). Not supported (UnsupportedError never needed: the
/// constructor has no such arguments): bidirectional, proj_size.
class LSTM final : public RecurrentLayer {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
       double dropout = 0.0, std::optional<uint64_t> seed = std::nullopt)
      : RecurrentLayer("LSTM", 4, input_size, hidden_size, num_layers, bias, batch_first, dropout, seed) {}
  std::string type_name() const override { return "LSTM"; }

 private:
  std::pair<Tensor, Tensor> cell(size_t k, const Tensor& xw_t, const Tensor& h, const Tensor& c) const override;
};

/// torch.nn.GRU (Cho et al. 2014; torch's formulation and gate order r, z, n):
///   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(.. z ..), n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),
///   h' = (1 - z) * n + z * h.
/// Parameters as torch (weight_ih_l0 (3H, I) = [W_ir; W_iz; W_in], ...), initialised U(-1/sqrt(H), 1/sqrt(H)).
/// forward_state's c_n is empty. Arguments in torch's order, dropout between layers as LSTM. Not supported:
/// bidirectional.
class GRU final : public RecurrentLayer {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
      double dropout = 0.0, std::optional<uint64_t> seed = std::nullopt)
      : RecurrentLayer("GRU", 3, input_size, hidden_size, num_layers, bias, batch_first, dropout, seed) {}
  std::string type_name() const override { return "GRU"; }

 private:
  std::pair<Tensor, Tensor> cell(size_t k, const Tensor& xw_t, const Tensor& h, const Tensor& c) const override;
};

/// Layer normalisation over the trailing dimensions (torch.nn.LayerNorm, same parameters, names and defaults so a
/// state_dict ports): forward(x) with x (*, normalized_shape) gives sg::layer_norm(x, normalized_shape, weight, bias,
/// eps) = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias, the biased variance over the last normalized_shape.size()
/// dimensions. Parameters (with elementwise_affine): "weight" (normalized_shape) initialised to ones and, unless
/// bias = false (torch >= 2.1's argument), "bias" (normalized_shape) to zeros. Fusion: the row statistics are one
/// kernel, the normalisation fuses into its consumer (tests/test_schedule.cpp, "schedule rule layer_norm"). Errors:
/// ValueError for an empty normalized_shape, a size < 1, eps < 0 or NaN (at construction), forward before build();
/// ShapeError when x does not end in normalized_shape, naming the layer and the caller's source line.
class LayerNorm final : public Module {
 public:
  explicit LayerNorm(ShapeRef normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  /// LayerNorm({3, 5}) and LayerNorm(64), as torch's int or tuple (overloads: a braced list would also match the
  /// copy constructor through (ShapeRef, eps)).
  explicit LayerNorm(std::initializer_list<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true)
      : LayerNorm(ShapeRef(normalized_shape), eps, elementwise_affine, bias) {}
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(ShapeRef(normalized_shape), eps, elementwise_affine, bias) {}
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  /// "LayerNorm((64,), eps=1e-05, elementwise_affine=True)", as torch prints it.
  std::string describe() const override;
  Tensor weight, bias;  ///< empty without elementwise_affine (and bias empty with bias = false)
  const Shape& normalized_shape() const { return shape_; }
  double eps() const { return eps_; }

 private:
  Shape shape_;
  double eps_;
  bool affine_, bias_;
};

/// Root-mean-square normalisation (torch.nn.RMSNorm, torch >= 2.4; same parameters, names and defaults):
/// forward(x) with x (*, normalized_shape) gives sg::rms_norm(x, normalized_shape, weight, eps) =
/// x * rsqrt(mean(x^2) + eps) * weight over the last normalized_shape.size() dimensions; eps nullopt (torch's None)
/// is the machine epsilon of f32 (torch.finfo(float32).eps = 1.1920929e-07). Parameter (with elementwise_affine):
/// "weight" (normalized_shape) initialised to ones. Errors as LayerNorm.
class RMSNorm final : public Module {
 public:
  explicit RMSNorm(ShapeRef normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  explicit RMSNorm(std::initializer_list<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true)
      : RMSNorm(ShapeRef(normalized_shape), eps, elementwise_affine) {}
  explicit RMSNorm(int64_t normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true)
      : RMSNorm(ShapeRef(normalized_shape), eps, elementwise_affine) {}
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  /// "RMSNorm((64,), eps=None, elementwise_affine=True)", as torch prints it.
  std::string describe() const override;
  Tensor weight;  ///< empty without elementwise_affine
  const Shape& normalized_shape() const { return shape_; }
  std::optional<double> eps() const { return eps_; }

 private:
  Shape shape_;
  std::optional<double> eps_;
  bool affine_;
};

/// Dropout (torch.nn.Dropout(p); Srivastava et al. 2014), elementwise over any shape, f32. Training mode: forward(x)
/// = sg::dropout(x, p, seed, step) — each element zeroed with probability p, the survivors scaled by 1 / (1 - p),
/// torch's NaN/inf semantics — with a new mask every step: the layer's step counter `step` (a State of shape {},
/// starting at 0) is the step of the random numbers, and the output carries its increment (sg::with_state_updates),
/// so the Program that evaluates it (Program::add_output, sg::make_train_step) adds 1 to it in the compiled step: a
/// fresh stream each run, no host round trip, no recompilation. Programs built from the same layer share the counter.
/// The mask is never stored (sg::random_uniform); the gradient is the adjoint times the same mask. The counter is not
/// a buffer: torch's Dropout has no state_dict entries, so state_dict and checkpoints are torch's. Eval mode
/// (eval()) or p = 0: identity, no counter read and no increment (the program is the one without the layer). The seed is `seed` if given, else the FNV-1a hash of the layer's path in the
/// model (build's prefix), so layers of one model draw different masks and a rebuilt model the same ones; each
/// forward takes the next stream of its seed (sg::random_uniform), so two calls of one layer drop different elements.
/// Throws ValueError for p outside [0, 1] or NaN (torch: ValueError), and for a training-mode forward before build().
class Dropout final : public Module {
 public:
  explicit Dropout(double p = 0.5, std::optional<uint64_t> seed = std::nullopt);
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  Tensor forward(const Tensor& x) override;
  /// "Dropout(p=0.5, inplace=False)", as torch prints it.
  std::string describe() const override;
  std::string type_name() const override { return "Dropout"; }
  double p() const { return p_; }
  /// The Philox key of this layer's masks (known after build()).
  uint64_t seed() const { return seed_; }
  Tensor step;  ///< the step counter: State prefix + "dropout_step", shape {}, initial 0 (created by build())

 private:
  double p_;
  std::optional<uint64_t> given_seed_;
  uint64_t seed_ = 0;
  Tensor next_step_;  ///< step + 1, one node for every forward of this layer (a program commits one next value)
};

/// Masks and options of an attention call (torch.nn.MultiheadAttention.forward's arguments). Boolean masks are i32
/// tensors (shadergrad has no bool dtype; stored as exact floats): nonzero = True. f32 masks are added to the scores,
/// as torch's float masks.
struct AttentionOptions {
  /// (N, S) (batched) or (S) (unbatched): True (nonzero i32) = this key is padding and is ignored; f32: added to the
  /// scores of that key. Empty: none.
  Tensor key_padding_mask;
  /// (L, S) or (N * num_heads, L, S): True (nonzero i32) = query l may not attend to key s; f32: added to the scores.
  /// Empty: none.
  Tensor attn_mask;
  /// The causal mask: query l attends to keys s <= l only (torch's triu(ones(L, S), 1) as "not allowed"), computed in
  /// the kernels from iota (no host constant). torch >= 2.0 takes is_causal as a hint that attn_mask is this mask;
  /// here it applies it (together with attn_mask when both are given).
  bool is_causal = false;
  /// Also return the attention weights (torch's default is true; here false: the output alone is cheaper).
  bool need_weights = false;
  /// The weights averaged over the heads (N, L, S) (torch's default), else per head (N, num_heads, L, S).
  bool average_attn_weights = true;
};

/// What an attention call returns (torch: the tuple (attn_output, attn_output_weights)).
struct AttentionOutput {
  Tensor output;   ///< (N, L, E) with batch_first, (L, N, E) without, (L, E) unbatched
  Tensor weights;  ///< with need_weights: (N, L, S) averaged, (N, num_heads, L, S) per head; (L, S) unbatched; else empty
};

/// Dropout on the attention weights: torch's dropout_p and training arguments of F.multi_head_attention_forward, and
/// the random stream of the masks (sg::dropout's seed and step).
struct AttentionDropout {
  double p = 0.0;         ///< probability of zeroing an attention weight, in [0, 1]; 0: no dropout
  bool training = true;   ///< torch's `training`: false turns the dropout off (torch sets dropout_p = 0)
  uint64_t seed = 0;      ///< the Philox key (each call takes the next stream of it, sg::dropout)
  Tensor step;            ///< one-element step of the random numbers (a State step counter or an input); required
                          ///< when p > 0 and training
};

/// Multi-head attention (Vaswani et al. 2017; torch.nn.functional.multi_head_attention_forward with kdim = vdim =
/// embed_dim, no bias_k/bias_v, no zero attention), in torch's parameter layouts:
///   q, k, v = query W_q^T + b_q, key W_k^T + b_k, value W_v^T + b_v   (W_q, W_k, W_v: rows 0..E, E..2E, 2E..3E of
///             in_proj_weight (3E, E); b_*: of in_proj_bias (3E))
///   per head h (D = E / num_heads columns each): A_h = dropout(softmax(q_h k_h^T / sqrt(D) + masks)), A_h v_h
///   output = concat(heads) out_proj_weight^T + out_proj_bias
/// Dropout (`dropout`, only when dropout.p > 0 and dropout.training): sg::dropout(softmax(...), p, seed, step) after
/// the softmax and before the product with v, as torch 1.13's F.multi_head_attention_forward; the weights returned
/// with need_weights are those after dropout, as torch returns them (its attn_output_weights is reassigned by
/// dropout before the average over the heads). The masks' bits are shadergrad's (sg::random_uniform), not torch's
/// generator's; the same on every backend. The mask is not stored: it is regenerated where the weights are read.
/// Shapes: query (N, L, E), key and value (N, S, E) with batch_first; (L, N, E) and (S, N, E) without; (L, E) and
/// (S, E) unbatched (the output likewise). Masks (AttentionOptions): bool ones give -inf scores (a query whose every
/// key is masked gets NaN, as torch), float ones are added. When query, key and value are one tensor (self-attention)
/// the in-projection is one matmul with the whole in_proj_weight. in_proj_bias / out_proj_bias may be empty (bias =
/// false). Fusion: the scale and the masks are the score matmul's epilogue, the softmax's max and sum one kernel per
/// row, its normalisation the prologue of the matmul with v (tests/test_schedule.cpp, "schedule rule attention").
/// Errors: ShapeError for inputs of other ranks or sizes, embed_dim not divisible by num_heads, masks that do not
/// have the shapes above, weights of other shapes; ValueError for num_heads < 1, masks of another dtype than i32 or
/// f32, a dropout p outside [0, 1] or NaN, p > 0 in training without a step — each naming "multi_head_attention"
/// and the caller's line.
AttentionOutput multi_head_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                             int64_t num_heads, const Tensor& in_proj_weight,
                                             const Tensor& in_proj_bias, const Tensor& out_proj_weight,
                                             const Tensor& out_proj_bias, const AttentionOptions& options = {},
                                             bool batch_first = true, const AttentionDropout& dropout = {},
                                             loc_t loc = loc_t::current());

/// torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, batch_first), a module tree as torch's:
/// own parameters "in_proj_weight" (3E, E) ~ xavier_uniform_ (U(+-sqrt(6 / (E + 3E)))) and "in_proj_bias" (3E) zeros,
/// and the child `out_proj`, a Linear(E, E) (torch's NonDynamicallyQuantizableLinear) with "out_proj.weight" (E, E) ~
/// U(+-1/sqrt(E)) (nn.Linear's init) and "out_proj.bias" (E) zeros — torch's state_dict names and order; bias = false
/// drops both biases. describe() is torch's nested repr ("MultiheadAttention(\n  (out_proj): Linear(64, 64)\n)",
/// with shadergrad's Linear repr); train()/eval() reach out_proj through the tree. batch_first defaults to true here
/// (torch's default is false; both are supported).
/// forward(x) is self-attention, attend(x, x, x).output; attend(query, key, value, options) is torch's forward
/// (multi_head_attention_forward above: masks, is_causal, need_weights). dropout > 0: in training, dropout on the
/// attention weights (AttentionDropout above: after the softmax, before the product with v; need_weights returns them
/// after dropout, as torch) with a new mask every step: the step counter `dropout_step` (a State prefix +
/// "dropout_step", shape {}, created by build() when dropout > 0; not a buffer, torch has no such state_dict entry)
/// is the masks' step and its increment rides on the outputs (sg::with_state_updates), as nn::Dropout's. The seed is
/// `seed` if given, else the FNV-1a hash of the layer's path; each attend takes the next stream of it. Eval mode: no
/// dropout. kdim/vdim other than embed_dim, add_bias_kv and add_zero_attn are not provided. Errors: ValueError at
/// construction for embed_dim or num_heads < 1, embed_dim not divisible by num_heads, a dropout outside [0, 1] or
/// NaN; forward before build() is a ValueError; shape errors name the layer
/// ("MultiheadAttention(embed_dim=64, num_heads=4, batch_first=True)") and the caller's line.
class MultiheadAttention final : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = true, std::optional<uint64_t> seed = std::nullopt);
  using Module::build;
  void build(const std::string& prefix, Rng& rng) override;
  /// Self-attention: attend(x, x, x).output.
  Tensor forward(const Tensor& x) override;
  /// torch's forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal).
  AttentionOutput attend(const Tensor& query, const Tensor& key, const Tensor& value,
                         const AttentionOptions& options = {}, loc_t loc = loc_t::current());
  /// in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias (torch's state_dict order); ValueError before build().
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::string type_name() const override { return "MultiheadAttention"; }
  /// "MultiheadAttention(embed_dim=64, num_heads=4, batch_first=True)": the layer in error messages (describe() is
  /// torch's repr, which names no sizes).
  std::string label() const;
  Tensor in_proj_weight, in_proj_bias;
  Linear out_proj;     ///< child "out_proj": weight (E, E), bias (E) (empty with bias = false)
  Tensor dropout_step;  ///< the dropout masks' step counter (see above); empty unless dropout > 0
  int64_t embed_dim() const { return e_; }
  int64_t num_heads() const { return h_; }
  double dropout() const { return p_; }
  /// The Philox key of the dropout masks (known after build()).
  uint64_t dropout_seed() const { return seed_; }

 private:
  int64_t e_, h_;
  double p_;
  bool bias_, batch_first_;
  std::optional<uint64_t> given_seed_;
  uint64_t seed_ = 0;
  Tensor next_step_;  ///< dropout_step + 1 (one node: a program commits one next value)
};

/// torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout, activation="relu",
/// layer_norm_eps=1e-5, batch_first, norm_first=False, bias=True): self-attention and a feed-forward block, each with a
/// residual connection and a LayerNorm,
///   post-norm (norm_first = false): x = norm1(x + self_attn(x)); x = norm2(x + linear2(activation(linear1(x))))
///   pre-norm (norm_first = true):   x = x + self_attn(norm1(x));  x = x + linear2(activation(linear1(norm2(x))))
/// activation "relu" or "gelu" (exact), with torch's dropouts (torch's _sa_block and _ff_block):
///   self_attn(x) above is dropout1(self_attn(x, x, x)) (the attention itself drops its weights with `dropout` too),
///   the feed-forward block is dropout2(linear2(dropout(activation(linear1(x))))).
/// A module tree with torch's children in torch's order: self_attn (MultiheadAttention(d_model, nhead, dropout)),
/// linear1, dropout, linear2, norm1, norm2, dropout1, dropout2 (nn::Dropout(dropout), each with its own step counter
/// and seed, the hash of its path: every dropout site draws independent masks; eval() turns them all off), so
/// describe() is torch's nested repr and state_dict torch's: self_attn.{in_proj_weight, in_proj_bias,
/// out_proj.weight, out_proj.bias}, linear1.{weight, bias} (dim_feedforward, d_model), linear2.{weight, bias}
/// (d_model, dim_feedforward), norm1.{weight, bias}, norm2.{weight, bias} (d_model), initialised as those layers.
/// Differences from torch: dropout defaults to 0 (torch: 0.1: a layer built with the defaults is deterministic and
/// its programs are those of the layer without dropout); batch_first defaults to true (torch: false). forward(x) is
/// encode(x) without masks;
/// encode(src, options) takes torch's src_mask (options.attn_mask), src_key_padding_mask (options.key_padding_mask)
/// and is_causal (AttentionOptions; need_weights is ignored). src (N, S, d_model) with batch_first, (S, N, d_model)
/// without, (S, d_model) unbatched. The submodules are public: their parameters may be replaced before the first
/// forward (e.g. by fed tensors). Errors: ValueError at construction for sizes < 1, d_model not divisible by nhead,
/// another activation, dropout outside [0, 1] or NaN; shape errors name the layer
/// ("TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, activation=relu)") and the caller's line.
class TransformerEncoderLayer final : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.0,
                          std::string activation = "relu", double layer_norm_eps = 1e-5, bool batch_first = true,
                          bool norm_first = false, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor encode(const Tensor& src, const AttentionOptions& options = {}, loc_t loc = loc_t::current());
  /// encode(src, options), and the self-attention's weights when options.need_weights (torch has no such method: its
  /// layer calls self_attn with need_weights=False; these are what self_attn(norm1(x)) (norm_first) or self_attn(x)
  /// returns, MultiheadAttention::attend's `weights`: (N, nhead, S, S) per head with average_attn_weights = false,
  /// (N, S, S) averaged, (S, S) unbatched), e.g. for drawing a language model's attention maps. The output is the
  /// same graph as encode's; the weights are the softmax the output is computed from (no second attention). Errors
  /// as encode.
  AttentionOutput encode_with_weights(const Tensor& src, const AttentionOptions& options,
                                      loc_t loc = loc_t::current());
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  /// "TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, activation=gelu, norm_first=True)": the layer
  /// in error messages (describe() is torch's nested repr of the children).
  std::string label() const;
  // the children, declared (so constructed) and registered in torch's order
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1, norm2;
  Dropout dropout1, dropout2;

 private:
  int64_t d_, nhead_, ff_;
  std::string activation_;
  bool norm_first_;
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
    layers_.push_back(&add_module<M>(std::to_string(layers_.size()), std::forward<Args>(args)...));
    return *this;
  }
  using Module::build;
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return layers_.size(); }
  /// "1: Linear(784, 128)" (the index is the parameter-name prefix).
  std::string layer_name(size_t i) const;
  /// forward(x) that also appends each layer's output to `outputs`: the nodes layer i creates are those created
  /// after outputs[i-1] (after x for layer 0) up to outputs[i] (Node::id is creation order), which is how
  /// sg::debug labels the nodes of each layer.
  Tensor forward_layers(const Tensor& x, std::vector<Tensor>& outputs);

 private:
  std::vector<Module*> layers_;
};

/// torchvision.models.resnet.BasicBlock(inplanes, planes, stride, downsample) (He et al. 2016, "Deep Residual
/// Learning for Image Recognition", the two-convolution block), same children, names and order so a torch
/// state_dict loads: conv1 (Conv2d(inplanes, planes, 3, stride, padding 1, bias=False)), bn1 (BatchNorm2d(planes)),
/// relu, conv2 (Conv2d(planes, planes, 3, padding 1, bias=False)), bn2 (BatchNorm2d(planes)) and, when stride != 1 or
/// inplanes != planes, downsample = Sequential(Conv2d(inplanes, planes, 1, stride, bias=False), BatchNorm2d(planes))
/// (torchvision's _make_layer projection shortcut, "option B"):
///   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),  shortcut = downsample or the identity.
/// Convolutions are initialised as torchvision's ResNet (ConvInit::KaimingNormalFanOut), BatchNorm weight 1, bias 0.
/// x (N, inplanes, H, W) -> (N, planes, (H - 1) / stride + 1, (W - 1) / stride + 1). Errors: ValueError for sizes or
/// a stride < 1 (at construction), as Conv2d and BatchNorm2d in forward (ShapeError for another channel count).
class BasicBlock final : public Module {
 public:
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }
  Conv2d conv1;
  BatchNorm2d bn1;
  ReLU relu;
  Conv2d conv2;
  BatchNorm2d bn2;
  /// The projection shortcut (empty, and not registered, when the block keeps its shape).
  std::unique_ptr<Sequential> downsample;
};

/// A small ResNet for images (torchvision.models.resnet.ResNet's structure and state_dict names with BasicBlock,
/// without its max pool, for inputs as small as 28x28 as the CIFAR ResNets of He et al. 2016, plus dropout before the
/// classifier). Children in order: conv1 (Conv2d(in_channels, widths[0], 3, padding 1, bias=False)), bn1
/// (BatchNorm2d), relu, layer1 .. layerK (K = widths.size(): Sequential of blocks[k] BasicBlocks with widths[k] planes;
/// the first block of every stage but the first has stride 2 and a projection shortcut), dropout (Dropout(dropout)),
/// fc (Linear(widths.back(), num_classes)):
///   logits = fc(dropout(mean over H, W of layerK(..layer1(relu(bn1(conv1(x)))))))
/// (the mean over H, W is torchvision's AdaptiveAvgPool2d((1, 1)) + flatten). state_dict names as torchvision's:
/// conv1.weight, bn1.{weight, bias, running_mean, running_var, num_batches_tracked}, layer1.0.conv1.weight,
/// layer1.0.bn1.running_mean, layer2.0.downsample.0.weight, layer2.0.downsample.1.running_var, ..., fc.weight, fc.bias.
/// Train mode: every BatchNorm uses the batch's statistics and updates its running statistics in the compiled step,
/// dropout is active (a new mask every step); eval(): the running statistics, no dropout.
/// x (N, in_channels, H, W) -> (N, num_classes). Errors: ValueError for an empty widths, blocks of another length,
/// sizes < 1, a dropout outside [0, 1]; ShapeError (naming the layer) for inputs of another channel count.
class ResNet final : public Module {
 public:
  ResNet(int64_t in_channels, int64_t num_classes, std::vector<int64_t> widths = {16, 32, 64},
         std::vector<int64_t> blocks = {1, 1, 1}, double dropout = 0.2);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }
  Conv2d conv1;
  BatchNorm2d bn1;
  ReLU relu;
  /// layer1 .. layerK (children "layer1", ...), each a Sequential of BasicBlocks.
  std::vector<std::unique_ptr<Sequential>> layers;
  Dropout dropout;
  Linear fc;

 private:
  int64_t in_channels_ = 0;
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
/// The "resnet" model of `shadergrad train`: ResNet(channels, classes, widths {16, 32, 64}, one BasicBlock per stage,
/// dropout 0.2) — 8 weight layers (the CIFAR ResNet-8 of He et al. 2016 with a projection shortcut), 78,042 parameters
/// for 1 channel and 10 classes; on 28x28 the stages see 28x28, 14x14 and 7x7. Throws ValueError for sizes < 1.
std::unique_ptr<ResNet> make_resnet(int64_t channels, int64_t height, int64_t width, int64_t classes = 10);
/// Every model the CLI trains as a Module: make_model's Sequential models and "resnet" (make_resnet). Throws
/// ValueError for unknown names.
std::unique_ptr<Module> make_module(const std::string& name, int64_t channels, int64_t height, int64_t width,
                                    int64_t classes = 10);
std::unique_ptr<Sequential> make_cnn(int64_t c1, int64_t c2, int64_t hidden, int64_t channels, int64_t height,
                                     int64_t width, int64_t classes = 10);

}  // namespace sg::nn
