// shadergrad serve — the `serve` subcommand of the CLI (tools/shadergrad.cpp registers it): a static file server
// for web bundles and the example pages, bound to 127.0.0.1 only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "subcommand.h"

namespace sg::cli {

/// Adds `shadergrad serve DIR [--port N]` to `app`; the returned command runs it when the subcommand was given
/// (it serves until the process is stopped; returns the exit code). Throws sg::IOError when DIR is not a
/// directory or the port cannot be bound (the message names the port and how to pick another).
Subcommand add_serve_command(CLI::App& app);

/// The Content-Type `shadergrad serve` sends for a file name ("bundle.json" -> "application/json"); unknown
/// extensions get "application/octet-stream". Exposed for tests.
const char* content_type_for(const std::string& path);

}  // namespace sg::cli
