// shadergrad export — a model's inference program and train step as a web bundle for the JavaScript runtime
// (runtime/web/, docs/BUNDLE.md). The work is sg::web::write_bundle (stdlib/include/sg/web_export.h); this file
// parses flags and prints what was written.
#include "export_cmd.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sg/lm_export.h"
#include "sg/web_export.h"
#include "cli_choices.h"

namespace sg::cli {

Subcommand add_export_command(CLI::App& app) {
  auto mo = std::make_shared<web::ModelExportOptions>();
  auto targets = std::make_shared<web::BundleTargets>();
  web::WebGL2Target* target = &targets->webgl2_target;
  auto target_list = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"webgpu", "webgl2", "wasm"});
  auto out = std::make_shared<std::string>();
  CLI::App* e = app.add_subcommand(
      "export", "write a model's inference program and Adam train step as a web bundle (bundle.json, WGSL and GLSL "
                "ES shaders, a WebAssembly module, weights.safetensors, expected outputs, the JavaScript runtime) for "
                "WebGPU, WebGL2 and WebAssembly in a browser");
  auto export_models = std::make_shared<std::vector<std::string>>(sg::cli::kExportModels);
  export_models->insert(export_models->end(), lm::kLmModels.begin(), lm::kLmModels.end());
  e->add_option("--model", mo->model, choices(*export_models) + " (resnet: program infer in eval mode, BatchNorm's "
                                      "running statistics; train updates them; charlm, lstm: the word models of "
                                      "sg/lm.h; their bundle's infer outputs logits and charlm's attention maps attn/L)")
      ->check(CLI::IsMember(*export_models));
  auto lmo = std::make_shared<lm::LmExportOptions>();
  e->add_option("--context", lmo->spec.context, "charlm, lstm without --load: positions per row (default 32)")
      ->check(CLI::Range(int64_t{2}, int64_t{1024}));
  e->add_option("--d-model", lmo->spec.d_model, "charlm: width; lstm: embedding size (default 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  e->add_option("--layers", lmo->spec.layers, "charlm: transformer blocks; lstm: LSTM layers (default 2)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  e->add_option("--heads", lmo->spec.heads, "charlm: attention heads (default 4)")->check(CLI::Range(int64_t{1}, int64_t{256}));
  e->add_option("--hidden", lmo->spec.hidden, "lstm: hidden size (default 128)")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  e->add_option("--clip-grad-norm", lmo->clip_grad_norm, "charlm, lstm: the train step's global gradient-norm clip "
                                                        "(default 1, as train; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  e->add_option("--dataset", mo->dataset, "input geometry: fashion-mnist (28x28) | digits (8x8) | shapes "
                                          "(128x128); default: fashion-mnist for mlp and resnet, shapes for cnn5, digits otherwise")
      ->check(CLI::IsMember(kDatasets));
  e->add_option("--load", mo->load, "initial parameters from a checkpoint (shadergrad train --save)");
  e->add_option("--targets", *target_list, "comma-separated targets the bundle carries: webgpu (WGSL compute "
                                          "kernels), webgl2 (GLSL ES fragment shaders), wasm (C kernels compiled to WebAssembly SIMD128 by "
                                          "clang-14 and wasm-ld); default webgpu,webgl2,wasm")
      ->delimiter(',')
      ->check(CLI::IsMember({"webgpu", "webgl2", "wasm"}));
  e->add_option("--webgpu-preset", targets->webgpu_target.preset,
                "WebGPU limits the webgpu kernels are made for: webgpu (core defaults, the default) | webgpu-compat "
                "(compatibility mode, e.g. WebGPU on OpenGL ES)")
      ->check(CLI::IsMember({"webgpu", "webgpu-compat"}));
  e->add_option("--webgpu-plans", targets->webgpu_plans,
                "comma-separated webgpu plans the bundle carries: gpu (kernels for GPUs), cpu (for CPU implementations of "
                "WebGPU: SwiftShader, Dawn over llvmpipe; CPU tile sizes, long reductions split), cpu-subgroups (the cpu "
                "plan with contractions that share loads across subgroups of 4: SwiftShader); default "
                "gpu,cpu,cpu-subgroups: the runtime picks one by the adapter")
      ->delimiter(',')
      ->check(CLI::IsMember({"gpu", "cpu", "cpu-subgroups"}));
  auto cpu_only = std::make_shared<bool>(false);
  e->add_flag("--webgpu-cpu", *cpu_only, "only the webgpu plans for CPU implementations of WebGPU (--webgpu-plans "
                                        "cpu,cpu-subgroups)");
  e->add_option("--out", *out, "bundle directory (created; an earlier bundle there is replaced once the new one is complete, other files stay)")->required();
  e->add_option("--batch", mo->batch, "train step batch (default 128 mlp, 16 charlm and lstm, 64 otherwise)")->check(CLI::PositiveNumber);
  e->add_option("--infer-batch", mo->infer_batch, "inference batch (default: the train batch; 8 for charlm and lstm)")
      ->check(CLI::PositiveNumber);
  e->add_option("--lr", mo->lr, "Adam learning rate (default 1e-3 mlp, 2e-3 otherwise; charlm and lstm: AdamW, 1e-3)")->check(CLI::PositiveNumber);
  e->add_option("--seed", mo->seed, "parameter init (without --load) and the fixed check inputs");
  e->add_option("--check-steps", mo->check_steps, "train steps in the expected-output checks (default 3)")
      ->check(CLI::Range(0, 100));
  e->add_flag("--debug-program", mo->debug_program,
              "also export program train_debug: the train step that outputs every layer's activation (act/I) and "
              "gradient (grad/I) and every parameter's gradient (gradp/NAME), for a page's gradient-flow view (Sequential "
              "models: mlp, cnn, cnn-large, cnn5; refused for resnet)");
  e->add_flag("--check-nodes", mo->check_nodes,
              "the first infer and train check runs also record every graph node's value on the CPU reference "
              "(bundle.json checks.runs[].nodes; the page debugger's per-kernel comparison)");
  e->add_flag("--infer-only", mo->infer_only, "only program infer (no train step), e.g. for a Worker that classifies");
  e->add_option("--max-texture-size", target->max_texture_size,
                "texture side limit the layouts use (default 4096; the runtime checks the device's)")
      ->check(CLI::Range(int64_t{64}, int64_t{65536}));
  e->add_option("--max-draw-buffers", target->max_draw_buffers,
                "render targets per kernel (default 4, what WebGL2 guarantees; 8 on most desktop GPUs and SwiftShader)")
      ->check(CLI::Range(1, 8));
  e->add_option("--row-planes", target->row_planes, "rows per fragment of matmul-like kernels (default 4; 1 = off)")
      ->check(CLI::Range(1, 8));
  e->add_option("--col-planes", target->col_planes, "column planes (1 = off, the default; 2 needs 8 draw buffers "
                                                    "with 4 row planes)")
      ->check(CLI::Range(1, 2));
  e->add_flag("--union", target->union_domains, "union-domain kernels (independent kernels of different shapes in "
                                                "one draw; off by default: CPU rasterisers run them masked)");
  auto linear = std::make_shared<bool>(false);
  e->add_flag("--linear-layout", *linear, "texture rows wrap at --max-texture-size (one long row per small tensor) "
                                         "instead of the default 2-D row-aligned layouts");
  e->add_option("--split-k", target->min_parallel_texels, "split-K below this many output texels (0 = off)")
      ->check(CLI::NonNegativeNumber);
  Subcommand cmd;
  cmd.sub = e;
  cmd.run = [e, mo, lmo, targets, target_list, out, linear, cpu_only]() {
    if (*cpu_only) targets->webgpu_plans = {"cpu", "cpu-subgroups"};
    web::WebGL2Target* target = &targets->webgl2_target;
    target->row_aligned_layout = !*linear;
    if (target->col_planes > 1 && (target->max_draw_buffers < 8 || target->row_planes != 4))  // was silently off
      throw ValueError(fmt::format("export: --col-planes 2 needs --max-draw-buffers 8 and --row-planes 4 (a 4 x 8 tile "
                                   "per fragment into 8 render targets); got --max-draw-buffers {} --row-planes {}",
                                   target->max_draw_buffers, target->row_planes));
    auto has = [&](const char* t) { return std::find(target_list->begin(), target_list->end(), t) != target_list->end(); };
    targets->webgpu = has("webgpu");
    targets->webgl2 = has("webgl2");
    targets->wasm = has("wasm");
    web::BundleSpec spec;
    if (lm::is_lm_model(mo->model)) {
      if (mo->debug_program || mo->check_nodes || mo->infer_only || !mo->dataset.empty())
        throw ValueError(fmt::format("export --model {}: --debug-program, --check-nodes, --infer-only and --dataset are "
                                     "for the image models (the words models' bundle has infer and train)", mo->model));
      // the checkpoint fixes the model's sizes: a size option given beside --load would be ignored, so it is refused
      for (const char* size : {"--context", "--d-model", "--layers", "--heads", "--hidden"})
        if (!mo->load.empty() && e->get_option(size)->count() > 0)
          throw ValueError(fmt::format("export --model {} --load {}: {} is the checkpoint's (its sizes are read from "
                                       "it); drop {} or export a new model without --load",
                                       mo->model, mo->load, size, size));
      lmo->spec.model = mo->model;
      lmo->load = mo->load;
      if (mo->batch > 0) lmo->batch = mo->batch;
      if (mo->infer_batch > 0) lmo->infer_batch = mo->infer_batch;
      if (mo->lr > 0) lmo->lr = mo->lr;
      lmo->seed = mo->seed;
      lmo->check_steps = mo->check_steps;
      spec = lm::lm_bundle_spec(*lmo);
    } else {
      spec = web::model_bundle_spec(*mo);
    }
    web::ExportSummary s = web::write_bundle(spec, *targets, *out);
    auto list = [](const std::vector<std::pair<std::string, int>>& ks) {
      std::string r;
      for (auto& [p, n] : ks) r += fmt::format("{}{} {}", r.empty() ? "" : ", ", p, n);
      return r;
    };
    std::cout << fmt::format("wrote the {} bundle to {}/ ({} files); {} persistent values, weights.safetensors "
                             "{:.2f} MiB\n", mo->model, *out, s.files.size(), s.persistent_values,
                             s.weight_bytes / 1048576.0);
    for (const auto& p : s.webgpu_plans)
      std::cout << fmt::format("target webgpu, {} plan (preset {}): WGSL compute kernels per run: {}{}\n", p.name,
                               targets->webgpu_target.preset, list(p.kernels),
                               p.shared_shaders ? fmt::format(" ({} shaders shared with the plan before)", p.shared_shaders)
                                                : "");
    if (targets->webgl2)
      std::cout << fmt::format("target webgl2: kernels per run: {}; {} draw buffers, {} texture units, textures up "
                               "to {}, row planes {}, column planes {}, union-domain kernels {}, {} layouts\n",
                               list(s.kernels), target->max_draw_buffers, target->max_texture_units,
                               target->max_texture_size, target->row_planes, target->col_planes,
                               target->union_domains ? "on" : "off", *linear ? "linear" : "row-aligned 2-D");
    if (targets->wasm)
      std::cout << fmt::format("target wasm: kernels per run: {}; wasm/kernels.wasm {:.1f} KiB, compiled in {:.0f} ms\n",
                               list(s.wasm_kernels), s.wasm_bytes / 1024.0, s.wasm_compile_ms);
    std::cout << "serve the directory over http(s) and load bundle.json with runtime/shadergrad.js (docs/BUNDLE.md); "
                 "runtime/debugger.html steps through its programs kernel by kernel (docs/DEBUGGING.md)\n";
    return 0;
  };
  return cmd;
}

}  // namespace sg::cli
