// shadergrad debug — N train steps with every launch captured: PNGs + stats, report.html, --check-numerics,
// and the --step debugger. The work is sg::debug::run_debug (stdlib/include/sg/debug.h); this file parses flags.
#include "debug_cmd.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "sg/debug.h"
#include "cli_choices.h"

namespace sg::cli {

namespace {
/// CLI11's PositiveNumber prints the whole range of double on failure; this says what is wrong.
const CLI::Validator kPositiveValue(
    [](std::string& s) -> std::string {
      try {
        size_t used = 0;
        double v = std::stod(s, &used);
        if (used == s.size() && v > 0 && v <= 1e6) return "";
      } catch (const std::exception&) {
      }
      return "must be a positive number up to 1e6 (got '" + s + "')";
    },
    "POSITIVE");
}  // namespace

Subcommand add_debug_command(CLI::App& app) {
  auto cfg = std::make_shared<debug::RunConfig>();
  CLI::App* d = app.add_subcommand(
      "debug", "run a few train steps writing every kernel's value/gradient as PNG + stats and DIR/report.html; "
               "--step opens a step-through debugger");
  d->add_option("--model", cfg->model, choices(kModels))->check(CLI::IsMember(kModels));
  d->add_option("--dataset", cfg->dataset,
                choices(kDatasets) + " (default: fashion-mnist for mlp, shapes for cnn5, digits otherwise)")
      ->check(CLI::IsMember(kDatasets));
  d->add_option("--backend", cfg->backend, choices(kBackends))->check(CLI::IsMember(kBackends));
  d->add_option("--steps", cfg->steps, "train steps to run (default 3)")->check(kPositiveValue);
  d->add_option("--batch", cfg->batch, "batch size (default 16)")->check(kPositiveValue);
  d->add_option("--optimizer", cfg->optimizer, "sgd | momentum | adam")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}));
  d->add_option("--lr", cfg->lr, "learning rate")->check(kPositiveValue);
  d->add_option("--seed", cfg->seed, "seed for init and batch order");
  d->add_flag("--unfused", cfg->unfused, "one kernel per graph node: every node's value is stored on the device");
  d->add_flag("!--no-recompute", cfg->recompute,
              "do not recompute (on the CPU reference) the values fused kernels keep in registers");
  d->add_flag("--check-numerics", cfg->check_numerics,
              "stop at the first kernel producing NaN/Inf, naming its graph nodes and source lines");
  d->add_option("--capture", cfg->capture,
                "capture only these (kernel name/prefix, nN, parameter, forward|backward|update|gradients); "
                "default all")
      ->delimiter(',');
  d->add_option("--out", cfg->out_dir, "output directory (PNGs, stats.json, report.html)")->required();
  d->add_flag("--step", cfg->step, "step-through debugger (commands from stdin or --commands)");
  d->add_option("--commands", cfg->commands, "read debugger commands from this file (implies --step)");

  Subcommand cmd;
  cmd.sub = d;
  cmd.run = [cfg]() -> int {
    if (!cfg->commands.empty()) cfg->step = true;
    // Interactive terminal: the user's typing is already on screen; scripts and pipes get an echoed transcript.
    cfg->echo = !(cfg->commands.empty() && isatty(STDIN_FILENO));
    try {
      debug::RunResult r = debug::run_debug(*cfg, std::cin, std::cout);
      (void)r;
      return 0;
    } catch (const Error& e) {
      std::cout.flush();
      std::cerr << "shadergrad debug: " << e.what() << "\n";
      return 1;
    }
  };
  return cmd;
}

}  // namespace sg::cli
