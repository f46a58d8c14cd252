// nn::ResNet / nn::BasicBlock and `shadergrad train --model resnet`:
//  - torch golden (tests/golden/resnet.json, gen_golden.py's gen_resnet): a ResNet of an identity-shortcut block and a
//    stride-2 projection block with given weights and running statistics — train-mode logits, loss, every parameter's
//    gradient, the state_dict after the step's running-statistics update, and the eval-mode logits — on cpu, gles,
//    gles-compute and vulkan;
//  - SGD steps with dropout active on every native backend equal the CPU reference (losses, parameters, running
//    statistics, num_batches_tracked), and the eval program (running statistics, no dropout) equals the CPU eval;
//  - torchvision's state_dict names, torch's repr, the parameter count of make_resnet, argument and shape errors;
//  - the training driver: `train --model resnet` (digits, 3 steps with a partial batch) on every native backend gives
//    the CPU reference's losses; the saved checkpoint holds the running statistics, refuses to load into another
//    model, and `shadergrad predict` with it equals an in-process eval-mode evaluation;
//  - `shadergrad export --model resnet --load` (sg::web::model_bundle_spec): the bundle starts from the checkpoint's
//    parameters and running statistics, its infer program (eval mode) gives predict's probabilities, its train checks
//    update the running statistics as a train step built here on gles does (the bundle in Chromium:
//    tests/test_web_runtime.cpp, "export --model resnet").
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/train.h"
#include "sg/web_export.h"
#include "test_util.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// n values ~ N(0, scale^2), seeded.
std::vector<float> normal(int64_t n, uint64_t seed, double scale = 1.0) {
  nn::Rng r(seed);
  return r.normal(n, 0.0, scale);
}

/// The golden's model: ResNet(1, 3, widths {4, 8}, blocks {1, 1}, dropout 0).
std::unique_ptr<nn::ResNet> golden_resnet() {
  auto m = std::make_unique<nn::ResNet>(1, 3, std::vector<int64_t>{4, 8}, std::vector<int64_t>{1, 1}, 0.0);
  nn::Rng rng(0);
  m->build(rng);
  return m;
}

}  // namespace

TEST_CASE("resnet: torchvision's state_dict names and order, torch's repr, parameter count, errors", "[nn][resnet]") {
  auto m = golden_resnet();
  std::vector<std::string> names;
  for (auto& [n, t] : m->state_dict()) names.push_back(n);
  const std::vector<std::string> bn = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  std::vector<std::string> want = {"conv1.weight"};
  auto add_bn = [&](const std::string& p) {
    for (auto& s : bn) want.push_back(p + "." + s);
  };
  add_bn("bn1");
  for (std::string b : {"layer1.0", "layer2.0"}) {
    want.push_back(b + ".conv1.weight");
    add_bn(b + ".bn1");
    want.push_back(b + ".conv2.weight");
    add_bn(b + ".bn2");
  }
  want.push_back("layer2.0.downsample.0.weight");
  add_bn("layer2.0.downsample.1");
  want.push_back("fc.weight");
  want.push_back("fc.bias");
  CHECK(names == want);
  // the golden file's state_dict (torch's) has exactly these entries
  const auto j = sg::golden::load("resnet.json");
  std::set<std::string> torch_names;
  for (auto& [k, v] : j.at("state_dict").items()) torch_names.insert(k);
  CHECK(torch_names == std::set<std::string>(want.begin(), want.end()));
  CHECK(m->layers.size() == 2);
  CHECK(m->layers[0]->size() == 1);
  CHECK(m->named_buffers().size() == 3 * 6);  // six BatchNorms: running_mean, running_var, num_batches_tracked
  const std::string d = m->describe();
  CHECK_THAT(d, Contains("ResNet(\n  (conv1): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"));
  CHECK_THAT(d, Contains("  (layer2): Sequential(\n    (0): BasicBlock(\n      (conv1): Conv2d(4, 8, kernel_size=(3, 3), "
                         "stride=(2, 2), padding=(1, 1), bias=False)"));
  CHECK_THAT(d, Contains("      (downsample): Sequential(\n        (0): Conv2d(4, 8, kernel_size=(1, 1), stride=(2, 2), "
                         "bias=False)\n        (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, "
                         "track_running_stats=True)"));
  CHECK_THAT(d, Contains("  (dropout): Dropout(p=0.0, inplace=False)\n  (fc): Linear(8, 3)\n)"));
  // make_resnet: widths 16, 32, 64, one block per stage: 77,754 parameters for 1 channel and 10 classes
  auto r = nn::make_resnet(1, 28, 28);
  nn::Rng rng(0);
  r->build(rng);
  CHECK(r->num_parameters() == 77754);
  CHECK(r->named_parameters().size() == 29);  // stem conv + bn (3), 3 blocks (6 each), 2 downsamples (3 each), fc (2)
  auto mm = nn::make_module("resnet", 1, 8, 8);
  CHECK(dynamic_cast<nn::ResNet*>(mm.get()) != nullptr);
  CHECK(dynamic_cast<nn::Sequential*>(nn::make_module("cnn", 1, 8, 8).get()) != nullptr);
  CHECK_THROWS_WITH(nn::make_model("resnet", 1, 8, 8), Contains("make_module"));
  // errors
  CHECK_THROWS_AS(nn::ResNet(1, 10, {}, {}), ValueError);
  CHECK_THROWS_WITH(nn::ResNet(1, 10, {4, 8}, {1}), Contains("one count per stage"));
  CHECK_THROWS_WITH(nn::ResNet(1, 10, {4, 0}, {1, 1}), Contains("must be >= 1"));
  CHECK_THROWS_AS(nn::ResNet(1, 10, {4}, {1}, 1.5), ValueError);
  CHECK_THROWS_WITH(nn::BasicBlock(4, 8, 0), Contains("BasicBlock(inplanes=4, planes=8, stride=0)"));
  Tensor x3 = input("x", {2, 3, 8, 8});
  CHECK_THROWS_WITH((*m)(x3), Contains("ResNet: expected input (N, 1, H, W), got 2x3x8x8"));
}

TEST_CASE("resnet: forward, backward, running statistics and eval output equal torch (golden) on cpu, gles, "
          "gles-compute and vulkan", "[nn][resnet][golden]") {
  const auto j = sg::golden::load("resnet.json");
  auto m = golden_resnet();
  const sg::golden::GTensor xg = sg::golden::tensor(j.at("x"));
  std::vector<float> labels;
  for (auto& v : j.at("labels").at("data")) labels.push_back(v.get<float>());
  const std::vector<float> xs = xg.floats();
  Tensor x = input("x", xg.shape), y = input("labels", {xg.shape[0]}, DType::i32);
  // train mode: batch statistics, running statistics updated by the program
  Tensor logits = (*m)(x);
  Tensor loss = cross_entropy(logits, y);
  auto params = m->named_parameters();
  std::vector<Tensor> ps;
  for (auto& [n, t] : params) ps.push_back(t);
  Program train;
  train.add_output("logits", logits);
  train.add_output("loss", loss);
  std::vector<Tensor> gs = grad(loss, ps);
  for (size_t i = 0; i < gs.size(); ++i) train.add_output("d_" + params[i].first, gs[i]);
  CHECK(train.updates.size() == 3 * 6);  // running_mean, running_var, num_batches_tracked of six BatchNorms
  m->eval();
  Program eval;
  eval.add_output("logits", (*m)(x));
  CHECK(eval.updates.empty());
  m->train();
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    for (auto& [name, t] : m->state_dict())
      if (j.at("init").contains(name)) be->write(t, sg::golden::tensor(j.at("init").at(name)).floats());
    auto out = be->compile(train)->run({{"x", &xs}, {"labels", &labels}});
    {
      auto c = sg::golden::compare(doubles(out[0]), sg::golden::tensor(j.at("logits")), 1e-4, 1e-5);
      INFO("logits " << c.report());
      CHECK(c.ok);
    }
    CHECK(out[1][0] == Approx(j.at("loss").get<double>()).epsilon(1e-5));
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("gradient of " << params[i].first);
      auto c = sg::golden::compare(doubles(out[2 + i]), sg::golden::tensor(j.at("grads").at(params[i].first)), 2e-4,
                                   2e-5);
      INFO(c.report());
      CHECK(c.ok);
    }
    for (auto& [name, t] : m->state_dict()) {
      INFO("state_dict entry " << name);
      auto c = sg::golden::compare(doubles(be->read(t)), sg::golden::tensor(j.at("state_dict").at(name)), 1e-4, 1e-5);
      INFO(c.report());
      CHECK(c.ok);
    }
    auto ev = be->compile(eval)->run({{"x", &xs}});
    auto c = sg::golden::compare(doubles(ev[0]), sg::golden::tensor(j.at("eval_logits")), 1e-4, 1e-5);
    INFO("eval logits " << c.report());
    CHECK(c.ok);
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
}

TEST_CASE("resnet: SGD steps with dropout on gles, gles-compute and vulkan equal the CPU reference (losses, "
          "parameters, running statistics), and the eval program equals the CPU eval", "[nn][resnet][backends]") {
  // ResNet(1, 10, {4, 8}, {1, 1}, dropout 0.3) on 8x8 inputs, batch 8: an identity block, a projection block, dropout
  auto m = std::make_unique<nn::ResNet>(1, 10, std::vector<int64_t>{4, 8}, std::vector<int64_t>{1, 1}, 0.3);
  nn::Rng rng(3);
  m->build(rng);
  const int64_t B = 8, steps = 3;
  Tensor x = input("x", {B, 1, 8, 8}), y = input("labels", {B}, DType::i32);
  auto opt = make_sgd({.lr = 0.05, .momentum = 0.9});
  Program step = make_train_step(cross_entropy((*m)(x), y), m->parameters(), *opt);
  // the parameters' updates (and momenta), six BatchNorms' three buffers, the dropout's step counter
  CHECK(step.updates.size() == 2 * m->parameters().size() + 3 * 6 + 1);
  m->eval();
  Program eval;
  eval.add_output("logits", (*m)(x));
  CHECK(eval.updates.empty());
  m->train();
  std::vector<std::vector<float>> xs, ys;
  for (int64_t s = 0; s < steps; ++s) {
    xs.push_back(normal(B * 64, 100 + s));
    std::vector<float> l(B);
    for (int64_t i = 0; i < B; ++i) l[i] = static_cast<float>((i * 3 + s) % 10);
    ys.push_back(l);
  }
  const std::vector<float> xt = normal(B * 64, 7);
  std::vector<float> cpu_losses, cpu_eval;
  std::vector<std::vector<float>> cpu_state;
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    auto exe = be->compile(step);
    std::vector<float> losses;
    for (int64_t s = 0; s < steps; ++s) losses.push_back(exe->run({{"x", &xs[s]}, {"labels", &ys[s]}})[0][0]);
    std::vector<std::vector<float>> state;
    for (auto& [n, t] : m->state_dict()) state.push_back(be->read(t));
    auto ev_exe = be->compile(eval);
    const std::vector<float> ev = ev_exe->run({{"x", &xt}})[0];
    CHECK(ev_exe->run({{"x", &xt}})[0] == ev);  // eval: no dropout, nothing updated
    CHECK(be->read(m->dropout.step) == std::vector<float>{static_cast<float>(steps)});  // one mask per step
    if (std::string(kind) == "cpu") {
      cpu_losses = losses, cpu_state = state, cpu_eval = ev;
      CHECK(losses[steps - 1] < losses[0] + 1.0);  // finite and not diverging
      continue;
    }
    for (int64_t s = 0; s < steps; ++s) CHECK(losses[s] == Approx(cpu_losses[s]).epsilon(1e-3));
    size_t i = 0;
    for (auto& [n, t] : m->state_dict()) {
      sg::testing::expect_close(state[i], cpu_state[i], 1e-3, 1e-4, n);
      ++i;
    }
    sg::testing::expect_close(ev, cpu_eval, 1e-3, 1e-4, "eval logits");
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
  // num_batches_tracked counted the steps; the running statistics moved from their initial 0 and 1
  auto sd = m->state_dict();
  for (size_t k = 0; k < sd.size(); ++k) {
    if (sd[k].first == "bn1.num_batches_tracked") CHECK(cpu_state[k] == std::vector<float>{3.0f});
    if (sd[k].first == "layer2.0.bn2.running_var") CHECK(cpu_state[k] != std::vector<float>(8, 1.0f));
  }
}

namespace {

struct Proc {
  int rc = -1;
  std::string out;
};
/// The CLI run with `args` (sg::testing::shell: exit status and the output, stderr included).
Proc cli(const std::string& args) {
  Proc r;
  r.rc = sg::testing::shell(fmt::format("'{}' {}", SG_CLI, args), r.out);
  return r;
}

/// `shadergrad train --model resnet` on digits, 3 steps (batches of 32, 32 and 16: the last one its own program, sharing
/// the state) in a process of its own: the dropout masks' streams are counted per process (sg::random_uniform), so
/// runs in one process draw other masks; SGD with momentum: Adam's first steps move every weight by about lr whatever
/// its gradient's size, so a weight whose gradient is at rounding level (f32 shaders against f64 accumulation) would
/// move either way. Returns the metrics JSON.
nlohmann::json train_resnet_digits(const std::string& backend, const sg::testing::TempDir& dir) {
  const std::string metrics = (dir.path / (backend + ".json")).string();
  Proc p = cli(fmt::format("train --model resnet --dataset digits --backend {} --epochs 1 --batch 32 --train-limit 80 "
                           "--test-limit 100 --optimizer momentum --lr 0.02 --metrics {} --quiet", backend, metrics));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  return nlohmann::json::parse(sg::testing::read_file(metrics));
}

}  // namespace

TEST_CASE("resnet: train --model resnet on gles, gles-compute and vulkan gives the CPU reference's losses and test "
          "accuracy", "[train][resnet][cli]") {
  sg::testing::TempDir dir("sg_resnet");
  const nlohmann::json c = train_resnet_digits("cpu", dir);
  CHECK(c.at("steps") == 3);
  CHECK(c.at("parameters") == 77754);
  CHECK(c.at("model") == "resnet");
  for (const char* kind : {"gles", "gles-compute", "vulkan"}) {
    INFO("backend " << kind);
    const nlohmann::json r = train_resnet_digits(kind, dir);
    CHECK(r.at("backend") == kind);
    CHECK(r.at("final_train_loss").get<double>() == Approx(c.at("final_train_loss").get<double>()).epsilon(1e-3));
    CHECK(std::fabs(r.at("test_accuracy").get<double>() - c.at("test_accuracy").get<double>()) <= 2.0 / 100 + 1e-12);
  }
  CHECK(train::default_dataset("resnet") == "fashion-mnist");
}

TEST_CASE("resnet: the checkpoint holds the running statistics, refuses another model, and predict evaluates it in "
          "eval mode", "[train][resnet][checkpoint][cli]") {
  sg::testing::TempDir dir("sg_resnet");
  const std::string ckpt = (dir.path / "resnet.safetensors").string();
  Proc t = cli(fmt::format("train --model resnet --dataset digits --backend gles --epochs 1 --batch 32 --train-limit 64 "
                           "--test-limit 64 --save {} --quiet", ckpt));
  INFO(t.out);
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Contains("after 1 epoch, 2 steps"));
  io::SafetensorsFile f = io::load_safetensors(ckpt);
  CHECK(f.metadata.at("model") == "resnet");
  auto model = nn::make_module("resnet", 1, 8, 8);
  nn::Rng rng(42);
  model->build(rng);
  CHECK(f.tensors.size() == model->state_dict().size());  // parameters and buffers
  const io::NamedTensor* nbt = f.find("layer3.0.bn2.num_batches_tracked");
  REQUIRE(nbt);
  CHECK(nbt->data == std::vector<float>{2.0f});
  const io::NamedTensor* rv = f.find("layer1.0.bn1.running_var");
  REQUIRE(rv);
  CHECK(rv->data != std::vector<float>(16, 1.0f));

  // another model refuses it, naming what it is
  auto cnn = nn::make_module("cnn", 1, 8, 8);
  cnn->build(rng);
  auto be = make_cpu_backend();
  CHECK_THROWS_WITH(train::load_checkpoint(ckpt, *cnn, *be),
                    Contains("different model structure") && Contains("model 'resnet'"));

  // predict: the CLI's probabilities equal this process's eval-mode evaluation (running statistics, no dropout)
  train::load_checkpoint(ckpt, *model, *be);
  auto test = train::load_split("digits").second;
  const float* px = test.sample(3);
  std::string pgm = "P5\n8 8\n16\n";
  for (int i = 0; i < 64; ++i) pgm += static_cast<char>(std::lround(px[i] * 16));
  std::ofstream(dir.path / "digit.pgm", std::ios::binary) << pgm;
  Proc p = cli(fmt::format("predict --load {} --input {} --backend cpu", ckpt, (dir.path / "digit.pgm").string()));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  std::vector<double> probs;
  std::istringstream in(p.out);
  std::string line;
  std::smatch mt;
  while (std::getline(in, line))
    if (std::regex_match(line, mt, std::regex(R"(^\s+(\d+)\s+([0-9.]+)\s*$)"))) probs.push_back(std::stod(mt[2]));
  REQUIRE(probs.size() == 10);
  std::vector<float> pixels(px, px + 64);
  for (float& v : pixels) v = static_cast<float>(std::lround(v * 16)) / 16.f;
  auto probs_of = [&](bool eval_mode) {
    model->train(!eval_mode);
    Tensor x = input("x", {1, 1, 8, 8});
    Program prog;
    prog.add_output("probs", softmax((*model)(x), 1));
    return be->compile(prog)->run({{"x", &pixels}})[0];
  };
  const std::vector<float> want = probs_of(true);
  for (int i = 0; i < 10; ++i) CHECK(probs[i] == Approx(want[i]).margin(1e-4));
  // a train-mode forward (batch statistics of one image) gives other probabilities: predict did use eval mode
  const std::vector<float> train_mode = probs_of(false);
  double diff = 0;
  for (int i = 0; i < 10; ++i) diff = std::max(diff, std::fabs(double(train_mode[i]) - want[i]));
  CHECK(diff > 1e-3);
}

namespace {

const io::NamedTensor& named(const io::SafetensorsFile& f, const std::string& name) {
  const io::NamedTensor* t = f.find(name);
  if (!t) FAIL("no tensor " << name);
  return *t;
}

/// The probabilities `shadergrad predict --backend cpu` prints for a PGM.
std::vector<double> predict_probs(const std::string& ckpt, const std::string& pgm) {
  Proc p = cli(fmt::format("predict --load {} --input {} --backend cpu", ckpt, pgm));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  std::vector<double> probs;
  std::istringstream in(p.out);
  std::smatch mt;
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, mt, std::regex(R"(^\s+(\d+)\s+([0-9.]+)\s*$)"))) probs.push_back(std::stod(mt[2]));
  return probs;
}

}  // namespace

TEST_CASE("resnet: export --model resnet --load: the infer program (eval mode) gives predict's probabilities, the "
          "bundle holds the checkpoint's running statistics and its train checks update them as a native train step",
          "[web][resnet][cli]") {
  sg::testing::TempDir dir("sg_resnet_export");
  const std::string ckpt = (dir.path / "resnet.safetensors").string(), out = (dir.path / "bundle").string();
  Proc t = cli(fmt::format("train --model resnet --dataset digits --backend cpu --epochs 1 --batch 32 --train-limit 64 "
                           "--test-limit 64 --save {} --quiet", ckpt));
  INFO(t.out);
  REQUIRE(t.rc == 0);
  Proc e = cli(fmt::format("export --model resnet --dataset digits --load {} --batch 4 --infer-batch 1 --check-steps 2 "
                           "--targets webgl2 --out {}", ckpt, out));
  INFO(e.out);
  REQUIRE(e.rc == 0);
  const io::SafetensorsFile ck = io::load_safetensors(ckpt);
  const nlohmann::json b = nlohmann::json::parse(sg::testing::read_file(out + "/bundle.json"));
  const nlohmann::json& meta = b.at("metadata");
  auto model = nn::make_module("resnet", 1, 8, 8);
  nn::Rng rng(9);
  model->build(rng);
  CHECK(meta.at("checkpoint_model") == "resnet");
  CHECK(meta.at("checkpoint_structure_hash") == ck.metadata.at("structure_hash"));
  CHECK(meta.at("checkpoint_structure_hash") == model->structure_hash());
  CHECK(nlohmann::json::parse(meta.at("layers").get<std::string>()).at(3) == "layer1: Sequential");
  CHECK(nlohmann::json::parse(meta.at("checkpoint_buffers").get<std::string>()).size() == model->named_buffers().size());
  // the initial values are the checkpoint's parameters and buffers
  const io::SafetensorsFile w = io::load_safetensors(out + "/weights.safetensors");
  for (auto& [name, tensor] : model->state_dict()) {
    INFO(name);
    CHECK(named(w, name).data == named(ck, name).data);
  }

  // the checks: 2 Adam steps in training mode moved the running statistics, counted the batches and the dropout
  // masks; a train step built here (gles backend, the check's batch) leaves the same running statistics. It is built
  // before model_bundle_spec below: a process's first dropout graph of a layer takes its random stream 0 (sg::dropout),
  // as the export's train program did in its process
  const io::SafetensorsFile x = io::load_safetensors(out + "/expected.safetensors");
  const nlohmann::json& after = b.at("checks").at("persistent_after");
  auto final_of = [&](const std::string& n) { return named(x, after.at(n).at("tensor")).data; };
  CHECK(final_of("bn1.num_batches_tracked")[0] == named(ck, "bn1.num_batches_tracked").data[0] + 2);
  CHECK(final_of("dropout.dropout_step") == std::vector<float>{2.0f});
  CHECK(final_of("layer3.0.bn2.running_var") != named(ck, "layer3.0.bn2.running_var").data);
  const nlohmann::json& run1 = b.at("checks").at("runs").at(1);
  REQUIRE(run1.at("program") == "train");
  const std::vector<float> xt = named(x, run1.at("feeds").at("x").at("tensor")).data;
  const std::vector<float> yt = named(x, run1.at("feeds").at("labels").at("tensor")).data;
  auto gles = native_backend("gles");
  train::load_checkpoint(ckpt, *model, *gles);
  Tensor xi = input("x", {4, 1, 8, 8}), yi = input("labels", {4}, DType::i32);
  auto adam = make_adam({.lr = 2e-3});
  auto step = gles->compile(make_train_step(cross_entropy((*model)(xi), yi), model->parameters(), *adam));
  for (int s = 0; s < 2; ++s) step->run({{"x", &xt}, {"labels", &yt}});
  for (auto& [name, tensor] : model->named_buffers())
    sg::testing::expect_close(gles->read(tensor), final_of(name), 1e-3, 1e-4, name);

  // the infer program, on predict's input: predict's probabilities (eval mode: running statistics, no dropout)
  auto test = train::load_split("digits").second;
  const float* px = test.sample(5);
  std::string pgm = "P5\n8 8\n16\n";
  for (int i = 0; i < 64; ++i) pgm += static_cast<char>(std::lround(px[i] * 16));
  std::ofstream(dir.path / "digit.pgm", std::ios::binary) << pgm;
  std::vector<float> pixels(px, px + 64);
  for (float& v : pixels) v = static_cast<float>(std::lround(v * 16)) / 16.f;
  const std::vector<double> want = predict_probs(ckpt, (dir.path / "digit.pgm").string());
  REQUIRE(want.size() == 10);
  web::ModelExportOptions mo;
  mo.model = "resnet", mo.dataset = "digits", mo.load = ckpt, mo.batch = 4, mo.infer_batch = 1, mo.check_steps = 2;
  web::BundleSpec spec = web::model_bundle_spec(mo);
  REQUIRE(spec.programs.at(0).name == "infer");
  auto cpu = make_cpu_backend();
  spec.prepare(*cpu);
  const std::vector<float> probs = cpu->compile(spec.programs[0].program)->run({{"x", &pixels}})[0];
  for (int i = 0; i < 10; ++i) CHECK(probs[i] == Approx(want[i]).margin(1e-4));
}
