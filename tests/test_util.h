// Shared helpers for the Catch2 suites.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace sg::testing {

/// A fresh empty directory under the system temp dir (mkdtemp), removed with its contents at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "sg_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Sorted names of the entries directly inside the directory.
  std::vector<std::string> files() const {
    std::vector<std::string> r;
    for (auto& e : std::filesystem::directory_iterator(path)) r.push_back(e.path().filename().string());
    std::sort(r.begin(), r.end());
    return r;
  }
  /// Number of entries directly inside the directory.
  size_t entries() const { return files().size(); }
  /// Path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// The whole content of a file ("" when it cannot be opened).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// Runs `cmd` with /bin/sh, its standard output and error captured into `output`; returns its exit status (-1 when it
/// did not exit normally, e.g. killed by a signal). The one runner of the tests that drive node, chromium and the CLI.
inline int shell(const std::string& cmd, std::string& output) {
  TempDir d("sg_shell");
  const std::string log = d / "out.txt";
  const int rc = std::system((cmd + " > '" + log + "' 2>&1").c_str());
  output = read_file(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// Writes `bytes` to `path` (plain, non-atomic: test fixtures); the test fails when the write fails.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

/// Runs a shell command and returns its standard output; the test fails unless it exits 0.
inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  REQUIRE(pclose(p) == 0);
  return out;
}

/// n samples of N(0, scale^2) from a seeded std::mt19937 (deterministic test data).
/// Elementwise |got - want| <= atol + rtol |want| (a NaN counts as the worst element); on failure names the worst
/// element, its two values and `what`. `got` is the GLES result, `want` the CPU backend's.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                         const std::string& what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / (atol + rtol * std::fabs(want[i]));
    if (!(err <= worst)) worst = err, wi = i;  // NaN counts as worst
  }
  INFO(what << ": worst element " << wi << " of " << got.size() << ": gles " << got[wi] << " cpu " << want[wi]);
  CHECK(worst <= 1.0);
}

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// n floats uniform in [lo, hi) from std::mt19937(seed) (drawn in double, rounded to float).
inline std::vector<float> uniform(int64_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(d(g));
  return v;
}

}  // namespace sg::testing
