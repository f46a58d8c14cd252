// Layers, initialisers and model builders.
#include "sg/nn.h"

#include <cmath>

#include <fmt/format.h>

#include "sg/kernel_cache.h"

namespace sg::nn {

std::vector<float> Rng::uniform(int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
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

std::string Linear::describe() const { return fmt::format("Linear({}, {}{})", in_, out_, bias_ ? "" : ", bias=False"); }

void Conv2d::build(const std::string& prefix, Rng& rng) {
  int64_t fan_in = c_ * k_ * k_;
  if (init_ == ConvInit::KaimingRelu) {
    const double bound = std::sqrt(6.0 / static_cast<double>(fan_in));
    weight = param(prefix + "weight", {o_, c_, k_, k_}, rng.uniform(o_ * c_ * k_ * k_, -bound, bound));
    bias = param(prefix + "bias", {o_}, std::vector<float>(static_cast<size_t>(o_), 0.0f));
    return;
  }
  weight = init_param(prefix + "weight", {o_, c_, k_, k_}, fan_in, rng);
  bias = init_param(prefix + "bias", {o_}, fan_in, rng);
}
Tensor Conv2d::forward(const Tensor& x) {
  if (!weight) throw ValueError("Conv2d: build() was not called before forward()");
  return conv2d(x, weight, bias, {.stride = {s_, s_}, .padding = {p_, p_}, .dilation = {d_, d_}});
}
std::vector<std::pair<std::string, Tensor>> Conv2d::named_parameters() const {
  if (!weight)
    throw ValueError(fmt::format("{}: parameters are created by build(); call build(rng) first", describe()));
  return {{weight.name(), weight}, {bias.name(), bias}};
}
std::string Conv2d::describe() const {
  return fmt::format("Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {}), padding=({}, {}))", c_, o_, k_, k_, s_, s_,
                     p_, p_);
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

void Sequential::build(const std::string& prefix, Rng& rng) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->build(fmt::format("{}{}.", prefix, i), rng);
}
Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}
Tensor Sequential::forward_layers(const Tensor& x, std::vector<Tensor>& outputs) {
  Tensor h = x;
  for (auto& l : layers_) {
    h = l->forward(h);
    outputs.push_back(h);
  }
  return h;
}
std::string Sequential::layer_name(size_t i) const {
  if (i >= layers_.size()) throw ValueError(fmt::format("Sequential::layer_name: no layer {} (it has {})", i, layers_.size()));
  return fmt::format("{}: {}", i, layers_[i]->describe());
}
std::vector<std::pair<std::string, Tensor>> Sequential::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for (auto& l : layers_)
    for (auto& p : l->named_parameters()) r.push_back(p);
  return r;
}
std::string Sequential::describe() const {
  std::string s = "Sequential(\n";
  for (size_t i = 0; i < layers_.size(); ++i) s += fmt::format("  ({}): {}\n", i, layers_[i]->describe());
  return s + ")";
}
std::vector<Tensor> Sequential::parameters() const {
  std::vector<Tensor> r;
  for (auto& [n, t] : named_parameters()) r.push_back(t);
  return r;
}
int64_t Sequential::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}
std::string Sequential::structure_hash() const {
  std::string s = describe();
  for (auto& [n, t] : named_parameters()) s += "|" + n + ":" + shape_str(t.shape());
  return hash_hex(fnv1a64(s));
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
  throw ValueError(fmt::format("unknown model '{}' (choose mlp, cnn, cnn-large or cnn5)", name));
}

}  // namespace sg::nn
