// Layers, initialisers and model builders.
#include "sg/nn.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "sg/kernel_cache.h"

namespace sg::nn {

std::vector<float> Rng::uniform(int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(g_));
  return v;
}

std::vector<float> Rng::normal(int64_t n, double mean, double std) {
  std::normal_distribution<double> d(mean, std);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(g_));
  return v;
}

namespace {
// torch.nn.Linear/Conv2d.reset_parameters: kaiming_uniform_(a=sqrt(5)) -> bound 1/sqrt(fan_in); bias the same.
Tensor init_param(const std::string& name, ShapeRef shape, int64_t fan_in, Rng& rng) {
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return param(name, shape, rng.uniform(numel(shape), -bound, bound));
}
/// Rethrows the sg::Error in flight with the layer and the caller named: `layer` + ": " before its message unless it
/// starts with `layer` already (an op's error inside a layer: "MultiheadAttention(...): multi_head_attention: ..."),
/// " at FILE:LINE" of `caller` after it unless it names that line already. ShapeError, ValueError and
/// UnsupportedError keep their type; any other exception is rethrown unchanged.
[[noreturn]] void rethrow_in_layer(const std::string& layer, const SourceLoc& caller) {
  auto reword = [&](const std::string& what) {
    std::string m = layer.empty() || what.rfind(layer, 0) == 0 ? what : layer + ": " + what;
    if (caller.known() && m.find(" at " + caller.str()) == std::string::npos) m += " at " + caller.str();
    return m;
  };
  try {
    throw;
  } catch (const ShapeError& e) {
    throw ShapeError(reword(e.what()));
  } catch (const ValueError& e) {
    throw ValueError(reword(e.what()));
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(reword(e.what()));
  }
}
/// body(), its errors naming the layer and the caller (rethrow_in_layer).
template <class F>
auto in_layer(const std::string& layer, const SourceLoc& caller, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    rethrow_in_layer(layer, caller);
  }
}
/// The path of the first module of the tree under `m` (named `path`) whose parameters or buffers exist (built), or
/// nullopt. A module that throws for unbuilt parameters is not built; its children are looked at.
std::optional<std::string> first_built(const Module& m, const std::string& path) {
  for (const auto& [name, child] : m.children())
    if (auto p = first_built(*child, path.empty() ? name : path + "." + name)) return p;
  try {  // no child is built: what m lists is its own
    if (!m.named_parameters().empty() || !m.named_buffers().empty()) return path.empty() ? m.type_name() : path;
  } catch (const ValueError&) {
  }
  return std::nullopt;
}
/// torch's repr of a float (Python's): 1e-05, 0.001, 1e-06, 0.5, 1.0.
std::string float_repr(double v) {
  std::string r = fmt::format("{}", v);
  const auto e = r.find("e-");
  if (e != std::string::npos && r.size() - e == 3) r.insert(e + 2, "0");  // 1e-5 -> 1e-05 (Python's repr)
  if (r.find_first_of(".en") == std::string::npos) r += ".0";              // 1 -> 1.0
  return r;
}
}  // namespace

void Linear::build(const std::string& prefix, Rng& rng) {
  weight = init_param(prefix + "weight", {out_, in_}, in_, rng);
  if (bias_) bias = init_param(prefix + "bias", {out_}, in_, rng);
}
Tensor Linear::forward(const Tensor& x) {
  if (!weight) throw ValueError("Linear: build() was not called before forward()");
  if (x.rank() < 1 || x.dim(-1) != in_)
    throw ShapeError(fmt::format("Linear({}, {}): input last dimension must be {}, got shape {}", in_, out_, in_,
                                 shape_str(x.shape())));
  Tensor y = matmul(x, transpose(weight));
  return bias ? Tensor(y + bias) : y;
}
std::vector<std::pair<std::string, Tensor>> Linear::named_parameters() const {
  if (!weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  std::vector<std::pair<std::string, Tensor>> r = {{weight.name(), weight}};
  if (bias) r.emplace_back(bias.name(), bias);
  return r;
}
GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  if (approximate_ != "none" && approximate_ != "tanh")
    throw ValueError(fmt::format("GELU: approximate='{}' is not 'none' or 'tanh' (torch.nn.GELU's choices)", approximate_));
}

Dropout::Dropout(double p, std::optional<uint64_t> seed) : p_(p), given_seed_(seed) {
  if (!(p >= 0.0 && p <= 1.0))
    throw ValueError(fmt::format("Dropout: dropout probability has to be between 0 and 1, but got {}", p));
}
void Dropout::build(const std::string& prefix, Rng&) {
  // the path's hash, not a draw from rng: inserting a Dropout changes no other layer's initial values
  seed_ = given_seed_ ? *given_seed_ : fnv1a64("sg::nn::Dropout " + prefix);
  step = state(prefix + "dropout_step", {}, {0.f});
  next_step_ = step + 1.0;
}
Tensor Dropout::forward(const Tensor& x) {
  if (!training() || p_ == 0.0) return x;  // torch: the identity; no counter increment (the program without the layer)
  if (!step)
    throw ValueError(fmt::format("{}: the step counter is created by build(); call build(rng) first", describe()));
  return with_state_updates(dropout(x, p_, seed_, step), {{step, next_step_}});
}
std::string Dropout::describe() const {
  std::string p = fmt::format("{}", p_);
  if (p.find_first_of(".en") == std::string::npos) p += ".0";  // Python's repr of a float: 1.0, not 1
  return fmt::format("Dropout(p={}, inplace=False)", p);
}

std::string Linear::describe() const { return fmt::format("Linear({}, {}{})", in_, out_, bias_ ? "" : ", bias=False"); }

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
               int64_t dilation, int64_t groups, bool bias, ConvInit init)
    : c_(in_channels), o_(out_channels), k_(kernel), s_(stride), p_(padding), d_(dilation), g_(groups), bias_(bias),
      init_(init) {
  // torch.nn.Conv2d's checks (_ConvNd.__init__), as ValueError
  if (g_ < 1) throw ValueError(fmt::format("Conv2d({}, {}): groups must be a positive integer, got {}", c_, o_, g_));
  if (c_ % g_ != 0)
    throw ValueError(fmt::format("Conv2d({}, {}, groups={}): in_channels must be divisible by groups", c_, o_, g_));
  if (o_ % g_ != 0)
    throw ValueError(fmt::format("Conv2d({}, {}, groups={}): out_channels must be divisible by groups", c_, o_, g_));
}
void Conv2d::build(const std::string& prefix, Rng& rng) {
  const int64_t cg = c_ / g_;
  int64_t fan_in = cg * k_ * k_;
  if (init_ == ConvInit::KaimingNormalFanOut) {  // torchvision's ResNet: kaiming_normal_(mode='fan_out', 'relu')
    const double std = std::sqrt(2.0 / static_cast<double>(o_ * k_ * k_));
    weight = param(prefix + "weight", {o_, cg, k_, k_}, rng.normal(o_ * cg * k_ * k_, 0.0, std));
    if (bias_) bias = param(prefix + "bias", {o_}, std::vector<float>(static_cast<size_t>(o_), 0.0f));
    return;
  }
  if (init_ == ConvInit::KaimingRelu) {
    const double bound = std::sqrt(6.0 / static_cast<double>(fan_in));
    weight = param(prefix + "weight", {o_, cg, k_, k_}, rng.uniform(o_ * cg * k_ * k_, -bound, bound));
    if (bias_) bias = param(prefix + "bias", {o_}, std::vector<float>(static_cast<size_t>(o_), 0.0f));
    return;
  }
  weight = init_param(prefix + "weight", {o_, cg, k_, k_}, fan_in, rng);
  if (bias_) bias = init_param(prefix + "bias", {o_}, fan_in, rng);
}
Tensor Conv2d::forward(const Tensor& x) {
  if (!weight) throw ValueError("Conv2d: build() was not called before forward()");
  return conv2d(x, weight, bias, {.stride = {s_, s_}, .padding = {p_, p_}, .dilation = {d_, d_}, .groups = g_});
}
std::vector<std::pair<std::string, Tensor>> Conv2d::named_parameters() const {
  if (!weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  std::vector<std::pair<std::string, Tensor>> r = {{weight.name(), weight}};
  if (bias) r.emplace_back(bias.name(), bias);
  return r;
}
std::string Conv2d::describe() const {
  std::string s = fmt::format("Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {})", c_, o_, k_, k_, s_, s_);
  if (p_) s += fmt::format(", padding=({}, {})", p_, p_);
  if (d_ != 1) s += fmt::format(", dilation=({}, {})", d_, d_);
  if (g_ != 1) s += fmt::format(", groups={}", g_);
  if (!bias_) s += ", bias=False";
  return s + ")";
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                                 int64_t padding, int64_t output_padding, int64_t groups, bool bias, int64_t dilation)
    : c_(in_channels), o_(out_channels), k_(kernel), s_(stride), p_(padding), op_(output_padding), g_(groups),
      d_(dilation), bias_(bias) {
  if (g_ < 1)
    throw ValueError(fmt::format("ConvTranspose2d({}, {}): groups must be a positive integer, got {}", c_, o_, g_));
  if (c_ % g_ != 0)
    throw ValueError(fmt::format("ConvTranspose2d({}, {}, groups={}): in_channels must be divisible by groups", c_, o_,
                                 g_));
  if (o_ % g_ != 0)
    throw ValueError(fmt::format("ConvTranspose2d({}, {}, groups={}): out_channels must be divisible by groups", c_,
                                 o_, g_));
}
void ConvTranspose2d::build(const std::string& prefix, Rng& rng) {
  const int64_t og = o_ / g_;
  const int64_t fan_in = og * k_ * k_;  // torch: the weight's size(1) * receptive field
  weight = init_param(prefix + "weight", {c_, og, k_, k_}, fan_in, rng);
  if (bias_) bias = init_param(prefix + "bias", {o_}, fan_in, rng);
}
Tensor ConvTranspose2d::forward(const Tensor& x) {
  if (!weight) throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
  return conv_transpose2d(x, weight, bias,
                          {.stride = {s_, s_}, .padding = {p_, p_}, .output_padding = {op_, op_}, .dilation = {d_, d_},
                           .groups = g_});
}
std::vector<std::pair<std::string, Tensor>> ConvTranspose2d::named_parameters() const {
  if (!weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  std::vector<std::pair<std::string, Tensor>> r = {{weight.name(), weight}};
  if (bias) r.emplace_back(bias.name(), bias);
  return r;
}
std::string ConvTranspose2d::describe() const {
  std::string s = fmt::format("ConvTranspose2d({}, {}, kernel_size=({}, {}), stride=({}, {})", c_, o_, k_, k_, s_, s_);
  if (p_) s += fmt::format(", padding=({}, {})", p_, p_);  // torch's _ConvNd.extra_repr order
  if (d_ != 1) s += fmt::format(", dilation=({}, {})", d_, d_);
  if (op_) s += fmt::format(", output_padding=({}, {})", op_, op_);
  if (g_ != 1) s += fmt::format(", groups={}", g_);
  if (!bias_) s += ", bias=False";
  return s + ")";
}
Upsample::Upsample(int64_t scale_factor, std::string mode, std::optional<bool> align_corners)
    : Upsample(std::nullopt, std::array<double, 2>{static_cast<double>(scale_factor), static_cast<double>(scale_factor)},
               std::move(mode), align_corners) {
  scalar_scale_ = true;
}
Upsample::Upsample(std::optional<std::array<int64_t, 2>> size, std::optional<std::array<double, 2>> scale_factor,
                   std::string mode, std::optional<bool> align_corners)
    : size_(size), scale_(scale_factor), mode_(std::move(mode)), align_corners_(align_corners) {
  if (mode_ != "nearest" && mode_ != "bilinear")
    throw UnsupportedError(fmt::format("Upsample: mode '{}' is not supported (only 'nearest' with whole scale factors "
                                       "and 'bilinear')", mode_));
  if (size_.has_value() == scale_.has_value())
    throw ValueError(size_ ? "Upsample: only one of size or scale_factor should be defined"
                           : "Upsample: either size or scale_factor should be defined");
  if (size_ && ((*size_)[0] < 1 || (*size_)[1] < 1))
    throw ValueError(fmt::format("Upsample: size must be >= 1, got ({}, {})", (*size_)[0], (*size_)[1]));
  if (scale_)
    for (double v : *scale_)
      if (!(v > 0) || !std::isfinite(v)) throw ValueError(fmt::format("Upsample: scale_factor must be > 0, got {}", v));
  if (mode_ == "nearest") {
    if (align_corners_)
      throw ValueError("Upsample: align_corners option can only be set with the interpolating modes: linear | "
                       "bilinear | bicubic | trilinear");
    if (size_) throw UnsupportedError("Upsample: mode 'nearest' takes whole scale factors here, not a size");
    for (double v : *scale_)
      if (v != std::floor(v) || v < 1)
        throw ValueError(fmt::format("Upsample: scale_factor must be a whole number >= 1 for mode 'nearest', got {}",
                                     v));
  }
}
Tensor Upsample::forward(const Tensor& x) {
  if (mode_ == "nearest")
    return upsample_nearest2d(x, static_cast<int64_t>((*scale_)[0]), static_cast<int64_t>((*scale_)[1]));
  return upsample_bilinear2d(x, {.size = size_, .scale_factor = scale_, .align_corners = align_corners_.value_or(false)});
}
std::string Upsample::describe() const {
  auto num = [](double v) {  // Python's repr of a float: 2.0, 1.5
    std::string t = fmt::format("{}", v);
    if (t.find_first_of(".en") == std::string::npos) t += ".0";
    return t;
  };
  std::string what;
  if (size_) what = fmt::format("size=({}, {})", (*size_)[0], (*size_)[1]);
  else if (scalar_scale_) what = "scale_factor=" + num((*scale_)[0]);
  else what = fmt::format("scale_factor=({}, {})", num((*scale_)[0]), num((*scale_)[1]));
  return fmt::format("Upsample({}, mode='{}')", what, mode_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : num_(num_embeddings), dim_(embedding_dim) {
  if (num_ < 1 || dim_ < 1)
    throw ValueError(fmt::format("Embedding({}, {}): num_embeddings and embedding_dim must be >= 1", num_, dim_));
  if (padding_idx) {
    if (*padding_idx < -num_ || *padding_idx >= num_)
      throw ValueError(fmt::format("Embedding({}, {}): padding_idx {} must be within [-{}, {}) (torch.nn.Embedding)",
                                   num_, dim_, *padding_idx, num_, num_));
    pad_ = *padding_idx < 0 ? *padding_idx + num_ : *padding_idx;
  }
}
void Embedding::build(const std::string& prefix, Rng& rng) {
  // torch.nn.Embedding.reset_parameters: normal_(0, 1), then the padding row filled with 0
  std::vector<float> w = rng.normal(num_ * dim_, 0.0, 1.0);
  if (pad_) std::fill(w.begin() + *pad_ * dim_, w.begin() + (*pad_ + 1) * dim_, 0.0f);
  weight = param(prefix + "weight", {num_, dim_}, std::move(w));
}
Tensor Embedding::forward(const Tensor& indices) {
  if (!weight) throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
  if (!indices) throw ValueError(fmt::format("{}: indices is an empty Tensor", describe()));
  if (indices.dtype() != DType::i32)
    throw ValueError(fmt::format("{}: indices must be i32 (an i32 input), got {} {}", describe(),
                                 dtype_name(indices.dtype()), shape_str(indices.shape())));
  Tensor table = weight;
  if (pad_) {
    // the padding row keeps its value in the forward pass and passes no gradient (torch's padding_idx)
    std::vector<float> keep(static_cast<size_t>(num_), 1.0f);
    keep[*pad_] = 0.0f;
    table = where(constant({num_, 1}, std::move(keep)), weight, stop_gradient(weight));
  }
  return take(table, indices, 0);
}
std::vector<std::pair<std::string, Tensor>> Embedding::named_parameters() const {
  if (!weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  return {{weight.name(), weight}};
}
std::string Embedding::describe() const {
  return fmt::format("Embedding({}, {}{})", num_, dim_, pad_ ? fmt::format(", padding_idx={}", *pad_) : "");
}

BatchNorm::BatchNorm(const char* type, std::vector<int> ranks, int64_t num_features, double eps,
                     std::optional<double> momentum, bool affine, bool track_running_stats)
    : type_(type), ranks_(std::move(ranks)), c_(num_features), eps_(eps), momentum_(momentum), affine_(affine),
      track_(track_running_stats) {
  if (c_ < 1) throw ValueError(fmt::format("{}({}): num_features must be >= 1", type_, c_));
  if (!(eps_ > 0)) throw ValueError(fmt::format("{}({}): eps must be > 0 (got {})", type_, c_, eps_));
  if (momentum_ && !(*momentum_ >= 0 && *momentum_ <= 1))
    throw ValueError(fmt::format("{}({}): momentum must be within [0, 1] or None (got {})", type_, c_, *momentum_));
}
void BatchNorm::build(const std::string& prefix, Rng&) {
  const size_t c = static_cast<size_t>(c_);
  if (affine_) {
    weight = param(prefix + "weight", {c_}, std::vector<float>(c, 1.0f));
    bias = param(prefix + "bias", {c_}, std::vector<float>(c, 0.0f));
  }
  if (track_) {
    running_mean = state(prefix + "running_mean", {c_}, std::vector<float>(c, 0.0f));
    running_var = state(prefix + "running_var", {c_}, std::vector<float>(c, 1.0f));
    num_batches_tracked = state(prefix + "num_batches_tracked", {}, {0.0f});
  }
}
Tensor BatchNorm::forward(const Tensor& x) {
  if (affine_ ? !weight : (track_ && !running_mean))
    throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
  if (!x || std::find(ranks_.begin(), ranks_.end(), x.rank()) == ranks_.end() || x.dim(1) != c_)
    throw ShapeError(fmt::format("{}: expected input of shape {} with {} channels on axis 1, got {}", describe(),
                                 ranks_.size() == 1 ? "(N, C, H, W)" : "(N, C) or (N, C, L)", c_,
                                 x ? shape_str(x.shape()) : std::string("an empty Tensor")));
  std::vector<int> axes;
  Shape stat_shape(static_cast<size_t>(x.rank()), 1);  // (1, C, 1, ...): broadcasts against x
  stat_shape[1] = c_;
  for (int a = 0; a < x.rank(); ++a)
    if (a != 1) axes.push_back(a);
  const bool batch_stats = training() || !track_;
  Tensor y;
  if (batch_stats) {
    const int64_t n = x.numel() / c_;
    if (training() && n <= 1)
      throw ValueError(fmt::format("{}: expected more than 1 value per channel when training, got input {}",
                                   describe(), shape_str(x.shape())));
    Tensor mu = mean(x, axes, true);
    Tensor centred = x - mu;
    Tensor var_b = mean(centred * centred, axes, true);  // biased; one mean of x (sg::var would take its own)
    y = centred * rsqrt(var_b + eps_);
    if (affine_) y = y * reshape(weight, stat_shape) + reshape(bias, stat_shape);
    if (training() && track_) {
      Tensor count = num_batches_tracked + 1.0;
      Tensor mu_c = reshape(mu, {c_}), var_unbiased = reshape(var_b, {c_}) * (static_cast<double>(n) / (n - 1));
      auto average = [&](const Tensor& running, const Tensor& batch) -> Tensor {
        if (momentum_) return running * (1.0 - *momentum_) + batch * *momentum_;
        Tensor m = 1.0 / count;  // torch's cumulative moving average
        return running * (1.0 - m) + batch * m;
      };
      y = with_state_updates(y, {{running_mean, average(running_mean, mu_c)},
                                 {running_var, average(running_var, var_unbiased)},
                                 {num_batches_tracked, count}});
    }
    return y;
  }
  y = (x - reshape(running_mean, stat_shape)) * rsqrt(reshape(running_var, stat_shape) + eps_);
  if (affine_) y = y * reshape(weight, stat_shape) + reshape(bias, stat_shape);
  return y;
}
std::vector<std::pair<std::string, Tensor>> BatchNorm::named_parameters() const {
  if (affine_ && !weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  if (!affine_) return {};
  return {{weight.name(), weight}, {bias.name(), bias}};
}
std::vector<std::pair<std::string, Tensor>> BatchNorm::named_buffers() const {
  if (!track_) return {};
  if (!running_mean)
    throw ValueError(fmt::format("{}: buffers are created by build(); call build(rng) first", describe()));
  return {{running_mean.name(), running_mean}, {running_var.name(), running_var},
          {num_batches_tracked.name(), num_batches_tracked}};
}
std::string BatchNorm::describe() const {
  return fmt::format("{}({}, eps={}, momentum={}, affine={}, track_running_stats={})", type_, c_, eps_,
                     momentum_ ? fmt::format("{}", *momentum_) : std::string("None"), affine_ ? "True" : "False",
                     track_ ? "True" : "False");
}

RecurrentLayer::RecurrentLayer(const char* type, int gates, int64_t input_size, int64_t hidden_size,
                               int64_t num_layers, bool bias, bool batch_first, double dropout,
                               std::optional<uint64_t> seed)
    : type_(type), gates_(gates), in_(input_size), h_(hidden_size), layers_(num_layers), bias_(bias),
      batch_first_(batch_first), dropout_(dropout), given_seed_(seed) {
  if (in_ < 1 || h_ < 1 || layers_ < 1)
    throw ValueError(fmt::format("{}({}, {}, num_layers={}): sizes must be >= 1", type_, in_, h_, layers_));
  if (!(dropout >= 0.0 && dropout <= 1.0))
    throw ValueError(fmt::format("{}({}, {}): dropout should be a number in range [0, 1] representing the probability "
                                 "of an element being zeroed, got {}", type_, in_, h_, dropout));
}
void RecurrentLayer::build(const std::string& prefix, Rng& rng) {
  // torch's RNNBase.reset_parameters: every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))
  const double bound = 1.0 / std::sqrt(static_cast<double>(h_));
  const int64_t gh = gates_ * h_;
  auto draw = [&](const std::string& name, ShapeRef shape) {
    return param(prefix + name, shape, rng.uniform(numel(shape), -bound, bound));
  };
  if (dropout_ > 0 && layers_ > 1) {  // the dropout between layers' counter and seed (no draw from rng)
    seed_ = given_seed_ ? *given_seed_ : fnv1a64(fmt::format("sg::nn::{} {}", type_, prefix));
    dropout_step = state(prefix + "dropout_step", {}, {0.f});
    next_step_ = dropout_step + 1.0;
  }
  for (int64_t k = 0; k < layers_; ++k) {
    weight_ih.push_back(draw(fmt::format("weight_ih_l{}", k), {gh, k == 0 ? in_ : h_}));
    weight_hh.push_back(draw(fmt::format("weight_hh_l{}", k), {gh, h_}));
    if (bias_) {
      bias_ih.push_back(draw(fmt::format("bias_ih_l{}", k), {gh}));
      bias_hh.push_back(draw(fmt::format("bias_hh_l{}", k), {gh}));
    }
  }
}
std::vector<std::pair<std::string, Tensor>> RecurrentLayer::named_parameters() const {
  if (weight_ih.empty())
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  std::vector<std::pair<std::string, Tensor>> r;  // torch's order: per layer w_ih, w_hh, b_ih, b_hh
  for (size_t k = 0; k < weight_ih.size(); ++k) {
    r.emplace_back(weight_ih[k].name(), weight_ih[k]);
    r.emplace_back(weight_hh[k].name(), weight_hh[k]);
    if (bias_) {
      r.emplace_back(bias_ih[k].name(), bias_ih[k]);
      r.emplace_back(bias_hh[k].name(), bias_hh[k]);
    }
  }
  return r;
}
std::string RecurrentLayer::describe() const {
  std::string s = fmt::format("{}({}, {}", type_, in_, h_);
  if (layers_ != 1) s += fmt::format(", num_layers={}", layers_);
  if (!bias_) s += ", bias=False";
  if (batch_first_) s += ", batch_first=True";
  if (dropout_ != 0) s += ", dropout=" + float_repr(dropout_);
  return s + ")";
}
RecurrentOutput RecurrentLayer::forward_state(const Tensor& x, const Tensor& h0, const Tensor& c0, loc_t loc) {
  const SourceLoc l(loc);
  LocationOverride at_caller{l};
  return in_layer(describe(), l, [&] {
    if (weight_ih.empty()) throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
    const bool lstm = gates_ == 4;
    if (c0 && !lstm) throw ValueError(fmt::format("{}: c0 is an LSTM's cell state; a GRU has none", describe()));
    if (!x || (x.rank() != 3 && x.rank() != 2) || x.dim(-1) != in_)
      throw ShapeError(fmt::format("{}: input must be {} or unbatched (T, {}), got {}", describe(),
                                   batch_first_ ? fmt::format("(N, T, {})", in_) : fmt::format("(T, N, {})", in_), in_,
                                   x ? shape_str(x.shape()) : std::string("an empty Tensor")));
    const bool unbatched = x.rank() == 2;
    Tensor seq = unbatched ? reshape(x, {x.dim(0), 1, in_}) : batch_first_ ? transpose(x, 0, 1) : x;  // (T, N, I)
    const int64_t t_len = seq.dim(0), n = seq.dim(1);
    auto initial = [&](const Tensor& s, const char* what) -> Tensor {
      if (!s) return zeros({n, h_});
      const Shape want = unbatched ? Shape{layers_, h_} : Shape{layers_, n, h_};
      if (s.shape() != ShapeRef(want))
        throw ShapeError(
            fmt::format("{}: {} must be {}, got {}", describe(), what, shape_str(want), shape_str(s.shape())));
      return reshape(s, {layers_, n, h_});
    };
    Tensor h_init = initial(h0, "h0"), c_init = initial(c0, "c0");
    std::vector<Tensor> h_last, c_last;
    for (size_t k = 0; k < static_cast<size_t>(layers_); ++k) {
      const int64_t ki = static_cast<int64_t>(k);
      Tensor h = h0 ? reshape(slice(h_init, 0, ki, ki + 1), {n, h_}) : h_init;
      Tensor c = c0 ? reshape(slice(c_init, 0, ki, ki + 1), {n, h_}) : c_init;
      // the input projection of every step at once: (T, N, I) @ W_ih^T -> (T, N, G*H)
      Tensor xw = matmul(seq, transpose(weight_ih[k]));
      if (bias_) xw = xw + bias_ih[k];
      std::vector<Tensor> outs;
      for (int64_t t = 0; t < t_len; ++t) {
        std::tie(h, c) = cell(k, reshape(slice(xw, 0, t, t + 1), {n, gates_ * h_}), h, c);
        outs.push_back(reshape(h, {1, n, h_}));
      }
      seq = concat(outs, 0);
      // torch: dropout on the output of every layer but the last, in training (one mask over the whole sequence)
      if (ki + 1 < layers_ && dropout_step && training()) seq = sg::dropout(seq, dropout_, seed_, dropout_step);
      h_last.push_back(reshape(h, {1, n, h_}));
      if (lstm) c_last.push_back(reshape(c, {1, n, h_}));
    }
    RecurrentOutput r;
    r.output = unbatched ? reshape(seq, {t_len, h_}) : batch_first_ ? transpose(seq, 0, 1) : seq;
    auto stacked = [&](const std::vector<Tensor>& v) {
      Tensor s = v.size() == 1 ? v[0] : concat(v, 0);
      return unbatched ? reshape(s, {layers_, h_}) : s;
    };
    r.h_n = stacked(h_last);
    if (lstm) r.c_n = stacked(c_last);
    if (dropout_step && training()) {  // the next step's masks: whichever of the results a program evaluates
      for (Tensor* t : {&r.output, &r.h_n, &r.c_n})
        if (*t) *t = with_state_updates(*t, {{dropout_step, next_step_}});
    }
    return r;
  });
}
std::pair<Tensor, Tensor> LSTM::cell(size_t k, const Tensor& xw_t, const Tensor& h, const Tensor& c) const {
  const int64_t hs = hidden_size();
  Tensor g = xw_t + matmul(h, transpose(weight_hh[k]));
  if (!bias_hh.empty()) g = g + bias_hh[k];
  auto gate = [&](int i) { return slice(g, 1, i * hs, (i + 1) * hs); };
  Tensor c_next = sigmoid(gate(1)) * c + sigmoid(gate(0)) * tanh(gate(2));
  return {sigmoid(gate(3)) * tanh(c_next), c_next};
}
std::pair<Tensor, Tensor> GRU::cell(size_t k, const Tensor& xw_t, const Tensor& h, const Tensor&) const {
  const int64_t hs = hidden_size();
  Tensor hw = matmul(h, transpose(weight_hh[k]));
  if (!bias_hh.empty()) hw = hw + bias_hh[k];
  auto part = [&](const Tensor& t, int i) { return slice(t, 1, i * hs, (i + 1) * hs); };
  Tensor r = sigmoid(part(xw_t, 0) + part(hw, 0));
  Tensor z = sigmoid(part(xw_t, 1) + part(hw, 1));
  Tensor cand = tanh(part(xw_t, 2) + r * part(hw, 2));
  return {(1.0 - z) * cand + z * h, Tensor()};
}

namespace {
/// torch's repr of a normalized_shape: "(64,)", "(4, 8)".
std::string shape_repr(ShapeRef s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}
void check_normalized_shape(const std::string& layer, ShapeRef s) {
  if (s.empty()) throw ValueError(layer + ": normalized_shape is empty (it names at least one trailing dimension)");
  for (int64_t d : s)
    if (d < 1) throw ValueError(fmt::format("{}: normalized_shape {} has a size < 1", layer, shape_str(s)));
}
/// ShapeError naming the layer and the line that called it (the Module::operator() override) when x does not end
/// in normalized_shape.
void check_trailing(const std::string& layer, const Tensor& x, ShapeRef s) {
  const SourceLoc at(loc_t::current());
  if (!x) throw ValueError(fmt::format("{}: input is an empty Tensor at {}", layer, at.str()));
  if (x.rank() < static_cast<int>(s.size()) || x.shape().take_back(s.size()) != s)
    throw ShapeError(fmt::format("{}: input {} does not end in normalized_shape {} at {}", layer, shape_str(x.shape()),
                                 shape_str(s), at.str()));
}
}  // namespace

LayerNorm::LayerNorm(ShapeRef normalized_shape, double eps, bool elementwise_affine, bool bias)
    : shape_(normalized_shape.begin(), normalized_shape.end()), eps_(eps), affine_(elementwise_affine), bias_(bias) {
  check_normalized_shape("LayerNorm", shape_);
  if (!(eps >= 0)) throw ValueError(fmt::format("LayerNorm: eps must be >= 0 (got {})", eps));
}
void LayerNorm::build(const std::string& prefix, Rng&) {
  // torch.nn.LayerNorm.reset_parameters: weight ones, bias zeros
  if (!affine_) return;
  weight = param(prefix + "weight", shape_, std::vector<float>(static_cast<size_t>(numel(shape_)), 1.0f));
  if (bias_) bias = param(prefix + "bias", shape_, std::vector<float>(static_cast<size_t>(numel(shape_)), 0.0f));
}
Tensor LayerNorm::forward(const Tensor& x) {
  if (affine_ && !weight) throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
  check_trailing(describe(), x, shape_);
  return layer_norm(x, shape_, weight, bias, eps_);
}
std::vector<std::pair<std::string, Tensor>> LayerNorm::named_parameters() const {
  if (affine_ && !weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  std::vector<std::pair<std::string, Tensor>> r;
  if (weight) r.emplace_back(weight.name(), weight);
  if (bias) r.emplace_back(bias.name(), bias);
  return r;
}
std::string LayerNorm::describe() const {
  return fmt::format("LayerNorm({}, eps={}, elementwise_affine={}{})", shape_repr(shape_), float_repr(eps_),
                     affine_ ? "True" : "False", affine_ && !bias_ ? ", bias=False" : "");
}

RMSNorm::RMSNorm(ShapeRef normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : shape_(normalized_shape.begin(), normalized_shape.end()), eps_(eps), affine_(elementwise_affine) {
  check_normalized_shape("RMSNorm", shape_);
  if (eps && !(*eps >= 0)) throw ValueError(fmt::format("RMSNorm: eps must be >= 0 (got {})", *eps));
}
void RMSNorm::build(const std::string& prefix, Rng&) {
  // torch.nn.RMSNorm.reset_parameters: weight ones
  if (affine_) weight = param(prefix + "weight", shape_, std::vector<float>(static_cast<size_t>(numel(shape_)), 1.0f));
}
Tensor RMSNorm::forward(const Tensor& x) {
  if (affine_ && !weight) throw ValueError(fmt::format("{}: build() was not called before forward()", describe()));
  check_trailing(describe(), x, shape_);
  return rms_norm(x, shape_, weight, eps_);
}
std::vector<std::pair<std::string, Tensor>> RMSNorm::named_parameters() const {
  if (affine_ && !weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  if (!weight) return {};
  return {{weight.name(), weight}};
}
std::string RMSNorm::describe() const {
  return fmt::format("RMSNorm({}, eps={}, elementwise_affine={})", shape_repr(shape_),
                     eps_ ? float_repr(*eps_) : "None", affine_ ? "True" : "False");
}

// --- multi-head attention ---
namespace {
[[noreturn]] void mha_shape_error(const std::string& what, const std::string& msg, const SourceLoc& l) {
  throw ShapeError(fmt::format("{}: {}{}", what, msg, l.known() ? " at " + l.str() : std::string()));
}
[[noreturn]] void mha_value_error(const std::string& what, const std::string& msg, const SourceLoc& l) {
  throw ValueError(fmt::format("{}: {}{}", what, msg, l.known() ? " at " + l.str() : std::string()));
}
/// A mask over the scores (N, H, L, S): boolean (i32, nonzero = -inf) or added (f32).
struct MaskTerm {
  Tensor mask;  // reshaped to broadcast against (N, H, L, S)
  bool boolean;
};
}  // namespace

AttentionOutput multi_head_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                             int64_t num_heads, const Tensor& in_proj_weight,
                                             const Tensor& in_proj_bias, const Tensor& out_proj_weight,
                                             const Tensor& out_proj_bias, const AttentionOptions& opt,
                                             bool batch_first, const AttentionDropout& drop, loc_t loc) {
  const SourceLoc l(loc);
  LocationOverride at_user(l);
  const std::string op = "multi_head_attention";
  for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"query", &query}, {"key", &key}, {"value", &value},
                                {"in_proj_weight", &in_proj_weight}, {"out_proj_weight", &out_proj_weight}})
    if (!*t) mha_value_error(op, fmt::format("{} is an empty Tensor", what), l);
  if (num_heads < 1) mha_value_error(op, fmt::format("num_heads must be >= 1 (got {})", num_heads), l);
  if (!(drop.p >= 0.0 && drop.p <= 1.0))
    mha_value_error(op, fmt::format("dropout probability has to be between 0 and 1, but got {}", drop.p), l);
  const bool dropping = drop.p > 0 && drop.training;  // torch: dropout_p = 0 unless training
  if (dropping && !drop.step)
    mha_value_error(op, fmt::format("dropout p = {} in training needs a step (AttentionDropout::step: a step counter "
                                    "State or a fed input of shape {{}})", drop.p), l);
  const int rank = query.rank();
  if ((rank != 2 && rank != 3) || key.rank() != rank || value.rank() != rank)
    mha_shape_error(op, fmt::format("query, key and value must all be 3-D (batched) or 2-D (unbatched), got {}, {} "
                                    "and {}", shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape())),
                    l);
  const bool unbatched = rank == 2;
  const bool self = query.node() == key.node() && key.node() == value.node();
  // everything as batch-first (N, L, E)
  auto batch_major = [&](const Tensor& t) {
    if (unbatched) return reshape(t, Shape{1, t.dim(0), t.dim(1)});
    return batch_first ? t : transpose(t, 0, 1);
  };
  const Tensor q3 = batch_major(query), k3 = self ? q3 : batch_major(key), v3 = self ? q3 : batch_major(value);
  const int64_t n = q3.dim(0), len = q3.dim(1), e = q3.dim(2), src = k3.dim(1);
  if (k3.dim(0) != n || k3.dim(2) != e || v3.shape() != k3.shape())
    mha_shape_error(op, fmt::format("key {} and value {} must be ({}{}, S, {}) like the query {} (kdim = vdim = embed_dim)",
                                    shape_str(key.shape()), shape_str(value.shape()), batch_first || unbatched ? "" : "S, ",
                                    unbatched ? "" : std::to_string(n), e, shape_str(query.shape())), l);
  if (e % num_heads != 0)
    mha_shape_error(op, fmt::format("embed_dim {} is not divisible by num_heads {}", e, num_heads), l);
  const int64_t h = num_heads, d = e / h;
  if (in_proj_weight.shape() != ShapeRef({3 * e, e}))
    mha_shape_error(op, fmt::format("in_proj_weight has shape {}, expected {}x{}", shape_str(in_proj_weight.shape()),
                                    3 * e, e), l);
  if (in_proj_bias && in_proj_bias.shape() != ShapeRef({3 * e}))
    mha_shape_error(op, fmt::format("in_proj_bias has shape {}, expected {}", shape_str(in_proj_bias.shape()), 3 * e), l);
  if (out_proj_weight.shape() != ShapeRef({e, e}))
    mha_shape_error(op, fmt::format("out_proj_weight has shape {}, expected {}x{}", shape_str(out_proj_weight.shape()),
                                    e, e), l);
  if (out_proj_bias && out_proj_bias.shape() != ShapeRef({e}))
    mha_shape_error(op, fmt::format("out_proj_bias has shape {}, expected {}", shape_str(out_proj_bias.shape()), e), l);

  // in-projection: one matmul with the whole (3E, E) weight for self-attention, else one per rows block of it
  Tensor q, k, v;
  if (self) {
    Tensor qkv = matmul(q3, transpose(in_proj_weight));
    if (in_proj_bias) qkv = qkv + in_proj_bias;
    q = slice(qkv, 2, 0, e), k = slice(qkv, 2, e, 2 * e), v = slice(qkv, 2, 2 * e, 3 * e);
  } else {
    auto project = [&](const Tensor& x, int64_t part) {
      Tensor y = matmul(x, transpose(slice(in_proj_weight, 0, part * e, (part + 1) * e)));
      return in_proj_bias ? Tensor(y + slice(in_proj_bias, 0, part * e, (part + 1) * e)) : y;
    };
    q = project(q3, 0), k = project(k3, 1), v = project(v3, 2);
  }
  auto heads = [&](const Tensor& t, int64_t rows) { return permute(reshape(t, Shape{n, rows, h, d}), {0, 2, 1, 3}); };
  const Tensor qh = heads(q, len), kh = heads(k, src), vh = heads(v, src);  // (N, H, L|S, D)

  // masks as terms over the scores (N, H, L, S)
  std::vector<MaskTerm> masks;
  auto check_mask_dtype = [&](const Tensor& m, const char* what) {
    if (m.dtype() != DType::i32 && m.dtype() != DType::f32)
      mha_value_error(op, fmt::format("{} must be i32 (boolean) or f32 (added)", what), l);
  };
  if (const Tensor& m = opt.key_padding_mask) {
    check_mask_dtype(m, "key_padding_mask");
    const Shape want = unbatched ? Shape{src} : Shape{n, src};
    if (m.shape() != ShapeRef(want))
      mha_shape_error(op, fmt::format("key_padding_mask has shape {}, expected {} (batch, source length)",
                                      shape_str(m.shape()), shape_str(want)), l);
    masks.push_back({reshape(m, Shape{n, 1, 1, src}), m.dtype() == DType::i32});
  }
  if (const Tensor& m = opt.attn_mask) {
    check_mask_dtype(m, "attn_mask");
    const Shape two{len, src}, three{(unbatched ? 1 : n) * h, len, src};
    if (m.shape() == ShapeRef(two))
      masks.push_back({reshape(m, Shape{1, 1, len, src}), m.dtype() == DType::i32});
    else if (m.shape() == ShapeRef(three))
      masks.push_back({reshape(m, Shape{n, h, len, src}), m.dtype() == DType::i32});
    else
      mha_shape_error(op, fmt::format("attn_mask has shape {}, expected {} or {} (batch * num_heads, L, S)",
                                      shape_str(m.shape()), shape_str(two), shape_str(three)), l);
  }
  // the scores with the scale and the masks: one elementwise expression, the score matmul's epilogue
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Tensor scores = matmul(qh, transpose(kh)) * scale;
  for (const MaskTerm& t : masks)
    if (!t.boolean) scores = scores + t.mask;
  for (const MaskTerm& t : masks)
    if (t.boolean) scores = where(t.mask, neg_inf, scores);
  if (opt.is_causal) {
    const Tensor rows = iota(Shape{len, 1}, 0), cols = iota(Shape{1, src}, 1);
    scores = where(cols > rows, neg_inf, scores);
  }
  Tensor attn = softmax(scores, -1);  // (N, H, L, S)
  // torch 1.13 F.multi_head_attention_forward: attn_output_weights = dropout(softmax(...)) before bmm with v; the
  // weights it returns are these, after dropout
  if (dropping) attn = dropout(attn, drop.p, drop.seed, drop.step, true, loc);
  Tensor out = reshape(permute(matmul(attn, vh), {0, 2, 1, 3}), Shape{n, len, e});  // heads side by side
  out = matmul(out, transpose(out_proj_weight));
  if (out_proj_bias) out = out + out_proj_bias;
  AttentionOutput r;
  r.output = unbatched ? reshape(out, Shape{len, e}) : batch_first ? out : transpose(out, 0, 1);
  if (opt.need_weights) {
    Tensor w = opt.average_attn_weights ? mean(attn, {1}) : attn;  // (N, L, S) or (N, H, L, S)
    if (unbatched) w = opt.average_attn_weights ? reshape(w, Shape{len, src}) : reshape(w, Shape{h, len, src});
    r.weights = w;
  }
  return r;
}

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first, std::optional<uint64_t> seed)
    : out_proj(embed_dim, embed_dim, bias), e_(embed_dim), h_(num_heads), p_(dropout), bias_(bias),
      batch_first_(batch_first), given_seed_(seed) {
  if (e_ < 1 || h_ < 1)
    throw ValueError(fmt::format("MultiheadAttention({}, {}): embed_dim and num_heads must be >= 1", e_, h_));
  if (e_ % h_ != 0)
    throw ValueError(fmt::format("MultiheadAttention({}, {}): embed_dim must be divisible by num_heads (torch)", e_, h_));
  if (!(dropout >= 0 && dropout <= 1))
    throw ValueError(fmt::format("MultiheadAttention({}, {}): dropout {} must be in [0, 1]", e_, h_, dropout));
  register_module("out_proj", out_proj);  // torch's NonDynamicallyQuantizableLinear child
}
void MultiheadAttention::build(const std::string& prefix, Rng& rng) {
  // torch.nn.MultiheadAttention._reset_parameters: xavier_uniform_(in_proj_weight), in_proj_bias and out_proj.bias
  // zeros; out_proj is an nn.Linear(E, E) keeping its kaiming_uniform(a = sqrt(5)) weight: U(+-1/sqrt(E)). The
  // out_proj child's parameters are made here (Linear::build would draw its bias from rng too).
  const double xavier = std::sqrt(6.0 / static_cast<double>(e_ + 3 * e_));
  in_proj_weight = add_parameter(prefix, "in_proj_weight", {3 * e_, e_}, rng.uniform(3 * e_ * e_, -xavier, xavier));
  if (bias_)
    in_proj_bias = add_parameter(prefix, "in_proj_bias", {3 * e_}, std::vector<float>(static_cast<size_t>(3 * e_), 0.f));
  const double bound = 1.0 / std::sqrt(static_cast<double>(e_));
  out_proj.weight = param(prefix + "out_proj.weight", {e_, e_}, rng.uniform(e_ * e_, -bound, bound));
  if (bias_) out_proj.bias = param(prefix + "out_proj.bias", {e_}, std::vector<float>(static_cast<size_t>(e_), 0.f));
  if (p_ > 0) {  // the dropout masks' counter and seed (no draw from rng)
    seed_ = given_seed_ ? *given_seed_ : fnv1a64("sg::nn::MultiheadAttention " + prefix);
    dropout_step = state(prefix + "dropout_step", {}, {0.f});
    next_step_ = dropout_step + 1.0;
  }
}
Tensor MultiheadAttention::forward(const Tensor& x) { return attend(x, x, x).output; }
AttentionOutput MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const AttentionOptions& options, loc_t loc) {
  const SourceLoc l(loc);
  return in_layer(label(), l, [&] {
    if (!in_proj_weight) throw ValueError(fmt::format("{}: build() was not called before forward()", label()));
    for (const Tensor* t : {&query, &key, &value})
      if (!*t) mha_value_error(label(), "query, key or value is an empty Tensor", l);
    for (const Tensor* t : {&query, &key, &value})
      if (t->rank() < 1 || t->dim(-1) != e_)
        mha_shape_error(label(), fmt::format("query {}, key {} and value {} must end in embed_dim {}",
                                             shape_str(query.shape()), shape_str(key.shape()),
                                             shape_str(value.shape()), e_), l);
    const bool dropping = p_ > 0 && training();
    AttentionDropout drop;
    if (dropping) drop = {.p = p_, .training = true, .seed = seed_, .step = dropout_step};
    AttentionOutput r = multi_head_attention_forward(query, key, value, h_, in_proj_weight, in_proj_bias,
                                                     out_proj.weight, out_proj.bias, options, batch_first_, drop, loc);
    if (dropping) {  // the next step's masks, whichever of the results a program evaluates
      LocationOverride at_user(l);
      for (Tensor* t : {&r.output, &r.weights})
        if (*t) *t = with_state_updates(*t, {{dropout_step, next_step_}});
    }
    return r;
  });
}
std::vector<std::pair<std::string, Tensor>> MultiheadAttention::named_parameters() const {
  if (!in_proj_weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", label()));
  return Module::named_parameters();  // in_proj_weight, in_proj_bias (own), out_proj.weight, out_proj.bias
}
std::string MultiheadAttention::label() const {
  return fmt::format("MultiheadAttention(embed_dim={}, num_heads={}{}{}, batch_first={})", e_, h_,
                     p_ > 0 ? ", dropout=" + float_repr(p_) : std::string(), bias_ ? "" : ", bias=False",
                     batch_first_ ? "True" : "False");
}

// --- transformer encoder layer ---
namespace {
/// d_model after the checks of TransformerEncoderLayer's arguments (before its members are made).
int64_t checked_encoder_args(int64_t d_model, int64_t nhead, int64_t ff, double dropout, const std::string& act) {
  const std::string me = fmt::format("TransformerEncoderLayer(d_model={}, nhead={})", d_model, nhead);
  if (d_model < 1 || nhead < 1 || ff < 1)
    throw ValueError(me + ": d_model, nhead and dim_feedforward must be >= 1");
  if (d_model % nhead != 0) throw ValueError(me + ": d_model must be divisible by nhead (torch)");
  if (act != "relu" && act != "gelu")
    throw ValueError(fmt::format("{}: activation '{}' is not 'relu' or 'gelu' (torch's strings)", me, act));
  if (!(dropout >= 0 && dropout <= 1)) throw ValueError(fmt::format("{}: dropout {} must be in [0, 1]", me, dropout));
  return d_model;
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout, std::string activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first, bool bias)
    : self_attn(checked_encoder_args(d_model, nhead, dim_feedforward, dropout, activation), nhead, dropout, bias,
                batch_first),
      linear1(d_model, dim_feedforward, bias),
      dropout(dropout),
      linear2(dim_feedforward, d_model, bias),
      norm1(d_model, layer_norm_eps, true, bias),
      norm2(d_model, layer_norm_eps, true, bias),
      dropout1(dropout),
      dropout2(dropout),
      d_(d_model),
      nhead_(nhead),
      ff_(dim_feedforward),
      activation_(std::move(activation)),
      norm_first_(norm_first) {
  // torch's registration order (its repr's, and the state_dict's: self_attn, linear1, linear2, norm1, norm2)
  register_module("self_attn", self_attn);
  register_module("linear1", linear1);
  register_module("dropout", this->dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
}
Tensor TransformerEncoderLayer::forward(const Tensor& x) { return encode(x); }
Tensor TransformerEncoderLayer::encode(const Tensor& src, const AttentionOptions& options, loc_t loc) {
  AttentionOptions o = options;
  o.need_weights = false;
  return encode_with_weights(src, o, loc).output;
}
AttentionOutput TransformerEncoderLayer::encode_with_weights(const Tensor& src, const AttentionOptions& options,
                                                             loc_t loc) {
  const SourceLoc l(loc);
  LocationOverride at_user(l);
  return in_layer(label(), l, [&]() -> AttentionOutput {
    if (!linear1.weight) throw ValueError(fmt::format("{}: build() was not called before forward()", label()));
    if (!src) mha_value_error(label(), "src is an empty Tensor", l);
    if ((src.rank() != 2 && src.rank() != 3) || src.dim(-1) != d_)
      mha_shape_error(label(), fmt::format("src {} must be (N, S, {}) (batch_first), (S, N, {}) or (S, {})",
                                           shape_str(src.shape()), d_, d_, d_), l);
    Tensor weights;
    // torch's _sa_block and _ff_block
    auto sa = [&](const Tensor& x) {
      AttentionOutput a = self_attn.attend(x, x, x, options, loc);
      weights = a.weights;
      return dropout1.forward(a.output);
    };
    auto ff = [&](const Tensor& x) {
      Tensor h = linear1.forward(x);
      h = activation_ == "gelu" ? gelu(h) : relu(h);
      return dropout2.forward(linear2.forward(dropout.forward(h)));
    };
    Tensor x = src;
    if (norm_first_) {
      x = x + sa(norm1.forward(x));
      x = x + ff(norm2.forward(x));
    } else {
      x = norm1.forward(x + sa(x));
      x = norm2.forward(x + ff(x));
    }
    return {x, weights};
  });
}
std::string TransformerEncoderLayer::label() const {
  return fmt::format("TransformerEncoderLayer(d_model={}, nhead={}, dim_feedforward={}{}, activation={}{})", d_, nhead_,
                     ff_, dropout.p() > 0 ? ", dropout=" + float_repr(dropout.p()) : std::string(), activation_,
                     norm_first_ ? ", norm_first=True" : "");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, {.kernel = {k_, k_}, .stride = {s_, s_}, .padding = {p_, p_}});
}
std::string MaxPool2d::describe() const {
  return fmt::format("MaxPool2d(kernel_size={}, stride={}, padding={})", k_, s_ ? s_ : k_, p_);
}
Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, {.kernel = {k_, k_}, .stride = {s_, s_}, .padding = {p_, p_}});
}
std::string AvgPool2d::describe() const {
  return fmt::format("AvgPool2d(kernel_size={}, stride={}, padding={})", k_, s_ ? s_ : k_, p_);
}

void Module::build(const std::string& prefix, Rng& rng) {
  for (auto& [name, child] : children_) child->build(prefix + name + ".", rng);
}
void Module::build(Rng& rng, loc_t loc) {
  const SourceLoc at(loc);
  // a second build would make new parameters: graphs built before it would keep the old ones, and a train step of
  // parameters() would update none of the tensors those graphs read
  if (auto built = first_built(*this, ""))
    throw ValueError(fmt::format("{}: build() was already called ({} has its parameters); build a module once{}",
                                 type_name(), *built, at.known() ? " at " + at.str() : std::string()));
  LocationOverride at_caller{at};
  build("", rng);
}
Tensor Module::operator()(const Tensor& x, loc_t loc) {
  const SourceLoc at(loc);
  LocationOverride at_caller{at};
  return in_layer("", at, [&] { return forward(x); });
}
Module& Module::register_module(const std::string& name, Module& child) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(fmt::format("{}: child module name '{}' must be non-empty without '.' (torch's rule)",
                                 type_name(), name));
  for (auto& [n, c] : children_)
    if (n == name) throw ValueError(fmt::format("{}: a child module named '{}' is already registered", type_name(), name));
  if (&child == this) throw ValueError(fmt::format("{}: a module cannot be its own child ('{}')", type_name(), name));
  children_.emplace_back(name, &child);
  child.train(training_);
  return child;
}
Tensor Module::add_parameter(const std::string& prefix, const std::string& name, ShapeRef shape,
                             std::vector<float> data) {
  Tensor t = param(prefix + name, shape, std::move(data));
  own_parameters_.emplace_back(t.name(), t);
  return t;
}
Tensor Module::add_buffer(const std::string& prefix, const std::string& name, ShapeRef shape, std::vector<float> data) {
  Tensor t = state(prefix + name, shape, std::move(data));
  own_buffers_.emplace_back(t.name(), t);
  return t;
}
std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> r = own_parameters_;
  for (auto& [name, child] : children_)
    for (auto& p : child->named_parameters()) r.push_back(p);
  return r;
}
std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> r = own_buffers_;
  for (auto& [name, child] : children_)
    for (auto& b : child->named_buffers()) r.push_back(b);
  return r;
}
std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  if (children_.empty()) {  // a layer: its (possibly overridden) parameters, then its buffers
    auto r = named_parameters();
    for (auto& b : named_buffers()) r.push_back(b);
    return r;
  }
  std::vector<std::pair<std::string, Tensor>> r = own_parameters_;
  r.insert(r.end(), own_buffers_.begin(), own_buffers_.end());
  for (auto& [name, child] : children_)
    for (auto& t : child->state_dict()) r.push_back(t);
  return r;
}
std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> r;
  for (auto& [n, t] : named_parameters()) r.push_back(t);
  return r;
}
int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}
std::string Module::structure_hash() const {
  std::string s = describe();
  for (auto& [n, t] : state_dict()) s += "|" + n + ":" + shape_str(t.shape());
  return hash_hex(fnv1a64(s));
}
std::string Module::describe() const {
  if (children_.empty()) return type_name() + "()";
  std::string s = type_name() + "(\n";
  for (auto& [name, child] : children_) {
    std::string d = child->describe();
    for (size_t at = d.find('\n'); at != std::string::npos; at = d.find('\n', at + 3)) d.replace(at, 1, "\n  ");
    s += fmt::format("  ({}): {}\n", name, d);  // nested lines indented as torch's repr
  }
  return s + ")";
}
Module& Module::train(bool mode) {
  training_ = mode;
  for (auto& [name, child] : children_) child->train(mode);
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  std::vector<Tensor> outputs;
  return forward_layers(x, outputs);
}
Tensor Sequential::forward_layers(const Tensor& x, std::vector<Tensor>& outputs) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      h = layers_[i]->forward(h);
    } catch (const Error& e) {  // which layer: "2: Linear(32, 4): input last dimension must be 32, ..."
      const std::string layer = layers_[i]->describe();
      const bool named = std::string_view(e.what()).substr(0, layer.size()) == layer;
      rethrow_in_layer(named ? std::to_string(i) : fmt::format("{}: {}", i, layer), SourceLoc());
    }
    outputs.push_back(h);
  }
  return h;
}
std::string Sequential::layer_name(size_t i) const {
  if (i >= layers_.size()) throw ValueError(fmt::format("Sequential::layer_name: no layer {} (it has {})", i, layers_.size()));
  return fmt::format("{}: {}", i, layers_[i]->describe());
}

Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_logits, double temperature, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  if (!(temperature > 0)) throw ValueError(fmt::format("distillation_loss: temperature must be > 0 (got {}) at {}",
                                                       temperature, l.str()));
  if (student_logits.shape() != teacher_logits.shape())
    throw ShapeError(fmt::format("distillation_loss: student {} and teacher {} logits differ at {}",
                                 shape_str(student_logits.shape()), shape_str(teacher_logits.shape()), l.str()));
  double inv_t = 1.0 / temperature;
  Tensor s = log_softmax(student_logits * inv_t, 1);
  Tensor t = softmax(stop_gradient(teacher_logits) * inv_t, 1);
  return kl_div(s, t) * (temperature * temperature);
}

std::unique_ptr<Sequential> make_cnn(int64_t c1, int64_t c2, int64_t hidden, int64_t channels, int64_t height,
                                     int64_t width, int64_t classes) {
  if (height % 4 || width % 4)
    throw ValueError(fmt::format("make_cnn: input {}x{} must be divisible by 4 (two 2x2 max pools)", height, width));
  auto m = std::make_unique<Sequential>();
  m->add<Conv2d>(channels, c1, 3, 1, 1).add<ReLU>().add<MaxPool2d>(2);
  m->add<Conv2d>(c1, c2, 3, 1, 1).add<ReLU>().add<MaxPool2d>(2);
  m->add<Flatten>().add<Linear>(c2 * (height / 4) * (width / 4), hidden).add<ReLU>().add<Linear>(hidden, classes);
  return m;
}

std::unique_ptr<Sequential> make_cnn5(int64_t channels, int64_t height, int64_t width, int64_t classes) {
  if (height % 32 || width % 32)
    throw ValueError(fmt::format("make_cnn5: input {}x{} must be divisible by 32 (five 2x2 max pools)", height, width));
  auto m = std::make_unique<Sequential>();
  const int64_t widths[5] = {4, 8, 8, 16, 16};
  int64_t in = channels;
  for (int64_t c : widths) {
    m->add<Conv2d>(in, c, 3, 1, 1, 1, ConvInit::KaimingRelu).add<ReLU>().add<MaxPool2d>(2);
    in = c;
  }
  m->add<Flatten>().add<Linear>(in * (height / 32) * (width / 32), classes);
  return m;
}

namespace {
int64_t checked_block_planes(int64_t inplanes, int64_t planes, int64_t stride) {
  if (inplanes < 1 || planes < 1 || stride < 1)
    throw ValueError(fmt::format("BasicBlock(inplanes={}, planes={}, stride={}): sizes and stride must be >= 1",
                                 inplanes, planes, stride));
  return inplanes;
}
/// widths[0] after checking ResNet's arguments (before any child is constructed).
int64_t checked_resnet_args(int64_t in_channels, int64_t num_classes, const std::vector<int64_t>& widths,
                            const std::vector<int64_t>& blocks) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t e : v) s += (s.empty() ? "" : ", ") + std::to_string(e);
    return "[" + s + "]";
  };
  const std::string what = fmt::format("ResNet(in_channels={}, num_classes={}, widths={}, blocks={})", in_channels,
                                       num_classes, list(widths), list(blocks));
  if (widths.empty()) throw ValueError(what + ": widths must name at least one stage");
  if (blocks.size() != widths.size())
    throw ValueError(what + ": blocks must give one count per stage (as many as widths)");
  if (in_channels < 1 || num_classes < 1) throw ValueError(what + ": in_channels and num_classes must be >= 1");
  for (size_t i = 0; i < widths.size(); ++i)
    if (widths[i] < 1 || blocks[i] < 1) throw ValueError(what + ": every width and block count must be >= 1");
  return widths[0];
}
}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride)
    : conv1(checked_block_planes(inplanes, planes, stride), planes, 3, stride, 1, 1, 1, false,
            ConvInit::KaimingNormalFanOut),
      bn1(planes),
      conv2(planes, planes, 3, 1, 1, 1, 1, false, ConvInit::KaimingNormalFanOut),
      bn2(planes) {
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("relu", relu);
  register_module("conv2", conv2);
  register_module("bn2", bn2);
  if (stride != 1 || inplanes != planes) {  // torchvision's _make_layer: a 1x1 projection shortcut
    downsample = std::make_unique<Sequential>();
    downsample->add<Conv2d>(inplanes, planes, 1, stride, 0, 1, 1, false, ConvInit::KaimingNormalFanOut)
        .add<BatchNorm2d>(planes);
    register_module("downsample", *downsample);
  }
}
Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = sg::relu(bn1.forward(conv1.forward(x)));
  out = bn2.forward(conv2.forward(out));
  return sg::relu(out + (downsample ? downsample->forward(x) : x));
}

ResNet::ResNet(int64_t in_channels, int64_t num_classes, std::vector<int64_t> widths, std::vector<int64_t> blocks,
               double dropout_p)
    : conv1(in_channels, checked_resnet_args(in_channels, num_classes, widths, blocks), 3, 1, 1, 1, 1, false,
            ConvInit::KaimingNormalFanOut),
      bn1(widths[0]),
      dropout(dropout_p),
      fc(widths.back(), num_classes) {
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("relu", relu);
  int64_t in = widths[0];
  for (size_t k = 0; k < widths.size(); ++k) {
    auto stage = std::make_unique<Sequential>();
    for (int64_t b = 0; b < blocks[k]; ++b) {
      stage->add<BasicBlock>(in, widths[k], b == 0 && k > 0 ? 2 : 1);
      in = widths[k];
    }
    register_module(fmt::format("layer{}", k + 1), *stage);
    layers.push_back(std::move(stage));
  }
  register_module("dropout", dropout);
  register_module("fc", fc);
  in_channels_ = in_channels;
}
Tensor ResNet::forward(const Tensor& x) {
  if (!x || x.rank() != 4 || x.dim(1) != in_channels_)
    throw ShapeError(fmt::format("ResNet: expected input (N, {}, H, W), got {}", in_channels_,
                                 x ? shape_str(x.shape()) : std::string("an empty Tensor")));
  Tensor h = sg::relu(bn1.forward(conv1.forward(x)));
  for (auto& stage : layers) h = stage->forward(h);
  h = mean(h, {2, 3});  // torchvision's AdaptiveAvgPool2d((1, 1)) + flatten: (N, C)
  return fc.forward(dropout.forward(h));
}

std::unique_ptr<ResNet> make_resnet(int64_t channels, int64_t height, int64_t width, int64_t classes) {
  if (height < 1 || width < 1)
    throw ValueError(fmt::format("make_resnet: input {}x{} must be at least 1x1", height, width));
  return std::make_unique<ResNet>(channels, classes, std::vector<int64_t>{16, 32, 64}, std::vector<int64_t>{1, 1, 1},
                                  0.2);
}

std::unique_ptr<Module> make_module(const std::string& name, int64_t channels, int64_t height, int64_t width,
                                    int64_t classes) {
  if (name == "resnet") return make_resnet(channels, height, width, classes);
  return make_model(name, channels, height, width, classes);
}

std::unique_ptr<Sequential> make_model(const std::string& name, int64_t channels, int64_t height, int64_t width,
                                       int64_t classes) {
  if (name == "mlp") {
    auto m = std::make_unique<Sequential>();
    m->add<Flatten>().add<Linear>(channels * height * width, 128).add<ReLU>().add<Linear>(128, classes);
    return m;
  }
  if (name == "cnn") return make_cnn(8, 16, 32, channels, height, width, classes);
  if (name == "cnn-large") return make_cnn(64, 128, 256, channels, height, width, classes);
  if (name == "cnn5") return make_cnn5(channels, height, width, classes);
  if (name == "resnet")
    throw ValueError("make_model: 'resnet' is a module tree, not a Sequential: nn::make_module or nn::make_resnet build it");
  throw ValueError(fmt::format("unknown model '{}' (choose mlp, cnn, cnn-large, cnn5 or resnet)", name));
}

}  // namespace sg::nn
