// The "log of a negative number" model of the page debugger's NaN check (ctest "page debugger: check numerics ...",
// tests/page_debugger_check.mjs): one train step whose log meets a negative value, exported as a web bundle, and the
// same step run natively under sg::debug::Session with check_numerics (what `shadergrad debug --check-numerics`
// does) so that the page's report can be compared with the native one.
//
// Usage: page_debugger_log_model OUT_DIR
//   writes OUT_DIR/bundle/ (bundle.json with program "train" = the debug train step, its checks feeding x) and
//   OUT_DIR/native.json: {backend, kernel, sources, message, log_node, log_line, log_op}. Exit 0 when the native
//   session threw its NumericsError as expected, 1 otherwise.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/debug.h"
#include "sg/shadergrad.h"
#include "sg/web_export.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: page_debugger_log_model OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  sg::Tensor x = sg::input("x", {4, 3});
  sg::Tensor w = sg::param("w", {3, 2}, {1, 0.5f, 0.5f, 1, 0.25f, 0.25f});
  sg::Tensor h = sg::matmul(x, w);
  const int log_line = __LINE__ + 1;
  sg::Tensor y = sg::log(h);  // row 1 of x makes both of h's values in that row negative: NaN
  sg::Tensor loss = sg::mean(y);
  auto opt = sg::make_sgd({.lr = 0.1});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt);
  const std::vector<float> xv = {1, 1, 1, 1, -3, 1, 2, 1, 0, 0.5f, 0.5f, 4};

  sg::web::BundleSpec spec;
  spec.model = "log-negative (tests/page_debugger_log_model.cpp)";
  spec.programs.push_back({"train", ts.program});
  spec.checks.push_back({"train", {{"x", xv}}});
  sg::web::BundleTargets targets;
  targets.webgpu_plans = {"cpu"};  // the kernels for SwiftShader, the test's WebGPU
  sg::web::write_bundle(spec, targets, out + "/bundle");

  auto choice = sg::make_backend({.kind = "auto"});
  auto exe = choice.backend->compile(ts.program);
  sg::debug::Session session({.check_numerics = true});
  session.attach(*exe, ts, choice.backend.get());
  nlohmann::json j = {{"backend", choice.backend->name()}, {"log_node", session.node_number(y.node().get())},
                      {"log_line", "page_debugger_log_model.cpp:" + std::to_string(log_line)},
                      {"log_op", y.node()->label()}};
  int rc = 1;
  try {
    session.run({{"x", &xv}});
    j["message"] = "no NumericsError";
  } catch (const sg::debug::NumericsError& e) {
    j["kernel"] = e.kernel;
    j["sources"] = e.sources;
    j["message"] = e.what();
    rc = 0;
  }
  std::ofstream(out + "/native.json") << j.dump(1) << "\n";
  std::printf("%s\n", j.dump(1).c_str());
  return rc;
}
