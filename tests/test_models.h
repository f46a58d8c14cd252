// Small models shared by the GLES suites.
#pragma once

#include <cstdint>
#include <vector>

#include "sg/sg.h"
#include "test_util.h"

namespace sg::testing {

/// A 2-layer MLP (relu, cross entropy) on inputs "x" {batch, in} and "labels" {batch} (i32), with parameters
/// w1 {in, hidden}, b1, w2 {hidden, out}, b2 initialised from fixed seeds (randn 1..4).
struct Mlp {
  Tensor x, labels, w1, b1, w2, b2, loss;
  Mlp(int64_t batch, int64_t in, int64_t hidden, int64_t out) {
    x = input("x", {batch, in});
    labels = input("labels", {batch}, DType::i32);
    w1 = param("w1", {in, hidden}, randn(in * hidden, 1, 0.3f));
    b1 = param("b1", {hidden}, randn(hidden, 2, 0.1f));
    w2 = param("w2", {hidden, out}, randn(hidden * out, 3, 0.3f));
    b2 = param("b2", {out}, randn(out, 4, 0.1f));
    Tensor h = relu(matmul(x, w1) + b1);
    loss = cross_entropy(matmul(h, w2) + b2, labels);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
};

}  // namespace sg::testing
