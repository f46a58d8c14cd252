// Tests for the character language models (sg/lm.h, `shadergrad train --model charlm|lstm`, `shadergrad sample`):
// the words dataset (filter, split, rows), the batch order shared with bench/charlm_torch.py, a few train steps of
// charlm and lstm on every native backend against the CPU reference, a short charlm run's validation loss against a
// bound measured with the torch script, the sampler (deterministic per seed) and the bad-input errors.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/error.h"
#include "sg/lm.h"
#include "sg/safetensors.h"
#include "sg/train.h"

#ifndef SG_CLI
#error "test_charlm needs SG_CLI (the shadergrad binary's path), defined in tests/CMakeLists.txt"
#endif

using Catch::Matchers::Contains;
using namespace sg;

namespace {

const data::Words& words() {
  static const data::Words w = data::load_words();
  return w;
}

/// A small charlm / lstm: the same structure as the defaults, fewer and narrower layers (fast on llvmpipe).
lm::LmSpec tiny(const std::string& model) {
  lm::LmSpec s;
  s.model = model;
  s.context = 12;
  s.d_model = 16;
  s.layers = 2;
  s.heads = 2;
  s.hidden = 16;
  return s;
}

}  // namespace

TEST_CASE("words dataset: load_words keeps lower-cased a-z words once and splits them by fnv1a64", "[charlm][data]") {
  const data::Words& w = words();
  // Debian 12's wamerican 2020.12.07-2 (the counts datasets.h documents; the torch script computes the same)
  CHECK(w.train.size() == 66112);
  CHECK(w.validation.size() == 7333);
  std::set<std::string> all;
  size_t bad = 0, misplaced = 0;
  for (const auto* part : {&w.train, &w.validation}) {
    CHECK(std::is_sorted(part->begin(), part->end()));
    for (const std::string& s : *part) {
      bad += s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
      misplaced += data::word_is_validation(s) != (part == &w.validation);
      all.insert(s);
    }
  }
  CHECK(bad == 0);
  CHECK(misplaced == 0);
  CHECK(all.size() == w.train.size() + w.validation.size());  // disjoint, no duplicates
  CHECK(all.count("aaron") == 1);                               // "Aaron" lower-cased
  CHECK(all.count("aaron's") == 0);                             // possessives dropped
  // FNV-1a 64 reference values (the published test vectors: "" and "a")
  CHECK(data::fnv1a64("") == 14695981039346656037ull);
  CHECK(data::fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  // deterministic: a second load gives the same split
  const data::Words again = data::load_words();
  CHECK(again.train == w.train);
  CHECK(again.validation == w.validation);
  CHECK_THROWS_WITH(data::load_words("/nonexistent/words"), Contains("/nonexistent/words"));
  sg::testing::TempDir d;
  sg::testing::write_file(d / "w.txt", "it's\n\n42\nno way\n");
  CHECK_THROWS_WITH(data::load_words(d / "w.txt"), Contains("no word made only of the letters a-z"));
  sg::testing::write_file(d / "w.txt", "Hello\nhello\nHELLO\nit's\nworld\n");
  const data::Words small = data::load_words(d / "w.txt");
  CHECK(small.train.size() + small.validation.size() == 2);
}

TEST_CASE("words dataset: make_word_rows pads and masks one word per row", "[charlm][data]") {
  const data::WordRows r = data::make_word_rows({"ab", "abcdef"}, 4);
  REQUIRE(r.n == 2);
  // "ab": s = [0, 1, 2, 0] -> x = 0 1 2 0(pad), y = 1 2 0 0(pad), mask 1 1 1 0
  CHECK(r.x == std::vector<float>{0, 1, 2, 0, 0, 1, 2, 3});
  CHECK(r.y == std::vector<float>{1, 2, 0, 0, 1, 2, 3, 4});  // "abcdef" cut after 4 targets (no end predicted)
  CHECK(r.mask == std::vector<float>{1, 1, 1, 0, 1, 1, 1, 1});
  CHECK(r.targets() == 7);
  const data::WordRows t = data::take_rows(r, std::vector<int64_t>{1, 1});
  CHECK(t.x == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK_THROWS_AS(data::take_rows(r, std::vector<int64_t>{2}), ValueError);
  CHECK_THROWS_WITH(data::make_word_rows({"ok", "no-"}, 4), Contains("'-' at position 3"));
  CHECK_THROWS_AS(data::make_word_rows({"a"}, 1), ValueError);
  CHECK(data::char_token('.') == 0);
  CHECK(data::char_token('z') == 26);
  CHECK(data::char_token('A') == -1);
  CHECK(data::token_char(1) == 'a');
  CHECK_THROWS_AS(data::token_char(27), ValueError);
  // the batch order of epoch e is seeded_permutation(n, seed + e - 1); bench/charlm_torch.py reimplements
  // std::mt19937_64 and prints [7, 2, 0, 8, 3, 9, 6, 1, 5, 4] for seeded_permutation(10, 0)
  CHECK(data::seeded_permutation(10, 0) == std::vector<int64_t>{7, 2, 0, 8, 3, 9, 6, 1, 5, 4});
}

TEST_CASE("charlm: CharTransformer and CharLSTM have torch's state_dict names and refuse bad specs", "[charlm]") {
  auto m = lm::make_lm(lm::LmSpec{});
  nn::Rng rng(0);
  m->build(rng);
  CHECK(m->num_parameters() == 105627);  // bench/charlm_torch.py's CharTransformer(27, 32, 64, 2, 4, 256)
  std::vector<std::string> names;
  for (auto& [n, t] : m->state_dict()) names.push_back(n);
  CHECK(names.front() == "tok_emb.weight");
  CHECK(std::find(names.begin(), names.end(), "blocks.1.self_attn.in_proj_weight") != names.end());
  CHECK(names.back() == "head.bias");
  lm::LmSpec ls;
  ls.model = "lstm";
  auto l = lm::make_lm(ls);
  l->build(rng);
  CHECK(l->num_parameters() == 236635);  // CharLSTM(27, 64, 128, 2)
  lm::LmSpec bad;
  bad.heads = 3;
  CHECK_THROWS_WITH(lm::make_lm(bad), Contains("divisible by --heads 3"));
  bad = {};
  bad.model = "gpt";
  CHECK_THROWS_WITH(lm::make_lm(bad), Contains("unknown language model 'gpt'"));
  CHECK_THROWS_WITH(m->forward(input("x", {2, 33}, DType::i32)), Contains("CharTransformer") && Contains("33"));
  CHECK_THROWS_WITH(m->forward(input("x", {2, 8})), Contains("must be i32"));
  // the metadata round trip that `shadergrad sample` relies on
  std::map<std::string, std::string> meta;
  for (auto& [k, v] : ls.metadata()) meta[k] = v;
  const lm::LmSpec back = lm::LmSpec::from_metadata(meta, "f.safetensors");
  CHECK(back.describe() == ls.describe());
  meta.erase("hidden");
  CHECK_THROWS_WITH(lm::LmSpec::from_metadata(meta, "f.safetensors"), Contains("no 'hidden'"));
  meta["hidden"] = "12x";
  CHECK_THROWS_WITH(lm::LmSpec::from_metadata(meta, "f.safetensors"), Contains("'12x', not a whole number"));
}

namespace {

/// Losses of `steps` AdamW steps (warmup-cosine, clipping) of `spec` on one batch of training words, on `kind`.
std::vector<double> lm_losses(const lm::LmSpec& spec, const std::string& kind, int steps) {
  auto be = sg::testing::native_backend(kind);
  auto model = lm::make_lm(spec);
  nn::Rng rng(3);
  model->build(rng);
  const int64_t batch = 8;
  auto opt = make_adamw({.lr = 1e-2, .schedule = LRSchedule::warmup_cosine(1, steps, 1e-3)});
  lm::LmLoss l = lm::lm_loss(*model, spec, batch);
  auto exe = be->compile(make_train_step(l.loss, model->parameters(), *opt, TrainStepOptions{.clip_grad_norm = 1.0}));
  std::vector<double> losses;
  // one batch, every step (the loss must fall): words 1000, 2000, ... (long and short ones; some cut at the context)
  std::vector<std::string> w;
  for (int64_t i = 0; i < batch; ++i) w.push_back(words().train[static_cast<size_t>(1000 + 7919 * i)]);
  const data::WordRows rows = data::make_word_rows(w, spec.context);
  for (int s = 0; s < steps; ++s) {
    losses.push_back(exe->run({{"x", &rows.x}, {"y", &rows.y}, {"mask", &rows.mask}})[0][0]);
  }
  return losses;
}

}  // namespace

TEST_CASE("charlm: train steps of charlm and lstm on every native backend equal the CPU reference",
          "[charlm][gles][vulkan]") {
  for (const char* model : {"charlm", "lstm"}) {
    const lm::LmSpec spec = tiny(model);
    const std::vector<double> ref = lm_losses(spec, "cpu", 3);
    INFO(model << " cpu losses " << ref[0] << " " << ref[1] << " " << ref[2]);
    CHECK(ref[2] < ref[0]);
    for (const char* kind : sg::testing::kNativeBackends) {
      if (std::string(kind) == "cpu") continue;
      const std::vector<double> got = lm_losses(spec, kind, 3);
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO(model << " on " << kind << " step " << i);
        CHECK(got[i] == Approx(ref[i]).epsilon(1e-3));
      }
    }
  }
}

// The bound: bench/charlm_torch.py with the same settings (--d-model 16 --heads 2 --context 12 --train-limit 2048
// --test-limit 512 --epochs 1 --batch 64 --lr 1e-2 --min-lr 1e-3 --warmup-steps 4) gave 2.5110, 2.5050 and 2.5103
// nats/char for --seed 0, 1, 2 (torch 1.13, Debian's); ours must stay below the worst of them plus 2 % (issue 37's
// tolerance): 2.5110 * 1.02 = 2.561. An untrained model is at ln 27 = 3.30.
constexpr double kTorchBound = 2.5110 * 1.02;

namespace {
/// The tiny charlm of the torch bound's runs (context 12, d_model 16, 2 heads, one epoch on the CPU reference,
/// lr 1e-2) over the first `train_words` / `validation_words` words.
train::Config tiny_charlm(int64_t train_words, int64_t validation_words) {
  train::Config c = train::lm_defaults("charlm");
  c.backend = "cpu";
  c.context = 12;
  c.d_model = 16;
  c.heads = 2;
  c.epochs = 1;
  c.train_limit = train_words;
  c.test_limit = validation_words;
  c.lr = 1e-2;
  return c;
}
}  // namespace

TEST_CASE("charlm: a short fixed run's validation loss is below the torch script's bound (tiny model, 32 steps)",
          "[charlm][train]") {
  train::Config c = tiny_charlm(2048, 512);
  c.min_lr = 1e-3;
  c.warmup_steps = 4;
  c.progress = false;
  std::ostringstream log;
  const train::Result r = train::run_lm(c, log);
  INFO(log.str());
  CHECK(r.steps == 32);
  CHECK(r.history.size() == 1);
  CHECK(r.validation_loss > 0);
  CHECK(r.validation_loss < kTorchBound);
  CHECK(r.to_json().at("validation_loss").get<double>() == r.validation_loss);
  CHECK(!r.to_json().contains("test_accuracy"));
  CHECK(r.to_json().at("history").at(0).at("validation_loss").get<double>() == r.validation_loss);
  CHECK_THAT(r.summary(), Contains("validation loss"));
}

TEST_CASE("sample: sample_token draws from softmax(logits / T), temperature 0 is the argmax", "[charlm][sample]") {
  std::mt19937_64 rng(1);
  const float logits[3] = {0.f, std::log(3.f), -1e30f};
  CHECK(lm::sample_token(logits, 3, 0.0, rng) == 1);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t t = lm::sample_token(logits, 3, 1.0, rng);
    CHECK(t != 2);
    ones += t == 1;
  }
  CHECK(ones / 4000.0 == Approx(0.75).margin(0.03));
  CHECK_THROWS_AS(lm::sample_token(logits, 3, -1.0, rng), ValueError);
  CHECK(lm::encode_prefix("Ab", 32) == std::vector<int32_t>{1, 2});
  CHECK_THROWS_WITH(lm::encode_prefix("ab3", 32), Contains("'3' at position 3"));
  CHECK_THROWS_WITH(lm::encode_prefix("aé", 32), Contains("'é' at position 2"));
  CHECK_THROWS_WITH(lm::encode_prefix("abcd", 4), Contains("context 4"));
}

TEST_CASE("sample: shadergrad sample is deterministic per seed and refuses bad input", "[charlm][sample][cli]") {
  sg::testing::TempDir d;
  const std::string ckpt = d / "charlm.safetensors";
  {
    train::Config c = tiny_charlm(640, 64);
    c.warmup_steps = 2;
    c.progress = false;
    c.save = ckpt;
    std::ostringstream log;
    train::run_lm(c, log);
  }
  auto sample = [&](const std::string& args, std::string& out) {
    return sg::testing::shell(fmt::format("'{}' sample --load '{}' --backend cpu {}", SG_CLI, ckpt, args), out);
  };
  std::string a, b, c, g;
  REQUIRE(sample("--count 8 --seed 1 --prefix Qu", a) == 0);
  REQUIRE(sample("--count 8 --seed 1 --prefix Qu", b) == 0);
  REQUIRE(sample("--count 8 --seed 2 --prefix Qu", c) == 0);
  CHECK(a == b);
  CHECK(a != c);
  std::istringstream lines(a);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    CHECK(line.rfind("qu", 0) == 0);  // every word starts with the lower-cased prefix
    CHECK(line.size() <= 12);         // at most `context` letters
    CHECK(std::all_of(line.begin(), line.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; }));
  }
  CHECK(n == 8);
  // temperature 0: greedy, the same word every row whatever the seed
  REQUIRE(sample("--count 3 --temperature 0 --seed 5", g) == 0);
  std::istringstream gl(g);
  std::string w0, w1, w2;
  gl >> w0 >> w1 >> w2;
  CHECK(w0 == w1);
  CHECK(w1 == w2);
  std::string err;
  CHECK(sample("--prefix 'a1'", err) == 1);
  CHECK_THAT(err, Contains("'1' at position 2"));
  CHECK(sample("--prefix abcdefghijkl", err) == 1);
  CHECK_THAT(err, Contains("context 12"));
  CHECK(sample("--temperature -1", err) != 0);
  // a checkpoint of another model: predict's image classifiers are refused by sample, and sample's by predict
  {
    auto m = nn::make_model("mlp", 1, 28, 28);
    nn::Rng rng(0);
    m->build(rng);
    auto be = make_cpu_backend();
    train::save_checkpoint(d / "mlp.safetensors", *m, *be, "mlp", {{"dataset", "fashion-mnist"}});
  }
  CHECK(sg::testing::shell(fmt::format("'{}' sample --load '{}'", SG_CLI, d / "mlp.safetensors"), err) == 1);
  CHECK_THAT(err, Contains("a 'mlp' checkpoint") && Contains("shadergrad predict"));
  CHECK(sg::testing::shell(fmt::format("'{}' predict --load '{}' --input x.png", SG_CLI, ckpt), err) == 1);
  CHECK_THAT(err, Contains("a 'charlm' checkpoint") && Contains("shadergrad sample"));
  CHECK(sg::testing::shell(fmt::format("'{}' sample --load '{}'", SG_CLI, d / "missing.safetensors"), err) == 1);
  CHECK(sg::testing::shell(fmt::format("'{}' train --model mlp --dataset words", SG_CLI), err) == 1);
  CHECK_THAT(err, Contains("--dataset words is for the language models"));
  CHECK(sg::testing::shell(fmt::format("'{}' train --model charlm --dataset digits", SG_CLI), err) == 1);
  CHECK_THAT(err, Contains("trains on --dataset words"));
  // export --load takes the checkpoint's sizes: a size option beside it (silently ignored before) is refused
  CHECK(sg::testing::shell(fmt::format("'{}' export --model charlm --load '{}' --d-model 32 --out '{}'", SG_CLI, ckpt,
                                       d / "bundle"), err) == 1);
  CHECK_THAT(err, Contains("--d-model is the checkpoint's"));
  CHECK_FALSE(std::filesystem::exists(d / "bundle"));
}
