// Debug mode: `shadergrad debug` — N train steps of a stdlib model through a Session, then the report.
// The setup (dataset, backend, model, optimizer, loss) is `shadergrad train`'s (sg/train.h). See sg/debug.h.
#include <fstream>
#include <istream>
#include <ostream>

#include "debug_internal.h"
#include "sg/train.h"

namespace sg::debug {

RunResult run_debug(const RunConfig& cfg, std::istream& in, std::ostream& out) {
  if (cfg.out_dir.empty()) throw ValueError("debug: an output directory is required (--out DIR)");
  if (cfg.steps < 1) throw ValueError(fmt::format("debug: --steps must be >= 1 (got {})", cfg.steps));
  if (cfg.batch < 1) throw ValueError(fmt::format("debug: --batch must be >= 1 (got {})", cfg.batch));
  if (!(cfg.lr > 0)) throw ValueError(fmt::format("debug: --lr must be > 0 (got {})", cfg.lr));
  std::string dataset = cfg.dataset.empty() ? train::default_dataset(cfg.model) : cfg.dataset;
  std::ifstream cmd_file;
  std::istream* cmds = &in;
  if (cfg.step && !cfg.commands.empty()) {
    cmd_file.open(cfg.commands);
    if (!cmd_file) throw IOError(fmt::format("debug: cannot read the commands file '{}'", cfg.commands));
    cmds = &cmd_file;
  }

  // The same setup as `shadergrad train` (dataset split, backend, seeded model, optimizer) and its train-step
  // loss; the TrainStep is sg::make_train_step's program plus the adjoint bookkeeping.
  train::Config tc;
  tc.model = cfg.model;
  tc.dataset = dataset;
  tc.backend = cfg.backend;
  tc.optimizer = cfg.optimizer;
  tc.lr = cfg.lr;
  tc.batch = cfg.batch;
  tc.seed = cfg.seed;
  tc.unfused = cfg.unfused;
  train::Setup setup = train::make_setup(tc);
  const data::Dataset& train = setup.train;
  data::BatchIterator it(train, cfg.batch, /*shuffle=*/true, cfg.seed, /*drop_last=*/true);
  if (it.batches_per_epoch() < 1)
    throw ValueError(fmt::format("debug: the {} training split has {} samples, fewer than one batch of {}", dataset,
                                 train.n, cfg.batch));
  Backend& be = *setup.backend.backend;
  if (!setup.backend.note.empty()) out << setup.backend.note << "\n";
  auto& model = setup.model;
  Optimizer& opt = *setup.optimizer;
  // The teaching run's model and loss: every forward node (and its backward nodes) names this line.
  train::BatchLoss bl = train::batch_loss(*model, cfg.batch, train.c, train.h, train.w);
  TrainStep ts = make_train_step(bl.loss, model->named_parameters(), opt);
  if (auto* seq = dynamic_cast<nn::Sequential*>(model.get()))  // layer labels: a Sequential's layers
    for (size_t i = 0; i < bl.layer_outputs.size(); ++i) ts.layers.emplace_back(seq->layer_name(i), bl.layer_outputs[i]);
  std::unique_ptr<Executable> exe = be.compile(ts.program);

  Options so;
  so.out_dir = cfg.out_dir;
  so.capture = cfg.capture;
  so.check_numerics = cfg.check_numerics;
  so.recompute = cfg.recompute;
  Session session(so);
  session.attach(*exe, ts, &be);
  ReportInfo info;
  info.title = fmt::format("shadergrad debug: {} on {}", cfg.model, dataset);
  info.facts = {{"model", model->describe()},
                {"parameters", std::to_string(model->num_parameters())},
                {"dataset", fmt::format("{} ({} training samples), batch {}", dataset, train.n, cfg.batch)},
                {"optimizer", opt.describe()},
                {"backend", fmt::format("{} ({})", be.name(), be.device())},
                {"plan", cfg.unfused     ? "unfused (one kernel per graph node)"
                          : cfg.recompute ? "fused (values kept in registers are recomputed on the CPU reference)"
                                          : "fused"},
                {"seed", std::to_string(cfg.seed)}};
  if (cfg.step) {
    DebuggerOptions d;
    d.echo = cfg.echo;
    session.set_debugger(*cmds, out, d);
  } else {
    // Launches as the session counts them (one per stored value); kernels (draws) too when they differ.
    const size_t entries = session.launches().size();
    const int kernels = exe->kernels_per_step();
    out << fmt::format("shadergrad debug: {} on {} ({} backend, {} launches per step{}{}), {} -> {}\n", cfg.model,
                       dataset, be.name(), entries,
                       exe->plan() && static_cast<size_t>(kernels) != entries
                           ? fmt::format(" from {} kernels", kernels)
                           : std::string(),
                       cfg.unfused ? ", unfused" : "", cfg.steps == 1 ? "1 step" : fmt::format("{} steps", cfg.steps),
                       cfg.out_dir);
  }

  RunResult r;
  data::Batch b;
  int64_t epoch = 0;
  try {
    for (int64_t s = 0; s < cfg.steps; ++s) {
      if (!it.next(b)) {
        it.reset(++epoch);
        it.next(b);
      }
      auto outs = session.run({{"x", &b.images}, {"labels", &b.labels}});
      if (session.quit_requested()) {
        r.quit = true;
        break;
      }
      r.losses.push_back(outs[0][0]);
      ++r.steps;
      if (!cfg.step) out << fmt::format("step {}: loss {:.6g}\n", s, outs[0][0]);
    }
  } catch (const NumericsError&) {
    r.report = session.write_report(info);
    out << fmt::format("wrote {} (up to the failing launch)\n", r.report);
    throw;
  }
  if (cfg.step && !r.quit) {
    session.debugger_finish();
    r.quit = session.quit_requested();
  }
  r.report = session.write_report(info);
  out << fmt::format("wrote {} ({} captures, gradient_flow.png, stats.json, shaders/)\n", r.report,
                     session.captures().size());
  return r;
}

}  // namespace sg::debug
