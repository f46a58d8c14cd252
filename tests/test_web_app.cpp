// The browser demos (examples/web/, issue 17) and `shadergrad serve`.
//
// Native side: the bundle's structure hash (changes with the model, not with the target or the weights), the
// train_debug program, the 128x128 five-conv CNN's fused conv+bias+relu kernels and its init (logits that depend
// on the input), the shapes task, the shipped cnn5 checkpoint's accuracy on a generated set, the shipped digits
// checkpoint's structure and test split accuracy (examples/web/README.md), colormap.js against
// sg::image::map_value, `shadergrad serve` (MIME types, no traversal, a taken port).
// Browser (headless Chromium, WebGL2 and WebGPU on SwiftShader, pages served by `shadergrad serve`): the digits page draws a
// scripted stroke and predicts what an f64 forward pass of the pretrained checkpoint predicts for the page's 8x8;
// the shipped checkpoint predicts ten cleanly drawn mouse digits 0-9 right, each with probability > 0.9;
// fine-tuning raises the probability of the taught label on the taught samples; IndexedDB round trip (the same
// weights after a reload); a changed model refuses the saved weights; a wrong checkpoint is refused; the page's
// checkpoint gives `shadergrad predict --load` the page's probabilities (native -> browser -> native); a lost
// context is recovered with the same predictions; a hidden tab pauses training; training from scratch lowers
// the loss (the fresh weights written into the running runtime); the shapes CNN runs in a Worker with transferred
// frames, pooled textures and the native outputs, and on WebGPU when the page is opened without ?backend;
// screenshots of the canvases are not blank. No timing is asserted.
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "sg/datasets.h"
#include "sg/image.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/sg.h"
#include "sg/train.h"
#include "sg/web_export.h"
#include "test_util.h"
#include "test_web_util.h"

#ifndef SG_CLI
#error "test_web_app needs SG_CLI (the shadergrad binary's path), defined in tests/CMakeLists.txt"
#endif

using Catch::Matchers::Contains;
using nlohmann::json;
using sg::testing::read_file;
using sg::testing::TempDir;
using sg::testing::shell;
namespace fs = std::filesystem;

namespace {

json read_json(const fs::path& p) { return json::parse(read_file(p.string())); }

std::string tests_dir() { return sg::golden::source_dir() + "/tests"; }

/// The digits MLP (Flatten, Linear(64,128), ReLU, Linear(128,10)) in double precision from a checkpoint, softmax.
std::vector<double> mlp_probs(const sg::io::SafetensorsFile& ck, const std::vector<double>& x) {
  auto t = [&](const char* n) {
    const sg::io::NamedTensor* p = ck.find(n);
    REQUIRE(p != nullptr);
    return p->data;
  };
  const auto w1 = t("1.weight"), b1 = t("1.bias"), w2 = t("3.weight"), b2 = t("3.bias");
  std::vector<double> h(128), z(10);
  for (int i = 0; i < 128; ++i) {
    double s = b1[i];
    for (int j = 0; j < 64; ++j) s += double(w1[i * 64 + j]) * x[j];
    h[i] = std::max(0.0, s);
  }
  double mx = -1e300;
  for (int i = 0; i < 10; ++i) {
    double s = b2[i];
    for (int j = 0; j < 128; ++j) s += double(w2[i * 128 + j]) * h[j];
    z[i] = s;
    mx = std::max(mx, s);
  }
  double sum = 0;
  for (double& v : z) sum += (v = std::exp(v - mx));
  for (double& v : z) v /= sum;
  return z;
}

/// Distinct colours in a PNG (a screenshot of one canvas): a blank canvas has one.
size_t distinct_colours(const fs::path& png) {
  sg::image::RGBImage img = sg::image::read_png(png.string());
  std::set<uint32_t> c;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3)
    c.insert(uint32_t(img.rgb[i]) << 16 | uint32_t(img.rgb[i + 1]) << 8 | img.rgb[i + 2]);
  return c.size();
}

}  // namespace

TEST_CASE("export: the structure hash names the model, not the target or the weights, and the train_debug outputs", "[web]") {
  sg::web::ModelExportOptions a;
  a.model = "mlp";
  a.dataset = "digits";
  a.batch = 4;
  a.infer_batch = 1;
  a.check_steps = 1;
  sg::web::ModelExportOptions seeded = a;
  seeded.seed = 99;  // other initial weights and check inputs: the same structure
  sg::web::ModelExportOptions wider = a;
  wider.batch = 8;  // another train graph
  sg::web::ModelExportOptions cnn = a;
  cnn.model = "cnn";
  sg::web::ModelExportOptions debug = a;
  debug.debug_program = true;
  const std::string h = sg::web::structure_hash(sg::web::model_bundle_spec(a));
  CHECK(h.size() == 16);
  CHECK(sg::web::structure_hash(sg::web::model_bundle_spec(a)) == h);  // deterministic (node ids differ)
  CHECK(sg::web::structure_hash(sg::web::model_bundle_spec(seeded)) == h);
  CHECK(sg::web::structure_hash(sg::web::model_bundle_spec(wider)) != h);
  CHECK(sg::web::structure_hash(sg::web::model_bundle_spec(cnn)) != h);
  CHECK(sg::web::structure_hash(sg::web::model_bundle_spec(debug)) != h);

  TempDir d1("sg_webapp_h1"), d2("sg_webapp_h2");
  sg::web::BundleTargets t1, t2;  // t1: webgpu and webgl2; t2: webgl2 alone with another schedule
  t2.webgpu = false;
  t2.webgl2_target.row_planes = 1;
  sg::web::BundleSpec dspec = sg::web::model_bundle_spec(debug);
  sg::web::write_bundle(dspec, t1, d1.path.string());
  sg::web::write_bundle(sg::web::model_bundle_spec(debug), t2, d2.path.string());
  const json b1 = read_json(d1.path / "bundle.json"), b2 = read_json(d2.path / "bundle.json");
  CHECK(b1["metadata"]["structure_hash"] == b2["metadata"]["structure_hash"]);
  CHECK(b1["metadata"]["structure_hash"] == sg::web::structure_hash(dspec));
  // the checkpoint hash is the nn::Sequential's, as shadergrad train --save records it
  auto model = sg::nn::make_model("mlp", 1, 8, 8);
  sg::nn::Rng rng(0);
  model->build(rng);
  CHECK(b1["metadata"]["checkpoint_structure_hash"] == model->structure_hash());
  CHECK(b1["metadata"]["checkpoint_model"] == "mlp");
  CHECK(json::parse(b1["metadata"]["layers"].get<std::string>()).size() == 4);
  // train_debug: the train step's outputs plus every layer's activation and gradient and every parameter's gradient
  const json& p = b1["programs"]["train_debug"];
  std::set<std::string> outs;
  for (const json& o : p["outputs"]) outs.insert(o["name"]);
  for (const char* n : {"loss", "act/0", "act/1", "act/2", "act/3", "grad/0", "grad/1", "grad/2", "grad/3",
                        "gradp/1.weight", "gradp/1.bias", "gradp/3.weight", "gradp/3.bias"})
    CHECK(outs.count(n) == 1);
  CHECK(p["updates"].size() == b1["programs"]["train"]["updates"].size());  // the same Adam step
  // its expected outputs (CPU reference): grad/3 is d(mean cross entropy)/d logits = (softmax - onehot) / batch
  const auto exp = sg::io::load_safetensors((d1.path / "expected.safetensors").string());
  int run = -1;
  for (size_t i = 0; i < b1["checks"]["runs"].size(); ++i)
    if (b1["checks"]["runs"][i]["program"] == "train_debug") run = static_cast<int>(i);
  REQUIRE(run >= 0);
  const json& r = b1["checks"]["runs"][run];
  const auto* logits = exp.find(r["outputs"]["act/3"]["tensor"].get<std::string>());
  const auto* g3 = exp.find(r["outputs"]["grad/3"]["tensor"].get<std::string>());
  const auto* labels = exp.find(r["feeds"]["labels"]["tensor"].get<std::string>());
  REQUIRE((logits && g3 && labels));
  for (int b = 0; b < 4; ++b) {
    double mx = -1e300, s = 0;
    for (int k = 0; k < 10; ++k) mx = std::max(mx, double(logits->data[b * 10 + k]));
    for (int k = 0; k < 10; ++k) s += std::exp(logits->data[b * 10 + k] - mx);
    for (int k = 0; k < 10; ++k) {
      const double want = (std::exp(logits->data[b * 10 + k] - mx) / s - (k == int(labels->data[b]) ? 1 : 0)) / 4;
      CHECK(g3->data[b * 10 + k] == Approx(want).margin(1e-6));
    }
  }
}

TEST_CASE("cnn5: the 128x128 five-conv CNN, its fused conv+bias+relu kernels, and the shapes task", "[web]") {
  auto m = sg::nn::make_model("cnn5", 1, 128, 128, 10);
  sg::nn::Rng rng(0);
  m->build(rng);
  // 5 convs (9*in*out + out) + Linear(16*4*4, 10)
  CHECK(m->num_parameters() == (9 * 1 * 4 + 4) + (9 * 4 * 8 + 8) + (9 * 8 * 8 + 8) + (9 * 8 * 16 + 16) +
                                   (9 * 16 * 16 + 16) + (256 * 10 + 10));
  CHECK_THROWS_WITH(sg::nn::make_model("cnn5", 1, 100, 100), Contains("divisible by 32"));
  sg::web::ModelExportOptions o;
  o.model = "cnn5";
  o.infer_batch = 1;
  o.infer_only = true;
  sg::web::BundleSpec spec = sg::web::model_bundle_spec(o);
  REQUIRE(spec.programs.size() == 1);
  TempDir d("sg_webapp_cnn5");
  sg::web::ExportSummary s = sg::web::write_bundle(spec, sg::web::WebGL2Target{}, d.path.string());
  const json b = read_json(d.path / "bundle.json");
  const json& infer = b["programs"]["infer"];
  CHECK(infer["inputs"][0]["shape"] == json({1, 1, 128, 128}));
  int convs = 0, fused = 0;
  for (const json& k : infer["kernels"]) {
    bool conv = false, relu = false, bias = false;
    for (const json& n : k["nodes"]) {
      const std::string op = n["op"];
      conv = conv || op == "conv2d";
      if (op.rfind("map", 0) == 0) {  // elementwise bodies: "map[(a0 + a1)]" (the bias), "map[relu(a0)]"
        relu = relu || op.find("relu") != std::string::npos;
        bias = bias || op.find('+') != std::string::npos;
      }
    }
    if (conv) ++convs;
    if (conv && relu && bias) ++fused;
  }
  INFO(infer["kernels"].dump().substr(0, 3000));
  CHECK(convs == 5);
  CHECK(fused == 5);  // each conv's bias and ReLU in its kernel: no separate bias or ReLU pass
  // 5 conv+bias+relu, 5 max pools, the Linear (+bias), the softmax's two reductions/normalisation
  CHECK(infer["kernels"].size() == 13);
  // every temporary lives in a pooled buffer of the memory plan (the runtime allocates them once, at set-up; the
  // browser test counts the textures per frame). The plan reuses a buffer only for values of the same physical
  // size, and cnn5's temporaries all differ in size, so here there is one buffer per temporary.
  for (const json& v : infer["values"])
    if (v["kind"] == "temp") CHECK((v.contains("buffer") && v["buffer"].get<size_t>() < infer["buffers"].size()));
  CHECK(s.kernels.size() == 1);

  // the shapes task: deterministic, balanced, pixels in [0, 1], the shape brighter than the background
  sg::data::Dataset a = sg::data::make_shapes(8, 5), a2 = sg::data::make_shapes(8, 5), c = sg::data::make_shapes(8, 6);
  CHECK(a.images == a2.images);
  CHECK(a.images != c.images);
  CHECK((a.c == 1 && a.h == 128 && a.w == 128 && a.num_classes == 4));
  for (int i = 0; i < 8; ++i) CHECK(a.labels[i] == i % 4);
  for (float v : a.images) REQUIRE((v >= 0 && v <= 1));
  CHECK_THROWS_WITH(sg::data::make_shapes(0, 1), Contains("n >= 1"));

  // the convs' init (ConvInit::KaimingRelu) keeps the logits input-dependent: their spread over 8 shapes, computed on
  // the CPU backend, against the same blocks with the torch default init, whose signal fades block by block (with
  // it Adam stayed at loss ln 4: examples/web/README.md)
  // mean over the 4 logits of their standard deviation over the 8 shapes of `a`
  auto spread = [&](sg::nn::Sequential& net) {
    auto cpu = sg::make_cpu_backend();
    sg::Tensor x = sg::input("x", {8, 1, 128, 128});
    sg::Program p;
    p.add_output("logits", net(x));
    const std::vector<float> l = cpu->compile(p)->run({{"x", &a.images}})[0];
    double s = 0;
    for (int k = 0; k < 4; ++k) {
      double mu = 0, v = 0;
      for (int i = 0; i < 8; ++i) mu += l[i * 4 + k] / 8.0;
      for (int i = 0; i < 8; ++i) v += (l[i * 4 + k] - mu) * (l[i * 4 + k] - mu) / 8.0;
      s += std::sqrt(v) / 4;
    }
    return s;
  };
  auto blocks = [](sg::nn::ConvInit init) {
    auto net = std::make_unique<sg::nn::Sequential>();
    int64_t in = 1;
    for (int64_t ch : {4, 8, 8, 16, 16}) {
      net->add<sg::nn::Conv2d>(in, ch, 3, 1, 1, 1, init).add<sg::nn::ReLU>().add<sg::nn::MaxPool2d>(2);
      in = ch;
    }
    net->add<sg::nn::Flatten>().add<sg::nn::Linear>(256, 4);
    sg::nn::Rng r(3);
    net->build(r);
    return net;
  };
  auto kaiming_net = blocks(sg::nn::ConvInit::KaimingRelu), torch_net = blocks(sg::nn::ConvInit::Torch);
  const double kaiming = spread(*kaiming_net), torch = spread(*torch_net);
  INFO("logit spread over 8 shapes: kaiming " << kaiming << ", torch default " << torch);
  CHECK(kaiming > 10 * torch);
  CHECK(kaiming > 1e-2);
  // make_cnn5 builds its convs so: with the same seed, the same spread
  auto m5 = sg::nn::make_model("cnn5", 1, 128, 128, 4);
  sg::nn::Rng r5(3);
  m5->build(r5);
  CHECK(spread(*m5) == Approx(kaiming).epsilon(1e-9));
}

TEST_CASE("the shipped cnn5 checkpoint classifies another generated shapes set as examples/web/README.md says", "[web]") {
  // examples/web/shapes/cnn5.safetensors (trained natively on the H200, scripts/device/phase_cnn5.sh) on 128 shapes
  // of make_shapes(128, seed 3) (neither the training set, seed 1, nor the test set, seed 2), on the CPU backend;
  // the README's line "accuracy on make_shapes(128, seed 3), CPU backend: N/128" is what this counts.
  const std::string dir = sg::golden::source_dir() + "/examples/web";
  const std::string ck = dir + "/shapes/cnn5.safetensors";
  if (!fs::exists(ck)) FAIL(ck + " is missing (examples/web/README.md: the shipped checkpoint and how it was trained)");
  const std::string readme = read_file(dir + "/README.md");
  const std::string key = "accuracy on make_shapes(128, seed 3), CPU backend: ";
  const size_t at = readme.find(key);
  REQUIRE(at != std::string::npos);
  const int documented = std::stoi(readme.substr(at + key.size()));
  auto model = sg::nn::make_model("cnn5", 1, 128, 128, sg::data::kShapeClasses);
  sg::nn::Rng rng(0);
  model->build(rng);
  auto cpu = sg::make_cpu_backend();
  const auto meta = sg::train::load_checkpoint(ck, *model, *cpu);
  bool has_accuracy = false;
  for (auto& [k, v] : meta) has_accuracy = has_accuracy || k == "test_accuracy";
  CHECK(has_accuracy);  // the page shows it (bundle metadata checkpoint_test_accuracy)
  const sg::data::Dataset set = sg::data::make_shapes(128, 3);
  sg::Tensor x = sg::input("x", {64, 1, 128, 128});
  sg::Program p;
  p.add_output("logits", (*model)(x));
  auto exe = cpu->compile(p);
  int correct = 0;
  for (int64_t b = 0; b < 2; ++b) {
    const std::vector<float> xs(set.images.begin() + b * 64 * 128 * 128, set.images.begin() + (b + 1) * 64 * 128 * 128);
    const std::vector<float> logits = exe->run({{"x", &xs}})[0];
    for (int i = 0; i < 64; ++i) {
      auto row = logits.begin() + i * sg::data::kShapeClasses;
      correct += (std::max_element(row, row + sg::data::kShapeClasses) - row) == set.labels[b * 64 + i];
    }
  }
  INFO("correct " << correct << "/128, documented " << documented << "/128");
  CHECK(correct >= documented);
  CHECK(correct >= 96);  // a useful classifier: at least 3 of 4 right (chance is 1 of 4)
}

TEST_CASE("the shipped digits checkpoint is the page's mlp and scores the test split as examples/web/README.md says",
          "[web]") {
  // examples/web/digits/pretrained.safetensors (examples/digits_pretrain.cpp): loads into `shadergrad train --model
  // mlp --dataset digits`'s model (its structure hash), carries its recipe, and an f64 forward pass on the 797 test
  // digits of digits_split(0) (never trained on) gives the accuracy its metadata and the README record.
  const std::string dir = sg::golden::source_dir() + "/examples/web";
  const std::string ck = dir + "/digits/pretrained.safetensors";
  if (!fs::exists(ck)) FAIL(ck + " is missing (examples/web/README.md: build/bin/digits_pretrain writes it)");
  auto model = sg::nn::make_model("mlp", 1, 8, 8);
  sg::nn::Rng rng(0);
  model->build(rng);
  auto cpu = sg::make_cpu_backend();
  std::string recorded, recipe;
  for (auto& [k, v] : sg::train::load_checkpoint(ck, *model, *cpu)) {
    if (k == "test_accuracy") recorded = v;
    if (k == "recipe") recipe = v;
  }
  CHECK_THAT(recipe, Contains("digits_pretrain"));
  REQUIRE(!recorded.empty());
  CHECK_THAT(read_file(dir + "/README.md"), Contains("| **" + recorded + "** |"));
  const auto file = sg::io::load_safetensors(ck);
  const sg::data::Dataset all = sg::data::load_digits();
  const sg::data::Dataset test = all.subset(sg::data::digits_split(0).test);
  int correct = 0;
  for (int64_t i = 0; i < test.n; ++i) {
    const auto p = mlp_probs(file, std::vector<double>(test.sample(i), test.sample(i) + 64));
    correct += std::max_element(p.begin(), p.end()) - p.begin() == test.labels[i];
  }
  INFO("correct " << correct << "/" << test.n << ", recorded " << recorded);
  CHECK(test.n == 797);
  CHECK(fmt::format("{:.4f}", double(correct) / double(test.n)) == recorded);
  CHECK(correct >= 0.97 * 797);
}

TEST_CASE("colormap.js gives the colours of sg::image::map_value", "[web]") {
  json cases = json::array();
  std::vector<std::tuple<float, sg::image::Colormap, float, float>> native;
  const std::pair<const char*, sg::image::Colormap> maps[] = {{"diverging", sg::image::Colormap::Diverging},
                                                              {"viridis", sg::image::Colormap::Viridis},
                                                              {"gray", sg::image::Colormap::Gray}};
  std::vector<float> values;
  for (int i = -40; i <= 40; ++i) values.push_back(i * 0.0371f);
  for (float v : {0.0f, 0.5f, -0.5f, 1e-8f, 1.4999f, 3.0f}) values.push_back(v);
  for (auto& [name, cm] : maps)
    for (float v : values) {
      cases.push_back({v, name, -1.3f, 1.4f});
      native.emplace_back(v, cm, -1.3f, 1.4f);
      cases.push_back({v, name, 0.0f, 1.0f});
      native.emplace_back(v, cm, 0.0f, 1.0f);
    }
  for (const char* special : {"nan", "inf", "-inf"}) {
    cases.push_back({special, "viridis", 0.0f, 1.0f});
    const float v = std::string(special) == "nan" ? NAN : std::string(special) == "inf" ? INFINITY : -INFINITY;
    native.emplace_back(v, sg::image::Colormap::Viridis, 0.0f, 1.0f);
  }
  TempDir d("sg_webapp_cmap");
  const std::string file = d / "cases.json";
  sg::testing::write_file(file, cases.dump());
  std::string out;
  int rc = shell(fmt::format("node '{}/web_app_check.mjs' --colormap \"$(cat '{}')\"", tests_dir(), file), out);
  INFO(out.substr(0, 2000));
  REQUIRE(rc == 0);
  const json got = json::parse(out);
  REQUIRE(got.size() == native.size());
  int differ = 0;
  for (size_t i = 0; i < native.size(); ++i) {
    auto [v, cm, lo, hi] = native[i];
    sg::image::RGB c = sg::image::map_value(v, cm, lo, hi);
    if (got[i] != json({c.r, c.g, c.b})) {
      ++differ;
      UNSCOPED_INFO(fmt::format("value {} {}: native ({}, {}, {}), js {}", v, cases[i][1].dump(), c.r, c.g, c.b,
                                got[i].dump()));
    }
  }
  CHECK(differ == 0);
}

TEST_CASE("preprocess.js makes 8x8 counts as UCI optdigits: bounding box, 32x32, 4x4 blocks", "[web]") {
  // a 100x200 rectangle: its box fills the 32 rows and 16 centred columns (8..23) -> blocks 2..5 of every row full;
  // a 200x48 one: 32 columns and 7.68 rows centred (12.16..19.84): on where at least a quarter of a pixel is ink,
  // so rows 12..19 -> block rows 3 and 4 full; nothing drawn -> null
  std::string out;
  int rc = shell(fmt::format("node '{}/web_app_check.mjs' --preprocess '[[50,150,20,220],[20,220,100,148],[0,0,0,0]]'",
                             tests_dir()), out);
  INFO(out);
  REQUIRE(rc == 0);
  const json r = json::parse(out);
  std::vector<int> tall(64, 0), wide(64, 0);
  for (int y = 0; y < 8; ++y)
    for (int x = 2; x < 6; ++x) tall[y * 8 + x] = 16;
  for (int y = 3; y < 5; ++y)
    for (int x = 0; x < 8; ++x) wide[y * 8 + x] = 16;
  CHECK(r[0]["counts"] == json(tall));
  CHECK(r[0]["bbox"] == json({{"x0", 50}, {"y0", 20}, {"x1", 149}, {"y1", 219}}));
  CHECK(r[1]["counts"] == json(wide));
  CHECK(r[2].is_null());
}

TEST_CASE("shadergrad serve: 127.0.0.1, MIME types, no directory traversal, a taken port named", "[web]") {
  TempDir root("sg_webapp_serve"), outside("sg_webapp_outside");
  fs::create_directories(root.path / "sub");
  for (const char* f : {"a.mjs", "b.wasm", "c.wgsl", "d.json", "e.html", "sub/f.js", "g.safetensors"})
    sg::testing::write_file(root / f, std::string("content of ") + f);
  sg::testing::write_file(outside / "secret.txt", "secret");
  fs::create_symlink(outside.path / "secret.txt", root.path / "link.txt");
  const std::string log = root / "serve.log";
  // our own server, in the background; its pid from the shell, stopped by that pid at the end
  std::string out;
  REQUIRE(shell(fmt::format("'{}' serve '{}' --port 0 > '{}' 2>&1 & echo $! > '{}/pid'", SG_CLI, root.path.string(),
                            log, root.path.string()), out) == 0);
  int port = 0;
  for (int i = 0; i < 200 && !port; ++i) {  // until it prints its address (not a timing assertion)
    const std::string l = read_file(log);
    const size_t at = l.find("http://127.0.0.1:");
    if (at != std::string::npos && l.find('/', at + 17) != std::string::npos) port = std::stoi(l.substr(at + 17));
    else std::system("sleep 0.05");
  }
  const std::string pid = read_file(root / "pid");
  REQUIRE(port > 0);
  auto get = [&](const std::string& path) {
    std::string o;
    shell(fmt::format("curl -s --path-as-is -o /dev/null -w '%{{http_code}} %{{content_type}}' "
                      "'http://127.0.0.1:{}{}'", port, path), o);
    return o;
  };
  CHECK(get("/a.mjs") == "200 text/javascript; charset=utf-8");
  CHECK(get("/b.wasm") == "200 application/wasm");
  CHECK(get("/c.wgsl") == "200 text/wgsl; charset=utf-8");
  CHECK(get("/d.json") == "200 application/json");
  CHECK(get("/e.html") == "200 text/html; charset=utf-8");
  CHECK(get("/sub/f.js") == "200 text/javascript; charset=utf-8");
  CHECK(get("/g.safetensors") == "200 application/octet-stream");
  CHECK_THAT(get("/nothing.js"), Contains("404"));
  CHECK_THAT(get("/../" + outside.path.filename().string() + "/secret.txt"), !Contains("200"));
  CHECK_THAT(get("/sub/%2e%2e/%2e%2e/" + outside.path.filename().string() + "/secret.txt"), !Contains("200"));
  CHECK_THAT(get("/link.txt"), Contains("403"));  // a symlink out of the folder
  CHECK_THAT(get("/e.html%00.js"), Contains("400"));  // served e.html as text/javascript before
  // 64 idle connections (opened, never a request): a request still gets its answer (it waited behind all of them)
  shell(fmt::format("python3 -c \"import socket, time; s = [socket.create_connection(('127.0.0.1', {})) for _ in "
                    "range(64)]; open('{}/idle', 'w').close(); time.sleep(15)\" > /dev/null 2>&1 &",
                    port, root.path.string()), out);
  for (int i = 0; i < 200 && !fs::exists(root.path / "idle"); ++i) std::system("sleep 0.05");
  shell(fmt::format("curl -s --max-time 5 -o /dev/null -w '%{{http_code}}' 'http://127.0.0.1:{}/d.json'", port), out);
  CHECK(out == "200");
  // the content as written, and the headers
  shell(fmt::format("curl -s -D - 'http://127.0.0.1:{}/d.json'", port), out);
  CHECK_THAT(out, Contains("content of d.json"));
  CHECK_THAT(out, Contains("Cross-Origin-Opener-Policy: same-origin"));
  // a second server on the same port: refused, naming the port and what to do
  // (timeout: a server that wrongly binds a taken port would serve forever: exit 124 then)
  int rc = shell(fmt::format("timeout 30 '{}' serve '{}' --port {}", SG_CLI, root.path.string(), port), out);
  CHECK(rc == 1);
  CHECK_THAT(out, Contains(fmt::format("127.0.0.1:{}", port)));
  CHECK_THAT(out, Contains("taken"));
  CHECK_THAT(out, Contains("--port"));
  rc = shell(fmt::format("'{}' serve '{}/missing'", SG_CLI, root.path.string()), out);
  CHECK(rc == 1);
  CHECK_THAT(out, Contains("is not a directory"));
  shell("kill " + pid, out);
}

TEST_CASE("the digits page and the shapes Worker in headless Chromium (WebGL2, WebGPU), served by shadergrad serve",
          "[web][browser]") {
  sg::testing::browser_tests_dir();
  TempDir root("sg_webapp_site"), shots("sg_webapp_shots");
  std::string out;
  int rc = shell(fmt::format("bash '{}/scripts/build_web_demo.sh' '{}' '{}'",
                             sg::golden::source_dir(), root.path.string(), SG_CLI), out);
  INFO(out);
  REQUIRE(rc == 0);
  const fs::path digits = root.path / "digits";
  // a changed model (another train batch: another graph) and a checkpoint of another model
  rc = shell(fmt::format("'{}' export --model mlp --dataset digits --batch 8 --infer-batch 1 --check-steps 0 --out '{}'",
                         SG_CLI, (digits / "bundle_changed").string()), out);
  REQUIRE(rc == 0);
  {
    auto cnn = sg::nn::make_model("cnn", 1, 8, 8);
    sg::nn::Rng rng(1);
    cnn->build(rng);
    auto cpu = sg::make_cpu_backend();
    sg::train::save_checkpoint((digits / "other_model.safetensors").string(), *cnn, *cpu, "cnn", {{"dataset", "digits"}});
  }
  rc = shell(fmt::format("node '{}/web_app_check.mjs' '{}' '{}' '{}' webgl2 webgpu", tests_dir(), root.path.string(),
                         SG_CLI, shots.path.string()), out);
  INFO(out.substr(0, 6000));
  REQUIRE(rc == 0);
  const json res = json::parse(out.substr(out.rfind("{\"results\"")));
  for (const std::string backend : {"webgl2", "webgpu"}) {
  INFO("backend " << backend);
  const json& d = res["results"]["backends"][backend]["digits"];
  const json bundle = read_json(digits / "bundle/bundle.json");
  const std::string hash = bundle["metadata"]["structure_hash"];

  // start: the backend and why; the bundle's checks (train, train_debug, infer) equal the native CPU backend's
  CHECK(d["start"]["backend"] == backend);
  CHECK(d["start"]["attempts"].size() >= 1);
  CHECK(d["start"]["structure_hash"] == hash);
  CHECK(d["checks"]["ok"] == true);
  CHECK(d["start"]["timeline"]["first_prediction_ms"].get<double>() > 0);

  // the stroke's prediction = an f64 forward pass of the pretrained checkpoint on the page's 8x8 / 16
  const auto pre = sg::io::load_safetensors((digits / "pretrained.safetensors").string());
  auto probs_of = [&](const sg::io::SafetensorsFile& ck, const json& x) {
    std::vector<double> v;
    for (const json& e : x) v.push_back(e.get<double>());
    return mlp_probs(ck, v);
  };
  const json& drawn = d["drawn"];
  int ink = 0;
  for (const json& c : drawn["counts"]) {
    REQUIRE((c.get<int>() >= 0 && c.get<int>() <= 16));
    ink += c.get<int>() > 0;
  }
  CHECK(ink >= 8);  // the 7 covers several blocks
  for (size_t i = 0; i < 64; ++i) CHECK(drawn["x"][i].get<double>() == drawn["counts"][i].get<double>() / 16);
  const auto want = probs_of(pre, drawn["x"]);
  for (int k = 0; k < 10; ++k) CHECK(drawn["probs"][k].get<double>() == Approx(want[k]).margin(2e-5));

  // the pretrained checkpoint on ten cleanly drawn digits 0-9 (tests/web_app_check.mjs CLEAN_DIGITS, mouse strokes
  // never trained on): every one predicted right with probability > 0.9, as the page shows it, and equal to an f64
  // forward pass of the checkpoint on the page's 8x8
  if (backend == "webgl2") {  // drawn on the first backend only (web_app_check.mjs)
  const json& clean = d["clean"];
  REQUIRE(clean.size() == 10);
  int confident = 0;
  std::string seen;
  for (int digit = 0; digit < 10; ++digit) {
    INFO("drawn " << digit);
    const json& c = clean[digit];
    const auto f64 = probs_of(pre, c["x"]);
    int best = 0;
    for (int k = 0; k < 10; ++k) {
      CHECK(c["probs"][k].get<double>() == Approx(f64[k]).margin(2e-5));
      if (c["probs"][k].get<double>() > c["probs"][best].get<double>()) best = k;
    }
    const double p = c["probs"][best];
    CHECK(c["shown"]["digit"] == best);  // the highlighted bar and its number
    CHECK(c["shown"]["p"].get<double>() == Approx(p).margin(5e-4));
    confident += best == digit && p > 0.9;
    seen += fmt::format(" {}->{} ({:.3f})", digit, best, p);
  }
  INFO("drawn -> predicted (probability):" << seen);
  CHECK(confident == 10);
  }

  // fine-tuning raises the taught label's probability on every taught sample
  const int label = d["label"];
  CHECK(d["steps"] == 40);
  for (size_t i = 0; i < d["samples"].size(); ++i) {
    const double before = d["samples"][i]["probs"][label], after = d["after"][i][label];
    INFO("sample " << i << " p(" << label << ") " << before << " -> " << after);
    CHECK(after > before);
  }
  CHECK(d["after"][0][label].get<double>() > 0.5);
  // the gradient flow: one figure per layer output and gradient, finite gradient norms, train_debug's outputs
  CHECK(d["flow_figures"].size() == 8);
  for (auto& [n, v] : d["norms"].items()) CHECK((v.is_number() && v.get<double>() > 0 && std::isfinite(v.get<double>())));
  CHECK(d["debug"]["grad/1"] == 16 * 128);
  CHECK(d["debug"]["act/3"] == 16 * 10);

  // IndexedDB: after a reload the saved weights (not the pretrained ones) come back, bit for bit
  CHECK(d["reload"]["saved"] == "loaded");
  CHECK(d["weight_after_reload"] == d["weight_before_reload"]);
  CHECK(d["probs_after_reload"] == d["probs_before_reload"]);
  // a changed model says so and does not load them
  CHECK(d["changed"]["saved"] == "mismatch");
  CHECK_THAT(d["changed"]["persist"].get<std::string>(), Contains("another model structure"));
  CHECK(d["changed"]["structure_hash"] != hash);
  CHECK(d["wrong_checkpoint"]["refused"] == true);
  CHECK_THAT(d["wrong_checkpoint"]["message"].get<std::string>(), Contains("another model structure"));
  // native -> browser: the pretrained checkpoint imported gives the pretrained predictions
  for (int k = 0; k < 10; ++k) CHECK(d["imported"][k].get<double>() == Approx(want[k]).margin(2e-5));

  // browser -> native: the page's checkpoint, read by shadergrad predict --load, and by an f64 forward pass
  const fs::path ck = shots.path / (backend + "_browser.safetensors");
  const auto page_ck = sg::io::load_safetensors(ck.string());
  CHECK(page_ck.checksum_verified);
  const auto want_ft = probs_of(page_ck, drawn["x"]);
  for (int k = 0; k < 10; ++k) CHECK(d["probs_before_reload"][k].get<double>() == Approx(want_ft[k]).margin(2e-5));
  {
    // an 8x8 PNG of the drawn digit: gray v = round(255 * counts / 16), the model input v / 255
    std::vector<uint8_t> rgb;
    std::vector<double> xq;
    for (const json& c : drawn["counts"]) {
      const uint8_t v = static_cast<uint8_t>(std::lround(255.0 * c.get<int>() / 16));
      rgb.insert(rgb.end(), {v, v, v});
      xq.push_back(v / 255.0);
    }
    sg::image::write_png((shots.path / "drawn.png").string(), 8, 8, rgb);
    rc = shell(fmt::format("'{}' predict --load '{}' --input '{}' --backend cpu", SG_CLI, ck.string(),
                           (shots.path / "drawn.png").string()), out);
    INFO(out);
    REQUIRE(rc == 0);
    const auto native = mlp_probs(page_ck, xq);
    for (int k = 0; k < 10; ++k) CHECK_THAT(out, Contains(fmt::format("  {:<18} {:.4f}", k, native[k])));
  }

  // a lost context: reported and recovered by reloading the weights, with the same predictions
  CHECK(d["lost"]["had"] == true);
  CHECK(d["lost"]["info"]["recoveries"] == 1);
  bool said = false;
  for (const json& e : d["lost"]["info"]["events"]) said = said || e["kind"] == "lost";
  CHECK(said);
  for (int k = 0; k < 10; ++k)
    CHECK(d["lost"]["probs"][k].get<double>() == Approx(d["probs_after_reload"][k].get<double>()).margin(1e-6));
  // a hidden tab pauses training and says so; shown again, it finishes
  CHECK_THAT(d["hidden"]["during"]["status"].get<std::string>(), Contains("paused: the tab is hidden"));
  CHECK(d["hidden"]["during"]["losses"].get<int>() < 10);
  CHECK(d["hidden"]["steps"] == 10);
  // from scratch: the loss falls (means of the first and last 20 steps)
  const json& l = d["scratch"]["losses"];
  REQUIRE(l.size() == 100);
  double first = 0, last = 0;
  for (int i = 0; i < 20; ++i) first += l[i].get<double>(), last += l[80 + i].get<double>();
  CHECK(last < 0.7 * first);
  // screenshots of the canvases are not blank
  for (const char* s : {"pad", "seen", "bars", "loss", "flow", "scratch_loss", "shapes_view"}) {
    const fs::path png = shots.path / fmt::format("{}_{}.png", backend, s);
    INFO(png);
    REQUIRE(fs::exists(png));
    CHECK(distinct_colours(png) > 2);
  }

  // the shapes CNN in a Worker
  const json& w = res["results"]["backends"][backend]["shapes"];
  CHECK(w["ready"]["backend"] == backend);
  CHECK(w["worker_checks"]["ok"] == true);  // the Worker's outputs equal the native CPU backend's
  const int textures = w["ready"]["textures"];
  CHECK(textures > 0);
  int right = 0, frames = 0;  // the shipped checkpoint on the page's frames (drawn by frames.js, not the native generator)
  for (const char* kind : {"bitmaps", "buffers"})
    for (const json& f : w[kind]) {
      CHECK(f["textures"] == textures);  // pooled: no texture created per frame
      double s = 0;
      int best = 0;
      for (size_t i = 0; i < f["probs"].size(); ++i) {
        s += f["probs"][i].get<double>();
        if (f["probs"][i].get<double>() > f["probs"][best].get<double>()) best = static_cast<int>(i);
      }
      CHECK(s == Approx(1).margin(1e-5));
      right += best == f["k"].get<int>();
      ++frames;
    }
  INFO(right << " of " << frames << " frames classified as drawn");
  CHECK(frames == 8);
  CHECK(right >= 6);
  for (const json& b : w["detached"]) CHECK(b == 0);  // every frame transferred, none copied
  CHECK(w["disposed"] == true);
  }
  // the shapes page as a visitor opens it (no ?backend): the Worker picks WebGPU (SwiftShader's adapter here) and
  // says so, with the weights it runs
  const json& sa = res["results"]["shapes_auto"];
  INFO(sa.dump().substr(0, 2000));
  CHECK(sa["ready"]["backend"] == "webgpu");
  CHECK(sa["ready"]["attempts"][0]["backend"] == "webgpu");
  CHECK(sa["ready"]["attempts"][0]["ok"] == true);
  CHECK_THAT(sa["text"].get<std::string>(), Contains("backend (in the Worker): webgpu"));
  CHECK_THAT(sa["text"].get<std::string>(), Contains("weights: trained natively"));
  double sum = 0;
  for (const json& p : sa["frame"]["probs"]) sum += p.get<double>();
  CHECK(sum == Approx(1).margin(1e-5));
}
