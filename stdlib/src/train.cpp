// The training driver: programs, epochs, evaluation, progress, checkpoints, metrics.
#include "sg/train.h"

#include "sg/atomic_file.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/compress.h"
#include "sg/lm.h"
#include "sg/safetensors.h"

#include "executable_cache.h"
#include "step_tally.h"

namespace sg::train {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

void check_names(const Config& c) {
  if (c.optimizer != "adam" && c.optimizer != "adamw" && c.optimizer != "sgd" && c.optimizer != "momentum")
    throw ValueError(fmt::format("unknown optimizer '{}' (choose sgd, momentum, adam or adamw)", c.optimizer));
  if (c.lr_schedule != "constant" && c.lr_schedule != "step" && c.lr_schedule != "warmup-cosine")
    throw ValueError(fmt::format("unknown --lr-schedule '{}' (choose constant, step or warmup-cosine)", c.lr_schedule));
  if (!(c.clip_grad_norm >= 0) || !std::isfinite(c.clip_grad_norm))
    throw ValueError(fmt::format("--clip-grad-norm must be >= 0 and finite (0: no clipping; got {})", c.clip_grad_norm));
}

/// cfg's schedule for a run of `steps_per_epoch` optimizer steps per epoch.
LRSchedule schedule_of(const Config& c, int64_t steps_per_epoch) {
  if (c.lr_schedule == "step") {
    const int64_t size = c.lr_step_size > 0 ? c.lr_step_size : steps_per_epoch;
    if (c.lr_step_size < 0) throw ValueError(fmt::format("--lr-step-size must be >= 1 (got {})", c.lr_step_size));
    return LRSchedule::step(size, c.lr_gamma);
  }
  if (c.lr_schedule == "warmup-cosine") {
    const int64_t total = c.epochs * steps_per_epoch;
    if (c.warmup_steps > total)
      throw ValueError(fmt::format("--warmup-steps {} exceeds the run's {} steps ({} epochs of {}): give fewer "
                                   "--warmup-steps (charlm and lstm default to 100) or a longer run", c.warmup_steps,
                                   total, c.epochs, steps_per_epoch));
    return LRSchedule::warmup_cosine(c.warmup_steps, total, c.min_lr);
  }
  return LRSchedule::constant();
}

std::unique_ptr<Optimizer> make_optimizer(const Config& c, const LRSchedule& s) {
  if (c.optimizer == "adam") return make_adam({.lr = c.lr, .schedule = s});
  if (c.optimizer == "adamw") return make_adamw({.lr = c.lr, .schedule = s});
  if (c.optimizer == "sgd") return make_sgd({.lr = c.lr, .schedule = s});
  return make_sgd({.lr = c.lr, .momentum = 0.9, .schedule = s});
}

namespace {

/// Compiled programs per batch size (the last partial batch gets its own).
struct Programs {
  nn::Module& model;
  Backend& backend;
  Optimizer* opt;
  int64_t c, h, w;
  double clip = 0;        ///< Config::clip_grad_norm: output "grad_norm" after the loss
  bool output_lr = false;  ///< a schedule: output "lr" last
  detail::ExecutableCache train, eval;

  Executable& train_step(int64_t b) {
    return train.get(backend, b, [&] {
      BatchLoss bl = batch_loss(model, b, c, h, w);
      return make_train_step(bl.loss, model.parameters(), *opt,
                             TrainStepOptions{.clip_grad_norm = clip, .output_grad_norm = clip > 0,
                                              .output_lr = output_lr});
    });
  }
  Executable& eval_step(int64_t b) {
    return eval.get(backend, b, [&] {
      struct EvalMode {  // the eval program reads BatchNorm's running statistics and drops nothing
        nn::Module& m;
        bool was;
        ~EvalMode() { m.train(was); }
      } mode{model, model.training()};
      model.eval();
      Tensor x = input("x", {b, c, h, w});
      Tensor y = input("labels", {b}, DType::i32);
      Tensor logits = model(x);
      Program p;
      p.add_output("correct", sum(eq(argmax(logits, 1), y)));
      return p;
    });
  }
};

double evaluate(Programs& progs, const data::Dataset& test, int64_t eval_batch) {
  data::BatchIterator it(test, eval_batch, /*shuffle=*/false);
  data::Batch b;
  double correct = 0;
  while (it.next(b)) {
    auto out = progs.eval_step(b.size).run({{"x", &b.images}, {"labels", &b.labels}});
    correct += out[0][0];
  }
  return test.n ? correct / static_cast<double>(test.n) : 0.0;
}

class Progress {
 public:
  Progress(std::ostream& log, bool enabled) : log_(log), enabled_(enabled), tty_(isatty(STDOUT_FILENO) != 0) {}
  void update(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double elapsed) {
    if (!enabled_) return;
    steps = std::max<int64_t>(steps, 1);  // a step ran, so there is at least one (never divide by 0)
    double rate = elapsed > 0 ? step / elapsed : 0;
    // ETA of the whole run: the rest of this epoch plus the epochs still to come (evaluation not included)
    double eta = rate > 0 ? (static_cast<double>(steps - step) + static_cast<double>(epochs - epoch) * steps) / rate : 0;
    if (tty_) {
      int width = 30, filled = static_cast<int>(width * step / std::max<int64_t>(steps, 1));
      log_ << fmt::format("\repoch {}/{} [{}{}] {}/{} loss {:.4f} {:.1f} steps/s ETA {:.0f}s ", epoch, epochs,
                          std::string(filled, '='), std::string(width - filled, ' '), step, steps, loss, rate, eta)
           << std::flush;
    } else if (step >= steps || step * 10 / steps != (step - 1) * 10 / steps) {  // steps >= 1 here
      log_ << fmt::format("epoch {}/{} step {}/{} loss {:.4f} {:.1f} steps/s ETA {:.0f}s\n", epoch, epochs, step,
                          steps, loss, rate, eta)
           << std::flush;
    }
  }
  void end_line() {
    if (enabled_ && tty_) log_ << "\n";
  }

 private:
  std::ostream& log_;
  bool enabled_, tty_;
};

}  // namespace

std::string default_dataset(const std::string& model) {
  return model == "mlp" || model == "resnet" ? "fashion-mnist" : model == "cnn5" ? "shapes" : "digits";
}

std::pair<data::Dataset, data::Dataset> load_split(const std::string& dataset, const std::string& split) {
  if (dataset == "fashion-mnist") {
    if (split != "ours")
      throw ValueError(fmt::format("--split {} applies to --dataset digits only (fashion-mnist has its own "
                                   "train/t10k files)", split));
    return {data::load_fashion_mnist(true), data::load_fashion_mnist(false)};
  }
  if (dataset == "digits") {
    data::DigitsSplit s = data::digits_split_named(split);  // an unknown split fails before the file is read
    data::Dataset all = data::load_digits();
    return {all.subset(s.train), all.subset(s.test)};
  }
  if (dataset == "shapes") return {data::make_shapes(2048, 1), data::make_shapes(512, 2)};
  throw ValueError(fmt::format("unknown dataset '{}' (choose fashion-mnist, digits or shapes)", dataset));
}

nlohmann::json Result::to_json() const {
  nlohmann::json h = nlohmann::json::array();
  for (auto& e : history) {
    h.push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"test_accuracy", e.test_accuracy},
                 {"seconds", e.seconds}, {"lr", e.lr}});
    if (e.grad_norm >= 0) h.back()["grad_norm"] = e.grad_norm;
    if (e.validation_loss >= 0) {  // a language model: no accuracy
      h.back()["validation_loss"] = e.validation_loss;
      h.back().erase("test_accuracy");
    }
  }
  nlohmann::json j = {{"model", model}, {"dataset", dataset}, {"split", split}, {"backend", backend}, {"renderer", renderer},
          {"optimizer", optimizer}, {"epochs", epochs}, {"steps", steps}, {"parameters", parameters},
          {"train_samples", train_samples}, {"test_samples", test_samples},
          {"final_train_loss", final_train_loss}, {"test_accuracy", test_accuracy},
          {"steps_per_second", steps_per_second}, {"kernels_per_step", kernels_per_step}, {"seconds", seconds},
          {"fallback_note", fallback_note}, {"history", h}};
  if (validation_loss >= 0) {
    j["validation_loss"] = validation_loss;
    j.erase("test_accuracy");
  }
  return j;
}

Setup make_setup(const Config& cfg) {
  if (cfg.batch < 1) throw ValueError(fmt::format("--batch must be >= 1 (got {})", cfg.batch));
  if (!(cfg.lr > 0)) throw ValueError(fmt::format("--lr must be > 0 (got {})", cfg.lr));
  Setup s;
  check_names(cfg);  // an unknown optimizer or schedule fails before the dataset is read
  std::tie(s.train, s.test) = load_split(cfg.dataset, cfg.split);
  auto take = [](const data::Dataset& d, int64_t n) {
    if (n <= 0 || n >= d.n) return d;
    std::vector<int64_t> idx(n);
    for (int64_t i = 0; i < n; ++i) idx[i] = i;
    return d.subset(idx);
  };
  s.train = take(s.train, cfg.train_limit);
  s.test = take(s.test, cfg.test_limit);

  BackendOptions bo;
  bo.kind = cfg.backend;
  if (cfg.max_texture_width > 0) bo.max_texture_width = cfg.max_texture_width;  // 0: the device limit
  bo.unfused = cfg.unfused;
  bo.profile = cfg.profile;
  bo.autotune = cfg.autotune;
  s.backend = make_backend(bo);

  nn::Rng rng(cfg.seed);
  s.model = nn::make_module(cfg.model, s.train.c, s.train.h, s.train.w, s.train.num_classes);
  s.model->build(rng);
  const int64_t steps_per_epoch = (std::min(cfg.batch, s.train.n) > 0)
                                      ? (s.train.n + std::min(cfg.batch, s.train.n) - 1) / std::min(cfg.batch, s.train.n)
                                      : 1;
  s.schedule = schedule_of(cfg, std::max<int64_t>(steps_per_epoch, 1));
  s.optimizer = make_optimizer(cfg, s.schedule);
  return s;
}

BatchLoss batch_loss(nn::Module& model, int64_t batch, int64_t c, int64_t h, int64_t w, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_caller(l);
  BatchLoss r;
  r.x = input("x", {batch, c, h, w});
  r.labels = input("labels", {batch}, DType::i32);
  auto* seq = dynamic_cast<nn::Sequential*>(&model);
  r.loss = cross_entropy(seq ? seq->forward_layers(r.x, r.layer_outputs) : model.forward(r.x), r.labels);
  return r;
}

void print_profile(Executable& exe, std::ostream& log) {
  auto ts = exe.last_timings();
  double total = 0;
  for (auto& t : ts) total += t.ms;
  log << fmt::format("per-kernel time of the last train step ({}):\n", ts.empty()      ? "not available on this backend"
                                                                   : ts[0].gpu_timer ? "GPU timer queries"
                                                                                     : "glFinish-bounded CPU time");
  const Plan* plan = exe.plan();
  const auto* cks = exe.compute_kernels();
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    size_t outs = plan && i < plan->kernels.size() ? plan->kernels[i].outputs.size() : 1;
    std::string how;  // compute backends: the strategy, a tiled kernel's config, the gap before it (Vulkan)
    if (cks && i < cks->size()) {
      const ComputeKernel& ck = (*cks)[i];
      how = "  " + ck.strategy + (ck.tiles ? " " + ck.tiles->str() + (ck.tuning.empty() ? "" : " (autotuned)") : "");
    }
    if (i > 0 && t.start_ms >= 0) how += fmt::format("  gap {:.4f} ms", t.start_ms - ts[i - 1].start_ms - ts[i - 1].ms);
    log << fmt::format("  {:<44} {:9.3f} ms {:5.1f}%{}{}\n", t.kernel, t.ms, total > 0 ? 100 * t.ms / total : 0.0,
                       outs > 1 ? fmt::format("  ({} outputs)", outs) : std::string(), how);
  }
  if (!ts.empty()) log << fmt::format("  {:<44} {:9.3f} ms\n", "total", total);
}

Result run(const Config& cfg, std::ostream& log) {
  if (lm::is_lm_model(cfg.model)) return run_lm(cfg, log);
  if (cfg.epochs < 1) throw ValueError(fmt::format("--epochs must be >= 1 (got {})", cfg.epochs));
  auto t_start = Clock::now();
  // fail before training, not after it, when an output cannot be written
  for (const std::string* out : {&cfg.save, &cfg.metrics})
    if (!out->empty()) check_atomic_writable(*out);
  Setup setup = make_setup(cfg);
  const data::Dataset& train_ds = setup.train;
  const data::Dataset& test_ds = setup.test;
  BackendChoice& choice = setup.backend;
  Backend& be = *choice.backend;
  if (!choice.note.empty()) log << choice.note << "\n";
  auto& model = setup.model;
  auto& opt = setup.optimizer;
  const bool scheduled = setup.schedule.kind != LRSchedule::Kind::Constant;
  Programs progs{*model, be, opt.get(), train_ds.c, train_ds.h, train_ds.w, cfg.clip_grad_norm, scheduled, {}, {}};

  Result r;
  r.model = cfg.model;
  r.dataset = cfg.dataset;
  r.split = cfg.split;
  r.backend = be.name();
  r.renderer = be.device();
  r.optimizer = opt->describe();
  r.fallback_note = choice.note;
  r.parameters = model->num_parameters();
  r.train_samples = train_ds.n;
  r.test_samples = test_ds.n;
  log << fmt::format("shadergrad train: {} ({} parameters) on {} ({} train / {} test), {} backend [{}], {}\n",
                     cfg.model, r.parameters, cfg.dataset, train_ds.n, test_ds.n, r.backend, r.renderer, r.optimizer);
  if (cfg.batch > train_ds.n)  // as torch's DataLoader: one batch of every sample
    log << fmt::format("note: batch {} is more than the {} training samples: one batch of {} per epoch\n", cfg.batch,
                       train_ds.n, train_ds.n);

  Progress progress(log, cfg.progress);
  data::BatchIterator it(train_ds, cfg.batch, /*shuffle=*/true, cfg.seed);
  {  // compile (with --autotune: tune) the train step of each batch size before the timed epochs: steps/s counts steps
    const auto tc = Clock::now();
    const int64_t full = std::min(cfg.batch, train_ds.n), rest = cfg.batch > 0 ? train_ds.n % cfg.batch : 0;
    double tuning_ms = 0;
    for (int64_t b : {full, rest}) {
      if (b <= 0) continue;
      if (const auto* cks = progs.train_step(b).compute_kernels())
        for (const ComputeKernel& ck : *cks) tuning_ms += ck.tuning_ms;
    }
    log << fmt::format("compiled the train step in {:.0f} ms{}\n", since(tc) * 1000,
                       tuning_ms > 0 ? fmt::format(" (autotuning {:.0f} ms of it)", tuning_ms) : std::string());
  }
  double train_seconds = 0;
  for (int64_t epoch = 1; epoch <= cfg.epochs; ++epoch) {
    auto t0 = Clock::now();
    it.reset(epoch - 1);
    data::Batch b;
    const int64_t steps = it.batches_per_epoch();
    detail::StepTally tally{.clipped = cfg.clip_grad_norm > 0, .scheduled = scheduled, .lr = cfg.lr};
    while (it.next(b)) {
      Executable& exe = progs.train_step(b.size);
      r.kernels_per_step = std::max<int64_t>(r.kernels_per_step, exe.kernels_per_step());
      tally.add(exe.run({{"x", &b.images}, {"labels", &b.labels}}), epoch);
      ++r.steps;
      progress.update(epoch, cfg.epochs, tally.steps, steps, tally.mean_loss(), since(t0));
    }
    progress.end_line();
    double secs = since(t0);
    train_seconds += secs;
    EpochStats es{epoch, tally.mean_loss(), tally.lr, tally.mean_grad_norm(), evaluate(progs, test_ds, 1000), secs};
    r.history.push_back(es);
    std::string extra;  // the schedule's lr of the epoch's last step, the mean gradient norm before clipping
    if (scheduled) extra += fmt::format(", lr {:.4g}", es.lr);
    if (es.grad_norm >= 0) extra += fmt::format(", grad norm {:.4g}", es.grad_norm);
    log << fmt::format("epoch {}/{}: train loss {:.4f}{}, test accuracy {:.4f} ({:.1f}s)\n", epoch, cfg.epochs,
                       es.train_loss, extra, es.test_accuracy, es.seconds);
  }
  r.epochs = cfg.epochs;
  r.final_train_loss = r.history.back().train_loss;
  r.test_accuracy = r.history.back().test_accuracy;
  r.steps_per_second = train_seconds > 0 ? r.steps / train_seconds : 0;
  r.seconds = since(t_start);
  if (cfg.profile) print_profile(progs.train_step(cfg.batch < train_ds.n ? cfg.batch : train_ds.n), log);
  if (!cfg.save.empty()) {
    save_checkpoint(cfg.save, *model, be, cfg.model,
                    {{"dataset", cfg.dataset}, {"split", cfg.split}, {"test_accuracy", fmt::format("{:.4f}", r.test_accuracy)}});
    log << "saved checkpoint " << cfg.save << "\n";
  }
  if (!cfg.metrics.empty()) {
    io::write_file_atomic(cfg.metrics, r.to_json().dump(2) + "\n");
    log << "wrote metrics " << cfg.metrics << "\n";
  }
  log << r.summary() << "\n";
  return r;
}

std::string Result::summary() const {
  if (validation_loss >= 0)
    return fmt::format("validation loss {:.4f} nats per character after {} epoch{}, {} step{}, {:.1f} steps/s, {} "
                       "kernels per step", validation_loss, epochs, epochs == 1 ? "" : "s", steps, steps == 1 ? "" : "s",
                       steps_per_second, kernels_per_step);
  return fmt::format("test accuracy {:.4f} after {} epoch{}, {} step{}, {:.1f} steps/s, {} kernels per step",
                     test_accuracy, epochs, epochs == 1 ? "" : "s", steps, steps == 1 ? "" : "s", steps_per_second,
                     kernels_per_step);
}

void save_checkpoint(const std::string& path, const nn::Module& model, Backend& backend,
                     const std::string& model_name, const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<io::NamedTensor> ts;
  for (auto& [name, t] : model.state_dict())
    ts.push_back({name, std::vector<int64_t>(t.shape().begin(), t.shape().end()), backend.read(t)});
  std::map<std::string, std::string> meta = {{"format", kCheckpointFormat},
                                             {"model", model_name},
                                             {"structure_hash", model.structure_hash()}};
  for (auto& [k, v] : extra) meta[k] = v;
  io::save_safetensors(path, ts, meta);
}

namespace {
/// Each state_dict tensor of `model` paired with its tensor in `f`, checked first: every name present with the
/// model's shape and finite values, and no tensor left over (torch's load_state_dict(strict=True)). IOError naming
/// the file, the tensor and what differs.
std::vector<std::pair<Tensor, const io::NamedTensor*>> checked_tensors(const std::string& path,
                                                                       const io::SafetensorsFile& f,
                                                                       const nn::Module& model) {
  auto params = model.state_dict();
  std::vector<std::pair<Tensor, const io::NamedTensor*>> plan;
  for (auto& [name, t] : params) {
    const io::NamedTensor* nt = f.find(name);
    if (!nt) throw IOError(fmt::format("{}: tensor '{}' is missing", path, name));
    if (ShapeRef(nt->shape) != t.shape())
      throw IOError(fmt::format("{}: tensor '{}' has shape {}, the model expects {}", path, name, shape_str(nt->shape),
                                shape_str(t.shape())));
    for (size_t i = 0; i < nt->data.size(); ++i)
      if (!std::isfinite(nt->data[i]))
        throw IOError(fmt::format("{}: tensor '{}' holds {} at index {}: a checkpoint's parameters must be finite "
                                  "(was it saved after training diverged?)", path, name, nt->data[i], i));
    plan.emplace_back(t, nt);
  }
  if (f.tensors.size() != params.size()) {
    for (const io::NamedTensor& nt : f.tensors)
      if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.first == nt.name; }))
        throw IOError(fmt::format("{}: tensor '{}' is not a parameter or buffer of the model ({} tensors in the file, "
                                  "{} in the model's state_dict)", path, nt.name, f.tensors.size(), params.size()));
    throw IOError(fmt::format("{}: checkpoint has {} tensors, the model has {} parameters and buffers", path,
                              f.tensors.size(), params.size()));
  }
  return plan;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> load_checkpoint(const std::string& path, const nn::Module& model,
                                                                 Backend& backend) {
  io::SafetensorsFile f = io::load_safetensors(path);
  auto meta = [&](const std::string& k) {
    auto it = f.metadata.find(k);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") == compress::kModelFormat || meta("format") == compress::kInt8Format)
    throw IOError(fmt::format("{}: a `shadergrad compress` output ({}), not a training checkpoint ({}): {}", path,
                              meta("format"), kCheckpointFormat,
                              meta("format") == compress::kInt8Format
                                  ? "`shadergrad compress int8-eval` evaluates it"
                                  : "`shadergrad predict` and the compress commands read it"));
  if (meta("format") != kCheckpointFormat)
    throw IOError(fmt::format("{}: not a shadergrad checkpoint (metadata format is '{}', expected '{}'; a torch "
                              "state_dict loads with sg::train::load_state_dict)", path, meta("format"),
                              kCheckpointFormat));
  if (meta("structure_hash") != model.structure_hash()) {
    try {
      checked_tensors(path, f, model);  // names the first tensor that differs, when one does
    } catch (const IOError& e) {
      throw IOError(fmt::format("{} (a different model structure: checkpoint of model '{}', structure hash {}; this "
                                "model's is {})", e.what(), meta("model"), meta("structure_hash"),
                                model.structure_hash()));
    }
    throw IOError(fmt::format("{}: checkpoint is for a different model structure (model '{}', structure hash {}; "
                              "this model's is {}: the same tensor names and shapes, another architecture)",
                              path, meta("model"), meta("structure_hash"), model.structure_hash()));
  }
  for (auto& [t, nt] : checked_tensors(path, f, model)) backend.write(t, nt->data);
  return {f.metadata.begin(), f.metadata.end()};
}

void load_state_dict(const std::string& path, const nn::Module& model, Backend& backend) {
  io::SafetensorsFile f = io::load_safetensors(path);
  for (auto& [t, nt] : checked_tensors(path, f, model)) backend.write(t, nt->data);
}

}  // namespace sg::train
