// Compiled programs keyed by batch size, for the training loops of train.cpp (classifiers) and lm_train.cpp (the
// word models): a loop compiles its train or eval step the first time it meets a batch of that size (an epoch's
// last, shorter batch gets a program of its own) and reuses it after.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "sg/backend.h"

namespace sg::train::detail {

class ExecutableCache {
 public:
  /// The executable for `batch`; `make()` builds the program to compile (called once per batch size).
  template <class MakeProgram>
  Executable& get(Backend& backend, int64_t batch, MakeProgram&& make) {
    std::unique_ptr<Executable>& e = by_batch_[batch];
    if (!e) e = backend.compile(std::forward<MakeProgram>(make)());
    return *e;
  }

 private:
  std::map<int64_t, std::unique_ptr<Executable>> by_batch_;
};

}  // namespace sg::train::detail
