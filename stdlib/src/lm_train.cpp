// The language models' training run (`shadergrad train --model charlm|lstm`): words rows, train and eval programs,
// epochs, validation loss in nats per character, checkpoints with the model's LmSpec, metrics.
#include <chrono>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/atomic_file.h"
#include "sg/lm.h"
#include "sg/train.h"

#include "executable_cache.h"
#include "step_tally.h"

namespace sg::train {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The LmSpec of cfg's model and sizes.
lm::LmSpec spec_of(const Config& cfg) {
  lm::LmSpec s;
  s.model = cfg.model;
  s.context = cfg.context;
  s.d_model = cfg.d_model;
  s.layers = cfg.layers;
  s.heads = cfg.heads;
  s.hidden = cfg.hidden;
  s.validate();
  return s;
}

/// Compiled train and eval programs per batch size (a last partial batch gets its own, sharing parameters and state).
struct LmPrograms {
  nn::Module& model;
  const lm::LmSpec& spec;
  Backend& backend;
  Optimizer& opt;
  double clip = 0;
  bool output_lr = false;
  detail::ExecutableCache train, eval;

  Executable& train_step(int64_t b) {
    return train.get(backend, b, [&] {
      lm::LmLoss l = lm::lm_loss(model, spec, b);
      return make_train_step(l.loss, model.parameters(), opt,
                             TrainStepOptions{.clip_grad_norm = clip, .output_grad_norm = clip > 0,
                                              .output_lr = output_lr});
    });
  }
  Executable& eval_step(int64_t b) {
    return eval.get(backend, b, [&] {
      lm::LmLoss l = lm::lm_loss(model, spec, b);
      Program p;
      p.add_output("nll_sum", l.loss_sum);
      return p;
    });
  }
};

/// Mean nats per predicted character over `rows` (the eval program's sums added in f64, divided by the mask's count).
double validation_loss(LmPrograms& progs, const data::WordRows& rows, int64_t eval_batch) {
  double nats = 0;
  std::vector<int64_t> idx;
  for (int64_t start = 0; start < rows.n; start += eval_batch) {
    const int64_t b = std::min(eval_batch, rows.n - start);
    idx.resize(static_cast<size_t>(b));
    for (int64_t k = 0; k < b; ++k) idx[static_cast<size_t>(k)] = start + k;
    const data::WordRows batch = data::take_rows(rows, idx);
    nats += progs.eval_step(b).run({{"x", &batch.x}, {"y", &batch.y}, {"mask", &batch.mask}})[0][0];
  }
  const int64_t targets = rows.targets();
  return targets > 0 ? nats / static_cast<double>(targets) : 0.0;
}

}  // namespace

Config lm_defaults(const std::string& model) {
  Config c;
  c.model = model;
  c.dataset = "words";
  c.optimizer = "adamw";
  c.lr = model == "lstm" ? 1e-2 : 3e-3;
  c.lr_schedule = "warmup-cosine";
  c.warmup_steps = 100;
  c.min_lr = c.lr / 10;
  c.clip_grad_norm = 1.0;
  c.batch = 64;
  c.epochs = 2;
  return c;
}

Result run_lm(const Config& cfg, std::ostream& log) {
  if (cfg.epochs < 1) throw ValueError(fmt::format("--epochs must be >= 1 (got {})", cfg.epochs));
  if (cfg.batch < 1) throw ValueError(fmt::format("--batch must be >= 1 (got {})", cfg.batch));
  if (!(cfg.lr > 0)) throw ValueError(fmt::format("--lr must be > 0 (got {})", cfg.lr));
  if (cfg.dataset != "words")
    throw ValueError(fmt::format("--model {} trains on --dataset words (the English word list), not '{}'", cfg.model,
                                 cfg.dataset));
  check_names(cfg);
  const lm::LmSpec spec = spec_of(cfg);
  auto t_start = Clock::now();
  for (const std::string* out : {&cfg.save, &cfg.metrics})
    if (!out->empty()) check_atomic_writable(*out);

  data::Words words = data::load_words();
  auto cut = [](std::vector<std::string>& v, int64_t n) {
    if (n > 0 && n < static_cast<int64_t>(v.size())) v.resize(static_cast<size_t>(n));
  };
  cut(words.train, cfg.train_limit);
  cut(words.validation, cfg.test_limit);
  const data::WordRows train_rows = data::make_word_rows(words.train, spec.context);
  const data::WordRows val_rows = data::make_word_rows(words.validation, spec.context);

  BackendOptions bo;
  bo.kind = cfg.backend;
  if (cfg.max_texture_width > 0) bo.max_texture_width = cfg.max_texture_width;
  bo.unfused = cfg.unfused;
  bo.profile = cfg.profile;
  bo.autotune = cfg.autotune;
  BackendChoice choice = make_backend(bo);
  Backend& be = *choice.backend;
  if (!choice.note.empty()) log << choice.note << "\n";

  nn::Rng rng(cfg.seed);
  std::unique_ptr<nn::Module> model = lm::make_lm(spec);
  model->build(rng);
  const int64_t batch = std::min(cfg.batch, train_rows.n);
  const int64_t steps_per_epoch = train_rows.n / batch + (train_rows.n % batch ? 1 : 0);
  const LRSchedule schedule = schedule_of(cfg, steps_per_epoch);
  std::unique_ptr<Optimizer> opt = make_optimizer(cfg, schedule);
  const bool scheduled = schedule.kind != LRSchedule::Kind::Constant;
  LmPrograms progs{*model, spec, be, *opt, cfg.clip_grad_norm, scheduled, {}, {}};

  Result r;
  r.model = cfg.model;
  r.dataset = "words";
  r.split = "fnv1a64 % 10";
  r.backend = be.name();
  r.renderer = be.device();
  r.optimizer = opt->describe();
  r.fallback_note = choice.note;
  r.parameters = model->num_parameters();
  r.train_samples = train_rows.n;
  r.test_samples = val_rows.n;
  log << fmt::format("shadergrad train: {} ({} parameters) on words ({} train / {} validation words, {} validation "
                     "characters), {} backend [{}], {}, batch {}\n",
                     spec.describe(), r.parameters, train_rows.n, val_rows.n, val_rows.targets(), r.backend, r.renderer,
                     r.optimizer, batch);
  {
    const auto tc = Clock::now();
    progs.train_step(batch);
    if (train_rows.n % batch) progs.train_step(train_rows.n % batch);
    log << fmt::format("compiled the train step in {:.0f} ms\n", seconds_since(tc) * 1000);
  }
  double train_seconds = 0;
  const int64_t eval_batch = std::min<int64_t>(512, std::max<int64_t>(val_rows.n, 1));
  for (int64_t epoch = 1; epoch <= cfg.epochs; ++epoch) {
    const auto t0 = Clock::now();
    const std::vector<int64_t> order = data::seeded_permutation(train_rows.n, cfg.seed + static_cast<uint64_t>(epoch - 1));
    detail::StepTally tally{.clipped = cfg.clip_grad_norm > 0, .scheduled = scheduled, .lr = cfg.lr};
    for (int64_t start = 0; start < train_rows.n; start += batch) {
      const int64_t b = std::min(batch, train_rows.n - start);
      const data::WordRows rows =
          data::take_rows(train_rows, llvm::ArrayRef<int64_t>(order.data() + start, static_cast<size_t>(b)));
      Executable& exe = progs.train_step(b);
      r.kernels_per_step = std::max<int64_t>(r.kernels_per_step, exe.kernels_per_step());
      tally.add(exe.run({{"x", &rows.x}, {"y", &rows.y}, {"mask", &rows.mask}}), epoch);
      const int64_t step = tally.steps;
      ++r.steps;
      if (cfg.progress && (step == steps_per_epoch || step * 10 / steps_per_epoch != (step - 1) * 10 / steps_per_epoch)) {
        const double el = seconds_since(t0);
        log << fmt::format("epoch {}/{} step {}/{} loss {:.4f} {:.1f} steps/s\n", epoch, cfg.epochs, step,
                           steps_per_epoch, tally.mean_loss(), el > 0 ? step / el : 0.0)
            << std::flush;
      }
    }
    const double secs = seconds_since(t0);
    train_seconds += secs;
    EpochStats es;
    es.epoch = epoch;
    es.train_loss = tally.mean_loss();
    es.lr = tally.lr;
    es.grad_norm = tally.mean_grad_norm();
    es.validation_loss = validation_loss(progs, val_rows, eval_batch);
    es.seconds = secs;
    r.history.push_back(es);
    std::string extra;
    if (scheduled) extra += fmt::format(", lr {:.4g}", es.lr);
    if (es.grad_norm >= 0) extra += fmt::format(", grad norm {:.4g}", es.grad_norm);
    log << fmt::format("epoch {}/{}: train loss {:.4f}{}, validation loss {:.4f} nats/char ({:.1f}s)\n", epoch,
                       cfg.epochs, es.train_loss, extra, es.validation_loss, es.seconds);
  }
  r.epochs = cfg.epochs;
  r.final_train_loss = r.history.back().train_loss;
  r.validation_loss = r.history.back().validation_loss;
  r.steps_per_second = train_seconds > 0 ? r.steps / train_seconds : 0;
  r.seconds = seconds_since(t_start);
  if (cfg.profile) print_profile(progs.train_step(batch), log);
  if (!cfg.save.empty()) {
    auto meta = spec.metadata();
    meta.emplace_back("dataset", "words");
    meta.emplace_back("validation_loss", fmt::format("{:.4f}", r.validation_loss));
    save_checkpoint(cfg.save, *model, be, cfg.model, meta);
    log << "saved checkpoint " << cfg.save << "\n";
  }
  if (!cfg.metrics.empty()) {
    write_file_atomic(cfg.metrics, r.to_json().dump(2) + "\n");
    log << "wrote metrics " << cfg.metrics << "\n";
  }
  log << r.summary() << "\n";
  return r;
}

}  // namespace sg::train
