// shadergrad debug — the `debug` subcommand of the CLI (tools/shadergrad.cpp registers it).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "subcommand.h"

namespace sg::cli {

/// Adds `shadergrad debug` to `app` and returns a function that runs it (call when the subcommand was given):
///   auto debug_run = sg::cli::add_debug_command(app);
///   ...; if (debug_run.sub->parsed()) return debug_run();
/// The run returns the process exit code: 0, or 1 after printing an sg::Error (a NumericsError included).
Subcommand add_debug_command(CLI::App& app);

}  // namespace sg::cli
