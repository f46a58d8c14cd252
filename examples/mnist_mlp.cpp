// mnist_mlp — a 784-128-10 MLP on Fashion-MNIST, written directly with the shadergrad DSL.
//
// This is the PyTorch program below, line for line (the `// torch:` comments name the line each part
// corresponds to). Nothing runs eagerly: the C++ builds a graph once, sg::make_train_step appends the backward
// pass and Adam's update to it, and the backend compiles that graph into fused GLSL ES fragment shaders
// (or runs it on the CPU reference when no GLES device is available).
//
//   model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
//   opt = torch.optim.Adam(model.parameters(), lr=1e-3)
//   for epoch in range(epochs):
//       for x, y in DataLoader(train, batch_size=128, shuffle=True):
//           loss = F.cross_entropy(model(x), y)
//           opt.zero_grad(); loss.backward(); opt.step()
//       accuracy = (model(x_test).argmax(1) == y_test).float().mean()
//
// Usage: mnist_mlp [--epochs N] [--limit N] [--batch N] [--lr X] [--backend auto|gles|cpu]
//   --limit N trains on the first N training images only (CI smoke tests: --epochs 1 --limit 512).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/nn.h"

namespace {

struct Args {
  int64_t epochs = 2, limit = 0, batch = 128;
  double lr = 1e-3;
  std::string backend = "auto";
};

// Options, parsed with CLI11 (as the shadergrad CLI does). Returns false when the program should exit with `code`
// (after --help, or a bad option whose message CLI11 printed).
bool parse_args(int argc, char** argv, Args& a, int& code) {
  CLI::App app{"mnist_mlp: the model of this file trained through generated shaders"};
  app.add_option("--epochs", a.epochs, "epochs")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--limit", a.limit, "train on the first N images only (0 = all)")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", a.batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--lr", a.lr, "Adam learning rate")->check(CLI::Range(1e-12, 10.0));
  app.add_option("--backend", a.backend, "auto | gles | cpu")->check(CLI::IsMember({"auto", "gles", "cpu"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  Args args;
  if (int code = 0; !parse_args(argc, argv, args, code)) return code;

  // torch: train = datasets.FashionMNIST(train=True); test = ... (pixels / 255, shape N x 1 x 28 x 28)
  sg::data::Dataset train = sg::data::load_fashion_mnist(true);
  sg::data::Dataset test = sg::data::load_fashion_mnist(false);
  if (args.limit > 0 && args.limit < train.n) {  // torch: Subset(train, range(limit))
    std::vector<int64_t> first(args.limit);
    std::iota(first.begin(), first.end(), 0);
    train = train.subset(first);
  }

  // torch: nn.Linear(784, 128) and nn.Linear(128, 10). A parameter is a named leaf with its initial value;
  // the init is PyTorch's default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  sg::nn::Rng rng(0);  // torch.manual_seed(0) (same distribution, different generator)
  auto linear = [&](const std::string& name, int64_t in, int64_t out) {
    double k = 1.0 / std::sqrt(static_cast<double>(in));
    sg::Tensor w = sg::param(name + ".weight", {out, in}, rng.uniform(out * in, -k, k));  // (out, in) like torch
    sg::Tensor b = sg::param(name + ".bias", {out}, rng.uniform(out, -k, k));
    return std::pair{w, b};
  };
  auto [w1, b1] = linear("fc1", 784, 128);
  auto [w2, b2] = linear("fc2", 128, 10);
  std::vector<sg::Tensor> params = {w1, b1, w2, b2};  // torch: model.parameters()

  // torch: model(x). Builds graph nodes (no computation); relu(matmul + bias) fuses into one kernel.
  // (Init-captures: clang 14 cannot capture structured bindings.)
  auto model = [w1 = w1, b1 = b1, w2 = w2, b2 = b2](const sg::Tensor& x) {
    sg::Tensor h = sg::relu(sg::matmul(sg::flatten(x, 1), sg::transpose(w1)) + b1);  // relu(fc1(flatten(x)))
    return sg::Tensor(sg::matmul(h, sg::transpose(w2)) + b2);                         // fc2(h)
  };

  // torch: device = "cuda" if available else "cpu". Parameters (and Adam's moments) live in the backend.
  sg::BackendOptions backend_options;
  backend_options.kind = args.backend;
  sg::BackendChoice be = sg::make_backend(backend_options);
  if (!be.note.empty()) fmt::print("{}\n", be.note);
  fmt::print("mnist_mlp: {} train / {} test images, backend {} [{}]\n", train.n, test.n, be.backend->name(),
             be.backend->device());

  // torch: opt = torch.optim.Adam(model.parameters(), lr=lr)
  std::unique_ptr<sg::Optimizer> opt = sg::make_adam({.lr = args.lr});

  // Shapes are static: one compiled program per batch size (the last, partial batch gets its own). Programs
  // built from the same parameter leaves and optimizer share the parameters and Adam state in the backend.
  std::map<int64_t, std::unique_ptr<sg::Executable>> train_steps, eval_steps;
  auto train_step = [&](int64_t n) -> sg::Executable& {
    auto& exe = train_steps[n];
    if (!exe) {
      sg::Tensor x = sg::input("x", {n, 1, 28, 28});
      sg::Tensor y = sg::input("labels", {n}, sg::DType::i32);
      sg::Tensor loss = sg::cross_entropy(model(x), y);  // torch: loss = F.cross_entropy(model(x), y)
      // torch: opt.zero_grad(); loss.backward(); opt.step() — forward, backward and update in one program.
      exe = be.backend->compile(sg::make_train_step(loss, params, *opt));
    }
    return *exe;
  };
  auto eval_step = [&](int64_t n) -> sg::Executable& {
    auto& exe = eval_steps[n];
    if (!exe) {
      sg::Tensor x = sg::input("x", {n, 1, 28, 28});
      sg::Tensor y = sg::input("labels", {n}, sg::DType::i32);
      sg::Program p;  // torch: with torch.no_grad(): (model(x).argmax(1) == y).sum()
      p.add_output("correct", sg::sum(sg::eq(sg::argmax(model(x), 1), y)));
      exe = be.backend->compile(p);
    }
    return *exe;
  };

  // torch: DataLoader(train, batch_size=batch, shuffle=True) — a seeded shuffle per epoch.
  sg::data::BatchIterator loader(train, args.batch, /*shuffle=*/true, /*seed=*/0);
  sg::data::BatchIterator test_loader(test, 1000, /*shuffle=*/false);
  sg::data::Batch b;
  for (int64_t epoch = 1; epoch <= args.epochs; ++epoch) {
    double loss_sum = 0;
    int64_t steps = 0;
    while (loader.next(b)) {  // torch: for x, y in loader:
      // run() feeds the inputs, returns the outputs (the loss) and commits the parameter updates.
      double loss = train_step(b.size).run({{"x", &b.images}, {"labels", &b.labels}})[0][0];
      if (!std::isfinite(loss)) throw sg::Error(fmt::format("training diverged (loss {}); try a smaller --lr", loss));
      loss_sum += loss;
      ++steps;
    }
    double correct = 0;
    while (test_loader.next(b)) correct += eval_step(b.size).run({{"x", &b.images}, {"labels", &b.labels}})[0][0];
    fmt::print("epoch {}/{}: train loss {:.4f}, test accuracy {:.4f}\n", epoch, args.epochs,
               loss_sum / static_cast<double>(steps), correct / static_cast<double>(test.n));
  }
  return 0;
} catch (const sg::Error& e) {
  std::fprintf(stderr, "mnist_mlp: %s\n", e.what());
  return 1;
}
