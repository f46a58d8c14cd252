// Shared helpers for the Catch2 suites.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
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

}  // namespace sg::testing
