// Lesson 8: the debug session — stepping through a train step on the GPU, for a class.
//
// A fused GPU program is fast and opaque: lesson 4's train step is a handful of kernels, and most values
// (x@W before the relu, the loss's squares, the backward pass's intermediates) live only in registers.
// sg::debug::Session (sg/debug.h, docs/DEBUGGING.md) attaches to a compiled Executable as its kernel hook and
// records every launch. Its step-through debugger reads commands — from a terminal, or, as here, from a script —
// and answers with a deterministic transcript: a teacher can put the same session on a slide every year.
//
// Every node gets a value: what a fused kernel kept in registers is re-evaluated on the CPU reference from the
// kernel's stored inputs (Options::recompute), and the kernel's stored outputs are checked against the same
// re-evaluation. `shadergrad debug --step` runs the same session on a stdlib model from the command line.
//
//   cmake --build build --target lesson_08_debug_session && build/bin/lesson_08_debug_session
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "sg/debug.h"
#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

// The numbers of the first "  [..]" line after `header` in a transcript (the values `print` and `grad` show).
static std::vector<double> numbers_after(const std::string& t, const std::string& header) {
  std::vector<double> v;
  size_t at = t.find(header);
  if (at == std::string::npos) return v;
  at = t.find("\n  [", at);
  if (at == std::string::npos) return v;
  const size_t end = t.find('\n', at + 1);
  std::string line = t.substr(at + 3, end - at - 3);
  for (char& c : line)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(line);
  for (double d; in >> d;) v.push_back(d);
  return v;
}

// The worst relative difference of the printed numbers to the first ones of `want` (`print` shows at most 8).
static double worst_rel(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.empty() || got.size() > want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1e-4 + std::abs(want[i])));
  return worst;
}

int main() {
  // A tiny MLP: 3 features -> 5 hidden (relu) -> 2 outputs, squared error against a target, one SGD step.
  sg::Tensor x = sg::input("x", {4, 3});
  sg::Tensor target = sg::input("target", {4, 2});
  sg::Tensor W1 = sg::param("W1", {3, 5}, {0.2f, -0.1f, 0.4f, 0.3f, -0.5f, 0.1f, 0.6f, -0.3f, 0.2f, 0.1f,
                                           -0.4f, 0.2f, 0.5f, -0.2f, 0.3f});
  sg::Tensor b1 = sg::param("b1", {5}, {0.1f, 0.0f, -0.1f, 0.2f, 0.05f});
  sg::Tensor W2 = sg::param("W2", {5, 2}, {0.3f, -0.2f, 0.1f, 0.4f, -0.5f, 0.2f, 0.25f, -0.1f, 0.6f, 0.3f});
  sg::Tensor h = sg::relu(sg::matmul(x, W1) + b1);
  sg::Tensor y = sg::matmul(h, W2);
  sg::Tensor loss = sg::mean((y - target) * (y - target));
  auto sgd = sg::make_sgd({.lr = 0.1});

  // debug::make_train_step is sg::make_train_step plus the bookkeeping the debugger needs: which node is the
  // gradient d(loss)/d(t) of which tensor (for the parameters, and for every forward node they feed), and
  // every parameter gradient as a program output, so that it is stored even in a fused plan.
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"W1", W1}, {"b1", b1}, {"W2", W2}}, *sgd);

  // The GLES backend (llvmpipe here, the GPU's driver elsewhere) with its default, fused schedule.
  auto backend = sg::make_backend({.kind = "gles"}).backend;
  auto exe = backend->compile(ts.program);
  std::printf("%s: %d kernels per step\n", backend->name().c_str(), exe->kernels_per_step());

  // The session: no out_dir, so nothing is written to disk (with one, it renders PNGs and report.html).
  sg::debug::Session session;
  session.attach(*exe, ts, backend.get());

  // Node numbers ("n12") are positions in Program::nodes(): stable across runs, so a script can name them.
  const int nh = session.node_number(h.node().get());
  const int ng = session.node_number(ts.param_grads[0].node().get());  // d(loss)/d(W1)
  std::printf("h is n%d, d(loss)/d(W1) is n%d\n", nh, ng);

  // The script a student would type: `list` the launches (one per stored value: a multi-output kernel shows
  // its outputs under one draw), take the first launch (`next`: x@W1, stored), walk the nodes it computed
  // (`step`), take the next launch — it computes h = relu(x@W1 + b1) in registers on its way to h@W2 — and
  // `print` h: the session recomputed it on the CPU reference from the kernel's stored inputs. Then `break`
  // where W1's gradient is computed, `continue` to it, print it (`grad W1`) and `quit`. Commands are echoed
  // after the prompt, so the transcript reads like a terminal session.
  const std::string script = "list\nnext\nstep\nnext\nprint n" + std::to_string(nh) + "\nbreak n" +
                             std::to_string(ng) + "\ncontinue\ngrad W1\nquit\n";
  std::istringstream in(script);
  std::ostringstream out;
  session.set_debugger(in, out);
  const std::vector<float> xs = {1, 2, -1, 0.5f, -1, 2, -2, 1, 0.5f, 0, 3, -1};
  const std::vector<float> ts_ = {1, 0, 0, 1, 1, 1, -1, 0.5f};
  session.run({{"x", &xs}, {"target", &ts_}});
  const std::string t = out.str();
  std::fputs(t.c_str(), stdout);
  expect(session.quit_requested(), "the script ran to its `quit`");

  // Now check the transcript against the CPU reference, computed independently: the same graph's h and
  // sg::grad(loss, {W1}) evaluated in f64 from the same feeds and the parameters' initial values.
  sg::cpu::LeafValues feed = {{x.node().get(), std::vector<double>(xs.begin(), xs.end())},
                              {target.node().get(), std::vector<double>(ts_.begin(), ts_.end())}};
  sg::Tensor gW1 = sg::grad(loss, {W1})[0];
  auto ref = sg::cpu::evaluate({h.node(), gW1.node()}, feed);

  const std::vector<double> printed_h = numbers_after(t, "(sgdb) print n" + std::to_string(nh));
  std::printf("h: %zu numbers printed, worst relative difference to the CPU reference %.2g\n", printed_h.size(),
              worst_rel(printed_h, ref[0]));
  expect(worst_rel(printed_h, ref[0]) < 1e-4, "`print` shows h (its first 8 of 20 values) equal to the CPU reference's");

  const std::vector<double> printed_g = numbers_after(t, "(sgdb) grad W1");
  std::printf("d(loss)/d(W1): %zu numbers printed, worst relative difference %.2g\n", printed_g.size(),
              worst_rel(printed_g, ref[1]));
  expect(worst_rel(printed_g, ref[1]) < 1e-4, "`grad W1` shows what sg::grad(loss, {W1}) gives on the CPU reference (first 8 of 15 values)");
  // The statistics line covers the whole tensor: its l2 norm is sqrt(sum g^2) over all 15 elements.
  double l2_ref = 0;
  for (double g : ref[1]) l2_ref += g * g;
  l2_ref = std::sqrt(l2_ref);
  const size_t l2_at = t.find(" l2 ", t.find("(sgdb) grad W1"));
  const double l2_printed = l2_at == std::string::npos ? NAN : std::strtod(t.c_str() + l2_at + 4, nullptr);
  std::printf("|d(loss)/d(W1)|: printed %.6g, CPU reference %.6g\n", l2_printed, l2_ref);
  expect(std::abs(l2_printed - l2_ref) <= 1e-5 * l2_ref, "and its printed l2 norm is the CPU reference's (6 digits)");
  expect(t.find("recomputed on the CPU reference") != std::string::npos,
         "the transcript says h was not stored by the fused kernel but recomputed");
  expect(t.find("lesson_08_debug_session.cpp:") != std::string::npos,
         "the transcript names this file's source lines for the nodes");
  std::printf("lesson 8 done\n");
  return 0;
}
