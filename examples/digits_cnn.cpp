// digits_cnn — a small CNN on sklearn's 8x8 digits, written directly with the shadergrad DSL.
//
// The PyTorch program it mirrors (the `// torch:` comments name the line each part corresponds to):
//
//   model = nn.Sequential(
//       nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 8x8 -> 4x4
//       nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 4x4 -> 2x2
//       nn.Flatten(), nn.Linear(16 * 2 * 2, 32), nn.ReLU(), nn.Linear(32, 10))   # 3,658 parameters
//   opt = torch.optim.Adam(model.parameters(), lr=2e-3)
//   for epoch in range(epochs):
//       for x, y in DataLoader(train, batch_size=64, shuffle=True):
//           loss = F.cross_entropy(model(x), y)
//           opt.zero_grad(); loss.backward(); opt.step()
//
// The graph is built once; sg::make_train_step appends backward and Adam's update, and the backend compiles it
// into fused GLSL ES fragment shaders (conv + bias + relu is one kernel) or runs it on the CPU reference.
// The split is data::digits_split(0): 600 training and 797 test images (the same as `shadergrad train
// --dataset digits`, so `shadergrad train --dataset digits --model cnn --lr 2e-3 --batch 64` trains this model).
//
// Usage: digits_cnn [--epochs N] [--limit N] [--batch N] [--lr X] [--backend auto|gles|cpu]
//   --limit N trains on the first N of the 600 training images only (CI smoke tests).
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/nn.h"

namespace {

struct Args {
  int64_t epochs = 25, limit = 0, batch = 64;
  double lr = 2e-3;
  std::string backend = "auto";
};

// Options, parsed with CLI11 (as the shadergrad CLI does). Returns false when the program should exit with `code`
// (after --help, or a bad option whose message CLI11 printed).
bool parse_args(int argc, char** argv, Args& a, int& code) {
  CLI::App app{"digits_cnn: the model of this file trained through generated shaders"};
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

  // torch: digits = load_digits(); x = torch.tensor(digits.images)[:, None] / 16; then a seeded 600/797 split.
  sg::data::Dataset all = sg::data::load_digits();
  sg::data::DigitsSplit split = sg::data::digits_split(0);
  if (args.limit > 0 && args.limit < static_cast<int64_t>(split.train.size())) split.train.resize(args.limit);
  sg::data::Dataset train = all.subset(split.train), test = all.subset(split.test);

  // Parameters: named leaves holding their initial values. Each layer's weight and bias get PyTorch's default
  // init U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels * kh * kw (conv) or in_features (linear).
  sg::nn::Rng rng(0);  // torch.manual_seed(0) (same distribution, different generator)
  auto layer = [&](const std::string& name, sg::Shape weight_shape) {
    int64_t out = weight_shape[0], fan_in = sg::numel(weight_shape) / out;
    double k = 1.0 / std::sqrt(static_cast<double>(fan_in));
    sg::Tensor w = sg::param(name + ".weight", weight_shape, rng.uniform(out * fan_in, -k, k));
    sg::Tensor b = sg::param(name + ".bias", {out}, rng.uniform(out, -k, k));
    return std::pair{w, b};
  };
  auto [c1w, c1b] = layer("0", {8, 1, 3, 3});   // torch: nn.Conv2d(1, 8, 3, padding=1), weight (out, in, kh, kw)
  auto [c2w, c2b] = layer("3", {16, 8, 3, 3});  // torch: nn.Conv2d(8, 16, 3, padding=1)
  auto [f1w, f1b] = layer("7", {32, 64});       // torch: nn.Linear(64, 32), weight (out, in)
  auto [f2w, f2b] = layer("9", {10, 32});       // torch: nn.Linear(32, 10)
  std::vector<sg::Tensor> params = {c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b};  // torch: model.parameters()

  // torch: model(x), x (N, 1, 8, 8) -> logits (N, 10). Only builds graph nodes. (Init-captures: clang 14 cannot
  // capture structured bindings.)
  auto model = [c1w = c1w, c1b = c1b, c2w = c2w, c2b = c2b, f1w = f1w, f1b = f1b, f2w = f2w, f2b = f2b](const sg::Tensor& x) {
    sg::Conv2dOptions same{.padding = {1, 1}};
    sg::Tensor h = sg::relu(sg::conv2d(x, c1w, c1b, same));            // torch: relu(conv1(x))     (N, 8, 8, 8)
    h = sg::max_pool2d(h, {.kernel = {2, 2}});                         // torch: max_pool2d(h, 2)   (N, 8, 4, 4)
    h = sg::relu(sg::conv2d(h, c2w, c2b, same));                       // torch: relu(conv2(h))     (N, 16, 4, 4)
    h = sg::max_pool2d(h, {.kernel = {2, 2}});                         // torch: max_pool2d(h, 2)   (N, 16, 2, 2)
    h = sg::flatten(h, 1);                                             // torch: h.flatten(1)       (N, 64)
    h = sg::relu(sg::matmul(h, sg::transpose(f1w)) + f1b);            // torch: relu(fc1(h))       (N, 32)
    return sg::Tensor(sg::matmul(h, sg::transpose(f2w)) + f2b);        // torch: fc2(h)             (N, 10)
  };

  // torch: device = "cuda" if available else "cpu". Parameters (and Adam's moments) live in the backend.
  sg::BackendOptions backend_options;
  backend_options.kind = args.backend;
  sg::BackendChoice be = sg::make_backend(backend_options);
  if (!be.note.empty()) fmt::print("{}\n", be.note);
  fmt::print("digits_cnn: {} train / {} test images, backend {} [{}]\n", train.n, test.n, be.backend->name(),
             be.backend->device());

  std::unique_ptr<sg::Optimizer> opt = sg::make_adam({.lr = args.lr});  // torch: torch.optim.Adam(params, lr)

  // Shapes are static: one compiled program per batch size (the last, partial batch gets its own); they share
  // the parameters and the optimizer state held by the backend.
  std::map<int64_t, std::unique_ptr<sg::Executable>> train_steps, eval_steps;
  auto train_step = [&](int64_t n) -> sg::Executable& {
    auto& exe = train_steps[n];
    if (!exe) {
      sg::Tensor x = sg::input("x", {n, 1, 8, 8});
      sg::Tensor y = sg::input("labels", {n}, sg::DType::i32);
      sg::Tensor loss = sg::cross_entropy(model(x), y);  // torch: F.cross_entropy(model(x), y)
      // torch: opt.zero_grad(); loss.backward(); opt.step() — one program: forward, backward, update.
      exe = be.backend->compile(sg::make_train_step(loss, params, *opt));
    }
    return *exe;
  };
  auto eval_step = [&](int64_t n) -> sg::Executable& {
    auto& exe = eval_steps[n];
    if (!exe) {
      sg::Tensor x = sg::input("x", {n, 1, 8, 8});
      sg::Tensor y = sg::input("labels", {n}, sg::DType::i32);
      sg::Program p;  // torch: with torch.no_grad(): (model(x).argmax(1) == y).sum()
      p.add_output("correct", sg::sum(sg::eq(sg::argmax(model(x), 1), y)));
      exe = be.backend->compile(p);
    }
    return *exe;
  };

  sg::data::BatchIterator loader(train, args.batch, /*shuffle=*/true, /*seed=*/0);  // torch: DataLoader(...)
  sg::data::BatchIterator test_loader(test, test.n, /*shuffle=*/false);              // the test set in one batch
  sg::data::Batch b;
  for (int64_t epoch = 1; epoch <= args.epochs; ++epoch) {
    double loss_sum = 0;
    int64_t steps = 0;
    while (loader.next(b)) {  // torch: for x, y in loader:
      // run() feeds the inputs, returns the outputs (the loss) and commits the updates.
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
  std::fprintf(stderr, "digits_cnn: %s\n", e.what());
  return 1;
}
