// shadergrad — running an external program (the C compilers of the cpu-simd backend and of the wasm export).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sg {

/// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null and stdout and stderr into the file `log`
/// (created or truncated), and waits for it. Returns its exit status, 128 + the signal number when a signal ended
/// it, or -errno when it could not be started (-ENOENT: no such program). Never throws.
int run_logged(const std::vector<std::string>& argv, const std::filesystem::path& log);

}  // namespace sg
