// shadergrad — the training driver behind `shadergrad train` (and the examples' shared helpers).
//
// Builds a model (sg::nn::make_model), a train-step Program (forward + backward + optimizer update, all graph
// nodes) and an eval Program, compiles both for the chosen backend, and runs epochs over a dataset with seeded
// shuffling (last partial batch included: it gets its own compiled program sharing parameters and optimizer
// state). Only the loss is read back per step; the eval program reads back the number of correct predictions.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/nn.h"

namespace sg::train {

struct Config {
  std::string model = "mlp";              ///< mlp | cnn | cnn-large
  std::string dataset = "fashion-mnist";  ///< fashion-mnist | digits
  std::string split = "ours";             ///< digits only: ours (data::digits_split(0)) | seed002 (seed 002's split)
  std::string backend = "auto";           ///< auto | gles | vulkan | cpu
  std::string optimizer = "adam";         ///< sgd | momentum | adam
  int64_t epochs = 4;
  int64_t batch = 128;
  double lr = 1e-3;
  uint64_t seed = 0;
  int64_t train_limit = 0;  ///< use only the first N training samples (0 = all): smoke tests
  int64_t test_limit = 0;   ///< evaluate only the first N test samples (0 = all)
  std::string save{};       ///< checkpoint path (safetensors) written after training; "" = none
  std::string metrics{};    ///< metrics JSON path; "" = none
  bool progress = true;     ///< progress output on `log`
  int64_t max_texture_width = 0;
  bool unfused = false;
  bool profile = false;     ///< print per-kernel GPU times of the train step (timer queries) after training
  /// BackendOptions::autotune (vulkan: time the tiled kernels' tile candidates, run the fastest; --autotune); unset =
  /// env SG_AUTOTUNE
  std::optional<bool> autotune{};
};

struct EpochStats {
  int64_t epoch = 0;
  double train_loss = 0;     ///< mean loss over the epoch's steps
  double test_accuracy = 0;  ///< after the epoch
  double seconds = 0;
};

struct Result {
  std::string model, dataset, split, backend, renderer, optimizer, fallback_note;
  int64_t epochs = 0, steps = 0, parameters = 0, kernels_per_step = 0, train_samples = 0, test_samples = 0;
  double final_train_loss = 0, test_accuracy = 0, steps_per_second = 0, seconds = 0;
  std::vector<EpochStats> history;
  nlohmann::json to_json() const;
  /// "test accuracy 0.8412 after 4 epochs, 1876 steps, 41.2 steps/s, 5 kernels per step": run()'s last line and
  /// all that `shadergrad train --quiet` prints.
  std::string summary() const;
};

/// The training/test split a dataset name stands for: fashion-mnist -> (train, t10k); digits -> the
/// 600/797 split data::digits_split_named(split) ("ours" = digits_split(0), "seed002" = seed 002's torch.randperm
/// split; the 400 "pool" samples are unused). ValueError on unknown names, or a split other than "ours" for
/// fashion-mnist.
std::pair<data::Dataset, data::Dataset> load_split(const std::string& dataset, const std::string& split = "ours");

/// The dataset a model is made for when none is named (dump, debug, export): mlp -> fashion-mnist (28x28),
/// cnn5 -> shapes (128x128: its five 2x2 pools need at least 32x32), others -> digits (8x8).
std::string default_dataset(const std::string& model);

/// What a training run sets up before its first step (shared by train::run and `shadergrad debug`).
struct Setup {
  data::Dataset train, test;              ///< load_split(cfg.dataset, cfg.split), cut to train_limit / test_limit
  BackendChoice backend;                  ///< make_backend(cfg.backend, max_texture_width, unfused, profile)
  std::unique_ptr<nn::Sequential> model;  ///< make_model(cfg.model) for the dataset, built with Rng(cfg.seed)
  std::unique_ptr<Optimizer> optimizer;   ///< cfg.optimizer with cfg.lr (sgd; momentum = SGD momentum 0.9; adam)
};
/// Builds the Setup of `cfg`. Throws ValueError (batch < 1, lr <= 0, unknown model/dataset/optimizer),
/// IOError (dataset files), BackendError.
Setup make_setup(const Config& cfg);

/// One train step's loss over a batch of `batch` samples of shape (c, h, w): inputs "x" (batch, c, h, w) f32 and
/// "labels" (batch) i32, loss = cross_entropy(model(x), labels). Every node names `loc` (the caller's line).
struct BatchLoss {
  Tensor x, labels, loss;
  std::vector<Tensor> layer_outputs;  ///< each layer's output (Sequential::forward_layers)
};
BatchLoss batch_loss(nn::Sequential& model, int64_t batch, int64_t c, int64_t h, int64_t w,
                     loc_t loc = loc_t::current());

/// Trains as configured, printing progress to `log`. Writes the checkpoint/metrics when asked (atomically).
Result run(const Config& cfg, std::ostream& log);

/// The metadata `format` of the checkpoints save_checkpoint writes and load_checkpoint reads.
inline constexpr const char* kCheckpointFormat = "shadergrad-checkpoint/1";

/// Saves a model's current parameters from `backend` as a safetensors checkpoint with metadata
/// {format: kCheckpointFormat, model, structure_hash, ...extra}. Atomic (temp + rename).
void save_checkpoint(const std::string& path, const nn::Sequential& model, Backend& backend,
                     const std::string& model_name, const std::vector<std::pair<std::string, std::string>>& extra = {});

/// Loads a checkpoint into `backend` for `model`: checks format, structure hash, every name and shape first,
/// and that every value is finite, and only then writes (no partial load). Throws IOError naming the file and what
/// differs (the tensor and the index of its first NaN or Inf).
/// Returns the checkpoint's metadata.
std::vector<std::pair<std::string, std::string>> load_checkpoint(const std::string& path, const nn::Sequential& model,
                                                                 Backend& backend);

}  // namespace sg::train
