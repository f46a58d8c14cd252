// Tests for sg/train.h: GLES vs CPU training runs, determinism, the last partial batch, the epoch loop
// against a hand-written loop, checkpoints (round trip, wrong structure, corrupted files, no partial load,
// failed saves), the metrics JSON, and real learning on the digits.
#include <catch2/catch.hpp>

#include "test_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/error.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/train.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using sg::train::Config;
using sg::train::Result;

namespace {

using sg::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

Config digits_cnn(const std::string& backend, uint64_t seed = 0, int64_t epochs = 3) {
  Config c;
  c.model = "cnn";
  c.dataset = "digits";
  c.backend = backend;
  c.epochs = epochs;
  c.batch = 64;
  c.lr = 2e-3;
  c.seed = seed;
  c.progress = false;
  return c;
}

Result run(const Config& c) {
  std::ostringstream log;
  Result r = sg::train::run(c, log);
  INFO(log.str());
  REQUIRE(static_cast<int64_t>(r.history.size()) == c.epochs);
  return r;
}

std::unique_ptr<sg::nn::Sequential> cnn(uint64_t seed) {
  auto m = sg::nn::make_model("cnn", 1, 8, 8);
  sg::nn::Rng rng(seed);
  m->build(rng);
  return m;
}

/// Every parameter's current value in `be`, in state_dict order.
std::vector<std::vector<float>> read_params(const sg::nn::Sequential& m, sg::Backend& be) {
  std::vector<std::vector<float>> r;
  for (auto& [name, t] : m.named_parameters()) r.push_back(be.read(t));
  return r;
}

/// Sets every parameter to distinct values no initialiser produces (so a load is visible).
void scramble(const sg::nn::Sequential& m, sg::Backend& be, float base) {
  int k = 0;
  for (auto& [name, t] : m.named_parameters()) {
    std::vector<float> v(t.numel());
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.001f * static_cast<float>(k++ % 997);
    be.write(t, v);
  }
}

/// A backend that forwards to `inner` but fails on the `fail_at`-th read (a readback error mid-save),
/// either by throwing or by returning a wrongly sized vector.
class FailingBackend final : public sg::Backend {
 public:
  FailingBackend(sg::Backend& inner, int fail_at, bool throw_error)
      : in_(inner), fail_at_(fail_at), throw_(throw_error) {}
  std::string name() const override { return in_.name(); }
  std::string device() const override { return in_.device(); }
  std::unique_ptr<sg::Executable> compile(const sg::Program& p) override { return in_.compile(p); }
  std::vector<float> read(const sg::Tensor& leaf) override {
    std::vector<float> v = in_.read(leaf);
    if (++reads_ == fail_at_) {
      if (throw_) throw sg::BackendError("simulated readback failure");
      v.pop_back();
    }
    return v;
  }
  void write(const sg::Tensor& leaf, const std::vector<float>& data) override { in_.write(leaf, data); }

 private:
  sg::Backend& in_;
  int fail_at_, reads_ = 0;
  bool throw_;
};

}  // namespace

TEST_CASE("train: digits CNN on GLES and CPU agree and runs are deterministic per seed", "[train][gles]") {
  Result g1 = run(digits_cnn("gles")), g2 = run(digits_cnn("gles"));
  Result c0 = run(digits_cnn("cpu")), c1 = run(digits_cnn("cpu", /*seed=*/1));
  CHECK(g1.backend == "gles");
  CHECK(c0.backend == "cpu");
  // 600 training samples in batches of 64: 9 full batches + one of 24 per epoch.
  CHECK(g1.steps == 30);
  CHECK(c0.steps == 30);
  CHECK(g1.train_samples == 600);
  CHECK(g1.test_samples == 797);
  CHECK(g1.parameters == 3658);
  for (size_t e = 0; e < 3; ++e) {
    INFO("epoch " << e + 1);
    // GLES (f32 shaders) vs the CPU reference (f64 accumulation): same training within float tolerance.
    CHECK(g1.history[e].train_loss == Approx(c0.history[e].train_loss).epsilon(1e-3));
    CHECK(std::fabs(g1.history[e].test_accuracy - c0.history[e].test_accuracy) <= 2.0 / 797 + 1e-12);
    // Same seed, same backend: bit-identical.
    CHECK(g1.history[e].train_loss == g2.history[e].train_loss);
    CHECK(g1.history[e].test_accuracy == g2.history[e].test_accuracy);
  }
  CHECK(g1.test_accuracy == g2.test_accuracy);
  CHECK(g1.final_train_loss == g1.history.back().train_loss);
  // Another seed: another init and shuffle, so other losses (epoch 1 is ~ln 10 for any small init; by epoch 3
  // the runs have clearly diverged).
  CHECK(c1.history[0].train_loss != c0.history[0].train_loss);
  CHECK(std::fabs(c1.history[2].train_loss - c0.history[2].train_loss) > 1e-3);
  // It learns: the loss goes down over three epochs.
  CHECK(c0.history[2].train_loss < c0.history[0].train_loss - 0.02);
}

TEST_CASE("train: the epoch loop equals a hand-written loop with the last partial batch", "[train]") {
  // 150 samples, batch 64: batches of 64, 64 and 22 per epoch.
  Config c = digits_cnn("cpu", /*seed=*/4, /*epochs=*/2);
  c.train_limit = 150;
  c.test_limit = 100;
  Result r = run(c);
  CHECK(r.steps == 6);
  CHECK(r.train_samples == 150);
  CHECK(r.test_samples == 100);
  CHECK(r.test_accuracy * 100 == Approx(std::round(r.test_accuracy * 100)).margin(1e-9));

  // The same training written out by hand: init from Rng(seed), the first 150 samples of the digits split,
  // BatchIterator(seed) reset per epoch, one program per batch size, Adam(lr), mean of step losses.
  auto [train_all, test_all] = sg::train::load_split("digits");
  std::vector<int64_t> first(150), first_test(100);
  for (int64_t i = 0; i < 150; ++i) first[i] = i;
  for (int64_t i = 0; i < 100; ++i) first_test[i] = i;
  sg::data::Dataset train = train_all.subset(first), test = test_all.subset(first_test);
  auto be = sg::make_cpu_backend();
  auto model = cnn(4);
  auto opt = sg::make_adam({.lr = 2e-3});
  std::map<int64_t, std::unique_ptr<sg::Executable>> steps;
  sg::data::BatchIterator it(train, 64, true, 4);
  std::vector<int64_t> sizes;
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    it.reset(epoch - 1);
    sg::data::Batch b;
    double sum = 0;
    int n = 0;
    while (it.next(b)) {
      auto& exe = steps[b.size];
      if (!exe) {
        sg::Tensor x = sg::input("x", {b.size, 1, 8, 8});
        sg::Tensor y = sg::input("labels", {b.size}, sg::DType::i32);
        exe = be->compile(sg::make_train_step(sg::cross_entropy((*model)(x), y), model->parameters(), *opt));
      }
      sum += exe->run({{"x", &b.images}, {"labels", &b.labels}})[0][0];
      ++n;
      sizes.push_back(b.size);
    }
    INFO("epoch " << epoch);
    CHECK(r.history[epoch - 1].train_loss == Approx(sum / n).epsilon(1e-12));
  }
  CHECK(sizes == std::vector<int64_t>{64, 64, 22, 64, 64, 22});
  // Test accuracy with the trained parameters, counted on the host from the logits.
  sg::Tensor x = sg::input("x", {100, 1, 8, 8});
  sg::Program p;
  p.add_output("logits", (*model)(x));
  sg::data::BatchIterator tit(test, 100, false);
  sg::data::Batch tb;
  REQUIRE(tit.next(tb));
  std::vector<float> logits = be->compile(p)->run({{"x", &tb.images}})[0];
  int correct = 0;
  for (int i = 0; i < 100; ++i) {
    auto row = logits.begin() + i * 10;
    correct += (std::max_element(row, row + 10) - row) == static_cast<int>(tb.labels[i]);
  }
  CHECK(r.test_accuracy == Approx(correct / 100.0).margin(1e-12));
}

TEST_CASE("train: a training set smaller than one batch and a GLES partial batch agreeing with CPU",
          "[train][gles]") {
  Config c = digits_cnn("cpu", 0, /*epochs=*/3);
  c.train_limit = 10;
  c.test_limit = 50;
  Result r = run(c);
  CHECK(r.steps == 3);
  Config g = digits_cnn("gles", 0, /*epochs=*/2);
  g.train_limit = 100;  // batches of 64 and 36
  g.test_limit = 50;
  Config gc = g;
  gc.backend = "cpu";
  Result rg = run(g), rc = run(gc);
  CHECK(rg.steps == 4);
  for (size_t e = 0; e < 2; ++e) CHECK(rg.history[e].train_loss == Approx(rc.history[e].train_loss).epsilon(1e-3));
}

TEST_CASE("train: invalid configurations are refused with a message naming the option", "[train]") {
  std::ostringstream log;
  Config c = digits_cnn("cpu");
  c.epochs = 0;
  CHECK_THROWS_WITH(sg::train::run(c, log), Contains("--epochs"));
  c = digits_cnn("cpu");
  c.batch = 0;
  CHECK_THROWS_WITH(sg::train::run(c, log), Contains("--batch"));
  c = digits_cnn("cpu");
  c.lr = -1;
  CHECK_THROWS_WITH(sg::train::run(c, log), Contains("--lr"));
  c = digits_cnn("cpu");
  c.model = "vgg";  // ("resnet" was the unknown name here before it became a model)
  CHECK_THROWS_AS(sg::train::run(c, log), sg::ValueError);
  CHECK_THROWS_WITH(sg::train::run(c, log), Contains("unknown model 'vgg'") && Contains("resnet"));
  CHECK_THROWS_WITH(sg::train::load_split("cifar"), Contains("cifar"));
}

TEST_CASE("train: checkpoints round-trip, refuse other structures and never load partially", "[train][checkpoint]") {
  TempDir dir;
  const std::string ckpt = dir / "cnn.safetensors";
  auto cpu = sg::make_cpu_backend();
  auto a = cnn(0);
  scramble(*a, *cpu, 0.25f);
  auto saved = read_params(*a, *cpu);
  sg::train::save_checkpoint(ckpt, *a, *cpu, "cnn", {{"dataset", "digits"}});

  SECTION("save -> load into a fresh model on a fresh GLES backend gives identical parameters") {
    sg::BackendOptions bo;
    bo.kind = "gles";
    auto gles = sg::make_backend(bo).backend;
    auto b = cnn(7);
    CHECK(read_params(*b, *gles) != saved);
    auto meta = sg::train::load_checkpoint(ckpt, *b, *gles);
    CHECK(read_params(*b, *gles) == saved);
    std::map<std::string, std::string> m(meta.begin(), meta.end());
    CHECK(m["format"] == "shadergrad-checkpoint/1");
    CHECK(m["model"] == "cnn");
    CHECK(m["dataset"] == "digits");
    CHECK(m["structure_hash"] == a->structure_hash());
    // The file is plain safetensors: the state_dict names and shapes, in order.
    auto f = sg::io::load_safetensors(ckpt);
    auto params = a->named_parameters();
    REQUIRE(f.tensors.size() == params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(f.tensors[i].name == params[i].first);
      CHECK(f.tensors[i].data == saved[i]);
    }
  }

  SECTION("a different structure is refused with the file and both structure hashes named") {
    for (std::string other : {"cnn-large", "mlp"}) {
      INFO(other);
      auto be = sg::make_cpu_backend();
      auto m = sg::nn::make_model(other, 1, 8, 8);
      sg::nn::Rng rng(0);
      m->build(rng);
      auto before = read_params(*m, *be);
      CHECK_THROWS_AS(sg::train::load_checkpoint(ckpt, *m, *be), sg::IOError);
      CHECK_THROWS_WITH(sg::train::load_checkpoint(ckpt, *m, *be),
                        Contains(ckpt) && Contains(a->structure_hash()) && Contains(m->structure_hash()));
      CHECK(read_params(*m, *be) == before);
    }
  }

  SECTION("corrupted files: IOError naming the file, parameters unchanged") {
    const std::string good = read_bytes(ckpt);
    REQUIRE(good.size() > 200);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(good[i]);
    REQUIRE(header_len + 8 < good.size());
    std::string shape_flip = good;
    auto pos = shape_flip.find("[8,1,3,3]");
    REQUIRE(pos != std::string::npos);
    REQUIRE(pos < header_len + 8);
    shape_flip[pos + 7] = '2';  // 0.weight claims 8x1x3x2: its data_offsets no longer fit the shape
    std::string hash_flip = good;
    pos = hash_flip.find(a->structure_hash());
    REQUIRE(pos != std::string::npos);
    hash_flip[pos] = hash_flip[pos] == '0' ? '1' : '0';
    std::string len_flip = good;
    len_flip[3] = static_cast<char>(0x7f);  // header length runs far past the end of the file
    std::string json_flip = good;
    json_flip[8] = '#';  // the JSON header's opening brace
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"truncated data", good.substr(0, good.size() - 100)},
        {"truncated header", good.substr(0, header_len / 2)},
        {"4 bytes", good.substr(0, 4)},
        {"empty", ""},
        {"header length flipped", len_flip},
        {"header JSON flipped", json_flip},
        {"shape flipped", shape_flip},
        {"structure hash flipped", hash_flip},
        {"trailing garbage", good + "garbage!"},
    };
    auto be = sg::make_cpu_backend();
    auto b = cnn(3);
    scramble(*b, *be, -0.5f);
    auto before = read_params(*b, *be);
    for (auto& [what, bytes] : cases) {
      INFO(what);
      std::string path = dir / "bad.safetensors";
      write_bytes(path, bytes);
      CHECK_THROWS_AS(sg::train::load_checkpoint(path, *b, *be), sg::IOError);
      CHECK_THROWS_WITH(sg::train::load_checkpoint(path, *b, *be), Contains(path));
      CHECK(read_params(*b, *be) == before);
    }
    CHECK_THROWS_WITH(sg::train::load_checkpoint(dir / "missing.safetensors", *b, *be),
                      Contains(dir / "missing.safetensors"));
  }

  SECTION("a valid file whose LAST tensor is wrong loads nothing") {
    auto f = sg::io::load_safetensors(ckpt);
    auto be = sg::make_cpu_backend();
    auto b = cnn(3);
    auto before = read_params(*b, *be);
    auto expect_refused = [&](std::vector<sg::io::NamedTensor> ts, const std::string& what) {
      INFO(what);
      std::string path = dir / "partial.safetensors";
      sg::io::save_safetensors(path, ts, f.metadata);
      CHECK_THROWS_AS(sg::train::load_checkpoint(path, *b, *be), sg::IOError);
      CHECK_THROWS_WITH(sg::train::load_checkpoint(path, *b, *be), Contains(what));
      CHECK(read_params(*b, *be) == before);  // in particular "0.weight", which comes first
    };
    REQUIRE(f.tensors.back().name == "9.bias");
    auto wrong_shape = f.tensors;
    wrong_shape.back().shape = {5, 2};
    expect_refused(wrong_shape, "9.bias");
    auto missing = f.tensors;
    missing.pop_back();
    expect_refused(missing, "9.bias");
    auto renamed = f.tensors;
    renamed.back().name = "9.b";
    expect_refused(renamed, "9.bias");
    auto extra = f.tensors;
    extra.push_back({"10.weight", {2}, {1.f, 2.f}});
    expect_refused(extra, "9 tensors");
    auto meta = f.metadata;
    meta["format"] = "something-else";
    std::string path = dir / "format.safetensors";
    sg::io::save_safetensors(path, f.tensors, meta);
    CHECK_THROWS_WITH(sg::train::load_checkpoint(path, *b, *be), Contains("shadergrad-checkpoint/1"));
    CHECK(read_params(*b, *be) == before);
  }

  SECTION("a failed save never destroys an existing checkpoint") {
    const std::string before = read_bytes(ckpt);
    auto other = cnn(9);
    auto files = dir.files();
    for (bool throw_error : {true, false}) {
      INFO("throw " << throw_error);
      FailingBackend failing(*cpu, /*fail_at=*/5, throw_error);
      CHECK_THROWS_AS(sg::train::save_checkpoint(ckpt, *other, failing, "cnn"), sg::Error);
      CHECK(read_bytes(ckpt) == before);
      CHECK(dir.files() == files);  // no temporary file left behind
    }
    // A path that cannot be written: IOError naming it, nothing created.
    std::string bad = dir / "no-such-dir/cnn.safetensors";
    CHECK_THROWS_AS(sg::train::save_checkpoint(bad, *a, *cpu, "cnn"), sg::IOError);
    CHECK_THROWS_WITH(sg::train::save_checkpoint(bad, *a, *cpu, "cnn"), Contains("no-such-dir"));
    // Still loadable, with the original values.
    auto be = sg::make_cpu_backend();
    auto b = cnn(1);
    sg::train::load_checkpoint(ckpt, *b, *be);
    CHECK(read_params(*b, *be) == saved);
  }
}

TEST_CASE("train: --save and --metrics give the required JSON keys and a checkpoint reproducing the accuracy",
          "[train][gles]") {
  TempDir dir;
  Config c = digits_cnn("gles", 2, /*epochs=*/2);
  c.train_limit = 200;  // 64, 64, 64, 8
  c.save = dir / "ckpt.safetensors";
  c.metrics = dir / "metrics.json";
  Result r = run(c);
  auto j = nlohmann::json::parse(read_bytes(c.metrics));
  for (const char* key : {"model", "dataset", "backend", "renderer", "epochs", "steps", "final_train_loss",
                          "test_accuracy", "steps_per_second", "kernels_per_step"})
    CHECK(j.contains(key));
  CHECK(j.at("model") == "cnn");
  CHECK(j.at("dataset") == "digits");
  CHECK(j.at("backend") == "gles");
  CHECK(j.at("renderer").get<std::string>() == r.renderer);
  CHECK_FALSE(r.renderer.empty());
  CHECK(j.at("epochs") == 2);
  CHECK(j.at("steps") == 8);
  CHECK(j.at("final_train_loss").get<double>() == r.history.back().train_loss);
  CHECK(j.at("test_accuracy").get<double>() == r.test_accuracy);
  CHECK(j.at("steps_per_second").get<double>() > 0);
  CHECK(j.at("kernels_per_step").get<int64_t>() > 0);
  CHECK(j.at("kernels_per_step").get<int64_t>() == r.kernels_per_step);
  REQUIRE(j.at("history").size() == 2);
  CHECK(j.at("history")[1].at("train_loss").get<double>() == r.final_train_loss);

  // The checkpoint holds the trained parameters: evaluating them on the CPU gives the reported accuracy
  // (up to argmax ties between f32 shader and f64 reference logits).
  auto be = sg::make_cpu_backend();
  auto m = cnn(123);
  sg::train::load_checkpoint(c.save, *m, *be);
  auto test = sg::train::load_split("digits").second;
  sg::Tensor x = sg::input("x", {test.n, 1, 8, 8});
  sg::Tensor y = sg::input("labels", {test.n}, sg::DType::i32);
  sg::Program p;
  p.add_output("correct", sg::sum(sg::eq(sg::argmax((*m)(x), 1), y)));
  sg::data::BatchIterator it(test, test.n, false);
  sg::data::Batch b;
  REQUIRE(it.next(b));
  double correct = be->compile(p)->run({{"x", &b.images}, {"labels", &b.labels}})[0][0];
  CHECK(std::fabs(correct / test.n - r.test_accuracy) <= 2.0 / test.n);
}

TEST_CASE("train: the digits CNN learns (25 epochs on GLES reach >= 0.85 test accuracy)", "[train][gles][slow]") {
  // Measured with this configuration: 0.892 (seed 0); seeds 1-3 gave 0.880, 0.882, 0.883 (CPU backend,
  // identical training). The 150-epoch figure of the seed article (0.95+) is not what 25 epochs reach.
  Result r = run(digits_cnn("gles", 0, /*epochs=*/25));
  CHECK(r.test_accuracy >= 0.85);
  CHECK(r.history.front().train_loss > 2.0);  // ln 10 = 2.30 at the start
  CHECK(r.final_train_loss < 0.4);
}
