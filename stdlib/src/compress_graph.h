// Internal: the graph of a compress::Model (parameters, masks, fake quantisation, observers) shared by training,
// evaluation and calibration.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sg/compress.h"

namespace sg::compress::detail {

/// The leaves a Model's graph reads: trainable parameters, masks and observer ranges (State leaves).
struct Bound {
  std::vector<Tensor> params;            ///< in Model::params order
  std::map<std::string, Tensor> masks;   ///< weight name -> 0/1 State
  std::vector<Tensor> act_lo, act_hi;    ///< kActPoints State leaves of shape {1} (quant only)
  std::vector<Tensor> act_scale, act_zp; ///< kActPoints State leaves of shape {1} (Model::act_given only)
  std::vector<Tensor> act_in;            ///< filled by forward: the activation at each point before quantisation
  std::vector<Update> observer_updates;  ///< filled by forward when observers run (minmax, moving_average)
};
/// Creates the leaves holding m's current values.
Bound bind(const Model& m);

struct ForwardOptions {
  bool quant_acts = true;      ///< fake-quantise activations (calibration: false)
  bool observe = false;        ///< train step: observer updates (minmax / moving_average), used by the forward
};
/// Logits (N, classes) of x (N, C, H, W) through make_cnn with m's masks and quantisation.
Tensor forward(const Model& m, Bound& b, const Tensor& x, const ForwardOptions& opt = {});

/// Copies the backend's current values of b's leaves back into m (params, observer ranges).
void read_back(Model& m, const Bound& b, Backend& backend);

/// Gathers the images of `indices` into a (n, C, H, W) batch.
std::vector<float> gather_images(const data::Dataset& all, const std::vector<int64_t>& indices, size_t begin,
                                 size_t end);

}  // namespace sg::compress::detail
