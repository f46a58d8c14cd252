// shadergrad — the training driver behind `shadergrad train` (and the examples' shared helpers).
//
// Builds a model (sg::nn::make_model), a train-step Program (forward + backward + optimizer update, all graph
// nodes) and an eval Program, compiles both for the chosen backend, and runs epochs over a dataset with seeded
// shuffling (last partial batch included: it gets its own compiled program sharing parameters and optimizer
// state). Only the loss is read back per step; the eval program reads back the number of correct predictions.
// The train step is built in train mode (BatchNorm: batch statistics, running statistics updated in the step;
// Dropout active), the eval program in eval mode (running statistics, no dropout).
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
  std::string model = "mlp";              ///< mlp | cnn | cnn-large | cnn5 | resnet (nn::make_module)
  std::string dataset = "fashion-mnist";  ///< fashion-mnist | digits
  std::string split = "ours";             ///< digits only: ours (data::digits_split(0)) | seed002 (seed 002's split)
  std::string backend = "auto";           ///< auto | gles | vulkan | cpu
  std::string optimizer = "adam";         ///< sgd | momentum | adam | adamw (torch.optim.AdamW, weight_decay 1e-2)
  int64_t epochs = 4;
  int64_t batch = 128;
  double lr = 1e-3;
  /// Global-norm gradient clipping in the compiled step (sg::clip_grad_norm, torch.nn.utils.clip_grad_norm_ with
  /// norm_type 2); 0 = none. The epoch lines and metrics then report the mean total norm before clipping.
  double clip_grad_norm = 0;
  /// constant | step (StepLR: lr * lr_gamma every lr_step_size optimizer steps) | warmup-cosine (linear warmup over
  /// warmup_steps, then cosine to min_lr at the run's last step, epochs x steps per epoch): sg::LRSchedule
  std::string lr_schedule = "constant";
  int64_t lr_step_size = 0;  ///< step: optimizer steps between decays; 0 = one epoch's steps
  double lr_gamma = 0.1;     ///< step: the factor
  int64_t warmup_steps = 0;  ///< warmup-cosine
  double min_lr = 0;         ///< warmup-cosine: the floor
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
  // The character language models (model charlm | lstm on dataset "words", sg/lm.h's LmSpec): their sizes.
  int64_t context = 32;  ///< positions per row (a word of up to context - 1 letters and its end)
  int64_t d_model = 64;  ///< charlm: width; lstm: embedding size
  int64_t layers = 2;    ///< charlm: transformer blocks; lstm: LSTM layers
  int64_t heads = 4;     ///< charlm: attention heads
  int64_t hidden = 128;  ///< lstm: hidden size
};

/// The defaults of `shadergrad train --model charlm|lstm` for the options the command line does not give:
/// dataset "words", optimizer adamw (weight decay 0.01), lr 3e-3 (charlm) / 1e-2 (lstm), lr_schedule warmup-cosine
/// with 100 warmup steps down to min_lr = lr / 10, clip_grad_norm 1, batch 64, epochs 2. Other fields as Config{}.
Config lm_defaults(const std::string& model);

struct EpochStats {
  int64_t epoch = 0;
  double train_loss = 0;     ///< mean loss over the epoch's steps
  double lr = 0;             ///< the learning rate of the epoch's last step (the schedule's, read from the step)
  double grad_norm = -1;     ///< with clipping: the mean total gradient norm before clipping; -1 = no clipping
  double test_accuracy = 0;  ///< after the epoch
  double seconds = 0;
  double validation_loss = -1;  ///< language models: nats per character on the validation words; -1 otherwise
};

struct Result {
  std::string model, dataset, split, backend, renderer, optimizer, fallback_note;
  int64_t epochs = 0, steps = 0, parameters = 0, kernels_per_step = 0, train_samples = 0, test_samples = 0;
  double final_train_loss = 0, test_accuracy = 0, steps_per_second = 0, seconds = 0;
  /// Language models (charlm, lstm): the last epoch's mean nats per character over the validation words (emitted as
  /// "validation_loss" in to_json, per epoch in history, without "test_accuracy"; summary() reports it instead of the
  /// accuracy); -1 otherwise.
  double validation_loss = -1;
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
/// cnn5 -> shapes (128x128: its five 2x2 pools need at least 32x32), resnet -> fashion-mnist, others -> digits (8x8).
std::string default_dataset(const std::string& model);

/// What a training run sets up before its first step (shared by train::run and `shadergrad debug`).
struct Setup {
  data::Dataset train, test;              ///< load_split(cfg.dataset, cfg.split), cut to train_limit / test_limit
  BackendChoice backend;                  ///< make_backend(cfg.backend, max_texture_width, unfused, profile)
  std::unique_ptr<nn::Module> model;      ///< make_module(cfg.model) for the dataset, built with Rng(cfg.seed)
  std::unique_ptr<Optimizer> optimizer;   ///< cfg.optimizer with cfg.lr (sgd; momentum = SGD momentum 0.9; adam; adamw)
  LRSchedule schedule{};                  ///< cfg.lr_schedule over this run's steps (the optimizer's)
};
/// Builds the Setup of `cfg`. Throws ValueError (batch < 1, lr <= 0, unknown model/dataset/optimizer/schedule,
/// clip_grad_norm < 0, warmup_steps beyond the run's steps, ...),
/// IOError (dataset files), BackendError.
Setup make_setup(const Config& cfg);

/// One train step's loss over a batch of `batch` samples of shape (c, h, w): inputs "x" (batch, c, h, w) f32 and
/// "labels" (batch) i32, loss = cross_entropy(model(x), labels), in the model's current train/eval mode. Every node
/// names `loc` (the caller's line).
struct BatchLoss {
  Tensor x, labels, loss;
  std::vector<Tensor> layer_outputs;  ///< a Sequential's layers' outputs (Sequential::forward_layers); else empty
};
BatchLoss batch_loss(nn::Module& model, int64_t batch, int64_t c, int64_t h, int64_t w,
                     loc_t loc = loc_t::current());

/// The language models' training run (model charlm | lstm; sg/lm.h), which run() calls for them: words rows
/// (data::make_word_rows with cfg.context), shuffled each epoch by data::seeded_permutation(n, seed + epoch - 1), the
/// loss lm::lm_loss; after every epoch an eval program sums the validation words' nats and reports their mean per
/// character (validation_loss). --save writes the checkpoint with the LmSpec in its metadata (what `shadergrad sample`
/// reads). Throws as run(), and ValueError for a dataset other than "words" or bad model sizes.
Result run_lm(const Config& cfg, std::ostream& log);

/// The optimizer and schedule names of cfg checked (ValueError naming the choices), shared by run() and run_lm().
void check_names(const Config& c);
/// cfg's learning-rate schedule for a run of `steps_per_epoch` optimizer steps per epoch.
LRSchedule schedule_of(const Config& c, int64_t steps_per_epoch);
/// cfg's optimizer with `schedule`.
std::unique_ptr<Optimizer> make_optimizer(const Config& c, const LRSchedule& schedule);

/// `train --profile`'s table: the per-kernel times of `exe`'s last run (timer queries where the backend has them),
/// with each compute kernel's strategy and tile configuration.
void print_profile(Executable& exe, std::ostream& log);

/// Trains as configured, printing progress to `log`. Writes the checkpoint/metrics when asked (atomically).
Result run(const Config& cfg, std::ostream& log);

/// The metadata `format` of the checkpoints save_checkpoint writes and load_checkpoint reads.
inline constexpr const char* kCheckpointFormat = "shadergrad-checkpoint/1";

/// Saves a model's current state_dict (parameters and buffers, e.g. BatchNorm's running statistics) from `backend` as
/// a safetensors checkpoint with metadata {format: kCheckpointFormat, model, structure_hash, ...extra}. Atomic (temp +
/// rename).
void save_checkpoint(const std::string& path, const nn::Module& model, Backend& backend,
                     const std::string& model_name, const std::vector<std::pair<std::string, std::string>>& extra = {});

/// Loads a checkpoint into `backend` for `model`'s state_dict: checks format, structure hash, every name and shape first,
/// and that every value is finite, and only then writes (no partial load). Throws IOError naming the file and what
/// differs (the tensor and the index of its first NaN or Inf).
/// Returns the checkpoint's metadata.
std::vector<std::pair<std::string, std::string>> load_checkpoint(const std::string& path, const nn::Module& model,
                                                                 Backend& backend);

/// Loads a state_dict saved from PyTorch (torch.nn.Module.state_dict(); names and layouts as torch's, which every
/// sg::nn layer follows) as a safetensors file with F32 (or I32) tensors and no shadergrad metadata, e.g. written by
/// scripts/torch_state_dict.py (`save_state_dict(module, path)`; torch's int64 num_batches_tracked becomes F32).
/// Strict as torch's load_state_dict(strict=True): every parameter and buffer of `model` present with its shape and
/// finite values, no other tensor in the file; checked before anything is written (no partial load). Throws IOError
/// naming the file, the tensor and what differs.
void load_state_dict(const std::string& path, const nn::Module& model, Backend& backend);

}  // namespace sg::train
