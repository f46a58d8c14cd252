// shadergrad compress — pruning, distillation, QAT / PTQ and int8 inference of make_cnn checkpoints on the digits
// (seed 002's study, one step per command). The work is sg::compress (stdlib/include/sg/compress.h); this file
// parses flags and prints what was done. Every training and evaluation runs as generated shaders on --backend.
#include "compress_cmd.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sg/compress.h"
#include "cli_choices.h"

namespace sg::cli {

namespace c = sg::compress;

namespace {

struct Common {
  std::string backend = "auto", split = "seed002", load, out;
  uint64_t seed = 0;
};

void add_common(CLI::App* s, Common& o, bool needs_load = true) {
  s->add_option("--backend", o.backend, choices(kBackends) + " (training and evaluation)")
      ->check(CLI::IsMember(kBackends));
  s->add_option("--split", o.split, "digits split: seed002 (seed 002's torch.randperm) | ours")
      ->check(CLI::IsMember({"seed002", "ours"}));
  if (needs_load)
    s->add_option("--load", o.load, "a make_cnn checkpoint (shadergrad train --save, or a compress output)")->required();
  s->add_option("--out", o.out, "write the resulting model (safetensors)");
  s->add_option("--seed", o.seed, "shuffling seed (and the student's init for distill)");
}

std::unique_ptr<Backend> backend_of(const Common& o) {
  auto b = make_backend({.kind = o.backend});
  if (!b.note.empty()) std::cout << b.note << "\n";
  std::cout << fmt::format("backend {} [{}]\n", b.backend->name(), b.backend->device());
  return std::move(b.backend);
}

void print_sparsity(const c::Model& m) {
  for (auto& s : c::sparsity(m))
    std::cout << fmt::format("  {:9s} [{}] sparsity {:.3f} ({} of {} zero)\n", s.name, fmt::join(s.shape, ", "),
                             s.sparsity(), s.zeros, s.numel);
}
void print_size(const std::string& path, const char* what) {
  auto s = c::file_size(path);
  std::cout << fmt::format("wrote {} {}: {:.1f} KB, gzip {:.1f} KB\n", what, path, s.raw / 1024.0, s.gzipped / 1024.0);
}

struct Prune {
  Common o;
  double amount = 0.9, lr = 1e-3;
  std::string scope = "global";
  int rounds = 1;
  int64_t epochs = 10;
  bool structured = false, keep_masks = false;
  int run() {
    c::Data d = c::load_data(o.split);
    auto be = backend_of(o);
    c::Model m = c::load(o.load);
    std::cout << fmt::format("loaded make_cnn({}, {}, {}): {} parameters, test accuracy {:.4f}\n", m.spec.c1, m.spec.c2,
                             m.spec.hidden, m.spec.num_parameters(), c::evaluate(m, d, *be));
    if (structured) {
      c::Slim s = c::slim(m, amount);
      m = s.small;
      std::cout << fmt::format("structured {:.0f}%: make_cnn({}, {}, {}), {} parameters, test accuracy {:.4f}\n",
                               100 * amount, m.spec.c1, m.spec.c2, m.spec.hidden, m.spec.num_parameters(),
                               c::evaluate(m, d, *be));
      if (epochs > 0) c::train(m, d, {.epochs = epochs, .lr = lr, .seed = o.seed}, *be);
    } else {
      // iterative: `rounds` rounds, each pruning 1 - (1 - amount)^(1/rounds) of what is left, then fine-tuning
      const double per_round = 1 - std::pow(1 - amount, 1.0 / rounds);
      for (int r = 0; r < rounds; ++r) {
        if (scope == "global") c::prune_global_l1(m, per_round);
        else for (auto& w : c::Model::weight_names()) c::prune_l1(m, w, per_round);
        std::cout << fmt::format("round {}/{}: pruned ({}) to test accuracy {:.4f}\n", r + 1, rounds, scope,
                                 c::evaluate(m, d, *be));
        print_sparsity(m);
        if (epochs > 0) c::train(m, d, {.epochs = epochs, .lr = lr, .seed = o.seed + static_cast<uint64_t>(r)}, *be);
      }
      if (!keep_masks) c::remove_masks(m);
    }
    std::cout << fmt::format("after fine-tuning {} epochs: test accuracy {:.4f}\n", epochs, c::evaluate(m, d, *be));
    if (!o.out.empty()) {
      c::save(o.out, m);
      print_size(o.out, keep_masks ? "masked model (weight_orig + weight_mask)" : "model");
    }
    return 0;
  }
};

struct Distill {
  Common o;
  std::string teacher;
  std::vector<int64_t> widths = {8, 16, 32};
  int64_t epochs = 150;
  double lr = 2e-3, temperature = 4, alpha = 0.9;
  bool unlabeled = false;
  int run() {
    c::Data d = c::load_data(o.split);
    auto be = backend_of(o);
    c::Model t = c::load(teacher);
    std::cout << fmt::format("teacher make_cnn({}, {}, {}): test accuracy {:.4f}\n", t.spec.c1, t.spec.c2,
                             t.spec.hidden, c::evaluate(t, d, *be));
    c::TrainOptions opt{.epochs = epochs, .lr = lr, .seed = o.seed, .log = &std::cout};
    opt.distill = c::Distill{c::logits(t, d, *be), temperature, alpha};
    if (unlabeled) {
      opt.data = d.split.train;
      opt.data.insert(opt.data.end(), d.split.pool.begin(), d.split.pool.end());
    }
    c::Model s = c::init_cnn({widths.at(0), widths.at(1), widths.at(2)}, o.seed);
    c::train(s, d, opt, *be);
    std::cout << fmt::format("student make_cnn({}, {}, {}) ({} parameters) distilled at T = {}, alpha = {}{}: test "
                             "accuracy {:.4f}\n", s.spec.c1, s.spec.c2, s.spec.hidden, s.spec.num_parameters(),
                             temperature, alpha, unlabeled ? " with the 400 unlabeled pool images" : "",
                             c::evaluate(s, d, *be));
    if (!o.out.empty()) c::save(o.out, s), print_size(o.out, "student");
    return 0;
  }
};

struct Quant {
  Common o;
  bool qat = false, per_channel = false;
  int bits = 8;
  std::string observer = "fixed", int8_out;
  int64_t epochs = 30;
  double lr = 1e-3;
  int run() {
    c::Data d = c::load_data(o.split);
    auto be = backend_of(o);
    c::Model f = c::load(o.load);
    std::cout << fmt::format("float model: test accuracy {:.4f}\n", c::evaluate(f, d, *be));
    c::Model q = c::quantize(f, {.bits = bits, .per_channel = per_channel, .observer = c::parse_observer(observer)}, d, *be);
    std::cout << fmt::format("PTQ {} bits ({} weights, {} observer): test accuracy {:.4f}\n", bits,
                             per_channel ? "per-channel" : "per-tensor", observer, c::evaluate(q, d, *be));
    if (qat) {
      c::train(q, d, {.epochs = epochs, .lr = lr, .seed = o.seed}, *be);
      std::cout << fmt::format("QAT {} epochs: test accuracy {:.4f}\n", epochs, c::evaluate(q, d, *be));
    }
    if (!o.out.empty()) c::save(o.out, q), print_size(o.out, "float weights of the quantised model");
    if (!int8_out.empty()) {
      c::Int8Model i8 = c::to_int8(q);
      c::save_int8(int8_out, i8);
      print_size(int8_out, "int8 model");
      std::cout << fmt::format("int8 inference: CPU (integer) {:.4f}\n",
                               c::accuracy(c::int8_logits_cpu(i8, d, d.split.test), d));
    }
    return 0;
  }
};

}  // namespace

Subcommand add_compress_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("compress", "seed 002's compression of make_cnn digits models: prune | distill | "
                                                 "qat | ptq | int8-eval | split");
  cmd->require_subcommand(1);
  auto prune = std::make_shared<Prune>();
  CLI::App* p = cmd->add_subcommand("prune", "L1 pruning (global or per layer, iterative) with masks the optimizer "
                                             "respects, fine-tuning, or --structured channel pruning");
  add_common(p, prune->o);
  p->add_option("--amount", prune->amount, "fraction to prune (weights, or channels with --structured)")
      ->check(CLI::Range(0.0, 1.0));
  p->add_option("--scope", prune->scope, "global (one ranking across layers) | layer")
      ->check(CLI::IsMember({"global", "layer"}));
  p->add_option("--rounds", prune->rounds, "iterative prune-and-fine-tune rounds")->check(CLI::Range(1, 100));
  p->add_option("--finetune-epochs", prune->epochs, "fine-tuning epochs per round (0 = none)")->check(CLI::NonNegativeNumber);
  p->add_option("--lr", prune->lr, "fine-tuning Adam learning rate")->check(CLI::PositiveNumber);
  p->add_flag("--structured", prune->structured, "drop whole output channels: a genuinely smaller make_cnn");
  p->add_flag("--keep-masks", prune->keep_masks, "save weight_orig + weight_mask instead of folding the masks");

  auto dist = std::make_shared<Distill>();
  CLI::App* ds = cmd->add_subcommand("distill", "train a student with a teacher's soft labels (Hinton 2015)");
  add_common(ds, dist->o, false);
  ds->add_option("--teacher", dist->teacher, "the teacher checkpoint")->required();
  ds->add_option("--widths", dist->widths, "student make_cnn(c1, c2, hidden)")->expected(3)->delimiter(',');
  ds->add_option("--epochs", dist->epochs, "epochs")->check(CLI::PositiveNumber);
  ds->add_option("--lr", dist->lr, "Adam learning rate")->check(CLI::PositiveNumber);
  ds->add_option("--temperature", dist->temperature, "T")->check(CLI::PositiveNumber);
  ds->add_option("--alpha", dist->alpha, "weight of the soft term")->check(CLI::Range(0.0, 1.0));
  ds->add_flag("--unlabeled", dist->unlabeled, "add the 400 pool images (soft term only)");

  auto qat = std::make_shared<Quant>(), ptq = std::make_shared<Quant>();
  qat->qat = true;
  for (auto [name, q] : {std::pair{"qat", qat}, std::pair{"ptq", ptq}}) {
    CLI::App* s = cmd->add_subcommand(name, q->qat ? "quantisation-aware training after a float pre-train"
                                                   : "post-training quantisation (calibrated fake quantisation)");
    add_common(s, q->o);
    s->add_option("--bits", q->bits, "bits of weights and activations")->check(CLI::Range(2, 8));
    s->add_flag("--per-channel", q->per_channel, "weight scales per output channel");
    s->add_option("--observer", q->observer, "fixed (calibrate, then frozen: seed 002) | minmax | moving-average")
        ->check(CLI::IsMember({"fixed", "minmax", "moving-average"}));
    s->add_option("--int8-out", q->int8_out, "with --bits 8: write the int8 model (safetensors)");
    if (q->qat) {
      s->add_option("--epochs", q->epochs, "QAT epochs")->check(CLI::PositiveNumber);
      s->add_option("--lr", q->lr, "Adam learning rate")->check(CLI::PositiveNumber);
    }
  }

  auto ev = std::make_shared<Common>();
  CLI::App* e = cmd->add_subcommand("int8-eval", "test accuracy of an int8 model: integer CPU inference and the "
                                                 "fake-quantised graph on --backend");
  add_common(e, *ev);

  auto split_name = std::make_shared<std::string>("seed002");
  auto split_out = std::make_shared<std::string>();
  CLI::App* sp = cmd->add_subcommand("split", "print a digits split as JSON (train / pool / test indices)");
  sp->add_option("--name", *split_name, "seed002 | ours")->check(CLI::IsMember({"seed002", "ours"}));
  sp->add_option("--out", *split_out, "write to a file instead of stdout");

  Subcommand r;
  r.sub = cmd;
  r.run = [=]() -> int {
    if (p->parsed()) return prune->run();
    if (ds->parsed()) return dist->run();
    if (cmd->got_subcommand("qat")) return qat->run();
    if (cmd->got_subcommand("ptq")) return ptq->run();
    if (e->parsed()) {
      c::Data d = c::load_data(ev->split);
      c::Int8Model q = c::load_int8(ev->load);
      auto be = backend_of(*ev);
      std::cout << fmt::format("int8 make_cnn({}, {}, {}): CPU integer inference {:.4f}, {} fake-quantised {:.4f}\n",
                               q.spec.c1, q.spec.c2, q.spec.hidden,
                               c::accuracy(c::int8_logits_cpu(q, d, d.split.test), d), be->name(),
                               c::evaluate(c::from_int8(q), d, *be));
      return 0;
    }
    data::DigitsSplit s = data::digits_split_named(*split_name);
    std::string j = nlohmann::json{{"name", *split_name}, {"train", s.train}, {"pool", s.pool}, {"test", s.test}}.dump();
    if (split_out->empty()) std::cout << j << "\n";
    else io::write_file_atomic(*split_out, j + "\n");  // IOError naming the path (an ofstream failed silently)
    return 0;
  };
  return r;
}

}  // namespace sg::cli
