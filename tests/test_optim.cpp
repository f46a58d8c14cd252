// AdamW, global-norm gradient clipping and learning-rate schedules inside the compiled train step (issue 36):
//  - 10 train steps of a small MLP (Linear(6, 8), Tanh, Linear(8, 5), cross_entropy, batch 12) equal torch's
//    (tests/golden/optim.json, written by tests/golden/gen_golden.py in float64) on cpu, gles, gles-compute and
//    vulkan: per step the loss, the lr the step used and clip_grad_norm_'s total norm (program outputs), after the
//    10 steps every parameter; for AdamW, AdamW with clipping active in some steps only, SGD with max-norm clipping,
//    linear warmup + cosine (LambdaLR), StepLR with SGD + momentum, CosineAnnealingLR with Adam, and AdamW +
//    clipping + warmup-cosine together;
//  - clip_grad_norm of zero, infinite and NaN gradients equals torch.nn.utils.clip_grad_norm_ (error_if_nonfinite
//    False) on the same backends, signed zeros included;
//  - a schedule's lr(t), computed in the graph from the step counter, equals LRSchedule::at (f64) at step counts up
//    to 2^24 on every backend (StepLR's floor(t / step_size) exact at the multiples, where an f32 division may land
//    below the integer);
//  - argument errors (negative lr, warmup > total, max_norm <= 0, ...) name the function and the caller's line.
// The web side: test_web_runtime's bundle "optim" (AdamW + clipping + warmup-cosine in Chromium on WebGPU and WebGL2).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "golden_util.h"
#include "sg/backend.h"
#include "test_util.h"
#include "tanh_mlp.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;
using sg::golden::json;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

const json& optim_golden() {
  static const json j = sg::golden::load("optim.json");
  return j;
}

std::vector<float> floats_of(const json& t) { return sg::golden::tensor(t).floats(); }

/// The golden's model: y = tanh(x W0^T + b0) W2^T + b2, cross_entropy; parameters under torch's state_dict names.
struct Mlp {
  Tensor x, labels, loss;
  std::vector<std::string> names = {"0.weight", "0.bias", "2.weight", "2.bias"};
  std::vector<Tensor> params;
};
Mlp build_mlp(const json& j) {
  Mlp m;
  m.x = input("x", {12, 6});
  m.labels = input("labels", {12}, DType::i32);
  for (const std::string& n : m.names) {
    const sg::golden::GTensor t = sg::golden::tensor(j.at("init").at(n));
    m.params.push_back(param(n, t.shape, t.floats()));
  }
  Tensor h = tanh(matmul(m.x, transpose(m.params[0])) + m.params[1]);
  m.loss = cross_entropy(matmul(h, transpose(m.params[2])) + m.params[3], m.labels);
  return m;
}

LRSchedule schedule_of(const json& s) {
  const std::string kind = s.at("kind");
  if (kind == "step") return LRSchedule::step(s.at("step_size"), s.at("gamma"));
  if (kind == "warmup_cosine") return LRSchedule::warmup_cosine(s.at("warmup_steps"), s.at("total_steps"), s.at("min_lr"));
  if (kind == "cosine_annealing") return LRSchedule::warmup_cosine(0, s.at("total_steps"), s.at("min_lr"));
  REQUIRE(kind == "constant");
  return LRSchedule::constant();
}

std::unique_ptr<Optimizer> optimizer_of(const json& r) {
  const std::string name = r.at("optimizer");
  const json& o = r.at("options");
  const LRSchedule s = schedule_of(r.at("schedule"));
  if (name == "adamw")
    return make_adamw({.lr = o.at("lr"), .beta1 = o.at("betas")[0], .beta2 = o.at("betas")[1], .eps = o.at("eps"),
                       .weight_decay = o.at("weight_decay"), .schedule = s});
  if (name == "adam")
    return make_adam({.lr = o.at("lr"), .beta1 = o.at("betas")[0], .beta2 = o.at("betas")[1], .eps = o.at("eps"),
                      .weight_decay = o.at("weight_decay"), .schedule = s});
  REQUIRE(name == "sgd");
  return make_sgd({.lr = o.at("lr"), .momentum = o.at("momentum"), .weight_decay = o.at("weight_decay"), .schedule = s});
}

double norm_type_of(const json& v) {
  if (!v.is_string()) return v.get<double>();
  REQUIRE(v == "inf");
  return std::numeric_limits<double>::infinity();
}

/// Runs the golden runs whose names contain `tag` on every native backend and compares them with torch's.
void check_runs(const std::string& tag) {
  const json& j = optim_golden();
  const std::vector<float> xv = floats_of(j.at("x")), lv = floats_of(j.at("labels"));
  int runs = 0;
  for (const json& r : j.at("runs")) {
    const std::string name = r.at("name");
    if (name.find(tag) == std::string::npos) continue;
    ++runs;
    INFO("run " << name);
    Mlp m = build_mlp(j);
    auto opt = optimizer_of(r);
    TrainStepOptions o;
    o.output_lr = true;
    const bool clip = !r.at("clip").is_null();
    if (clip) {
      o.clip_grad_norm = r.at("clip").at("max_norm");
      o.clip_norm_type = norm_type_of(r.at("clip").at("norm_type"));
      o.output_grad_norm = true;
    }
    Program prog = make_train_step(m.loss, m.params, *opt, o);
    REQUIRE(prog.output_names.back() == "lr");
    if (clip) REQUIRE(prog.output_names.at(1) == "grad_norm");
    for (const char* kind : kNative) {
      INFO("backend " << kind);
      auto be = native_backend(kind);
      auto exe = be->compile(prog);
      int step = 0;
      for (const json& s : r.at("steps")) {
        INFO("step " << step);
        auto out = exe->run({{"x", &xv}, {"labels", &lv}});
        CHECK(out[0][0] == Approx(s.at("loss").get<double>()).epsilon(1e-5));
        CHECK(out.back()[0] == Approx(s.at("lr").get<double>()).epsilon(2e-6));
        if (clip) CHECK(out[1][0] == Approx(s.at("grad_norm").get<double>()).epsilon(1e-5));
        ++step;
      }
      CHECK(step == 10);
      for (size_t i = 0; i < m.params.size(); ++i) {
        INFO("parameter " << m.names[i]);
        const std::vector<float> want = floats_of(r.at("params_after").at(m.names[i]));
        const std::vector<float> got = be->read(m.params[i]);
        REQUIRE(got.size() == want.size());
        for (size_t e = 0; e < got.size(); ++e) {
          INFO("element " << e);
          CHECK(got[e] == Approx(want[e]).margin(1e-5).epsilon(1e-5));
        }
      }
      if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
    }
  }
  CHECK(runs > 0);
}

/// A golden value: a number, or "nan", "inf", "-inf", "-0".
double special(const json& v) {
  if (!v.is_string()) return v.get<double>();
  const std::string s = v;
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  REQUIRE(s == "-0");
  return -0.0;
}

void check_special(float got, const json& want) {
  const double w = special(want);
  INFO("got " << got << ", want " << want.dump());
  if (std::isnan(w)) {
    CHECK(std::isnan(got));
  } else if (std::isinf(w) || w == 0) {
    CHECK(got == w);
    CHECK(std::signbit(got) == std::signbit(w));  // clip_coef 0 keeps the gradient's sign: -2 * 0 = -0
  } else {
    CHECK(got == Approx(w).epsilon(1e-6));
  }
}

}  // namespace

TEST_CASE("adamw: 10 torch.optim.AdamW steps of a small MLP equal torch's on cpu, gles, gles-compute and vulkan",
          "[optim][adamw][golden]") {
  check_runs("adamw");
}

TEST_CASE("clip: 10 train steps with clip_grad_norm (2-norm with AdamW, max norm with SGD, clipping active in some "
          "steps only) equal torch's on cpu, gles, gles-compute and vulkan", "[optim][clip][golden]") {
  check_runs("clip");
}

TEST_CASE("lr_schedule: warmup + cosine (LambdaLR), StepLR and CosineAnnealingLR computed in the graph, 10 steps equal "
          "torch's on cpu, gles, gles-compute and vulkan", "[optim][lr_schedule][golden]") {
  check_runs("lr_schedule");
}

TEST_CASE("clip: clip_grad_norm of zero, infinite and NaN gradients equals torch.nn.utils.clip_grad_norm_ on cpu, "
          "gles, gles-compute and vulkan", "[optim][clip][golden][edge]") {
  const json& cases = optim_golden().at("clip_grad_norm");
  REQUIRE(cases.size() >= 8);
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    for (const json& c : cases) {
      INFO("case " << c.at("name").get<std::string>());
      std::vector<Tensor> gs;
      std::vector<std::vector<float>> feeds;
      for (size_t i = 0; i < c.at("grads").size(); ++i) {
        const json& g = c.at("grads")[i];
        gs.push_back(input(fmt::format("g{}", i), {static_cast<int64_t>(g.size())}));
        std::vector<float> v;
        for (const json& e : g) v.push_back(static_cast<float>(special(e)));
        feeds.push_back(std::move(v));
      }
      ClippedGrads r = clip_grad_norm(gs, c.at("max_norm"), norm_type_of(c.at("norm_type")));
      Program p;
      for (size_t i = 0; i < r.grads.size(); ++i) p.add_output(fmt::format("c{}", i), r.grads[i]);
      p.add_output("total_norm", r.total_norm);
      auto exe = be->compile(p);
      std::vector<Feed> f;
      for (size_t i = 0; i < feeds.size(); ++i) f.push_back({fmt::format("g{}", i), &feeds[i]});
      auto out = exe->run(f);
      for (size_t i = 0; i < r.grads.size(); ++i) {
        INFO("gradient " << i);
        const json& want = c.at("clipped")[i];
        REQUIRE(out[i].size() == want.size());
        for (size_t e = 0; e < want.size(); ++e) check_special(out[i][e], want[e]);
      }
      INFO("total_norm");
      check_special(out.back()[0], c.at("total_norm"));
    }
  }
}

TEST_CASE("lr_schedule: lr(t) computed in the graph equals LRSchedule::at at step counts up to 2^24 on cpu, gles, "
          "gles-compute and vulkan", "[optim][lr_schedule]") {
  // the counter is set by writing the optimizer's State, the program outputs Optimizer::lr()
  const LRSchedule step = LRSchedule::step(7, 0.5), step0 = LRSchedule::step(3, 0.0);
  // at large counts a gamma near 1 keeps gamma^k a normal float; adjacent k differ by 1e-5 relative, more than the
  // tolerance (the f32 exponent k ln gamma, about 24 at the end, is rounded to ~1.5e-6)
  const LRSchedule slow = LRSchedule::step(7, 1 - 1e-5);
  std::vector<int64_t> big = {0, 6, 7, 8};
  for (int64_t k : {100, 10000, 123457, 2396745})  // multiples of 7 and their neighbours, up to 16777215 = 7 * 2396745
    for (int64_t d : {-1, 0, 1}) big.push_back(7 * k + d);
  const LRSchedule cosine = LRSchedule::warmup_cosine(10, 1000, 1e-4), nowarm = LRSchedule::warmup_cosine(0, 50, 0.0);
  const LRSchedule all_warm = LRSchedule::warmup_cosine(5, 5, 0.01);
  struct Sched {
    LRSchedule s;
    double lr;
    std::vector<int64_t> ts;
    double eps = 2e-6;
  };
  std::vector<Sched> scheds = {{step, 0.1, {0, 1, 2, 5, 6, 7, 8, 13, 14, 20, 21, 22, 99, 100, 101, 699, 700, 701}},
                               {slow, 0.1, big, 4e-6},
                               {step0, 0.3, {0, 1, 2, 3, 4, 100}},
                               {cosine, 0.02, {0, 1, 8, 9, 10, 11, 300, 505, 900, 990, 998, 999, 1000, 1001, 5000}},
                               {nowarm, 1.0, {0, 1, 2, 24, 25, 26, 48, 49, 50, 51}}, {all_warm, 0.5, {0, 3, 4, 5, 6}}};
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    for (const Sched& sc : scheds) {
      INFO(sc.s.describe());
      auto opt = make_sgd({.lr = sc.lr, .schedule = sc.s});
      Program p;
      p.add_output("lr", opt->lr());
      const std::vector<NodePtr> counters = p.persistent();
      REQUIRE(counters.size() == 1);
      CHECK(counters[0]->name == "sgd.step");
      auto exe = be->compile(p);
      for (int64_t t : sc.ts) {
        INFO("t = " << t);
        be->write(Tensor(counters[0]), {static_cast<float>(t)});
        const double want = sc.s.at(sc.lr, t);
        const float got = exe->run({})[0][0];
        if (want == 0)
          CHECK(got == 0.0f);
        else
          CHECK(got == Approx(want).epsilon(sc.eps));
      }
    }
  }
  // LRSchedule::at itself against torch's formulas written out here
  CHECK(step.at(0.1, 6) == 0.1);
  CHECK(step.at(0.1, 7) == 0.05);
  CHECK(step.at(0.1, 21) == Approx(0.0125).epsilon(1e-15));
  CHECK(cosine.at(0.02, 4) == Approx(0.02 * 5 / 10).epsilon(1e-15));
  CHECK(cosine.at(0.02, 10) == Approx(0.02).epsilon(1e-15));
  CHECK(cosine.at(0.02, 505) == Approx(1e-4 + (0.02 - 1e-4) * (1 + std::cos(M_PI * 495 / 990)) / 2).epsilon(1e-15));
  CHECK(cosine.at(0.02, 5000) == 1e-4);
  CHECK(all_warm.at(0.5, 5) == 0.01);
}

TEST_CASE("adamw, lr_schedule and clip: describe(), Optimizer::lr() and the train step's outputs",
          "[optim][adamw][lr_schedule][clip]") {
  CHECK(make_adamw({})->describe() == "AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01)");
  CHECK(make_adam({})->describe() == "Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0)");
  CHECK(make_sgd({.lr = 0.1, .schedule = LRSchedule::step(5, 0.5)})->describe() ==
        "SGD(lr=0.1, momentum=0, weight_decay=0, schedule=StepLR(step_size=5, gamma=0.5))");
  CHECK(make_adamw({.schedule = LRSchedule::warmup_cosine(2, 10, 0.0)})->describe() ==
        "AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, schedule=warmup_cosine(warmup_steps=2, "
        "total_steps=10, min_lr=0))");
  // Optimizer::lr() returns one node; a constant lr is a constant node, an optimizer without one refuses
  auto sgd = make_sgd({.lr = 0.25});
  CHECK(sgd->lr().node() == sgd->lr().node());
  Program pc;
  pc.add_output("lr", sgd->lr());
  CHECK(make_cpu_backend()->compile(pc)->run({})[0][0] == 0.25f);
  struct NoLr final : Optimizer {
    std::vector<Update> updates(const std::vector<Tensor>&, const std::vector<Tensor>&) override { return {}; }
    std::string describe() const override { return "NoLr"; }
  } none;
  CHECK_THROWS_AS(none.lr(), UnsupportedError);
  CHECK_THROWS_WITH(none.lr(), Contains("NoLr does not expose its learning rate"));
  // the train step's outputs: loss, extra outputs, grad_norm, lr; the step counters of Adam and AdamW
  Tensor w = param("w", {3}, {1.f, -2.f, 0.5f});
  Tensor loss = sum(w * w);
  auto adamw = make_adamw({.lr = 0.1, .schedule = LRSchedule::step(1, 0.5)});
  Program p = make_train_step(loss, {w}, *adamw,
                              TrainStepOptions{.extra_outputs = {{"w2", w * 2.0}}, .clip_grad_norm = 1.0,
                                               .output_grad_norm = true, .output_lr = true});
  CHECK(p.output_names == std::vector<std::string>{"loss", "w2", "grad_norm", "lr"});
  bool counter = false;
  for (const NodePtr& n : p.persistent()) counter = counter || n->name == "adamw.step";
  CHECK(counter);
  auto exe = make_cpu_backend()->compile(p);
  // grad = 2w = (2, -4, 1), norm sqrt(21) > 1: clipped; lr 0.1, then 0.05
  auto out = exe->run({});
  CHECK(out[2][0] == Approx(std::sqrt(21.0)).epsilon(1e-6));
  CHECK(out[3][0] == Approx(0.1).epsilon(1e-7));
  out = exe->run({});
  CHECK(out[3][0] == Approx(0.05).epsilon(1e-7));
}

TEST_CASE("adamw, lr_schedule and clip: bad arguments are refused naming the function, the value and the caller's line",
          "[optim][adamw][lr_schedule][clip][errors]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // make_adamw: torch.optim.AdamW's checks
  CHECK_THROWS_WITH(make_adamw({.lr = -1e-3}), Contains("make_adamw: invalid lr -0.001 (must be >= 0)"));
  CHECK_THROWS_AS(make_adamw({.lr = nan}), ValueError);
  CHECK_THROWS_WITH(make_adamw({.beta1 = 1.0}), Contains("make_adamw: invalid beta1 1"));
  CHECK_THROWS_WITH(make_adamw({.beta2 = -0.5}), Contains("make_adamw: invalid beta2"));
  CHECK_THROWS_WITH(make_adamw({.eps = -1.0}), Contains("make_adamw: invalid eps"));
  CHECK_THROWS_WITH(make_adamw({.weight_decay = -0.01}), Contains("make_adamw: invalid weight_decay"));
  CHECK_NOTHROW(make_adamw({.lr = 0, .beta1 = 0, .beta2 = 0, .weight_decay = 0}));
  // schedules: the caller's line
  const std::string here = "test_optim.cpp:";
  // each call sits on the line whose number it captures: GCC and clang name different lines of a macro that spans
  // several (the start or the end of the CHECK), so the call is made in a lambda written on one line
  auto warmup_too_long = [] { return LRSchedule::warmup_cosine(11, 10); };
  int line = __LINE__ - 1;
  CHECK_THROWS_WITH(warmup_too_long(), Contains("LRSchedule::warmup_cosine: warmup_steps 11 exceeds total_steps 10") &&
                                           Contains(here + std::to_string(line)));
  auto zero_step_size = [] { return LRSchedule::step(0, 0.5); };
  line = __LINE__ - 1;
  CHECK_THROWS_WITH(zero_step_size(), Contains("LRSchedule::step: step_size 0 must be >= 1") &&
                                          Contains(here + std::to_string(line)));
  CHECK_THROWS_WITH(LRSchedule::step(3, -0.5), Contains("gamma -0.5 must be finite and >= 0"));
  CHECK_THROWS_WITH(LRSchedule::step(3, nan), Contains("gamma nan"));
  CHECK_THROWS_WITH(LRSchedule::warmup_cosine(-1, 10), Contains("warmup_steps -1 must be >= 0"));
  CHECK_THROWS_WITH(LRSchedule::warmup_cosine(0, 0), Contains("total_steps 0 must be >= 1"));
  CHECK_THROWS_WITH(LRSchedule::warmup_cosine(0, 10, -1e-3), Contains("min_lr -0.001 must be finite and >= 0"));
  CHECK_THROWS_WITH(LRSchedule::warmup_cosine(0, 10, inf), Contains("min_lr inf"));
  // a schedule written field by field is checked by the optimizer
  LRSchedule bad;
  bad.kind = LRSchedule::Kind::Step;
  CHECK_THROWS_WITH(make_sgd({.schedule = bad}), Contains("make_sgd: schedule: step_size 0 must be >= 1"));
  CHECK_THROWS_WITH(make_adam({.schedule = bad}), Contains("make_adam: schedule: step_size 0"));
  CHECK_THROWS_WITH(make_adamw({.schedule = bad}), Contains("make_adamw: schedule: step_size 0"));
  // clipping
  Tensor g = input("g", {4});
  auto zero_max_norm = [&g] { return clip_grad_norm({g}, 0.0); };
  line = __LINE__ - 1;
  CHECK_THROWS_WITH(zero_max_norm(), Contains("clip_grad_norm: max_norm 0 must be positive and finite") &&
                                         Contains(here + std::to_string(line)));
  CHECK_THROWS_WITH(clip_grad_norm({g}, -1.0), Contains("max_norm -1 must be positive"));
  CHECK_THROWS_WITH(clip_grad_norm({g}, nan), Contains("max_norm nan"));
  CHECK_THROWS_WITH(clip_grad_norm({g}, inf), Contains("max_norm inf"));
  CHECK_THROWS_WITH(clip_grad_norm({g}, 1.0, 0.0), Contains("norm_type 0 is not supported"));
  CHECK_THROWS_WITH(clip_grad_norm({g}, 1.0, -inf), Contains("norm_type -inf is not supported"));
  CHECK_THROWS_WITH(clip_grad_norm({g}, 1.0, nan), Contains("norm_type nan"));
  CHECK_THROWS_WITH(clip_grad_norm({input("i", {2}, DType::i32)}, 1.0), Contains("gradient 0") && Contains("not f32"));
  CHECK(clip_grad_norm({}, 1.0).grads.empty());  // torch: total norm 0 of no gradients
  Tensor w = param("w", {2}, {1.f, 2.f});
  auto sgd = make_sgd({});
  auto negative_clip = [&] { return make_train_step(sum(w * w), {w}, *sgd, TrainStepOptions{.clip_grad_norm = -1.0}); };
  line = __LINE__ - 1;
  CHECK_THROWS_WITH(negative_clip(), Contains("clip_grad_norm: max_norm -1") && Contains(here + std::to_string(line)));
  CHECK_THROWS_WITH(make_train_step(sum(w * w), {w}, *sgd, TrainStepOptions{.output_grad_norm = true}),
                    Contains("make_train_step: output_grad_norm needs clip_grad_norm > 0"));
}

namespace {

/// 3 train steps of Linear layers of `widths` (batch 64, tanh between them, cross entropy, AdamW with warmup + cosine,
/// clip_grad_norm 0.5, the norm and lr output) on gles, gles-compute and vulkan equal the CPU backend's: outputs
/// within 1e-5, parameters within 1e-5 + 1e-4 |w|.
void check_clipped_mlp_steps(const std::vector<int64_t>& widths) {
  const int64_t batch = 64;
  const sg::testing::TanhMlp mlp = sg::testing::tanh_mlp(widths, batch, 500, 600, 0.12f);
  const std::vector<Tensor>& params = mlp.params;
  const Tensor& h = mlp.logits;
  const Tensor& labels = mlp.labels;
  Tensor loss = cross_entropy(h, labels);
  // eps 1e-4 (as test_compute_union): Adam moves a weight by about lr whatever its gradient's size, so a gradient that
  // cancels to ~0 over the batch turns the summation order's rounding into a visible step difference (5e-5 with 1e-8)
  auto opt = make_adamw({.lr = 0.01, .eps = 1e-4, .schedule = LRSchedule::warmup_cosine(1, 5)});
  Program p = make_train_step(loss, params, *opt,
                              TrainStepOptions{.clip_grad_norm = 0.5, .output_grad_norm = true, .output_lr = true});
  const std::vector<float> xv = sg::testing::randn(batch * widths[0], 700);
  std::vector<float> lv(batch);
  for (int64_t i = 0; i < batch; ++i) lv[i] = static_cast<float>((i * 7) % 10);
  const std::vector<Feed> feeds = {{"x", &xv}, {"labels", &lv}};
  auto cpu = make_cpu_backend();
  auto want_exe = cpu->compile(p);
  std::vector<std::vector<std::vector<float>>> want;
  for (int s = 0; s < 3; ++s) want.push_back(want_exe->run(feeds));
  CHECK(want[0][1][0] > 0.5f);  // the clipping is active
  for (const char* kind : {"gles", "gles-compute", "vulkan"}) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    auto exe = be->compile(p);
    for (int s = 0; s < 3; ++s) {
      INFO("step " << s);
      const auto got = exe->run(feeds);
      REQUIRE(got.size() == 3);
      for (size_t o = 0; o < got.size(); ++o) {
        INFO("output " << p.output_names[o]);
        CHECK(got[o][0] == Approx(want[s][o][0]).epsilon(1e-5));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << params[i].name());
      const std::vector<float> g = be->read(params[i]), w = cpu->read(params[i]);
      double worst = 0;
      size_t at = 0;
      for (size_t e = 0; e < g.size(); ++e) {
        const double err = std::fabs(g[e] - w[e]) / (1e-5 + 1e-4 * std::fabs(w[e]));
        if (!(err <= worst)) worst = err, at = e;
      }
      INFO("worst element " << at << ": " << g[at] << ", cpu " << w[at]);
      CHECK(worst <= 1.0);
    }
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
}

}  // namespace

TEST_CASE("clip: clip_grad_norm in a train step of 6 Linear layers (batch 64, AdamW) schedules on gles, gles-compute "
          "and vulkan and equals the CPU backend (issue 35)", "[optim][clip][adamw][schedule]") {
  // issue 35: global-norm clipping of a deep MLP did not schedule on the GPU backends ("needs N loop iterations per
  // invocation (limit 32768) and its loops cannot be split") once a term was a nested reduction (a bias gradient).
  // Here: 12 gradients, the weights' 128 x 128 squares over the loop budget, the biases' gradients sums over the batch.
  check_clipped_mlp_steps({64, 128, 128, 128, 128, 128, 10});
}

TEST_CASE("clip: clip_grad_norm over 13 Linear layers (more long sums of squares than eight split rounds) schedules "
          "on gles, gles-compute and vulkan and equals the CPU backend", "[optim][clip][adamw][schedule]") {
  // the norm's kernel adds 26 sums of squares, 12 over the loop budget alone; it was refused when a kernel was split
  // at most 8 times (charlm at context 64: "needs 38088 loop iterations per invocation (limit 32768)")
  std::vector<int64_t> widths(14, 128);
  widths.front() = 64, widths.back() = 10;
  check_clipped_mlp_steps(widths);
}
