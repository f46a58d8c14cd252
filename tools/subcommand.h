// shadergrad CLI — a subcommand as registered on the CLI11 app: every `add_*_command(app)` (tools/*_cmd.h and the
// built-in ones of tools/shadergrad.cpp) returns one, and main runs the one the command line named.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace sg::cli {

/// A registered subcommand: `sub` is its CLI11 app (owned by the parent app), `run` executes it with the options
/// parsed into the state the lambda captured, returning the process exit code. It throws sg::Error (and
/// std::exception) for bad input; main prints those as "shadergrad: MESSAGE" and exits with status 1.
struct Subcommand {
  CLI::App* sub = nullptr;
  std::function<int()> run;
  int operator()() const { return run(); }
  /// True when the command line named this subcommand.
  explicit operator bool() const { return sub && sub->parsed(); }
};

}  // namespace sg::cli
