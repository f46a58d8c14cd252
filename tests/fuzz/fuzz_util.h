// Shared helpers of the libFuzzer targets (tests/fuzz/fuzz_*.cpp; built with -DSG_FUZZ=ON, docs/RELIABILITY.md).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace sg::fuzz {

/// A file path private to this process under $TMPDIR (default /tmp) ending in `suffix`; loaders that take a path
/// are fuzzed through it (rewritten for every input).
inline std::string scratch_path(const std::string& suffix) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/sg_fuzz_" + std::to_string(::getpid()) + "_" + suffix;
}

/// Writes `bytes` to `path` (aborts on failure: the fuzzer's environment is broken, not the code under test).
inline void write_bytes(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) std::abort();
}

/// Splits an input at the first occurrence of `sep` (a multi-file input); `rest` is empty when it is absent.
inline std::string_view split(std::string_view& in, std::string_view sep) {
  size_t at = in.find(sep);
  std::string_view head = in.substr(0, at);
  in = at == std::string_view::npos ? std::string_view() : in.substr(at + sep.size());
  return head;
}

}  // namespace sg::fuzz
