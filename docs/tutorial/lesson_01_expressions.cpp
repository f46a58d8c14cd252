// Lesson 1: expressions, and the one Map node they become.
//
// This lesson shows how shadergrad sees the arithmetic you write. Build and run it with the rest of the
// tutorial (ctest -R lesson_ runs every lesson; each one checks its own output and fails loudly if shadergrad
// stops doing what the prose says):
//
//   cmake --build build --target lesson_01_expressions && build/bin/lesson_01_expressions
//
// One header brings in everything a program needs.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sg/shadergrad.h"

// A tiny check used by every lesson: prints what was compared and exits non-zero when it is false.
static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

int main() {
  // A Tensor is a handle to a node of a graph. Leaves are the values you provide: `param` is a trainable
  // parameter with an initial value, `input` is data fed at every run (a batch of images, labels).
  // Shapes are row-major, like PyTorch's; data is given as a flat list of floats.
  sg::Tensor a = sg::param("a", {2, 3}, {1, 2, 3, 4, 5, 6});
  sg::Tensor b = sg::param("b", {3}, {10, 20, 30});

  // Now some arithmetic. `a * b` broadcasts b over a's rows (NumPy rules), `sg::exp` and `/ 2.0` act on
  // every element. In most frameworks each of the four operations below would be its own tensor and, on a
  // GPU, its own kernel launch with its own trip through memory.
  //
  // In shadergrad the operators build a compile-time *expression template*: the type of the right-hand side
  // is something like BinaryExpr<Add, BinaryExpr<Mul, Tensor, Tensor>, BinaryExpr<Div, UnaryExpr<Exp,
  // Tensor>, double>>. Nothing has been computed and no node has been made yet.
  auto expr = a * b + sg::exp(a) / 2.0;

  // Assigning the expression to a Tensor *materialises* it: the whole tree becomes ONE graph node of op Map,
  // whose body is a scalar expression over the distinct tensors it reads (a0 = a, a1 = b).
  sg::Tensor c = expr;
  const sg::Node& n = *c.node();
  std::printf("c is %s, shape %s, %zu inputs\n", n.label().c_str(), sg::shape_str(n.shape).c_str(),
              n.inputs.size());
  expect(n.op == sg::Op::Map, "four elementwise operations became one Map node");
  expect(n.inputs.size() == 2, "the Map reads its two distinct tensors, a and b, once each");
  expect(n.shape == sg::Shape{2, 3}, "b was broadcast over a's rows: the result is 2x3");

  // The body is what will be printed into a shader, and what autodiff differentiates symbolically.
  std::printf("its body: %s\n", sg::sexpr_str(n.body).c_str());

  // Nodes also remember where you created them (this file and line): error messages and generated shaders
  // name it, so a kernel can be traced back to the line of your model that produced it.
  std::printf("created at %s\n", n.describe().c_str());
  expect(n.describe().find("lesson_01_expressions.cpp") != std::string::npos,
         "the node carries the user's source file and line");

  // To see values, evaluate the graph. The CPU reference executor is the ground truth of every backend:
  // it computes in f64 and rounds each stored value to f32, as a GPU stores it.
  std::vector<double> got = sg::cpu::evaluate({c.node()}, {})[0];
  std::printf("c = [");
  for (double v : got) std::printf(" %.4f", v);
  std::printf(" ]\n");

  // Check it against the same formula computed by hand, element by element.
  const double av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
  double worst = 0;
  for (int i = 0; i < 6; ++i) {
    const double want = av[i] * bv[i % 3] + std::exp(av[i]) / 2.0;
    worst = std::max(worst, std::abs(got[i] - want) / std::abs(want));
  }
  expect(worst < 1e-6, "the values equal a*b + exp(a)/2 computed by hand (relative error < 1e-6)");

  // A materialised Tensor can be used in further expressions; those build a new Map node reading c.
  // Lesson 4 shows that the scheduler later decides again what to fuse: a cheap Map read by one consumer is
  // recomputed inside it rather than stored.
  sg::Tensor d = sg::relu(c - 50.0);
  expect(d.node()->op == sg::Op::Map && d.node()->inputs.front() == c.node(), "relu(c - 50) is a new Map over c");

  // Leaves are never merged by value: two parameters that both hold 3.0 are two different nodes (two
  // different things to train).
  sg::Tensor p = sg::param("p", {1}, {3}), q = sg::param("q", {1}, {3});
  expect(p.node() != q.node(), "two leaves with equal values stay two nodes");
  std::printf("lesson 1 done\n");
  return 0;
}
