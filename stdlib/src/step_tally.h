// What the training loops of train.cpp (classifiers) and lm_train.cpp (the word models) add up over an epoch's
// train steps, read from each step's outputs in sg::make_train_step's order: "loss", then "grad_norm" when the step
// clips, and "lr" last when it has a schedule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg::train::detail {

struct StepTally {
  bool clipped = false;    ///< the step outputs "grad_norm" (TrainStepOptions::output_grad_norm)
  bool scheduled = false;  ///< the step outputs "lr" last (TrainStepOptions::output_lr)
  double lr = 0;           ///< the last step's learning rate (the constant one without a schedule)
  double loss_sum = 0, norm_sum = 0;
  int64_t steps = 0;

  /// Adds one step's outputs. Throws sg::Error when its loss is not finite, naming `epoch` and the step (1-based).
  void add(const std::vector<std::vector<float>>& out, int64_t epoch) {
    const double loss = out[0][0];
    if (clipped) norm_sum += out[1][0];
    if (scheduled) lr = out.back()[0];
    if (!std::isfinite(loss))
      throw Error(fmt::format("training diverged: loss is {} at epoch {} step {} (try a smaller --lr)", loss, epoch,
                              steps + 1));
    loss_sum += loss;
    ++steps;
  }
  double mean_loss() const { return loss_sum / static_cast<double>(std::max<int64_t>(steps, 1)); }
  /// The mean gradient norm before clipping, -1 when the step does not clip (EpochStats::grad_norm).
  double mean_grad_norm() const { return clipped ? norm_sum / static_cast<double>(std::max<int64_t>(steps, 1)) : -1.0; }
};

}  // namespace sg::train::detail
