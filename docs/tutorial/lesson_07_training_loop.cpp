// Lesson 7: a training loop on real data.
//
// Lessons 1-6 built graphs by hand. Real models use the standard library: sg::nn layers with PyTorch's names,
// shapes and default initialisation, datasets, batching, and make_train_step to turn a loss into one Program
// that runs forward, backward and the optimizer update as GPU kernels, reading back only the loss.
//
// The data: sklearn's copy of the UCI 8x8 handwritten digits (1797 images, Debian package python3-sklearn),
// split 600 train / 400 unused / 797 test as in seed 002.
//
//   cmake --build build --target lesson_07_training_loop && build/bin/lesson_07_training_loop
#include <cstdio>
#include <cstdlib>

#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

int main() {
  sg::data::Dataset all = sg::data::load_digits();
  sg::data::DigitsSplit split = sg::data::digits_split(0);
  sg::data::Dataset train = all.subset(split.train), test = all.subset(split.test);
  std::printf("digits: %lld train, %lld test images of %lldx%lld\n", (long long)train.n, (long long)test.n,
              (long long)all.h, (long long)all.w);

  // The model: Flatten, Linear(64, 32), ReLU, Linear(32, 10) — torch.nn.Sequential's layout and init.
  sg::nn::Sequential model;
  model.add<sg::nn::Flatten>().add<sg::nn::Linear>(64, 32).add<sg::nn::ReLU>().add<sg::nn::Linear>(32, 10);
  sg::nn::Rng rng(0);
  model.build(rng);
  std::printf("model: %s, %lld parameters\n", model.describe().c_str(), (long long)model.num_parameters());

  // One batch size for the whole loop, so one compiled program serves every step (drop_last below).
  const int64_t B = 50;
  sg::Tensor x = sg::input("x", {B, 1, 8, 8});
  sg::Tensor labels = sg::input("labels", {B}, sg::DType::i32);
  sg::Tensor logits = model(x);
  sg::Tensor loss = sg::cross_entropy(logits, labels);
  auto adam = sg::make_adam({.lr = 1e-2});
  sg::Program step = sg::make_train_step(loss, model.parameters(), *adam);

  // Evaluation is another Program over the same parameters: no updates, the logits as output. Programs compiled
  // by one backend share its persistent values, so the eval program sees the trained weights. model.eval() before
  // building its graph, as in torch: layers that differ in training (BatchNorm's running statistics, Dropout) read
  // the mode when the graph is built, so this graph is an inference graph (this MLP has none of them; a model with
  // BatchNorm would otherwise update its statistics in "eval"). model.train() after, for graphs built later.
  sg::Tensor tx = sg::input("x", {test.n, 1, 8, 8});
  sg::Program eval;
  model.eval();
  eval.add_output("pred", sg::argmax(model(tx), 1));
  model.train();

  auto backend = sg::make_backend({.kind = "auto"}).backend;
  auto train_exe = backend->compile(step);
  auto eval_exe = backend->compile(eval);
  std::printf("backend %s: %d kernels per train step\n", backend->name().c_str(), train_exe->kernels_per_step());

  auto accuracy = [&] {
    auto pred = eval_exe->run({{"x", &test.images}})[0];
    int64_t right = 0;
    for (int64_t i = 0; i < test.n; ++i) right += static_cast<int32_t>(pred[i]) == test.labels[i];
    return static_cast<double>(right) / static_cast<double>(test.n);
  };
  const double before = accuracy();
  sg::data::BatchIterator it(train, B, /*shuffle=*/true, /*seed=*/1, /*drop_last=*/true);
  sg::data::Batch batch;
  double first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 30; ++epoch) {
    double sum = 0;
    int n = 0;
    while (it.next(batch)) {
      sum += train_exe->run({{"x", &batch.images}, {"labels", &batch.labels}})[0][0];
      ++n;
    }
    if (epoch == 0) first_loss = sum / n;
    last_loss = sum / n;
    if (epoch % 10 == 9) std::printf("epoch %2d: mean loss %.4f\n", epoch + 1, sum / n);
  }
  const double after = accuracy();
  std::printf("test accuracy: %.4f before training, %.4f after 30 epochs\n", before, after);
  expect(last_loss < 0.5 * first_loss, "the training loss fell by more than half");
  expect(after > 0.9, "test accuracy above 0.9 on 797 unseen digits");
  std::printf("lesson 7 done\n");
  return 0;
}
