// The choices the subcommands offer (models, backends, datasets) in one place, so `train`, `predict`, `dump`,
// `debug`, `export` and `compress` accept the same names and their --help lists them the same way.
#pragma once

#include <string>
#include <vector>

namespace sg::cli {

inline const std::vector<std::string> kModels = {"mlp", "cnn", "cnn-large", "cnn5"};      ///< sg::nn::make_model
inline const std::vector<std::string> kBackends = {"auto", "gles", "gles-compute", "vulkan", "cpu"};  ///< make_backend
inline const std::vector<std::string> kDatasets = {"fashion-mnist", "digits", "shapes"};  ///< sg::train::load_split

/// "a | b | c": the choices as --help shows them.
inline std::string choices(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& c : v) s += (s.empty() ? "" : " | ") + c;
  return s;
}

}  // namespace sg::cli
