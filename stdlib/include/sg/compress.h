// shadergrad — model compression of seed 002's digits CNN: pruning, knowledge distillation, quantisation-aware
// training, post-training quantisation and an int8 export (`shadergrad compress ...`, bench/seed002_study.cpp).
//
//   sg::compress::Data d = sg::compress::load_data("seed002");         // 1797 digits, seed 002's split
//   auto be = sg::make_backend({.kind = "gles"}).backend;
//   sg::compress::Model m = sg::compress::init_cnn({64, 128, 256}, 0);  // make_cnn(64, 128, 256), Rng(0)
//   sg::compress::train(m, d, {.epochs = 40}, *be);                     // Adam, batch 64, generated shaders
//   sg::compress::prune_global_l1(m, 0.9);                              // masks: pruned weights are 0 and stay 0
//   sg::compress::train(m, d, {.epochs = 10, .lr = 1e-3}, *be);         // fine-tune under the masks
//   sg::compress::remove_masks(m);                                      // fold the masks (torch prune.remove)
//
// A Model lives on the host (the state_dict of nn::make_cnn: "0.weight" (c1,C,3,3), "0.bias", "3.weight",
// "3.bias", "7.weight" (hidden, c2*H/4*W/4), "7.bias", "9.weight" (classes, hidden), "9.bias"); every train or
// evaluate call builds the graph of that model (masks, fake quantisation), compiles it for the backend, writes the
// values in, runs and reads them back. The formulas follow torch.nn.utils.prune, torch.ao.quantization and seed 002
// (an article in Chinese: /work/shared/seeds/002_*.txt); each function names its source.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/safetensors.h"

namespace sg::compress {

/// The metadata `format` of save()'s float models and of save_int8()'s integer models.
inline constexpr const char* kModelFormat = "shadergrad-compress/1";
inline constexpr const char* kInt8Format = "shadergrad-int8/1";

/// The digits and one split of them (index lists into `all`).
struct Data {
  data::Dataset all;        ///< the 1797 digits, 1x8x8, pixels / 16 (seed 002's scaling)
  data::DigitsSplit split;  ///< train 600 / pool 400 (unlabeled) / test 797
};
/// load_digits() and digits_split_named(split) ("seed002" or "ours"). Throws IOError, ValueError.
Data load_data(const std::string& split = "seed002");

/// make_cnn(c1, c2, hidden) on 1x8x8 inputs with 10 classes (sg::nn::make_cnn).
struct CnnSpec {
  int64_t c1 = 8, c2 = 16, hidden = 32;
  int64_t channels = 1, height = 8, width = 8, classes = 10;
  int64_t num_parameters() const;
};

/// Fake quantisation of a model (seed 002's QuantWeight / QuantAct, with torch.ao's observers and per-channel
/// weights as options). Weights: symmetric, qmax = 2^(bits-1) - 1, range [-qmax, qmax], scale = max|w| / qmax
/// recomputed from the weight every forward (per tensor, or per output channel), biases not quantised. Activations:
/// affine over [qmin, qmax] = [0, 2^bits - 1] on the input and after every ReLU (the logits are not quantised);
/// scale = (max(hi, 0) - min(lo, 0)) / (qmax - qmin), zero_point = qmin - round(min(lo, 0) / scale) clamped to
/// [qmin, qmax] (torch.ao ObserverBase._calculate_qparams, per_tensor_affine); ReLU outputs have lo = 0, so
/// zero_point = 0 and scale = hi / qmax as seed 002's QuantAct.
struct QuantConfig {
  enum class Observer {
    fixed,           ///< ranges set by calibrate() and then frozen (seed 002's QuantAct: observe=False)
    minmax,          ///< torch.ao MinMaxObserver: lo = min(lo, min x), hi = max(hi, max x) every train step
    moving_average,  ///< torch.ao MovingAverageMinMaxObserver: lo += c * (min x - lo), hi likewise
  };
  int bits = 8;             ///< 2..8, weights and activations
  bool per_channel = false; ///< weight scales per output channel (torch.ao per_channel_symmetric)
  Observer observer = Observer::fixed;
  double averaging_constant = 0.01;  ///< moving_average's c (torch.ao's default)
  bool weights = true;      ///< fake-quantise the weights (false: they are on the grid already, as from_int8's)
  int64_t act_qmax() const { return (int64_t{1} << bits) - 1; }
  int64_t weight_qmax() const { return (int64_t{1} << (bits - 1)) - 1; }
};
/// "fixed" | "minmax" | "moving-average" -> Observer; ValueError otherwise.
QuantConfig::Observer parse_observer(const std::string& name);

/// Quantisation parameters of one activation point: scale and zero point as above.
struct QParams {
  float scale = 1;
  int32_t zero_point = 0;
};

/// The four activation quantisation points of make_cnn: the input and the outputs of the three ReLUs.
inline constexpr int kActPoints = 4;

/// A model on the host: parameters (state_dict order), pruning masks, fake-quantisation settings and ranges.
struct Model {
  CnnSpec spec;
  std::vector<io::NamedTensor> params;               ///< "0.weight", "0.bias", ..., "9.bias"
  std::map<std::string, std::vector<float>> masks;   ///< weight name -> 0/1 per element (1 = kept); pruned = 0
  std::optional<QuantConfig> quant;                  ///< fake quantisation on (QAT / PTQ), or float
  std::vector<float> act_lo, act_hi;                 ///< kActPoints observed ranges (quant only)
  std::vector<QParams> act_given;                   ///< kActPoints qparams used as given (from_int8), or empty

  io::NamedTensor& param(const std::string& name);   ///< ValueError naming the parameters if absent
  const io::NamedTensor& param(const std::string& name) const;
  /// The prunable weights (Conv2d and Linear weights): "0.weight", "3.weight", "7.weight", "9.weight".
  static std::vector<std::string> weight_names();
};

/// make_cnn(spec) initialised by sg::nn's initialisers from Rng(seed) (the values `shadergrad train --seed` uses).
Model init_cnn(const CnnSpec& spec, uint64_t seed);

// --- training and evaluation (every run is generated shaders on `backend`) ---

/// Knowledge distillation (Hinton et al. 2015; seed 002's distill_loss):
///   alpha * T^2 * kl_div(log_softmax(z_s/T), softmax(z_t/T), batchmean) + (1 - alpha) * mean_i(labeled_i * CE_i)
/// student, teacher: (N, C) logits (no gradient into the teacher); labels (N) exact integers; labeled (N) 0/1
/// (unlabeled samples contribute only the soft term; the mean divides by N, as seed 002's). Throws ShapeError,
/// ValueError (T <= 0, alpha outside [0, 1]).
Tensor distillation_objective(const Tensor& student, const Tensor& teacher, const Tensor& labels,
                              const Tensor& labeled, double temperature, double alpha,
                              loc_t loc = loc_t::current());

struct Distill {
  std::vector<float> teacher_logits;  ///< (1797, classes): logits(teacher, data) for every image
  double temperature = 4.0, alpha = 0.9;
};

struct TrainOptions {
  int64_t epochs = 1;
  double lr = 2e-3;
  uint64_t seed = 0;           ///< shuffling: epoch e visits data in seeded_permutation(n, seed * 1000003 + e)
  int64_t batch = 64;
  std::vector<int64_t> data{};  ///< indices into Data::all; empty = split.train (labeled are split.train's)
  std::optional<Distill> distill{};  ///< distillation objective instead of cross entropy
  std::ostream* log = nullptr; ///< one line per epoch when set
};
/// Seed 002's train(): a fresh torch.optim.Adam(lr) per call, `epochs` epochs of shuffled batches (last partial
/// batch included), cross entropy or the distillation objective; masks kept (pruned weights get zero gradient, so
/// Adam's moments and the weights stay exactly 0); QAT when m.quant is set (observer updates as graph state).
/// Updates m in place. Throws ValueError (epochs < 1, batch < 1, lr <= 0, an index outside the data), Error on a
/// non-finite loss.
void train(Model& m, const Data& d, const TrainOptions& opt, Backend& backend);

/// Logits of `indices` (empty = all 1797), row-major (n, classes), in batches of 1000.
std::vector<float> logits(const Model& m, const Data& d, Backend& backend, const std::vector<int64_t>& indices = {});
/// Test accuracy (fraction of split.test classified right).
double evaluate(const Model& m, const Data& d, Backend& backend);

// --- pruning (torch.nn.utils.prune) ---

/// prune.l1_unstructured(amount): among the weights still kept, masks the round(amount * kept) of smallest |w| (ties:
/// lower flat index first); repeated calls prune further (0.5 then 0.2 -> 0.6). Pruned weights are set to 0.
/// Throws ValueError (unknown name, amount outside [0, 1]).
void prune_l1(Model& m, const std::string& weight, double amount);
/// prune.global_unstructured(L1Unstructured, amount) over `weights` (empty = Model::weight_names()): one ranking of
/// |w| across all layers.
void prune_global_l1(Model& m, double amount, const std::vector<std::string>& weights = {});
/// prune.remove on every masked weight: folds w * mask into the weight and drops the masks.
void remove_masks(Model& m);

struct LayerSparsity {
  std::string name;
  std::vector<int64_t> shape;
  int64_t zeros = 0, numel = 0;
  double sparsity() const { return numel ? static_cast<double>(zeros) / static_cast<double>(numel) : 0.0; }
};
/// Zeros per prunable weight (whether masked or not).
std::vector<LayerSparsity> sparsity(const Model& m);

/// Structured channel pruning (seed 002's slim(): prune.ln_structured(n=1, dim=0) on layers 0, 3 and 7, biases of
/// pruned channels zeroed too): keeps the out_channels - round(amount * out_channels) channels (neurons) of largest
/// L1 norm, in index order. `masked` is the same-size model with the pruned channels zeroed; `small` the genuinely
/// narrower make_cnn(k1, k2, k3) with the kept rows/columns copied (the Linear after Flatten keeps the columns of
/// each kept channel's H/4*W/4 block). Both compute the same logits up to float rounding.
struct Slim {
  Model masked, small;
};
Slim slim(const Model& m, double amount);

// --- quantisation (torch.ao.quantization; seed 002's quantize()) ---

/// Seed 002's quantize(): m with fake quantisation `q` on, activation ranges calibrated on `indices` (empty =
/// split.train) in one pass (fixed / minmax observers: min/max over all of them) or in batches of 64
/// (moving_average: torch.ao's running average, the first batch taken as is). Weights are quantised during
/// calibration, activations not (seed 002: observe=True). Evaluating the result is post-training quantisation;
/// train() on it is quantisation-aware training. Throws ValueError (bits outside 2..8).
Model quantize(const Model& m, const QuantConfig& q, const Data& d, Backend& backend,
               const std::vector<int64_t>& indices = {});

QParams act_qparams(float lo, float hi, int64_t qmin, int64_t qmax);
/// Symmetric weight scales: max|w| / qmax, one per tensor or one per output channel (dim 0); a zero range gives
/// torch.ao's eps (float32 epsilon) instead of 0.
std::vector<float> weight_scales(const io::NamedTensor& w, int64_t qmax, bool per_channel);

/// An int8 model: int8 weights with their scales, float biases, the activation qparams (uint8 where seed 002's
/// torch.ao model has quint8 activations: the input and after every ReLU).
struct Int8Model {
  CnnSpec spec;
  bool per_channel = false;
  std::vector<io::NamedTensor> weights;  ///< "0.weight" ... int values in [-127, 127] (dtype I8)
  std::vector<std::vector<float>> weight_scales;
  std::vector<io::NamedTensor> biases;   ///< F32
  std::vector<QParams> acts;             ///< kActPoints, over [0, 255]
};
/// Converts an 8-bit fake-quantised model (after PTQ or QAT) to integers. ValueError unless m.quant->bits == 8.
Int8Model to_int8(const Model& m);
/// Writes `q` as safetensors: "<w>" I8, "<w>.scale" F32 ([1] or [O]), "<b>" F32, "act<i>.scale" F32 [1],
/// "act<i>.zero_point" I32 [1]; metadata format "shadergrad-int8/1" and the spec. Atomic.
void save_int8(const std::string& path, const Int8Model& q);
/// Reads save_int8's file. Throws IOError naming the file and the tensor at fault.
Int8Model load_int8(const std::string& path);
/// Integer inference on the CPU: uint8 activations x int8 weights accumulated in int32, rescaled by s_a * s_w in
/// f32, plus the bias, ReLU, requantised to the next activation's uint8 (round half to even), max pools on the
/// integers; returns the float logits (n, classes) of `indices` (empty = all).
std::vector<float> int8_logits_cpu(const Int8Model& q, const Data& d, const std::vector<int64_t>& indices = {});
/// The same model as fake-quantised floats (weights q * s, activation ranges from the qparams, observer fixed, no
/// weight re-quantisation): what runs on a GPU backend through evaluate()/logits().
Model from_int8(const Int8Model& q);
/// Fraction of split.test that `logits` (n_test, classes) classifies right.
double accuracy(const std::vector<float>& logits, const Data& d);

// --- files ---

/// Saves m as safetensors: masked weights as "<w>_orig" + "<w>_mask" (torch.nn.utils.prune's state_dict) unless
/// the masks were removed. Atomic.
void save(const std::string& path, const Model& m);
/// Reads a model saved by save() or by `shadergrad train --save` (a make_cnn checkpoint: "<i>.weight"/"<i>.bias",
/// or "<w>_orig" + "<w>_mask" for masked weights); the widths come from the shapes. Throws IOError naming the file
/// and the tensor at fault.
Model load(const std::string& path);
/// Bytes of a file and of its gzip compression at level 9 (Python's gzip.compress default, as seed 002's
/// file_size(compress=True)). Throws IOError.
struct FileSize {
  int64_t raw = 0, gzipped = 0;
};
FileSize file_size(const std::string& path);

}  // namespace sg::compress
