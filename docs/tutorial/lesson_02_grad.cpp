// Lesson 2: gradients, and how to check them.
//
// sg::grad is reverse-mode automatic differentiation: given a scalar y and the tensors you want gradients
// for, it walks the graph from y backwards and appends, for every node on the way, the nodes of its
// vector-Jacobian product (VJP) — "given the adjoint of my output, here are the adjoints of my inputs". The
// gradients are themselves Tensors of the same graph, so they are fused, compiled and run like any other
// value. There is one table of VJP rules (autodiff/src/autodiff.cpp); a Map body is differentiated
// symbolically, so an elementwise formula you write needs no hand-written derivative.
//
//   cmake --build build --target lesson_02_grad && build/bin/lesson_02_grad
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

int main() {
  // A neuron-sized model: y = sum over i of tanh(w * x_i + b)^2, with x an input of 4 values.
  sg::Tensor x = sg::input("x", {4});
  sg::Tensor w = sg::param("w", {1}, {0.7f});
  sg::Tensor b = sg::param("b", {1}, {-0.2f});
  sg::Tensor u = sg::tanh(w * x + b);
  sg::Tensor y = sg::sum(u * u);

  // grad(y, {w, b}) returns dy/dw and dy/db as Tensors with the shapes of w and b. Nothing is computed yet.
  std::vector<sg::Tensor> g = sg::grad(y, {w, b});
  expect(g.size() == 2 && g[0].node()->shape == sg::Shape{1}, "one gradient per parameter, shaped like it");

  // Evaluate y and both gradients on the CPU reference, feeding the input x.
  const std::vector<double> xs = {-1.0, 0.5, 2.0, 3.0};
  sg::cpu::LeafValues feed = {{x.node().get(), xs}};
  auto out = sg::cpu::evaluate({y.node(), g[0].node(), g[1].node()}, feed);

  // The same derivative by hand (chain rule): d tanh(v)^2 / dv = 2 tanh(v) (1 - tanh(v)^2), and v = w x + b,
  // so dy/dw = sum 2 t (1 - t^2) x and dy/db = sum 2 t (1 - t^2).
  double dw = 0, db = 0;
  for (double xi : xs) {
    const double t = std::tanh(0.7f * xi + -0.2f);
    dw += 2 * t * (1 - t * t) * xi;
    db += 2 * t * (1 - t * t);
  }
  std::printf("autodiff: dy/dw = %.6f, dy/db = %.6f; by hand: %.6f, %.6f\n", out[1][0], out[2][0], dw, db);
  expect(std::abs(out[1][0] - dw) < 1e-5 * std::abs(dw) && std::abs(out[2][0] - db) < 1e-5 * std::abs(db),
         "autodiff's gradients equal the chain rule worked by hand");

  // For a model too large to differentiate by hand, compare against finite differences instead:
  // check_gradients perturbs every element of every tensor in `wrt` by +-h, re-evaluates y in f64 and
  // compares (y(p+h) - y(p-h)) / 2h with the autodiff gradient element by element. Use it whenever you write
  // a custom layer (lesson 3) or a custom VJP.
  sg::GradCheckResult r = sg::cpu::check_gradients(y, {w, b}, feed);
  std::printf("finite differences: %s\n", r.report().c_str());
  expect(r.ok, "central finite differences agree with autodiff (rtol 1e-4)");

  // Gradients of intermediate values work too: dy/du is the adjoint that flows into u (here 2u).
  sg::Tensor du = sg::grad(y, {u})[0];
  auto du_u = sg::cpu::evaluate({du.node(), u.node()}, feed);
  bool two_u = true;
  for (int i = 0; i < 4; ++i) two_u &= std::abs(du_u[0][i] - 2 * du_u[1][i]) < 1e-6;
  expect(two_u, "the adjoint of u is 2u, the derivative of sum(u*u)");
  std::printf("lesson 2 done\n");
  return 0;
}
