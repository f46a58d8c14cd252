// compress: data, models, seed 002's train() / evaluate(), the distillation objective, calibration (quantize()).
#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "compress_graph.h"
#include "sg/nn.h"

namespace sg::compress {

using detail::Bound;

Data load_data(const std::string& split) {
  Data d;
  d.split = data::digits_split_named(split);  // an unknown name fails before the file is read
  d.all = data::load_digits();
  return d;
}

int64_t CnnSpec::num_parameters() const {
  const int64_t flat = c2 * (height / 4) * (width / 4);
  return c1 * channels * 9 + c1 + c2 * c1 * 9 + c2 + hidden * flat + hidden + classes * hidden + classes;
}

QuantConfig::Observer parse_observer(const std::string& name) {
  if (name == "fixed") return QuantConfig::Observer::fixed;
  if (name == "minmax") return QuantConfig::Observer::minmax;
  if (name == "moving-average") return QuantConfig::Observer::moving_average;
  throw ValueError(fmt::format("unknown observer '{}' (choose fixed, minmax or moving-average)", name));
}

io::NamedTensor& Model::param(const std::string& name) {
  return const_cast<io::NamedTensor&>(static_cast<const Model*>(this)->param(name));
}
const io::NamedTensor& Model::param(const std::string& name) const {
  for (auto& p : params)
    if (p.name == name) return p;
  std::string names;
  for (auto& p : params) names += (names.empty() ? "" : ", ") + p.name;
  throw ValueError(fmt::format("compress: the model has no parameter '{}' (it has {})", name, names));
}
std::vector<std::string> Model::weight_names() { return {"0.weight", "3.weight", "7.weight", "9.weight"}; }

Model init_cnn(const CnnSpec& spec, uint64_t seed) {
  auto net = nn::make_cnn(spec.c1, spec.c2, spec.hidden, spec.channels, spec.height, spec.width, spec.classes);
  nn::Rng rng(seed);
  net->build(rng);
  Model m;
  m.spec = spec;
  for (auto& [name, t] : net->named_parameters())
    m.params.push_back({name, std::vector<int64_t>(t.shape().begin(), t.shape().end()), *t.node()->data});
  return m;
}

Tensor distillation_objective(const Tensor& student, const Tensor& teacher, const Tensor& labels,
                              const Tensor& labeled, double temperature, double alpha, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_user(l);
  if (!(alpha >= 0 && alpha <= 1))
    throw ValueError(fmt::format("distillation: alpha must be in [0, 1] (got {}) at {}", alpha, l.str()));
  if (student.rank() != 2 || labels.shape() != ShapeRef({student.dim(0)}) || labeled.shape() != labels.shape())
    throw ShapeError(fmt::format("distillation: student logits {} need (N, C), labels and labeled (N); got {} and {} "
                                 "at {}", shape_str(student.shape()), shape_str(labels.shape()),
                                 shape_str(labeled.shape()), l.str()));
  Tensor soft = nn::distillation_loss(student, teacher, temperature, loc);  // T^2 * KL (batchmean)
  Tensor ce = -sum(one_hot(labels, student.dim(1)) * log_softmax(student, 1), {1});  // per-sample cross entropy
  Tensor hard = mean(ce * labeled);
  return Tensor(alpha * soft + (1 - alpha) * hard);
}

namespace {

/// One compiled train step per batch size (the last partial batch gets its own), sharing Adam's state.
struct Steps {
  const Model& m;
  Bound& b;
  Backend& backend;
  Optimizer& adam;
  const std::optional<Distill>& distill;
  std::map<int64_t, std::unique_ptr<Executable>> exe;

  Executable& get(int64_t n) {
    auto& e = exe[n];
    if (e) return *e;
    const CnnSpec& s = m.spec;
    Tensor x = input("x", {n, s.channels, s.height, s.width});
    Tensor labels = input("labels", {n}, DType::i32);
    Tensor z = detail::forward(m, b, x, {.observe = true});
    Tensor loss;
    if (distill) {
      Tensor teacher = input("teacher", {n, s.classes});
      Tensor labeled = input("labeled", {n});
      loss = distillation_objective(z, teacher, labels, labeled, distill->temperature, distill->alpha);
    } else {
      loss = cross_entropy(z, labels);
    }
    Program p = make_train_step(loss, b.params, adam);
    for (auto& u : b.observer_updates) p.updates.push_back(u);
    e = backend.compile(p);
    return *e;
  }
};

}  // namespace

void train(Model& m, const Data& d, const TrainOptions& opt, Backend& backend) {
  if (opt.epochs < 1) throw ValueError(fmt::format("compress::train: epochs must be >= 1 (got {})", opt.epochs));
  if (opt.batch < 1) throw ValueError(fmt::format("compress::train: batch must be >= 1 (got {})", opt.batch));
  if (!(opt.lr > 0)) throw ValueError(fmt::format("compress::train: lr must be > 0 (got {})", opt.lr));
  const std::vector<int64_t>& idx = opt.data.empty() ? d.split.train : opt.data;
  std::vector<char> is_labeled(static_cast<size_t>(d.all.n), 0);
  for (int64_t i : d.split.train) is_labeled[static_cast<size_t>(i)] = 1;
  if (opt.distill && opt.distill->teacher_logits.size() != static_cast<size_t>(d.all.n * m.spec.classes))
    throw ValueError(fmt::format("compress::train: teacher logits hold {} values, expected {} x {}",
                                 opt.distill->teacher_logits.size(), d.all.n, m.spec.classes));
  Bound b = detail::bind(m);
  auto adam = make_adam({.lr = opt.lr});
  Steps steps{m, b, backend, *adam, opt.distill, {}};
  const size_t n = idx.size();
  const int64_t classes = m.spec.classes;
  for (int64_t epoch = 0; epoch < opt.epochs; ++epoch) {
    std::vector<int64_t> perm = data::seeded_permutation(static_cast<int64_t>(n), opt.seed * 1000003 + epoch);
    std::vector<int64_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = idx[static_cast<size_t>(perm[i])];
    double loss_sum = 0;
    int64_t count = 0;
    for (size_t at = 0; at < n; at += static_cast<size_t>(opt.batch)) {
      const size_t end = std::min(n, at + static_cast<size_t>(opt.batch));
      const int64_t bn = static_cast<int64_t>(end - at);
      std::vector<float> x = detail::gather_images(d.all, order, at, end), labels(bn), teacher, labeled;
      for (size_t i = at; i < end; ++i) labels[i - at] = static_cast<float>(d.all.labels[order[i]]);
      std::vector<Feed> feeds = {{"x", &x}, {"labels", &labels}};
      if (opt.distill) {
        teacher.resize(static_cast<size_t>(bn * classes));
        labeled.resize(static_cast<size_t>(bn));
        for (size_t i = at; i < end; ++i) {
          std::copy_n(opt.distill->teacher_logits.begin() + order[i] * classes, classes,
                      teacher.begin() + static_cast<ptrdiff_t>((i - at) * classes));
          labeled[i - at] = static_cast<float>(is_labeled[static_cast<size_t>(order[i])]);
        }
        feeds.push_back({"teacher", &teacher});
        feeds.push_back({"labeled", &labeled});
      }
      double loss = steps.get(bn).run(feeds)[0][0];
      if (!std::isfinite(loss))
        throw Error(fmt::format("compress::train: loss is {} at epoch {} (try a smaller lr)", loss, epoch + 1));
      loss_sum += loss;
      ++count;
    }
    if (opt.log) *opt.log << fmt::format("  epoch {}/{}: train loss {:.4f}\n", epoch + 1, opt.epochs, loss_sum / count);
  }
  detail::read_back(m, b, backend);
}

std::vector<float> logits(const Model& m, const Data& d, Backend& backend, const std::vector<int64_t>& indices) {
  std::vector<int64_t> all;
  if (indices.empty())
    for (int64_t i = 0; i < d.all.n; ++i) all.push_back(i);
  const std::vector<int64_t>& idx = indices.empty() ? all : indices;
  Bound b = detail::bind(m);
  std::vector<float> out;
  const CnnSpec& s = m.spec;
  std::map<int64_t, std::unique_ptr<Executable>> exe;
  for (size_t at = 0; at < idx.size(); at += 1000) {
    const size_t end = std::min(idx.size(), at + 1000);
    const int64_t bn = static_cast<int64_t>(end - at);
    auto& e = exe[bn];
    if (!e) {
      Program p;
      p.add_output("logits", detail::forward(m, b, input("x", {bn, s.channels, s.height, s.width})));
      e = backend.compile(p);
    }
    std::vector<float> x = detail::gather_images(d.all, idx, at, end);
    auto r = e->run({{"x", &x}})[0];
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

double accuracy(const std::vector<float>& z, const Data& d) {
  const size_t n = d.split.test.size();
  if (n == 0 || z.size() % n) throw ValueError(fmt::format("compress::accuracy: {} logits for {} test images", z.size(), n));
  const size_t c = z.size() / n;
  int64_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t best = 0;
    for (size_t k = 1; k < c; ++k)
      if (z[i * c + k] > z[i * c + best]) best = k;  // first maximum, as torch.argmax
    correct += static_cast<int64_t>(best) == d.all.labels[d.split.test[i]];
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

double evaluate(const Model& m, const Data& d, Backend& backend) { return accuracy(logits(m, d, backend, d.split.test), d); }

Model quantize(const Model& m, const QuantConfig& q, const Data& d, Backend& backend,
               const std::vector<int64_t>& indices) {
  if (q.bits < 2 || q.bits > 8) throw ValueError(fmt::format("compress::quantize: bits must be 2..8 (got {})", q.bits));
  Model r = m;
  r.quant = q;
  r.act_lo.assign(kActPoints, 0.f);
  r.act_hi.assign(kActPoints, 0.f);
  const std::vector<int64_t>& idx = indices.empty() ? d.split.train : indices;
  const bool running = q.observer == QuantConfig::Observer::moving_average;
  const size_t chunk = running ? 64 : idx.size();  // seed 002 calibrates on all 600 training images at once
  Bound b = detail::bind(r);
  std::map<int64_t, std::unique_ptr<Executable>> exe;
  bool first = true;
  for (size_t at = 0; at < idx.size(); at += chunk) {
    const size_t end = std::min(idx.size(), at + chunk);
    const int64_t bn = static_cast<int64_t>(end - at);
    auto& e = exe[bn];
    if (!e) {
      Program p;
      detail::forward(r, b, input("x", {bn, m.spec.channels, m.spec.height, m.spec.width}), {.quant_acts = false});
      for (int i = 0; i < kActPoints; ++i) {
        p.add_output(fmt::format("min{}", i), reshape(min(b.act_in[i]), {1}));
        p.add_output(fmt::format("max{}", i), reshape(max(b.act_in[i]), {1}));
      }
      e = backend.compile(p);
    }
    std::vector<float> x = detail::gather_images(d.all, idx, at, end);
    auto out = e->run({{"x", &x}});
    for (int i = 0; i < kActPoints; ++i) {
      const float lo = out[2 * i][0], hi = out[2 * i + 1][0];
      if (first) {
        r.act_lo[i] = lo, r.act_hi[i] = hi;
      } else if (running) {  // torch.ao MovingAverageMinMaxObserver
        r.act_lo[i] += static_cast<float>(q.averaging_constant) * (lo - r.act_lo[i]);
        r.act_hi[i] += static_cast<float>(q.averaging_constant) * (hi - r.act_hi[i]);
      } else {
        r.act_lo[i] = std::min(r.act_lo[i], lo), r.act_hi[i] = std::max(r.act_hi[i], hi);
      }
    }
    first = false;
  }
  return r;
}

}  // namespace sg::compress
