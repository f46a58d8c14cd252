// Lesson 4: the schedule — which kernels a program becomes, and what fused and why.
//
// Lessons 1-3 built graphs: one node per materialised tensor. A GPU does not run nodes, it runs kernels (a
// draw of a fragment shader, or a dispatch of a compute shader), and every kernel writes its results to memory
// and the next one reads them back. The *scheduler* (sg::schedule, codegen/src/schedule*.cpp) partitions the
// graph into *fusion groups*, one kernel each, and plans the memory (which values get a texture or a buffer,
// which temporaries share one). This lesson schedules a small train step and reads the Plan it returns.
//
//   cmake --build build --target lesson_04_schedule && build/bin/lesson_04_schedule
//
// Nothing here needs a GPU: scheduling is a pure function of the program and of the target's limits.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sg/emit.h"
#include "sg/kernel_ir.h"
#include "sg/shader_compiler.h"
#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

static void print_plan(const sg::Plan& plan) {
  for (const sg::Kernel& k : plan.kernels) {
    std::printf("  %-28s %zu output(s), %zu input(s), nodes:", k.name.c_str(), k.outputs.size(), k.inputs.size());
    for (auto& n : k.nodes) std::printf(" %.24s", n->label().c_str());  // labels cut: Adam's bodies are long
    std::printf("\n");
  }
}

int main(int argc, char** argv) {
  // The program: one dense layer h = relu(x @ W + b), a loss, and one Adam step on W and b. In the graph,
  // x @ W is a MatMul node and `relu(... + b)` is ONE Map node (lesson 1: an expression is one node).
  sg::Tensor x = sg::input("x", {8, 4});
  sg::Tensor W = sg::param("W", {4, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, -0.8f, 0.9f, 1.0f, 0.2f, -0.1f});
  sg::Tensor b = sg::param("b", {3}, {0.1f, 0.0f, -0.1f});
  sg::Tensor h = sg::relu(sg::matmul(x, W) + b);
  sg::Tensor loss = sg::mean(h * h);
  auto adam = sg::make_adam({.lr = 1e-2});
  sg::Program step = sg::make_train_step(loss, {W, b}, *adam);
  std::printf("the train step has %zu graph nodes\n", step.nodes().size());

  // A Target says what code is written and how tensors are stored: GlslEsFragment means GLSL ES 3.00 fragment
  // shaders writing RGBA32F textures (the "gles" backend); its limits (render targets per draw, samplers,
  // texture size) come from the device's capabilities. preset_caps("llvmpipe") gives Mesa's CPU rasteriser's
  // without opening a device. sg::schedule_options is the ONE policy function that turns (target, backend
  // options) into ScheduleOptions: the backends, `shadergrad dump` and the debugger all call it, so what you
  // see here is what the "gles" backend on llvmpipe runs.
  sg::Target frag = sg::make_target(sg::TargetName::GlslEsFragment, sg::preset_caps("llvmpipe"));
  sg::Plan plan = sg::schedule(step, sg::schedule_options(frag, {}));
  std::printf("\nfragment target (%s): %zu kernels, launch order\n", std::string(sg::target_name(frag.name)).c_str(),
              plan.kernels.size());
  print_plan(plan);

  // 1. Inference first: relu(x @ W + b) alone, as the program's only output. The matmul's result is read by a
  //    single elementwise consumer of the same shape, so instead of storing x@W and reading it back, the
  //    scheduler *inlines* the bias add and the relu into the matmul's kernel as its *epilogue*: each fragment
  //    computes its dot products, adds b, clamps, and stores only h. Kernel names list the ops they compute.
  sg::Program infer;
  infer.add_output("h", h);
  sg::Plan iplan = sg::schedule(infer, sg::schedule_options(frag, {}));
  std::printf("\ninference relu(x@W+b): %zu kernel: %s\n", iplan.kernels.size(), iplan.kernels.front().name.c_str());
  expect(iplan.kernels.size() == 1 && iplan.kernels.front().nodes.size() == 2 &&
             iplan.kernels.front().nodes.front()->op == sg::Op::MatMul,
         "matmul + bias + relu = one kernel (the epilogue rule)");

  // 2. In the train step the same layer is NOT one kernel, and the reason is the whole game of fusion: the
  //    relu's result h is read by the loss AND by the backward pass (relu's gradient mask, W's and b's
  //    gradients). A cheap Map is recomputed in each reader (the prologue rule: a few scalar ops), but a matmul
  //    is never duplicated — three readers would be three matmuls. So the matmul is stored on its own
  //    (k00_matmul) and relu(. + b) is recomputed inside each of the three kernels that read it.
  const sg::Kernel& k0 = plan.kernels.front();
  expect(k0.nodes.size() == 1 && k0.nodes.front()->op == sg::Op::MatMul,
         "train step: the forward matmul is a kernel of its own (its result has several readers)");
  int relu_copies = 0;
  for (const sg::Kernel& k : plan.kernels)
    for (auto& n : k.nodes) relu_copies += n.get() == h.node().get();
  expect(relu_copies == 3, "relu(x@W + b) itself is recomputed in 3 kernels (loss, Adam of b, Adam of W)");

  // 3. A reduction ends a group. mean(h*h) sums all 24 elements into one: every element of the result depends on
  //    every element read, so only a consumer of the sum's own shape (its epilogue: the mean's scaling) can be
  //    computed in the same kernel. Anything that needs the reduced value at other elements starts a new
  //    kernel. (Here the loss kernel also carries Adam's step counter t + 1, another scalar: multi-output.)
  bool ends = true;
  for (const sg::Kernel& k : plan.kernels)
    for (auto& n : k.nodes)
      for (auto& in : n->inputs)
        if ((in->op == sg::Op::Reduce || in->op == sg::Op::MatMul) && n->numel() != in->numel())
          for (auto& m : k.nodes) ends &= m != in;  // a wider reader of a reduction computed in the same kernel
  expect(ends, "no kernel reads its own reduction or matmul at other elements: only an epilogue of the same shape");

  // 4. Multi-output kernels. Adam keeps two moments m and v per parameter and computes the new parameter from
  //    them: three new values per element, all of one shape, all reading the same gradient. One draw with three
  //    render targets computes them together: the gradient is computed once, in registers (the reduction that
  //    makes it — b's sum over rows, W's x^T @ dh — is *sunk* into the kernel instead of being stored), and the
  //    update reads the new m and v at its own element. Bounded by the target's render targets (llvmpipe: 8).
  int multi = 0;
  for (const sg::Kernel& k : plan.kernels)
    if (k.outputs.size() == 3) ++multi;
  expect(multi == 2, "two kernels of 3 outputs: Adam's (m, v, b) and (m, v, W), each with its gradient inside");
  expect(plan.kernels.size() == 4, "the whole train step is 4 kernels: forward matmul, loss, Adam(b), Adam(W)");

  // Which values the plan stores: Value::node is the materialised node. Everything else was inlined — computed
  // in registers of the kernel that needed it, never written to memory.
  std::printf("the plan stores %zu values for %zu nodes; %lld bytes of textures at peak\n", plan.values.size(),
              step.nodes().size(), static_cast<long long>(plan.peak_bytes));
  expect(plan.values.size() < step.nodes().size(), "fewer stored values than graph nodes: the rest were inlined");

  // The same program for a compute target. SpirvVulkan kernels are compute shaders over storage buffers (the
  // "vulkan" backend; "gles-compute" uses the same plans). The storage model differs (buffers, not textures),
  // so the policy gives other options: no texture planes, one storage-buffer budget per kernel for inputs and
  // outputs together instead of render targets and samplers. The fusion rules are the same, so the partition is
  // the same here (Adam(W) binds 9 inputs and 3 outputs: within llvmpipe's 16 storage buffers).
  sg::Target comp = sg::make_target(sg::TargetName::SpirvVulkan, sg::preset_caps("llvmpipe"));
  sg::Plan cplan = sg::schedule(step, sg::schedule_options(comp, {}));
  std::printf("\ncompute target (%s): %zu kernels\n", std::string(sg::target_name(comp.name)).c_str(),
              cplan.kernels.size());
  print_plan(cplan);
  int cmulti = 0;
  for (const sg::Kernel& k : cplan.kernels) cmulti += k.outputs.size() == 3;
  expect(cplan.kernels.size() == plan.kernels.size() && cmulti == 2,
         "on buffers: the same 4 kernels, Adam's updates again two multi-output kernels");

  // And the baseline the fusion is measured against: unfused = one kernel per non-leaf node (the debug mode of
  // every backend, BackendOptions::unfused).
  sg::BackendOptions unfused_opt;
  unfused_opt.unfused = true;
  sg::Plan unfused = sg::schedule(step, sg::schedule_options(frag, unfused_opt));
  std::printf("\nunfused: %zu kernels instead of %zu\n", unfused.kernels.size(), plan.kernels.size());
  expect(unfused.kernels.size() > 2 * plan.kernels.size(), "fusion more than halves the number of launches");
  // Run with a directory argument to get each kernel's files as lesson 5 explains them (docs/ARCHITECTURE.md's
  // worked example was dumped this way): DIR/<kernel>.ir (the kernel IR of each output), .glsl, .spvasm, .frag.
  if (argc > 1) {
    std::error_code ec;
    std::filesystem::create_directories(argv[1], ec);
    if (ec) {
      std::fprintf(stderr, "lesson 4: cannot create the output directory %s: %s\n", argv[1], ec.message().c_str());
      return 1;
    }
    for (const sg::Kernel& k : plan.kernels) {
      const std::string base = std::string(argv[1]) + "/" + k.name;
      std::ofstream ir(base + ".ir");
      for (auto& e : k.exprs) ir << sg::kexpr_str(e) << "\n";
      sg::CompiledShader cs = sg::compile_shader(k.name, sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment),
                                                 sg::ShaderStage::Fragment);
      std::ofstream(base + ".glsl") << cs.glsl450;
      std::ofstream(base + ".spvasm") << cs.spvasm;
      std::ofstream(base + ".frag") << cs.gles;
      if (!ir || !std::ifstream(base + ".frag")) {
        std::fprintf(stderr, "lesson 4: cannot write %s.*\n", base.c_str());
        return 1;
      }
    }
    std::printf("wrote %zu kernels to %s\n", plan.kernels.size(), argv[1]);
  }
  std::printf("lesson 4 done\n");
  return 0;
}
