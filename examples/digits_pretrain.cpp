// digits_pretrain — the digits page's pretrained MLP (examples/web/digits/pretrained.safetensors, issue 40).
//
// The page (examples/web/digits/) turns mouse strokes into the model's input with runtime/web/preprocess.js: ink
// (darkness > 0.5), the ink's bounding box scaled (aspect kept) so its longer side fills 32 pixels, centred, a
// 32x32 pixel on when >= 1/4 of its footprint is ink, 4x4 blocks counted -> 8x8 counts 0..16, input counts / 16.
// sklearn's digits (UCI optdigits) were normalised by their authors' own program, from pen strokes of another
// thickness; a model trained on them alone is right but unsure on many mouse-drawn digits. So this program trains
// `shadergrad train --model mlp --dataset digits`'s model (Flatten, Linear(64,128), ReLU, Linear(128,10), the same
// structure hash as the page's bundle) on the 1000 non-test digits of data::digits_split(0) (600 train + 400 pool;
// --no-pool: the 600) plus, per digit, `--copies` augmented copies made as the page would see them:
//   1. the 8x8 values upsampled to a 32x32 ink density (bilinear between block centres);
//   2. a random affine map: rotation +-`--rotate` degrees, shear +-0.2, horizontal scale `--narrow`..1.25;
//   3. ink where the density is above a random threshold 0.3..`--thin` (thicker or thinner strokes: the page's
//      strokes are thinner than most of the dataset's), on a 2x finer grid;
//   4. for a `--redraw` fraction of the copies: the ink thinned to its skeleton (Zhang & Suen) and drawn again with a
//      round pen 2.5..4.5 pixels of the final 32x32 wide, as the page's 18-pixel line is on a 130..230-pixel digit;
//   5. preprocess.js's steps 2-4 on that ink (bounding box, longer side to 32, centred, coverage 1/4, 4x4 counts).
// Adam (lr 1e-3), batch 32, shuffled every epoch. Everything is seeded (std::mt19937_64(--seed) for the copies,
// nn::Rng(--seed) for the init, the BatchIterator's seed for the order): the CPU backend gives the same checkpoint
// bit for bit. The 797 test digits are never augmented nor trained on: their accuracy is printed and stored in the
// checkpoint's metadata (test_accuracy, with the command line as `recipe`). No drawing of the page's test
// (tests/web_app_check.mjs) is used here.
//
// The shipped checkpoint: build/bin/digits_pretrain --out examples/web/digits/pretrained.safetensors
// (the defaults below; examples/web/README.md).
//
// Usage: digits_pretrain --out FILE [--epochs N] [--copies K] [--batch N] [--lr X] [--rotate DEG] [--narrow S] [--thin T]
//                        [--redraw F] [--no-pool] [--seed S] [--backend auto|gles|cpu]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/nn.h"
#include "sg/train.h"

namespace {

struct Args {
  std::string out;
  int64_t epochs = 60, copies = 10, batch = 32;
  bool pool = true;
  double lr = 1e-3, rotate = 12, narrow = 0.8, thin = 0.9, redraw = 0.25;
  uint64_t seed = 0;
  std::string backend = "cpu";
};

/// Uniform in [lo, hi) from the top 53 bits (no implementation-defined std distributions: the same on every platform).
double uniform(std::mt19937_64& g, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(g() >> 11) * 0x1.0p-53;
}

/// preprocess.js's normalise32 and blockCounts: `ink` (w x h, 0/1) -> the 64 inputs (counts / 16); all zero when
/// there is no ink.
std::vector<float> page_counts(const std::vector<uint8_t>& ink, int w, int h, double coverage = 0.25) {
  int x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (ink[y * w + x]) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  std::vector<float> counts(64, 0.0f);
  if (x1 < 0) return counts;
  const double bw = x1 - x0 + 1, bh = y1 - y0 + 1, scale = 32 / std::max(bw, bh);
  const double ox = (32 - bw * scale) / 2, oy = (32 - bh * scale) / 2;
  for (int v = 0; v < 32; ++v)
    for (int u = 0; u < 32; ++u) {
      const double sx0 = x0 + (u - ox) / scale, sx1 = x0 + (u + 1 - ox) / scale;
      const double sy0 = y0 + (v - oy) / scale, sy1 = y0 + (v + 1 - oy) / scale;
      const int ix0 = std::max(x0, static_cast<int>(std::floor(sx0))), ix1 = std::min(x1 + 1, static_cast<int>(std::ceil(sx1)));
      const int iy0 = std::max(y0, static_cast<int>(std::floor(sy0))), iy1 = std::min(y1 + 1, static_cast<int>(std::ceil(sy1)));
      double on = 0, all = 0;
      for (int y = iy0; y < iy1; ++y)
        for (int x = ix0; x < ix1; ++x) {
          const double a = (std::min(x + 1.0, sx1) - std::max(double(x), sx0)) * (std::min(y + 1.0, sy1) - std::max(double(y), sy0));
          if (a <= 0) continue;
          all += a;
          on += a * ink[y * w + x];
        }
      if (all > 0 && on >= coverage * (sx1 - sx0) * (sy1 - sy0)) counts[(v / 4) * 8 + u / 4] += 1.0f / 16;
    }
  return counts;
}

/// Zhang & Suen's thinning ("A fast parallel algorithm for thinning digital patterns", CACM 1984): `ink` (w x w,
/// 0/1) reduced in place to a one-pixel-wide skeleton. The border pixels must be 0.
void thin_to_skeleton(std::vector<uint8_t>& ink, int w) {
  std::vector<int> del;
  for (bool changed = true; changed;) {
    changed = false;
    for (int pass = 0; pass < 2; ++pass) {
      del.clear();
      for (int y = 1; y + 1 < w; ++y)
        for (int x = 1; x + 1 < w; ++x) {
          if (!ink[y * w + x]) continue;
          // P2..P9 clockwise from north
          const int p[8] = {ink[(y - 1) * w + x], ink[(y - 1) * w + x + 1], ink[y * w + x + 1], ink[(y + 1) * w + x + 1],
                            ink[(y + 1) * w + x], ink[(y + 1) * w + x - 1], ink[y * w + x - 1], ink[(y - 1) * w + x - 1]};
          int b = 0, a = 0;
          for (int k = 0; k < 8; ++k) b += p[k], a += !p[k] && p[(k + 1) % 8];
          if (b < 2 || b > 6 || a != 1) continue;
          if (pass == 0 ? ((p[0] && p[2] && p[4]) || (p[2] && p[4] && p[6])) : ((p[0] && p[2] && p[6]) || (p[0] && p[4] && p[6]))) continue;
          del.push_back(y * w + x);
        }
      for (int i : del) ink[i] = 0;
      changed = changed || !del.empty();
    }
  }
}

/// The skeleton redrawn as a pen (a mouse) draws: every pixel within `radius` of a skeleton pixel is ink.
std::vector<uint8_t> redraw(const std::vector<uint8_t>& skeleton, int w, double radius) {
  std::vector<uint8_t> out(skeleton.size());
  const int r = static_cast<int>(std::ceil(radius));
  for (int y = 0; y < w; ++y)
    for (int x = 0; x < w; ++x) {
      if (!skeleton[y * w + x]) continue;
      for (int dy = -r; dy <= r; ++dy)
        for (int dx = -r; dx <= r; ++dx)
          if (dx * dx + dy * dy <= radius * radius && y + dy >= 0 && y + dy < w && x + dx >= 0 && x + dx < w)
            out[(y + dy) * w + x + dx] = 1;
    }
  return out;
}

/// One augmented copy of a digit (64 values counts / 16), steps 1-5 of the header.
std::vector<float> augment(const float* x, std::mt19937_64& g, double rotate_deg, double narrow, double thin,
                           double redraw_p) {
  const double pi = 3.14159265358979323846;
  const double th = uniform(g, -rotate_deg, rotate_deg) * pi / 180, shear = uniform(g, -0.2, 0.2);
  const double sx = std::exp(uniform(g, std::log(narrow), std::log(1.25))), t = uniform(g, 0.3, thin);
  // forward map of the 32x32 frame (centred at 16, 16): p' = R(th) * [[sx, shear], [0, 1]] * p; sampled backwards
  const double c = std::cos(th), s = std::sin(th);
  const double a = c * sx, b = c * shear - s, cc = s * sx, d = s * shear + c, det = a * d - b * cc;
  const double ia = d / det, ib = -b / det, ic = -cc / det, id = a / det;
  auto density = [&](double u, double v) {  // bilinear between block centres (4i + 2), 0 outside the frame
    if (u < 0 || v < 0 || u >= 32 || v >= 32) return 0.0;
    const double fu = std::clamp((u - 2) / 4, 0.0, 7.0), fv = std::clamp((v - 2) / 4, 0.0, 7.0);
    const int i0 = std::min(static_cast<int>(fu), 6), j0 = std::min(static_cast<int>(fv), 6);
    const double du = fu - i0, dv = fv - j0;
    return (1 - dv) * ((1 - du) * x[j0 * 8 + i0] + du * x[j0 * 8 + i0 + 1]) +
           dv * ((1 - du) * x[(j0 + 1) * 8 + i0] + du * x[(j0 + 1) * 8 + i0 + 1]);
  };
  constexpr int W = 128;  // the canvas: [-32, 32) around the centre, 2 pixels per unit of the 32x32 frame
  std::vector<uint8_t> ink(W * W);
  for (int y = 0; y < W; ++y)
    for (int xx = 0; xx < W; ++xx) {
      const double px = (xx + 0.5) / 2 - 32, py = (y + 0.5) / 2 - 32;
      ink[y * W + xx] = density(ia * px + ib * py + 16, ic * px + id * py + 16) > t;
    }
  // step 4: with probability redraw_p, the ink's skeleton redrawn with a round pen as wide as 2.5..4.5 pixels of the
  // page's 32x32 (its 18-pixel line on a digit 130..230 pixels tall)
  const bool pen = uniform(g, 0, 1) < redraw_p;
  const double width32 = uniform(g, 2.5, 4.5);
  if (pen) {
    int x0 = W, y0 = W, x1 = -1, y1 = -1;
    for (int y = 0; y < W; ++y)
      for (int xx = 0; xx < W; ++xx)
        if (ink[y * W + xx]) x0 = std::min(x0, xx), x1 = std::max(x1, xx), y0 = std::min(y0, y), y1 = std::max(y1, y);
    if (x1 >= 0) {
      const double side = std::max(x1 - x0, y1 - y0) + 1;
      thin_to_skeleton(ink, W);
      // the pen's width in canvas pixels: width32 of 32 after the box (skeleton + pen) is scaled to 32
      const double wc = width32 * side / (32 - width32);
      ink = redraw(ink, W, wc / 2);
    }
  }
  return page_counts(ink, W, W);
}

}  // namespace

int main(int argc, char** argv) try {
  Args args;
  CLI::App app{"digits_pretrain: the digits page's pretrained MLP, trained with the page's preprocessing as augmentation"};
  app.add_option("--out", args.out, "checkpoint to write (safetensors)")->required();
  app.add_option("--epochs", args.epochs, "epochs")->check(CLI::Range(int64_t{1}, int64_t{100000}));
  app.add_option("--copies", args.copies, "augmented copies per training digit (0: none)")->check(CLI::Range(int64_t{0}, int64_t{1000}));
  app.add_option("--batch", args.batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--lr", args.lr, "Adam learning rate")->check(CLI::Range(1e-12, 10.0));
  app.add_option("--rotate", args.rotate, "largest rotation, degrees")->check(CLI::Range(0.0, 90.0));
  app.add_option("--narrow", args.narrow, "smallest horizontal scale (the largest is 1.25)")->check(CLI::Range(0.1, 1.25));
  app.add_option("--thin", args.thin, "largest ink threshold (thinnest strokes; the smallest is 0.3)")->check(CLI::Range(0.3, 0.95));
  app.add_option("--redraw", args.redraw, "fraction of the copies redrawn with a round pen along their skeleton")->check(CLI::Range(0.0, 1.0));
  app.add_flag("--pool,!--no-pool", args.pool, "train on the 400 pool digits of digits_split(0) too (default; never the test split)");
  app.add_option("--seed", args.seed, "seed of the init, the augmentation and the shuffling");
  app.add_option("--backend", args.backend, "auto | gles | cpu")->check(CLI::IsMember({"auto", "gles", "cpu"}));
  CLI11_PARSE(app, argc, argv);

  const sg::data::Dataset all = sg::data::load_digits();
  sg::data::DigitsSplit split = sg::data::digits_split(0);
  if (args.pool) split.train.insert(split.train.end(), split.pool.begin(), split.pool.end());
  const sg::data::Dataset base = all.subset(split.train), test = all.subset(split.test);
  sg::data::Dataset train = base;  // the 600 digits, then their augmented copies
  std::mt19937_64 g(args.seed);
  for (int64_t k = 0; k < args.copies; ++k)
    for (int64_t i = 0; i < base.n; ++i) {
      const auto v = augment(base.sample(i), g, args.rotate, args.narrow, args.thin, args.redraw);
      train.images.insert(train.images.end(), v.begin(), v.end());
      train.labels.push_back(base.labels[i]);
    }
  train.n = static_cast<int64_t>(train.labels.size());

  sg::BackendOptions bo;
  bo.kind = args.backend;
  sg::BackendChoice be = sg::make_backend(bo);
  auto model = sg::nn::make_model("mlp", 1, 8, 8);
  sg::nn::Rng rng(args.seed);
  model->build(rng);
  auto opt = sg::make_adam({.lr = args.lr});
  std::map<int64_t, std::unique_ptr<sg::Executable>> steps, evals;
  auto step = [&](int64_t n) -> sg::Executable& {
    auto& e = steps[n];
    if (!e) e = be.backend->compile(sg::make_train_step(sg::train::batch_loss(*model, n, 1, 8, 8).loss, model->parameters(), *opt));
    return *e;
  };
  auto accuracy = [&](const sg::data::Dataset& ds) {
    auto& e = evals[ds.n];
    if (!e) {
      sg::Tensor x = sg::input("x", {ds.n, 1, 8, 8});
      sg::Tensor y = sg::input("labels", {ds.n}, sg::DType::i32);
      sg::Program p;
      p.add_output("correct", sg::sum(sg::eq(sg::argmax((*model)(x), 1), y)));
      e = be.backend->compile(p);
    }
    sg::data::BatchIterator it(ds, ds.n, /*shuffle=*/false);
    sg::data::Batch b;
    it.next(b);
    return e->run({{"x", &b.images}, {"labels", &b.labels}})[0][0] / static_cast<double>(ds.n);
  };
  fmt::print("digits_pretrain: {} training digits ({} + {} augmented copies each), {} test digits, backend {}\n",
             train.n, base.n, args.copies, test.n, be.backend->name());
  sg::data::BatchIterator it(train, args.batch, /*shuffle=*/true, args.seed);
  sg::data::Batch b;
  double acc = 0;
  for (int64_t epoch = 1; epoch <= args.epochs; ++epoch) {
    it.reset(epoch - 1);
    double sum = 0;
    int64_t n = 0;
    while (it.next(b)) {
      const double loss = step(b.size).run({{"x", &b.images}, {"labels", &b.labels}})[0][0];
      if (!std::isfinite(loss)) throw sg::Error(fmt::format("training diverged (loss {}); try a smaller --lr", loss));
      sum += loss, ++n;
    }
    acc = accuracy(test);
    if (epoch % 10 == 0 || epoch == args.epochs)
      fmt::print("epoch {}/{}: train loss {:.4f}, test accuracy {:.4f}\n", epoch, args.epochs, sum / n, acc);
  }
  const std::string recipe = fmt::format("digits_pretrain --epochs {} --copies {} --batch {} --lr {} --rotate {} --narrow {} --thin {} --redraw {} --seed {}{}",
                                         args.epochs, args.copies, args.batch, args.lr, args.rotate, args.narrow, args.thin, args.redraw, args.seed,
                                         args.pool ? "" : " --no-pool");
  sg::train::save_checkpoint(args.out, *model, *be.backend, "mlp",
                             {{"dataset", "digits"}, {"split", "ours"}, {"test_accuracy", fmt::format("{:.4f}", acc)},
                              {"recipe", recipe}});
  fmt::print("saved {} (test accuracy {:.4f}; {})\n", args.out, acc, recipe);
  return 0;
} catch (const sg::Error& e) {
  std::fprintf(stderr, "digits_pretrain: %s\n", e.what());
  return 1;
}
