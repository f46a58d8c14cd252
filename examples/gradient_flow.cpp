// gradient_flow — a classroom demo of vanishing gradients with shadergrad's debug API.
//
// Two 6-layer MLPs learn the 8x8 digits: one with sigmoid activations, one with ReLU. A sg::debug::Session
// watches every train step and records the L2 norm of each parameter's gradient. The sigmoid network's
// gradients shrink layer by layer on the way back to the input (sigmoid'(x) <= 1/4 at every layer), the ReLU
// network's do not: the plots OUT/sigmoid/gradient_flow.png and OUT/relu/gradient_flow.png show it, and
// OUT/*/report.html has every kernel's values and gradients as images.
//
//   build/bin/gradient_flow [OUT_DIR = gradient_flow_out] [STEPS = 20] [BACKEND = auto]
//
// Read it top to bottom: each step is commented for a lesson.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "sg/debug.h"
#include "sg/train.h"

namespace {

/// Trains one network for `steps` steps under a debug session and returns the session's gradient norms.
std::vector<sg::debug::GradientNorms> lesson(const std::string& activation, const std::string& out_dir, int steps,
                                             const std::string& backend_kind) {
  // 1. Data: sklearn's 8x8 digits (600 training samples), pixels in [0, 1].
  sg::data::Dataset train = sg::train::load_split("digits").first;

  // 2. The model: 64 -> 32 -> 32 -> 32 -> 32 -> 32 -> 10, the same seed for both activations.
  sg::nn::Sequential net;
  net.add<sg::nn::Flatten>();
  for (int i = 0; i < 5; ++i) {
    net.add<sg::nn::Linear>(i == 0 ? 64 : 32, 32);
    if (activation == "sigmoid")
      net.add<sg::nn::Sigmoid>();
    else
      net.add<sg::nn::ReLU>();
  }
  net.add<sg::nn::Linear>(32, 10);
  sg::nn::Rng rng(7);
  net.build(rng);

  // 3. The loss of one batch, as a graph: inputs are placeholders fed at every step.
  const int64_t batch = 32;
  sg::Tensor x = sg::input("x", {batch, 1, 8, 8});
  sg::Tensor labels = sg::input("labels", {batch}, sg::DType::i32);
  sg::Tensor loss = sg::cross_entropy(net(x), labels);

  // 4. The train step: forward + backward + SGD update in one Program. sg::debug::make_train_step is
  //    sg::make_train_step plus bookkeeping: it remembers which graph node is the gradient of which parameter.
  auto opt = sg::make_sgd({.lr = 0.5});
  sg::debug::TrainStep step = sg::debug::make_train_step(loss, net.named_parameters(), *opt);

  // 5. Compile for a backend ("auto": the GLES shader backend when it works, else the CPU reference).
  sg::BackendOptions bo;
  bo.kind = backend_kind;
  auto choice = sg::make_backend(bo);
  auto exe = choice.backend->compile(step.program);

  // 6. The debug session: attach it to the executable. Capture only the parameter gradients (the launches that
  //    compute them) and the first layer's weight; everything goes to out_dir as PNG + stats.
  sg::debug::Options dopt;
  dopt.out_dir = out_dir;
  dopt.capture = {"gradients", "1.weight"};
  sg::debug::Session session(dopt);
  session.attach(*exe, step, choice.backend.get());

  // 7. Train: session.run() is exe->run() with every launch observed.
  sg::data::BatchIterator it(train, batch, /*shuffle=*/true, /*seed=*/1, /*drop_last=*/true);
  sg::data::Batch b;
  for (int s = 0; s < steps; ++s) {
    if (!it.next(b)) {
      it.reset(s);
      it.next(b);
    }
    auto out = session.run({{"x", &b.images}, {"labels", &b.labels}});
    if (s == 0 || s == steps - 1) std::cout << fmt::format("  {:7} step {:2}: loss {:.4f}\n", activation, s, out[0][0]);
  }

  // 8. The report: report.html, stats.json and gradient_flow.png (the picture for the slide).
  sg::debug::ReportInfo info;
  info.title = "gradient flow: 6-layer MLP with " + activation;
  info.facts = {{"model", net.describe()}, {"backend", choice.backend->name()}, {"optimizer", opt->describe()}};
  std::string report = session.write_report(info);
  std::cout << fmt::format("  wrote {} and {}/gradient_flow.png\n", report, out_dir);
  return session.gradient_norms();
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = argc > 1 ? argv[1] : "gradient_flow_out";
  int steps = argc > 2 ? std::stoi(argv[2]) : 20;
  std::string backend = argc > 3 ? argv[3] : "auto";
  try {
    auto sig = lesson("sigmoid", out + "/sigmoid", steps, backend);
    auto relu = lesson("relu", out + "/relu", steps, backend);
    // 9. The lesson in numbers: gradient norm of each layer's weight at the last step, input layer first.
    std::cout << "\nL2 norm of d(loss)/d(weight) at the last step (input layer first):\n";
    std::cout << fmt::format("  {:10} {:>12} {:>12}\n", "layer", "sigmoid", "relu");
    for (size_t i = 0; i < sig.size(); ++i) {
      if (sig[i].param.find("weight") == std::string::npos) continue;
      std::cout << fmt::format("  {:10} {:>12.3e} {:>12.3e}\n", sig[i].param, sig[i].l2.back(), relu[i].l2.back());
    }
    double ratio_sig = sig.front().l2.back() / sig[sig.size() - 2].l2.back();
    double ratio_relu = relu.front().l2.back() / relu[relu.size() - 2].l2.back();
    std::cout << fmt::format("\nfirst/last layer gradient ratio: sigmoid {:.2e}, relu {:.2e}\n", ratio_sig, ratio_relu);
    std::cout << "The sigmoid network's early layers get far smaller gradients: they learn slowly (vanishing "
                 "gradients).\n";
    return 0;
  } catch (const sg::Error& e) {
    std::cerr << "gradient_flow: " << e.what() << "\n";
    return 1;
  }
}
