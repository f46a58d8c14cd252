// Tests of the `shadergrad` command line and the examples, run as processes (popen): option errors, train ->
// checkpoint + metrics, predict on a real test digit (PGM and PNG) checked against an in-process evaluation,
// predict errors, info / info --json, dump (plan.json against the files), and example smoke runs (digits_cnn
// must print exactly the numbers `shadergrad train` prints for the same configuration).
// The binaries' paths come from CMake (SG_CLI, SG_EXAMPLE_MNIST_MLP, SG_EXAMPLE_DIGITS_CNN).
#include <catch2/catch.hpp>

#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compress.h"
#include "sg/image.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/train.h"

#ifndef SG_CLI
#error "test_cli needs SG_CLI (the shadergrad binary's path), defined in tests/CMakeLists.txt"
#endif

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sg_test_cli_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

struct Proc {
  int rc = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs `binary args` with stderr merged into stdout.
Proc run(const std::string& binary, const std::string& args) {
  std::string cmd = fmt::format("'{}' {} 2>&1", binary, args);
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Proc r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
Proc cli(const std::string& args) { return run(SG_CLI, args); }

using sg::testing::read_file;

/// "epoch 1/2: train loss 2.3017, test accuracy 0.0916" lines of a training log (timings cut off; with a schedule or
/// clipping ", lr 0.0094, grad norm 0.5641" before the accuracy).
std::vector<std::string> epoch_lines(const std::string& log) {
  std::vector<std::string> r;
  std::regex re(R"(epoch \d+/\d+: train loss [0-9.]+(?:, (?:lr|grad norm) [0-9.e+-]+)*, test accuracy [0-9.]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it)
    r.push_back(it->str());
  return r;
}

// Training flags shared by the CLI run and the digits_cnn example (whose defaults they are).
constexpr const char* kDigitsFlags = "--dataset digits --model cnn --epochs 2 --lr 2e-3 --batch 64";

/// One `shadergrad train ... --save F --metrics M` run, shared by the tests below.
struct Trained {
  TempDir dir;
  std::string ckpt = dir / "cnn.safetensors", metrics = dir / "metrics.json";
  Proc proc;
  Trained() { proc = cli(fmt::format("train {} --save {} --metrics {}", kDigitsFlags, ckpt, metrics)); }
};
const Trained& trained() {
  static Trained t;
  return t;
}

struct Prediction {
  int label = -1;
  double p = 0;
  std::vector<double> probs;
};
/// Parses predict's output: "prediction: 3 (p = 0.1234)" then ten "  <label> <probability>" lines.
Prediction parse_prediction(const std::string& out) {
  Prediction r;
  std::istringstream in(out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, std::regex(R"(^prediction: (\d+) \(p = ([0-9.]+)\))"))) {
      r.label = std::stoi(m[1]);
      r.p = std::stod(m[2]);
    } else if (std::regex_match(line, m, std::regex(R"(^\s+(\d+)\s+([0-9.]+)\s*$)"))) {
      REQUIRE(std::stoi(m[1]) == static_cast<int>(r.probs.size()));
      r.probs.push_back(std::stod(m[2]));
    }
  }
  return r;
}

}  // namespace

TEST_CASE("cli: bad options fail with a clear message and a non-zero exit code", "[cli]") {
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{{"train --model vgg", "--model"},
                                         {"export --model vgg --out x", "--model"},
                                         // resnet is not a Sequential: no per-layer train_debug program
                                         {"export --model resnet --debug-program --out x", "--debug-program"},
                                         {"train --dataset cifar", "--dataset"},
                                         {"train --epochs 0", "--epochs"},
                                         {"train --epochs -3", "--epochs"},
                                         {"train --batch x", "--batch"},
                                         {"train --lr -1", "--lr"},
                                         {"train --backend metal", "--backend"},
                                         {"train --optimizer lbfgs", "--optimizer"},
                                         {"train --train-limit -5", "--train-limit"},
                                         {"train --frobnicate", "--frobnicate"},
                                         {"predict --input x.png", "--load"},
                                         {"dump --model mlp", "--out"},
                                         {"frobnicate", "frobnicate"}}) {
    INFO(c.args);
    Proc p = cli(c.args);
    INFO(p.out);
    CHECK(p.rc != 0);
    CHECK_THAT(p.out, Contains(c.expect));
    CHECK(p.out.size() < 400);  // a message, not a dump
    CHECK(p.out.find("shadergrad train:") == std::string::npos);  // nothing was trained
  }
  // Ranges are stated in words (CLI11's PositiveNumber printed "not in range 0.000000 to 1.797...e308").
  CHECK_THAT(cli("train --epochs 0").out, Contains("whole number from 1"));
}

TEST_CASE("cli: train --save --metrics writes a loadable checkpoint and the metrics JSON", "[cli]") {
  const Trained& t = trained();
  INFO(t.proc.out);
  REQUIRE(t.proc.rc == 0);
  CHECK(epoch_lines(t.proc.out).size() == 2);
  CHECK_THAT(t.proc.out, Contains("saved checkpoint " + t.ckpt));
  auto j = nlohmann::json::parse(read_file(t.metrics));
  CHECK(j.at("model") == "cnn");
  CHECK(j.at("dataset") == "digits");
  CHECK(j.at("epochs") == 2);
  CHECK(j.at("steps") == 20);  // 600 samples, batch 64: 10 steps per epoch
  CHECK_FALSE(j.at("renderer").get<std::string>().empty());
  for (const char* key : {"backend", "final_train_loss", "test_accuracy", "steps_per_second", "kernels_per_step"})
    CHECK(j.contains(key));
  // The log's last epoch line carries the same numbers as the JSON.
  CHECK_THAT(t.proc.out, Contains(fmt::format("train loss {:.4f}, test accuracy {:.4f}",
                                              j.at("final_train_loss").get<double>(),
                                              j.at("test_accuracy").get<double>())));
}

TEST_CASE("cli: predict classifies a real test digit (PGM and PNG) like an in-process evaluation", "[cli]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir dir;
  // A real digit from the test split, as an 8x8 PGM (maxval 16: the digits' own 0..16 levels) and as a 32x32
  // PNG (each pixel a 4x4 block; predict's area-average resize brings it back to 8x8).
  auto test = sg::train::load_split("digits").second;
  const int index = 5;
  const float* px = test.sample(index);
  std::string pgm = "P5\n8 8\n16\n";
  for (int i = 0; i < 64; ++i) pgm += static_cast<char>(std::lround(px[i] * 16));
  std::ofstream(dir / "digit.pgm", std::ios::binary) << pgm;
  std::vector<uint8_t> rgb(32 * 32 * 3);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c)
        rgb[(y * 32 + x) * 3 + c] = static_cast<uint8_t>(std::lround(px[(y / 4) * 8 + x / 4] * 255));
  sg::image::write_png(dir / "digit.png", 32, 32, rgb);

  // The reference: the same checkpoint evaluated in this process on the CPU backend.
  auto model = sg::nn::make_model("cnn", 1, 8, 8);
  sg::nn::Rng rng(42);
  model->build(rng);
  auto be = sg::make_cpu_backend();
  sg::train::load_checkpoint(t.ckpt, *model, *be);
  sg::Tensor x = sg::input("x", {1, 1, 8, 8});
  sg::Program prog;
  prog.add_output("probs", sg::softmax((*model)(x), 1));
  auto exe = be->compile(prog);

  for (std::string image : {dir / "digit.pgm", dir / "digit.png"}) {
    INFO(image);
    Proc p = cli(fmt::format("predict --load {} --input {}", t.ckpt, image));
    INFO(p.out);
    REQUIRE(p.rc == 0);
    Prediction pr = parse_prediction(p.out);
    REQUIRE(pr.probs.size() == 10);
    double sum = 0;
    for (double v : pr.probs) sum += v;
    CHECK(sum == Approx(1.0).margin(6e-4));  // ten values printed to 4 decimals
    REQUIRE(pr.label >= 0);
    CHECK(pr.p == pr.probs[pr.label]);
    CHECK(pr.probs[pr.label] == *std::max_element(pr.probs.begin(), pr.probs.end()));
    std::vector<float> pixels = sg::image::read_image_gray(image, 8, 8);
    for (int i = 0; i < 64; ++i) CHECK(pixels[i] == Approx(px[i]).margin(0.5 / 255 + 1e-6));
    std::vector<float> want = exe->run({{"x", &pixels}})[0];
    for (int i = 0; i < 10; ++i) CHECK(pr.probs[i] == Approx(want[i]).margin(1e-4));
  }
}

TEST_CASE("cli: predict with a missing or corrupt checkpoint or image fails clearly", "[cli]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir dir;
  std::vector<uint8_t> rgb(8 * 8 * 3, 0);
  sg::image::write_png(dir / "blank.png", 8, 8, rgb);
  std::string good = read_file(t.ckpt);
  std::ofstream(dir / "truncated.safetensors", std::ios::binary) << good.substr(0, good.size() / 2);
  std::string flipped = good;
  flipped[8] = '!';
  std::ofstream(dir / "flipped.safetensors", std::ios::binary) << flipped;
  for (std::string ckpt : {dir / "missing.safetensors", dir / "truncated.safetensors", dir / "flipped.safetensors"}) {
    Proc p = cli(fmt::format("predict --load {} --input {}", ckpt, dir / "blank.png"));
    INFO(p.out);
    CHECK(p.rc != 0);
    CHECK_THAT(p.out, Contains("shadergrad: ") && Contains(ckpt));
    CHECK(p.out.find("prediction:") == std::string::npos);
  }
  Proc p = cli(fmt::format("predict --load {} --input {}", t.ckpt, dir / "missing.png"));
  INFO(p.out);
  CHECK(p.rc != 0);
  CHECK_THAT(p.out, Contains(dir / "missing.png"));
}

TEST_CASE("cli: info and info --json describe the GLES device", "[cli]") {
  Proc text = cli("info"), json = cli("info --json");
  INFO(text.out << json.out);
  REQUIRE(text.rc == 0);
  REQUIRE(json.rc == 0);
  auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.contains("renderer"));
  std::string renderer = j.at("renderer").get<std::string>();
  CHECK_FALSE(renderer.empty());
  CHECK(j.at("fp32_roundtrip_ok") == true);
  CHECK(j.at("max_texture_size").get<int64_t>() >= 4096);
  CHECK_THAT(text.out, Contains("renderer") && Contains(renderer));
  // the Vulkan device (lavapipe in CI) and its compute limits
  REQUIRE(j.contains("vulkan"));
  CHECK(j.at("vulkan").at("available") == true);
  CHECK(j.at("vulkan").at("limits").at("maxComputeWorkGroupInvocations").get<int64_t>() >= 128);
  CHECK_THAT(text.out, Contains("Vulkan backend: available") && Contains(j.at("vulkan").at("name").get<std::string>()));
}

TEST_CASE("cli: dump writes plan.json and every kernel's GLSL 4.50 and SPIR-V and GLSL ES sources", "[cli]") {
  TempDir dir;
  std::string out = dir / "mlp";
  Proc p = cli(fmt::format("dump --model mlp --out {}", out));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  auto plan = nlohmann::json::parse(read_file(out + "/plan.json"));
  REQUIRE(plan.at("kernels").is_array());
  size_t n = plan.at("kernels").size();
  CHECK(n > 0);
  CHECK_THAT(p.out, Contains(fmt::format("wrote {} kernels", n)));
  std::set<std::string> want = {"plan.json"}, have;
  for (auto& k : plan.at("kernels")) {
    std::string name = k.at("name").get<std::string>();
    for (const char* ext : {".glsl", ".spv", ".spvasm", ".frag"}) want.insert(name + ext);
    INFO(name);
    CHECK(read_file(out + "/" + name + ".glsl").rfind("#version 450", 0) == 0);
    CHECK(read_file(out + "/" + name + ".frag").rfind("#version 300 es", 0) == 0);
    std::string spv = read_file(out + "/" + name + ".spv");
    REQUIRE(spv.size() >= 20);
    CHECK(static_cast<uint8_t>(spv[0]) == 0x03);  // SPIR-V magic 0x07230203, little-endian
    CHECK(static_cast<uint8_t>(spv[3]) == 0x07);
    CHECK_THAT(read_file(out + "/" + name + ".spvasm"), Contains("OpEntryPoint"));
  }
  for (auto& e : fs::directory_iterator(out)) have.insert(e.path().filename().string());
  CHECK(have == want);  // exactly the kernels of plan.json, no strays
  Proc bad = cli(fmt::format("dump --model mlp --target hlsl --out {}", dir / "x"));
  CHECK(bad.rc != 0);
  CHECK_THAT(bad.out, Contains("hlsl"));
  // one target writes only its format (plus plan.json), and a later dump into the same directory replaces the files
  for (auto [target, exts] : {std::pair<std::string, std::set<std::string>>{"spirv", {".spv", ".spvasm"}},
                              {"glsl450", {".glsl"}}, {"glsl-es", {".frag"}}, {"glsl-es-compute", {".comp"}},
                              {"spirv-vulkan", {".glsl", ".spv", ".spvasm"}}}) {
    INFO(target);
    Proc t = cli(fmt::format("dump --model mlp --target {} --out {}", target, out));
    REQUIRE(t.rc == 0);
    std::set<std::string> got;
    for (auto& e : fs::directory_iterator(out))
      if (e.path().filename() != "plan.json") got.insert(e.path().extension().string());
    CHECK(got == exts);
  }
  CHECK_THAT(p.out, Contains("schedule: target glsl-es-fragment on llvmpipe") && Contains("union-domain kernels off"));
  // --gpu --no-union: the GPU schedule without unions (split-K adds the partial sums of x.W1^T: one kernel more, a
  // *_partial kernel); --gpu: with union-domain kernels, fewer
  Proc g = cli(fmt::format("dump --model mlp --gpu --no-union --out {}", dir / "gpu"));
  REQUIRE(g.rc == 0);
  auto gplan = nlohmann::json::parse(read_file((dir / "gpu") + "/plan.json"));
  CHECK(gplan.at("kernels").size() == n + 1);
  bool partial = false;
  for (auto& k : gplan.at("kernels")) partial |= k.at("name").get<std::string>().find("_partial") != std::string::npos;
  CHECK(partial);
  Proc u = cli(fmt::format("dump --model mlp --gpu --out {}", dir / "gpu_union"));
  REQUIRE(u.rc == 0);
  CHECK_THAT(u.out, Contains("union-domain kernels on"));
  auto uplan = nlohmann::json::parse(read_file((dir / "gpu_union") + "/plan.json"));
  CHECK(uplan.at("kernels").size() < n + 1);
}

TEST_CASE("examples: digits_cnn prints exactly what `shadergrad train` prints for the same model", "[cli][examples]") {
#ifdef SG_EXAMPLE_DIGITS_CNN
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  Proc p = run(SG_EXAMPLE_DIGITS_CNN, "--epochs 2");
  INFO(p.out << "\n" << t.proc.out);
  REQUIRE(p.rc == 0);
  auto lines = epoch_lines(p.out);
  CHECK(lines.size() == 2);
  // Same init (Rng(0), state_dict order), same shuffle (seed 0), same Adam: the same numbers.
  CHECK(lines == epoch_lines(t.proc.out));
  Proc small = run(SG_EXAMPLE_DIGITS_CNN, "--epochs 1 --limit 100");
  INFO(small.out);
  CHECK(small.rc == 0);
  CHECK_THAT(small.out, Contains("100 train / 797 test"));
  CHECK(epoch_lines(small.out).size() == 1);
  Proc bad = run(SG_EXAMPLE_DIGITS_CNN, "--epochs");
  CHECK(bad.rc != 0);
  CHECK_THAT(bad.out, Contains("--epochs"));
#else
  WARN("digits_cnn not built (SG_BUILD_EXAMPLES=OFF)");
#endif
}

TEST_CASE("examples: mnist_mlp smoke run (1 epoch on 256 images)", "[cli][examples]") {
#ifdef SG_EXAMPLE_MNIST_MLP
  Proc p = run(SG_EXAMPLE_MNIST_MLP, "--epochs 1 --limit 256");
  INFO(p.out);
  REQUIRE(p.rc == 0);
  CHECK_THAT(p.out, Contains("256 train / 10000 test"));
  auto lines = epoch_lines(p.out);
  REQUIRE(lines.size() == 1);
  std::smatch m;
  REQUIRE(std::regex_search(lines[0], m, std::regex(R"(train loss ([0-9.]+), test accuracy ([0-9.]+))")));
  double loss = std::stod(m[1]), acc = std::stod(m[2]);
  CHECK(loss > 0.5);
  CHECK(loss < 2.4);  // two Adam steps from ~ln 10
  CHECK(acc > 0.15);  // better than chance (0.10) already
  CHECK(acc <= 1.0);
  Proc bad = run(SG_EXAMPLE_MNIST_MLP, "--limit abc");
  CHECK(bad.rc != 0);
#else
  WARN("mnist_mlp not built (SG_BUILD_EXAMPLES=OFF)");
#endif
}

TEST_CASE("cli: dump of multi-output kernels: plan.json render targets match the sources, stable across dumps",
          "[cli][mrt]") {
  TempDir dir;
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    std::string a = dir / (model + "_a"), b = dir / (model + "_b");
    REQUIRE(cli(fmt::format("dump --model {} --out {}", model, a)).rc == 0);
    REQUIRE(cli(fmt::format("dump --model {} --out {}", model, b)).rc == 0);
    auto plan = nlohmann::json::parse(read_file(a + "/plan.json"));
    CHECK(read_file(a + "/plan.json") == read_file(b + "/plan.json"));
    int multi = 0;
    for (auto& k : plan.at("kernels")) {
      std::string name = k.at("name").get<std::string>();
      INFO(name);
      for (const char* ext : {".glsl", ".frag"}) CHECK(read_file(a + "/" + name + ext) == read_file(b + "/" + name + ext));
      const auto& outs = k.at("outputs");
      if (outs.size() < 2) continue;
      ++multi;
      std::string glsl = read_file(a + "/" + name + ".glsl"), frag = read_file(a + "/" + name + ".frag");
      for (size_t j = 0; j < outs.size(); ++j) {
        CHECK(outs[j].at("render_target").get<size_t>() == j);
        std::string v = outs[j].at("name").get<std::string>();
        // The header names every output and the source declares it at location = render_target.
        CHECK_THAT(glsl, Contains(fmt::format("// output {} {} = n", j, v)));
        CHECK_THAT(frag, Contains(fmt::format("// output {} {} = n", j, v)));
        CHECK_THAT(frag, Contains(fmt::format("layout(location = {}) out vec4 out_{};", j, v)));
        // one iteration domain per block (union-domain kernels draw blocks of different shapes over the extent)
        const int block = outs[j].value("block", 0);
        size_t first = 0;
        while (outs[first].value("block", 0) != block) ++first;
        CHECK(outs[j].at("numel") == outs[first].at("numel"));
        CHECK(outs[j].at("texture")[0] <= k.at("extent")[0]);
        CHECK(outs[j].at("texture")[1] <= k.at("extent")[1]);
        if (k.at("blocks").get<int>() > 1) CHECK_THAT(glsl, Contains(fmt::format("// block {}: ", block)));
      }
      for (auto& n : k.at("nodes")) CHECK_THAT(glsl, Contains(fmt::format("//   n{} ", n.at("node").get<int>())));
    }
    CHECK(multi > 0);  // Adam's m, v and parameter of a weight are one kernel
  }
}

TEST_CASE("cli: debug over multi-output kernels: capture by kernel name, break on it, every output's PNG", "[cli][mrt]") {
  TempDir dir;
  std::string out = dir / "dbg";
  // Find a multi-output kernel of the debug run's plan from its own stats.json (a first run capturing everything).
  Proc p = cli(fmt::format("debug --model mlp --dataset digits --steps 1 --batch 4 --out {}", out));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  auto stats = nlohmann::json::parse(read_file(out + "/stats.json"));
  std::string kname;
  std::vector<nlohmann::json> entries;
  for (auto& l : stats.at("launches"))
    if (l.at("outputs").get<int>() >= 3 && (kname.empty() || l.at("kernel") == kname)) {
      kname = l.at("kernel").get<std::string>();
      entries.push_back(l);
    }
  REQUIRE(!kname.empty());
  for (size_t j = 0; j < entries.size(); ++j) {
    CHECK(entries[j].at("render_target").get<size_t>() == j);
    CHECK(entries[j].at("name").get<std::string>().rfind(kname + ".", 0) == 0);
  }
  CHECK_THAT(p.out, Contains(fmt::format("{} launches per step from ", stats.at("launches").size())));

  // --capture with the full kernel name (as in plan.json and the profile table) keeps every output of it.
  std::string out2 = dir / "dbg2";
  std::string cmds = dir / "cmds.txt";
  {
    std::ofstream f(cmds);
    f << "break " << kname << "\ncontinue\nprint " << kname << "\nquit\n";
  }
  Proc q = cli(fmt::format("debug --model mlp --dataset digits --steps 1 --batch 4 --capture {} --out {} --commands {}",
                           kname, out2, cmds));
  INFO(q.out);
  REQUIRE(q.rc == 0);
  CHECK_THAT(q.out, Contains(fmt::format("breakpoint 1: after {} (computes", kname)));
  CHECK_THAT(q.out, Contains(fmt::format(": {} (one draw, {} outputs", kname, entries.size())));
  CHECK_THAT(q.out, !Contains("not computed yet"));
  auto stats2 = nlohmann::json::parse(read_file(out2 + "/stats.json"));
  for (auto& e : entries) {
    const std::string name = e.at("name").get<std::string>();
    INFO(name);
    bool found = false;
    for (auto& c : stats2.at("captures"))
      if (c.at("kernel") == name) {
        found = true;
        CHECK(c.at("node") == e.at("output"));
        CHECK(fs::exists(out2 + "/" + c.at("png").get<std::string>()));
        // The same value in the full run: identical statistics (same seed, same batch).
        for (auto& c0 : stats.at("captures"))
          if (c0.at("kernel") == name) CHECK(c0.at("stats") == c.at("stats"));
      }
    CHECK(found);
    // `print KERNEL` printed every output with the statistics the capture recorded.
    CHECK_THAT(q.out, Contains(fmt::format("\nn{} ", e.at("output").get<int>())));
  }
}

// ---- issue 19: crashes and silent acceptance on flags and files ----

TEST_CASE("cli: a batch of 2^63-1 trains (one batch per epoch) instead of dying of SIGFPE in the progress printer",
          "[cli]") {
  // stdout is a pipe here (popen), the non-tty progress path the issue's `| cat` took
  Proc p = cli("train --batch 9223372036854775807 --train-limit 256 --test-limit 100 --epochs 1 --backend cpu");
  INFO(p.out);
  CHECK(p.rc == 0);
  CHECK_THAT(p.out, Contains("epoch 1/1 step 1/1") && Contains("test accuracy"));
}

TEST_CASE("cli: dump --batch 9e18 is refused naming the shape instead of printing a negative element count", "[cli]") {
  TempDir dir;
  Proc p = cli(fmt::format("dump --model mlp --batch 9000000000000000000 --out {}", dir / "d"));
  INFO(p.out);
  CHECK(p.rc == 1);
  CHECK_THAT(p.out, Contains("shadergrad: ") && Contains("9000000000000000000x1x28x28") && Contains("2^63-1"));
  CHECK(p.out.find("wrote") == std::string::npos);
}

TEST_CASE("cli: --save '' and --metrics '' are refused, an unwritable --metrics directory before training", "[cli]") {
  for (const char* opt : {"--save", "--metrics"}) {
    Proc p = cli(fmt::format("train --dataset digits --epochs 1 {} ''", opt));
    INFO(p.out);
    CHECK(p.rc != 0);
    CHECK_THAT(p.out, Contains(opt) && Contains("must name a file"));
  }
  TempDir dir;
  std::ofstream(dir / "file") << "x";  // a regular file: nothing can be created below it, not even by root
  Proc p = cli(fmt::format("train --dataset digits --epochs 1 --backend cpu --metrics {}", dir / "file/sub/m.json"));
  INFO(p.out);
  CHECK(p.rc == 1);
  CHECK_THAT(p.out, Contains("cannot write '" + dir / "file/sub/m.json"));
  CHECK(p.out.find("epoch 1/1") == std::string::npos);  // before training
}

TEST_CASE("cli: predict warns about uniform (white-on-transparent) and dark-on-light images", "[cli]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir dir;
  // white strokes on a transparent background: alpha is composited onto white, so the image is all white
  {
    std::vector<uint8_t> white(8 * 8 * 3, 255);
    sg::image::write_png(dir / "white.png", 8, 8, white);
  }
  // dark digit on light paper: the inverse of a real test digit
  auto test = sg::train::load_split("digits").second;
  const float* px = test.sample(3);
  std::vector<uint8_t> rgb(8 * 8 * 3);
  for (int i = 0; i < 64; ++i)
    for (int c = 0; c < 3; ++c) rgb[i * 3 + c] = static_cast<uint8_t>(std::lround((1 - px[i]) * 255));
  sg::image::write_png(dir / "dark_on_light.png", 8, 8, rgb);
  Proc p = cli(fmt::format("predict --load {} --input {}", t.ckpt, dir / "white.png"));
  INFO(p.out);
  CHECK(p.rc == 0);
  CHECK_THAT(p.out, Contains("warning: the image is nearly uniform"));
  p = cli(fmt::format("predict --load {} --input {}", t.ckpt, dir / "dark_on_light.png"));
  INFO(p.out);
  CHECK_THAT(p.out, Contains("warning: the background is light") && Contains("--invert"));
  p = cli(fmt::format("predict --load {} --input {} --invert", t.ckpt, dir / "dark_on_light.png"));
  INFO(p.out);
  CHECK(p.out.find("warning") == std::string::npos);  // inverted, it looks like the training data
}

TEST_CASE("cli: predict says when a checkpoint has no data checksum, and refuses a corrupted data section",
          "[cli]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir dir;
  std::vector<uint8_t> rgb(8 * 8 * 3, 0);
  rgb[3 * 27] = rgb[3 * 27 + 1] = rgb[3 * 27 + 2] = 255;
  sg::image::write_png(dir / "dot.png", 8, 8, rgb);
  // one flipped bit in the last weight: the header is intact, only the SHA-256 can tell
  std::string bytes = read_file(t.ckpt);
  bytes[bytes.size() - 3] ^= 0x01;
  std::ofstream(dir / "corrupt.safetensors", std::ios::binary) << bytes;
  Proc p = cli(fmt::format("predict --load {} --input {}", dir / "corrupt.safetensors", dir / "dot.png"));
  INFO(p.out);
  CHECK(p.rc == 1);
  CHECK_THAT(p.out, Contains("is corrupt") && Contains("SHA-256"));
  // the same checkpoint without the checksum entry (as other writers make them) loads with a warning
  sg::io::SafetensorsFile f = sg::io::load_safetensors(t.ckpt);
  CHECK(f.checksum_verified);
  std::string stripped = dir / "no_checksum.safetensors";
  {
    // rewrite the header without the key, by hand (save_safetensors always adds it)
    std::string good = read_file(t.ckpt);
    uint64_t n = 0;
    std::memcpy(&n, good.data(), 8);
    auto h = nlohmann::json::parse(good.substr(8, n));
    h["__metadata__"].erase(sg::io::kDataSha256Key);
    std::string js = h.dump();
    uint64_t m = js.size();
    std::string out(reinterpret_cast<const char*>(&m), 8);
    std::ofstream(stripped, std::ios::binary) << out + js + good.substr(8 + n);
  }
  p = cli(fmt::format("predict --load {} --input {}", stripped, dir / "dot.png"));
  INFO(p.out);
  CHECK(p.rc == 0);
  CHECK_THAT(p.out, Contains("warning: " + stripped + " records no SHA-256"));
  CHECK_THAT(p.out, Contains("prediction:"));
}

TEST_CASE("cli: compress ptq writes an int8 file int8-eval reads back, prune and split report what they did",
          "[cli][compress]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir d;
  std::smatch m;
  Proc q = cli(fmt::format("compress ptq --load {} --bits 8 --int8-out {} --backend gles", t.ckpt, d / "m.int8"));
  INFO(q.out);
  REQUIRE(q.rc == 0);
  REQUIRE(std::regex_search(q.out, m, std::regex(R"(int8 inference: CPU \(integer\) ([0-9.]+))")));
  const std::string cpu = m[1];
  Proc e = cli(fmt::format("compress int8-eval --load {} --backend gles", d / "m.int8"));
  INFO(e.out);
  REQUIRE(e.rc == 0);
  REQUIRE(std::regex_search(e.out, m, std::regex(R"(CPU integer inference ([0-9.]+), gles fake-quantised ([0-9.]+))")));
  CHECK(m[1] == cpu);
  CHECK(std::stod(m[2]) == Approx(std::stod(cpu)).margin(2.0 / 797));

  Proc p = cli(fmt::format("compress prune --load {} --amount 0.5 --finetune-epochs 1 --out {} --backend gles", t.ckpt,
                           d / "p.safetensors"));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  CHECK_THAT(p.out, Contains("sparsity") && Contains("gzip"));
  sg::compress::Model pm = sg::compress::load(d / "p.safetensors");
  int64_t zeros = 0, total = 0;
  for (auto& s : sg::compress::sparsity(pm)) zeros += s.zeros, total += s.numel;
  CHECK(zeros >= total / 2);  // the pruned half stayed 0 through fine-tuning (more may be 0 already)
  CHECK(cli(fmt::format("compress prune --load {} --amount 1.5", t.ckpt)).rc != 0);

  Proc s = cli("compress split --name seed002");
  REQUIRE(s.rc == 0);
  auto j = nlohmann::json::parse(s.out);
  CHECK(j.at("train").size() == 600);
  CHECK(j.at("pool").size() == 400);
  CHECK(j.at("test").get<std::vector<int64_t>>() == sg::data::digits_split_seed002().test);
}

TEST_CASE("cli: --version, defaults in --help, one set of models and backends in every subcommand", "[cli]") {
  Proc v = cli("--version");
  CHECK(v.rc == 0);
  CHECK_THAT(v.out, Contains("shadergrad 0.") && Contains("shadergrad-bundle/") && Contains("shadergrad-checkpoint/"));
  Proc h = cli("train --help");
  INFO(h.out);
  REQUIRE(h.rc == 0);
  // every option with a value shows its default (sg::train::Config's)
  const sg::train::Config defaults;
  for (const std::string& want : {fmt::format("--epochs INT:COUNT={}", defaults.epochs),
                                  fmt::format("--batch INT:COUNT={}", defaults.batch),
                                  fmt::format("}}={}", defaults.model), fmt::format("}}={}", defaults.optimizer)})
    CHECK_THAT(h.out, Contains(want));
  for (const char* sub : {"train", "predict", "debug", "compress prune"}) {
    INFO(sub);
    CHECK_THAT(cli(fmt::format("{} --help", sub)).out, Contains("auto | gles | gles-compute | vulkan | cpu-simd | cpu"));
  }
  for (const char* sub : {"train", "dump", "debug", "export"}) {
    INFO(sub);
    CHECK_THAT(cli(fmt::format("{} --help", sub)).out, Contains("mlp | cnn | cnn-large | cnn5"));
  }
  for (const char* sub : {"train", "dump", "debug"})
    CHECK_THAT(cli(fmt::format("{} --help", sub)).out, Contains("cnn5 | resnet"));
  // the choices added to dump and debug run (dump --model cnn5 on its 128x128 shapes; debug on gles-compute)
  TempDir d;
  Proc dump = cli(fmt::format("dump --model cnn5 --target wgsl --out {}", d / "cnn5"));
  INFO(dump.out);
  CHECK(dump.rc == 0);
  CHECK_THAT(dump.out, Contains("of the cnn5 train step"));
  Proc debug = cli(fmt::format("debug --backend gles-compute --steps 1 --out {}", d / "debug"));
  INFO(debug.out);
  CHECK(debug.rc == 0);
  CHECK_THAT(debug.out, Contains("(gles-compute backend"));
  CHECK(fs::exists(d.path / "debug" / "report.html"));
  // on cpu-simd the report's shaders/ holds the C that ran, each kernel's header naming its graph nodes and lines
  Proc c = cli(fmt::format("debug --backend cpu-simd --steps 1 --out {}", d / "debug-c"));
  INFO(c.out);
  CHECK(c.rc == 0);
  CHECK_THAT(c.out, Contains("(cpu-simd backend"));
  int c_files = 0;
  for (auto& e : fs::directory_iterator(d.path / "debug-c" / "shaders")) {
    CHECK(e.path().extension() == ".c");
    CHECK_THAT(sg::testing::read_file(e.path().string()), Contains("graph nodes computed here") && Contains(".cpp:"));
    ++c_files;
  }
  CHECK(c_files > 0);
}

TEST_CASE("cli: train --quiet prints the result line only, counts are whole numbers, a batch over the data says so",
          "[cli]") {
  Proc q = cli("train --quiet --backend cpu --dataset digits --model mlp --epochs 1 --train-limit 128 --test-limit 64");
  INFO(q.out);
  REQUIRE(q.rc == 0);
  CHECK(std::regex_match(
      q.out, std::regex(R"(test accuracy [0-9.]+ after 1 epoch, 1 step, [0-9.]+ steps/s, \d+ kernels per step\n)")));
  for (const char* bad : {"1e20", "2.5", "1000001", "99999999999999999999"}) {
    INFO(bad);
    Proc p = cli(fmt::format("train --epochs {}", bad));
    CHECK(p.rc != 0);
    CHECK_THAT(p.out, Contains("--epochs") && Contains("whole number"));
  }
  Proc b = cli("train --backend cpu --dataset digits --model mlp --epochs 1 --batch 1000 --train-limit 100 "
               "--test-limit 64");
  INFO(b.out);
  REQUIRE(b.rc == 0);
  CHECK_THAT(b.out, Contains("batch 1000 is more than the 100 training samples: one batch of 100 per epoch"));
}

TEST_CASE("cli: predict reads every float checkpoint family and refuses NaN weights and int8 models by name",
          "[cli][compress]") {
  const Trained& t = trained();
  REQUIRE(t.proc.rc == 0);
  TempDir d;
  const std::string digit = d / "digit.pgm";
  {
    const sg::data::Dataset ds = sg::data::load_digits();
    std::string pgm = "P5\n8 8\n16\n";
    for (int i = 0; i < 64; ++i) pgm += static_cast<char>(std::lround(ds.images[i] * 16));
    std::ofstream(digit, std::ios::binary) << pgm;
  }
  // sg::train::save_checkpoint without extra metadata: no 'dataset'; predict finds the geometry its shapes fit
  sg::train::Config cfg;
  cfg.model = "cnn";
  cfg.dataset = "digits";
  cfg.backend = "cpu";
  sg::train::Setup setup = sg::train::make_setup(cfg);
  sg::train::load_checkpoint(t.ckpt, *setup.model, *setup.backend.backend);
  sg::train::save_checkpoint(d / "bare.safetensors", *setup.model, *setup.backend.backend, "cnn");
  Proc bare = cli(fmt::format("predict --load {} --input {} --backend cpu", d / "bare.safetensors", digit));
  Proc full = cli(fmt::format("predict --load {} --input {} --backend cpu", t.ckpt, digit));
  INFO(bare.out << full.out);
  REQUIRE(bare.rc == 0);
  REQUIRE(full.rc == 0);
  CHECK(parse_prediction(bare.out).probs == parse_prediction(full.out).probs);
  // a compress output (float, masks folded) predicts; an int8 model is named as int8-eval's
  REQUIRE(cli(fmt::format("compress ptq --load {} --bits 8 --int8-out {} --backend cpu", t.ckpt, d / "m.int8")).rc == 0);
  Proc i8 = cli(fmt::format("predict --load {} --input {} --backend cpu", d / "m.int8", digit));
  CHECK(i8.rc == 1);
  CHECK_THAT(i8.out, Contains("int8-eval"));
  Proc pr = cli(fmt::format("compress prune --load {} --amount 0.5 --finetune-epochs 0 --backend cpu --out {}",
                            d / "m.int8", d / "p.safetensors"));
  CHECK(pr.rc == 1);  // loaded the int8 file as float weights before
  CHECK_THAT(pr.out, Contains("int8-eval"));
  REQUIRE(cli(fmt::format("compress prune --load {} --amount 0.5 --finetune-epochs 0 --backend cpu --out {}", t.ckpt,
                          d / "p.safetensors")).rc == 0);
  Proc pp = cli(fmt::format("predict --load {} --input {} --backend cpu", d / "p.safetensors", digit));
  INFO(pp.out);
  CHECK(pp.rc == 0);
  CHECK(parse_prediction(pp.out).probs.size() == 10);
  // export reads training checkpoints; a compress output is named, with the commands that read it
  Proc ex = cli(fmt::format("export --model cnn --dataset digits --load {} --out {}", d / "p.safetensors",
                            d / "bundle"));
  CHECK(ex.rc == 1);
  CHECK_THAT(ex.out, Contains("a `shadergrad compress` output") && Contains("shadergrad predict"));
  // a NaN weight: refused naming the tensor (printed p = nan and exited 0 before)
  sg::io::SafetensorsFile f = sg::io::load_safetensors(t.ckpt);
  f.tensors[0].data[3] = std::numeric_limits<float>::quiet_NaN();
  sg::io::save_safetensors(d / "nan.safetensors", f.tensors, f.metadata);
  Proc nan = cli(fmt::format("predict --load {} --input {} --backend cpu", d / "nan.safetensors", digit));
  CHECK(nan.rc == 1);
  CHECK_THAT(nan.out, Contains(f.tensors[0].name) && Contains("index 3"));
  // an unwritable --out fails (exited 0 and wrote nothing before)
  Proc sp = cli(fmt::format("compress split --out {}", d / "missing-dir/split.json"));
  CHECK(sp.rc != 0);
  CHECK_THAT(sp.out, Contains("missing-dir"));
}

TEST_CASE("cli: an on/off environment variable with another value is an error naming it", "[cli][vulkan]") {
  Proc p = run("/usr/bin/env", fmt::format("SG_AUTOTUNE=banana '{}' train --backend vulkan --epochs 1 --train-limit 64",
                                           SG_CLI));
  INFO(p.out);
  CHECK(p.rc == 1);
  CHECK_THAT(p.out, Contains("SG_AUTOTUNE='banana'"));
}

TEST_CASE("cli: train --optimizer adamw --clip-grad-norm --lr-schedule (adamw, clip, lr_schedule): the step's lr and the "
          "gradient norm in the epoch lines and the metrics", "[cli][adamw][clip][lr_schedule]") {
  TempDir d;
  // digits, 256 samples, batch 64: 4 steps per epoch, 8 in all
  const std::string one = "train --backend cpu --dataset digits --model mlp --batch 64 --train-limit 256 "
                          "--test-limit 64 --lr 0.01 ",
                    base = one + "--epochs 2 ";
  const std::string metrics = d / "m.json";
  Proc a = cli(base + "--optimizer adamw --clip-grad-norm 0.5 --lr-schedule warmup-cosine --warmup-steps 2 "
                      "--min-lr 0.001 --metrics " + metrics);
  INFO(a.out);
  REQUIRE(a.rc == 0);
  CHECK_THAT(a.out, Contains("AdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, "
                             "schedule=warmup_cosine(warmup_steps=2, total_steps=8, min_lr=0.001))"));
  const sg::LRSchedule wc = sg::LRSchedule::warmup_cosine(2, 8, 0.001);
  auto j = nlohmann::json::parse(read_file(metrics));
  REQUIRE(j.at("history").size() == 2);
  auto lines = epoch_lines(a.out);
  REQUIRE(lines.size() == 2);
  for (int e = 0; e < 2; ++e) {
    INFO("epoch " << e + 1);
    const nlohmann::json& h = j.at("history")[e];
    const double want = wc.at(0.01, 4 * e + 3);  // the epoch's last step: t = 3, 7
    CHECK(h.at("lr").get<double>() == Approx(want).epsilon(1e-6));
    CHECK(h.at("grad_norm").get<double>() > 0);
    CHECK_THAT(lines[e], Contains(fmt::format(", lr {:.4g}, grad norm {:.4g}, test accuracy", h.at("lr").get<double>(),
                                              h.at("grad_norm").get<double>())));
  }
  // StepLR every epoch (the default step size): 0.01, then 0.005
  Proc s = cli(base + "--optimizer momentum --lr-schedule step --lr-gamma 0.5");
  INFO(s.out);
  REQUIRE(s.rc == 0);
  CHECK_THAT(s.out, Contains("schedule=StepLR(step_size=4, gamma=0.5)"));
  lines = epoch_lines(s.out);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Contains(", lr 0.01, test accuracy"));
  CHECK_THAT(lines[1], Contains(", lr 0.005, test accuracy"));
  // without a schedule or clipping the epoch line is as before
  Proc plain = cli(one + "--optimizer adamw --epochs 1");
  INFO(plain.out);
  REQUIRE(plain.rc == 0);
  CHECK(std::regex_search(plain.out, std::regex(R"(epoch 1/1: train loss [0-9.]+, test accuracy)")));
  // errors, before any training
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--lr-schedule warmup-cosine --warmup-steps 100", "--warmup-steps 100 exceeds the run's 8 steps"},
           {"--lr-schedule linear", "--lr-schedule"},
           {"--clip-grad-norm -1", "--clip-grad-norm"},
           {"--optimizer lamb", "--optimizer"}}) {
    INFO(args);
    Proc p = cli(base + args);
    INFO(p.out);
    CHECK(p.rc != 0);
    CHECK_THAT(p.out, Contains(expect));
    CHECK(p.out.find("epoch 1/") == std::string::npos);
  }
  Proc h = cli("train --help");
  CHECK_THAT(h.out, Contains("sgd | momentum | adam | adamw") && Contains("constant | step | warmup-cosine"));
}
