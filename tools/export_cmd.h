// shadergrad export — the `export` subcommand of the CLI (tools/shadergrad.cpp registers it).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "subcommand.h"

namespace sg::cli {

/// Adds `shadergrad export` to `app`; the returned command runs it when the subcommand was given:
///   auto export_run = sg::cli::add_export_command(app);
///   ...; if (export_run) return export_run();
/// The run returns the process exit code (0); sg::Error propagates to the caller's handler.
Subcommand add_export_command(CLI::App& app);

}  // namespace sg::cli
