// shadergrad compress — the `compress` subcommands of the CLI (tools/shadergrad.cpp registers them):
// prune | distill | qat | ptq | int8-eval | split, over make_cnn checkpoints on seed 002's digits split.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "subcommand.h"

namespace sg::cli {

/// Adds `shadergrad compress ...` to `app`; the returned command runs the chosen subcommand:
///   auto compress_run = sg::cli::add_compress_command(app);
///   ...; if (compress_run) return compress_run();
/// The run returns the process exit code (0); sg::Error propagates to the caller's handler.
Subcommand add_compress_command(CLI::App& app);

}  // namespace sg::cli
