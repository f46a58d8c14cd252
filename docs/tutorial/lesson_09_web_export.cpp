// Lesson 9: export a model and train it in a browser.
//
// Lessons 1-8 ran programs on native backends. The same programs can leave the process: sg::web::write_bundle
// schedules them for the browser's two GPU APIs and writes a *bundle* — a directory with bundle.json (the plans:
// every kernel, its bindings and launch size), the generated shaders (WGSL compute kernels for WebGPU, GLSL ES 3.00
// fragment shaders for WebGL2), weights.safetensors, the outputs the native CPU reference computed for a fixed
// sequence of runs (expected.safetensors) and a copy of the JavaScript runtime (runtime/web/). A page loads it with
// `createRuntime('bundle.json')` and calls `rt.run('train', {x, labels})`: the whole Adam step — forward, backward,
// update — runs as the exported kernels on the user's GPU, and the weights stay there between steps.
//
// This lesson exports a small MLP on the 8x8 digits (lesson 7's model), then runs the bundle in headless Chromium
// (docs/tutorial/lesson_09_browser.mjs) on WebGPU and on WebGL2: first it replays the bundle's checks (the browser's
// outputs and weights against the native CPU backend's), then it trains 30 more steps and watches the loss fall, the
// same on both APIs.
// `shadergrad export --model mlp --out DIR` does steps 1-3 for the built-in models; docs/BUNDLE.md is the format.
//
//   cmake --build build --target lesson_09_web_export && build/bin/lesson_09_web_export [DIR]
//
// The browser part needs node, Debian's chromium and the npm packages of tests/ (`(cd tests && npm ci)`, which
// scripts/setup.sh runs); without them the lesson says what is missing and exits 77 (ctest: skipped).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>

#include "sg/shadergrad.h"
#include "sg/web_export.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

int main(int argc, char** argv) {
  // 1. The model and its programs, built exactly as for a native backend (lesson 7). A bundle holds named
  //    programs that share their persistent values (parameters, Adam's moments) by node name: "infer" and "train"
  //    below read the same weights, so a page can train and then predict with what it learned.
  sg::nn::Sequential model;
  model.add<sg::nn::Flatten>().add<sg::nn::Linear>(64, 32).add<sg::nn::ReLU>().add<sg::nn::Linear>(32, 10);
  sg::nn::Rng rng(0);
  model.build(rng);
  const int64_t B = 50;
  sg::web::BundleSpec spec;
  spec.model = "lesson 9: digits MLP 64-32-10";
  {
    sg::Tensor x = sg::input("x", {B, 1, 8, 8});
    sg::Program infer;
    infer.add_output("probs", sg::softmax(model(x), 1));
    spec.programs.push_back({"infer", std::move(infer)});
  }
  auto adam = sg::make_adam({.lr = 3e-3});
  {
    sg::Tensor x = sg::input("x", {B, 1, 8, 8});
    sg::Tensor labels = sg::input("labels", {B}, sg::DType::i32);
    spec.programs.push_back({"train", sg::make_train_step(sg::cross_entropy(model(x), labels), model.parameters(), *adam)});
  }

  // 2. The checks: a fixed sequence of runs (here the first 50 digits: infer, three train steps, infer again).
  //    write_bundle replays it on the CPU reference backend and stores every output and the weights after it; the
  //    runtime's runChecks() replays the same runs in the browser and compares. Integer inputs travel as exact
  //    floats, like every feed.
  sg::data::Dataset digits = sg::data::load_digits();
  std::vector<float> xs(digits.images.begin(), digits.images.begin() + B * digits.sample_size());
  std::vector<float> ys(digits.labels.begin(), digits.labels.begin() + B);
  spec.checks.push_back({"infer", {{"x", xs}}});
  for (int s = 0; s < 3; ++s) spec.checks.push_back({"train", {{"x", xs}, {"labels", ys}}});
  spec.checks.push_back({"infer", {{"x", xs}}});

  // 3. Write the bundle. BundleTargets' defaults: both APIs, and three webgpu plans — "gpu" for hardware GPUs,
  //    "cpu" and "cpu-subgroups" for CPU implementations of WebGPU such as SwiftShader (register tiles instead of
  //    workgroup memory). The runtime picks one by the adapter and says why; WebGL2 has one plan (4 render targets
  //    and 16 samplers per kernel: what every WebGL2 device guarantees).
  const std::string dir = argc > 1 ? argv[1] : (std::filesystem::temp_directory_path() / "sg_lesson_09").string();
  sg::web::ExportSummary sum = sg::web::write_bundle(spec, sg::web::BundleTargets{}, dir);
  std::printf("wrote %s: %zu files, %lld bytes of weights\n", dir.c_str(), sum.files.size(),
              (long long)sum.weight_bytes);
  for (auto& [program, n] : sum.kernels) std::printf("  webgl2 plan, %s: %d kernels\n", program.c_str(), n);
  for (auto& plan : sum.webgpu_plans)
    for (auto& [program, n] : plan.kernels)
      std::printf("  webgpu %s plan, %s: %d kernels\n", plan.name.c_str(), program.c_str(), n);
  expect(std::filesystem::exists(dir + "/bundle.json") && std::filesystem::exists(dir + "/runtime/shadergrad.js"),
         "the bundle holds bundle.json and the runtime");

  // 4. Run it in a browser. The script serves the directory from 127.0.0.1 (module scripts and WebGPU want a
  //    secure context), opens a page in headless Chromium, and there:
  //      const rt = await createRuntime('/bundle.json', {backend});   // 'webgpu', then 'webgl2'
  //      const report = await rt.runChecks();                         // the browser against the CPU reference
  //      for (...) losses.push((await rt.run('train', {x, labels})).loss[0]);
  //    It exits 0 when both APIs pass their checks, the loss falls below 0.7 of its first value and WebGPU's and
  //    WebGL2's losses agree at every step (two shader languages, one kernel IR); 2 when node, chromium or
  //    playwright-core is missing.
  const std::string cmd = "node docs/tutorial/lesson_09_browser.mjs '" + dir + "'";
  std::printf("\n$ %s\n", cmd.c_str());
  std::fflush(stdout);
  const int status = std::system(cmd.c_str());
  const int code = status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
  if (code == 2 || code == 127) {
    std::printf("lesson 9: the browser part was skipped (see above for what is missing)\n");
    return 77;
  }
  expect(code == 0, "on WebGPU and on WebGL2 the browser matches the native CPU reference, and training lowers the loss");
  return 0;
}
