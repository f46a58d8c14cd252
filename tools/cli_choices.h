// The choices the subcommands offer (models, backends, datasets, optimizers, schedules) in one place, so `train`, `predict`, `dump`,
// `debug`, `export` and `compress` accept the same names and their --help lists them the same way.
#pragma once

#include <string>
#include <vector>

namespace sg::cli {

inline const std::vector<std::string> kModels = {"mlp", "cnn", "cnn-large", "cnn5", "resnet"};  ///< sg::nn::make_module
/// The image models `export` bundles (sg::web::model_bundle_spec; `export` adds the word models of sg/lm.h).
inline const std::vector<std::string> kExportModels = {"mlp", "cnn", "cnn-large", "cnn5", "resnet"};
inline const std::vector<std::string> kBackends = {"auto", "gles", "gles-compute", "vulkan", "cpu-simd", "cpu"};  ///< make_backend
inline const std::vector<std::string> kDatasets = {"fashion-mnist", "digits", "shapes"};  ///< sg::train::load_split
/// sg::train::Config::optimizer: make_sgd, make_sgd with momentum 0.9, make_adam, make_adamw
inline const std::vector<std::string> kOptimizers = {"sgd", "momentum", "adam", "adamw"};
/// sg::train::Config::lr_schedule: sg::LRSchedule::constant, ::step (StepLR), ::warmup_cosine
inline const std::vector<std::string> kLrSchedules = {"constant", "step", "warmup-cosine"};

/// "a | b | c": the choices as --help shows them.
inline std::string choices(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& c : v) s += (s.empty() ? "" : " | ") + c;
  return s;
}

}  // namespace sg::cli
