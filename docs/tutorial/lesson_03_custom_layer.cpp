// Lesson 3: a custom layer with sg::map, and a custom VJP.
//
// Most layers people write are elementwise formulas (activations, gates, normalisation steps). In shadergrad
// such a layer is a C++ generic lambda: sg::map instantiates it ONCE with symbolic scalars, and what the
// lambda returns becomes the body of one Map node — emitted into shaders as it is, and differentiated
// symbolically by autodiff. There is no backward to write, and no extra kernel: the layer fuses with its
// neighbours like the built-in operators do.
//
// Sometimes you want a gradient that is NOT the derivative of the forward formula: quantisation-aware
// training rounds in the forward pass but passes the gradient straight through (the straight-through
// estimator, Bengio et al. 2013). sg::custom_vjp attaches your own VJP rule to any node.
//
//   cmake --build build --target lesson_03_custom_layer && build/bin/lesson_03_custom_layer
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

// Swish / SiLU (Ramachandran et al. 2017): x * sigmoid(beta * x). `auto v` is an sg::Scalar when sg::map calls
// it; the same lambda also works on plain doubles, which is how we check it below.
auto swish = [](auto v) { return v * sg::sigmoid(1.5 * v); };

int main() {
  sg::Tensor x = sg::param("x", {2, 3}, {-2.f, -0.5f, 0.f, 0.25f, 1.f, 3.f});
  sg::Tensor s = sg::map(swish, x);
  std::printf("swish is one node: %s\n", s.node()->label().c_str());
  expect(s.node()->op == sg::Op::Map, "the lambda became one Map node");

  // Values: compare with the formula in double precision.
  auto sv = sg::cpu::evaluate({s.node()}, {})[0];
  const double xv[6] = {-2, -0.5, 0, 0.25, 1, 3};
  double worst = 0;
  for (int i = 0; i < 6; ++i) worst = std::max(worst, std::abs(sv[i] - xv[i] / (1 + std::exp(-1.5 * xv[i]))));
  expect(worst < 1e-6, "forward values equal x * sigmoid(1.5 x)");

  // The gradient comes from differentiating the body symbolically. Check it with finite differences.
  sg::Tensor loss = sg::sum(s * s);
  sg::GradCheckResult r = sg::cpu::check_gradients(loss, {x}, {});
  std::printf("gradient check of the custom layer: %s\n", r.report().c_str());
  expect(r.ok, "autodiff's derivative of the lambda agrees with finite differences");

  // A straight-through estimator: forward rounds to a grid of 0.25, backward passes the adjoint unchanged.
  // The rule receives the node and the adjoint of its output and returns one adjoint per input of the node.
  sg::Tensor q = sg::map([](auto v) { return sg::round(v * 4.0) / 4.0; }, x);
  sg::Tensor q_ste = sg::custom_vjp(q, [](const sg::NodePtr&, const sg::NodePtr& adjoint) {
    return std::vector<sg::NodePtr>{adjoint};  // d q / d x := 1
  });
  sg::Tensor gq = sg::grad(sg::sum(q_ste * 3.0), {x})[0];
  auto qv = sg::cpu::evaluate({q_ste.node(), gq.node()}, {});
  std::printf("rounded: [");
  for (double v : qv[0]) std::printf(" %.2f", v);
  std::printf(" ], gradient: [");
  for (double v : qv[1]) std::printf(" %.1f", v);
  std::printf(" ]\n");
  bool grid = true, straight = true;
  for (int i = 0; i < 6; ++i) {
    grid &= std::abs(qv[0][i] * 4 - std::nearbyint(qv[0][i] * 4)) < 1e-9;
    straight &= qv[1][i] == 3.0;
  }
  expect(grid, "forward values lie on the 0.25 grid");
  expect(straight, "the gradient passed straight through (3 everywhere) instead of round's derivative 0");
  // Without custom_vjp the gradient of round is zero almost everywhere, so nothing would train.
  auto plain = sg::cpu::evaluate({sg::grad(sg::sum(q * 3.0), {x})[0].node()}, {})[0];
  bool zeros = true;
  for (double v : plain) zeros &= v == 0.0;
  expect(zeros, "the plain derivative of round is 0: that is why the STE exists");
  std::printf("lesson 3 done\n");
  return 0;
}
