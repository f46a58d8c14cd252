// libFuzzer target: the step-through debugger's command parser and argument resolution (sg::debug::Session's
// REPL). One session on the CPU backend runs one train step of a small MLP once; every input is then a script of
// commands given to its final prompt (debugger_finish). Contract: no command ends the session except quit/EOF, no
// exception escapes, no sanitizer report (issue 19: `print n99999999999999999999` ended it with std::stol).
#include <cstdint>
#include <sstream>
#include <string>

#include "sg/debug.h"
#include "sg/nn.h"
#include "sg/sg.h"

namespace {

struct Fixture {
  std::unique_ptr<sg::Backend> backend = sg::make_cpu_backend();
  std::unique_ptr<sg::nn::Sequential> model = sg::nn::make_model("mlp", 1, 2, 2, 3);
  std::unique_ptr<sg::Optimizer> opt = sg::make_adam({});
  sg::debug::TrainStep step;
  std::unique_ptr<sg::Executable> exe;
  sg::debug::Session session;
  std::vector<float> xs = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, ys = {0, 2};
  std::istringstream none;
  std::ostringstream sink;
  Fixture() {
    sg::nn::Rng rng(1);
    model->build(rng);
    sg::Tensor x = sg::input("x", {2, 1, 2, 2});
    sg::Tensor y = sg::input("labels", {2}, sg::DType::i32);
    step = sg::debug::make_train_step(sg::cross_entropy((*model)(x), y), model->named_parameters(), *opt);
    exe = backend->compile(step.program);
    session.attach(*exe, step, backend.get());
    session.run({{"x", &xs}, {"labels", &ys}});
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = new Fixture;  // never destroyed: the session outlives every input
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  f->sink.str("");
  f->session.set_debugger(in, f->sink, {.echo = false, .stop_at_start = false, .prompt = ""});
  f->session.debugger_finish();
  return 0;
}
