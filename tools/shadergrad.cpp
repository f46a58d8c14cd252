// shadergrad — command-line interface: train, predict, info, dump (debug and export in their own files).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/compress.h"
#include "sg/datasets.h"
#include "sg/dump.h"
#include "sg/gles_device.h"
#include "sg/image.h"
#include "sg/lm.h"
#include "sg/safetensors.h"
#include "sg/train.h"
#include "sg/vulkan_device.h"
#include "sg/web_export.h"
#include "compress_cmd.h"
#include "debug_cmd.h"
#include "export_cmd.h"
#include "serve_cmd.h"
#include "cli_choices.h"
#include "subcommand.h"

namespace {

using sg::cli::choices;
using sg::cli::kBackends;
using sg::cli::kDatasets;
using sg::cli::kModels;

// CLI11's PositiveNumber/NonNegativeNumber report "Value 0 not in range 0.000000 to 1797...(309 digits)";
// these say what is wanted in words.
std::string check_number(const std::string& s, bool zero_ok) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || !(zero_ok ? v >= 0 : v > 0))  // `--lr inf` too
    return fmt::format("must be a finite {} number, got '{}'", zero_ok ? "non-negative" : "positive", s);
  return "";
}
const CLI::Validator kPositive([](std::string& s) { return check_number(s, false); }, "POSITIVE");
// a count: digits only ("1e20" and "2.5" are not counts; CLI11 took "1e20" epochs without a word), 1 .. max
CLI::Validator count_up_to(int64_t max) {
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || v < 1 || v > static_cast<unsigned long long>(max))
          return fmt::format("must be a whole number from 1 to {}, got '{}'", max, s);
        return "";
      },
      "COUNT");
}
const CLI::Validator kNonNegative([](std::string& s) { return check_number(s, true); }, "NONNEGATIVE");
// `--save ""` used to mean "save nothing" silently (the Config default); an output option given must name a file
const CLI::Validator kFileName([](std::string& s) { return s.empty() ? std::string("must name a file, got ''") : ""; },
                               "FILE");

const char* kFashionClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct DatasetGeometry {
  int64_t c, h, w;
  int64_t classes = 10;  ///< the model's outputs, as shadergrad train builds it (the dataset's num_classes)
};
DatasetGeometry geometry(const std::string& dataset) {
  if (dataset == "fashion-mnist") return {1, 28, 28};
  if (dataset == "digits") return {1, 8, 8};
  if (dataset == "shapes") return {1, 128, 128, sg::data::kShapeClasses};
  throw sg::ValueError(fmt::format("unknown dataset '{}' (choose fashion-mnist, digits or shapes)", dataset));
}

/// The Vulkan device the Vulkan backend would pick (JSON: its caps, or available = false with the reason).
nlohmann::json vulkan_info() {
  try {
    return sg::vk::caps_json(sg::vk::Device::create({})->caps());
  } catch (const sg::Error& e) {
    return {{"available", false}, {"reason", e.what()}};
  }
}

std::string vulkan_info_text(const nlohmann::json& v) {
  if (!v.at("available").get<bool>())
    return "Vulkan backend: unavailable\n" + v.at("reason").get<std::string>() + "\n";
  const auto& l = v.at("limits");
  return fmt::format(
      "Vulkan backend: available\n  device          {} ({}, Vulkan {})\n  driver          {}\n"
      "  storage buffers {} per kernel\n  workgroup       {} invocations, size {}, {} groups per dimension\n"
      "  shared memory   {} bytes\n  buffer range    {} bytes\n  subgroup size   {}\n  timestamps      {}\n"
      "  memory          {}\n",
      v.at("name").get<std::string>(), v.at("device_type").get<std::string>(), v.at("api_version").get<std::string>(),
      v.at("driver").get<std::string>(), l.at("maxPerStageDescriptorStorageBuffers").get<int64_t>(),
      l.at("maxComputeWorkGroupInvocations").get<int64_t>(), l.at("maxComputeWorkGroupSize").dump(),
      l.at("maxComputeWorkGroupCount").get<int64_t>(), l.at("maxComputeSharedMemorySize").get<int64_t>(),
      l.at("maxStorageBufferRange").get<int64_t>(), l.at("subgroupSize").get<int64_t>(),
      v.at("timestamps").get<bool>() ? "yes" : "no",
      v.at("direct_map").get<bool>() ? "device memory mapped directly" : "staging buffers");
}

int cmd_info(bool json) {
  sg::gles::DeviceOptions o;
  try {
    auto dev = sg::gles::Device::create(o);
    if (json) {
      nlohmann::json j = dev->caps_json();
      j["vulkan"] = vulkan_info();
      std::cout << j.dump(2) << "\n";
    } else {
      const auto& c = dev->caps();
      std::cout << fmt::format(
          "GLES backend: available\n  renderer        {}\n  version         {}\n  GLSL            {}\n"
          "  EGL platform    {}\n  max texture     {}\n  draw buffers    {}\n  float targets   {}\n  timer queries   {}\n"
          "  highp float     {} mantissa bits\n  fp32 round trip {} ({})\n",
          c.renderer, c.version, c.glsl_version, c.egl_platform, c.max_texture_size, c.max_draw_buffers,
          c.color_buffer_float ? "yes" : "no", c.timer_query ? "yes" : "no", c.highp_float_precision,
          c.fp32_roundtrip_ok ? "ok" : "FAILED", c.roundtrip_detail);
      std::cout << vulkan_info_text(vulkan_info());
    }
    return 0;
  } catch (const sg::Error& e) {
    if (json)
      std::cout << nlohmann::json{{"available", false}, {"reason", e.what()}, {"vulkan", vulkan_info()}}.dump(2) << "\n";
    else
      std::cout << "GLES backend: unavailable (the CPU backend will be used)\n" << e.what() << "\n"
                << vulkan_info_text(vulkan_info());
    return 1;  // the same status with and without --json: GLES is not usable
  }
}

int cmd_dump(const std::string& model_name, const std::string& target, const std::string& out, int64_t batch,
             bool unfused, bool gpu, int max_outputs, bool no_union) {
  const std::string dataset = sg::train::default_dataset(model_name);
  DatasetGeometry g = geometry(dataset);
  if (batch <= 0) batch = model_name == "mlp" ? 128 : 64;
  sg::nn::Rng rng(0);
  auto model = sg::nn::make_module(model_name, g.c, g.h, g.w, g.classes);
  model->build(rng);
  sg::Tensor x = sg::input("x", {batch, g.c, g.h, g.w});
  sg::Tensor y = sg::input("labels", {batch}, sg::DType::i32);
  sg::Tensor loss = sg::cross_entropy((*model)(x), y);
  auto opt = sg::make_adam({});
  sg::Program p = sg::make_train_step(loss, model->parameters(), *opt);
  // the schedule a backend of the chosen target runs on the chosen device (the one policy, sg::target_policy):
  // llvmpipe/lavapipe, or a hardware GPU (split-K, row-aligned layouts and union-domain kernels besides row and
  // column planes for the fragment target; GPU tile sizes for the compute targets)
  const bool wgsl = target == "wgsl" || target == "wgsl-compat";
  const bool csimd = target == "cpu-simd";  // the C kernels of the cpu-simd backend
  const bool compute = target == "glsl-es-compute" || target == "spirv-vulkan" || wgsl || csimd;
  if (!compute && target != "all" && target != "glsl450" && target != "spirv" && target != "glsl-es")
    throw sg::ValueError(fmt::format("unknown --target '{}' (all, glsl450, spirv, glsl-es, glsl-es-compute, "
                                     "spirv-vulkan, wgsl, wgsl-compat or cpu-simd)",
                                     target));
  // WGSL: the WebGPU default limits (or compatibility mode's); --gpu does not apply (a WebGPU device is any device)
  const sg::DeviceCaps caps =
      sg::preset_caps(wgsl ? (target == "wgsl" ? "webgpu" : "webgpu-compat") : csimd ? "cpu-simd" : gpu ? "gpu" : "llvmpipe");
  const sg::Target tgt = sg::make_target(wgsl      ? sg::TargetName::Wgsl
                                         : csimd   ? sg::TargetName::CpuSimd
                                         : compute ? (target == "spirv-vulkan" ? sg::TargetName::SpirvVulkan
                                                                               : sg::TargetName::GlslEsCompute)
                                                   : sg::TargetName::GlslEsFragment,
                                         caps);
  sg::BackendOptions bo;
  bo.unfused = unfused;
  bo.max_outputs = max_outputs;
  if (no_union) bo.union_domains = false;
  const sg::TargetPolicy policy = sg::target_policy(tgt, bo);  // schedule and emit options
  const sg::ScheduleOptions& so = policy.schedule;
  sg::Plan plan = sg::schedule(p, so);
  sg::DumpOptions d;
  if (compute) {
    d.fragment = false;
    d.compute = true;
    d.compute_limits = policy.emit.limits;
  }
  if (target != "all") {  // one format: the GLSL 4.50 input, the SPIR-V (+ disassembly), or the GLSL ES output
    d.glsl450 = target == "glsl450" || target == "spirv-vulkan";
    d.spirv = target == "spirv" || target == "spirv-vulkan";
    d.gles = target == "glsl-es" || target == "glsl-es-compute";
    d.wgsl = wgsl;
    d.c = csimd;
  }
  sg::KernelCache cache;
  sg::dump_plan(plan, out, cache, d);
  std::string files = "plan.json";
  if (d.glsl450) files += ", *.glsl";
  if (d.spirv) files += ", *.spv, *.spvasm";
  if (d.gles) files += d.compute ? ", *.comp" : ", *.frag";
  if (d.wgsl) files += ", *.wgsl";
  if (d.c) files += ", *.c";
  std::cout << fmt::format("wrote {} kernels of the {} train step (batch {}) to {}/ ({}); peak memory "
                           "{:.2f} MiB\nschedule: target {} on {}: {} outputs per kernel, row planes "
                           "{}, column planes {}, split-K {}, row-aligned layouts {}, union-domain kernels {}{}\n",
                           plan.kernels.size(), model_name, batch, out, files, plan.peak_bytes / 1048576.0,
                           sg::target_name(tgt.name), caps.renderer, so.max_outputs, so.row_planes, so.col_planes,
                           so.min_parallel_texels > 0 ? "on" : "off", so.row_aligned_layout ? "on" : "off",
                           so.union_domains ? "on" : "off", unfused ? " (unfused: one kernel per node)" : "");
  return 0;
}

/// A model ready to classify (eval mode: BatchNorm's running statistics, no dropout): built for its dataset's geometry,
/// its parameters and buffers written to `backend`.
struct Loaded {
  std::unique_ptr<sg::nn::Module> model;
  std::string dataset;
};

/// Reads any float checkpoint family: `train --save` / sg::train::save_checkpoint (shadergrad-checkpoint/1; a
/// checkpoint without 'dataset' metadata is matched to the dataset whose geometry gives its structure hash) and
/// compress outputs (shadergrad-compress/1, digits; masks folded). An int8 model gets an error naming int8-eval.
Loaded load_for_predict(const std::string& load, sg::Backend& backend) {
  sg::io::SafetensorsFile f = sg::io::load_safetensors(load);  // IOError when the data's SHA-256 differs
  if (!f.checksum_verified)
    std::cerr << "shadergrad predict: warning: " << load << " records no SHA-256 of its data ("
              << sg::io::kDataSha256Key << "), so corruption cannot be detected; re-save it with this version\n";
  auto meta = [&](const std::string& k) { return f.metadata.count(k) ? f.metadata.at(k) : std::string(); };
  auto build = [](const std::string& model_name, const std::string& dataset) {
    const DatasetGeometry g = geometry(dataset);
    auto model = sg::nn::make_module(model_name, g.c, g.h, g.w, g.classes);
    sg::nn::Rng rng(0);
    model->build(rng);
    model->eval();
    return model;
  };
  const std::string format = meta("format");
  if (format == sg::compress::kInt8Format)
    throw sg::IOError(fmt::format("{}: an int8 model ({}); predict runs float checkpoints, `shadergrad compress "
                                  "int8-eval --load {}` evaluates this one", load, format, load));
  if (format == sg::compress::kModelFormat) {  // a make_cnn(c1, c2, hidden) on digits, pruning masks folded
    sg::compress::Model m = sg::compress::load(load);
    sg::compress::remove_masks(m);
    const sg::compress::CnnSpec& s = m.spec;
    Loaded r{sg::nn::make_cnn(s.c1, s.c2, s.hidden, s.channels, s.height, s.width, s.classes), "digits"};
    sg::nn::Rng rng(0);
    r.model->build(rng);
    for (auto& [name, t] : r.model->named_parameters()) backend.write(t, m.param(name).data);
    return r;
  }
  if (format != sg::train::kCheckpointFormat)
    throw sg::IOError(fmt::format("{}: metadata format '{}' is not a checkpoint predict reads ({} from `shadergrad "
                                  "train --save`, or {} from `shadergrad compress`)", load, format,
                                  sg::train::kCheckpointFormat, sg::compress::kModelFormat));
  const std::string model_name = meta("model");
  if (sg::lm::is_lm_model(model_name))
    throw sg::IOError(fmt::format("{}: a '{}' checkpoint (a character language model on words): predict classifies "
                                  "images; `shadergrad sample --load {}` generates words with it", load, model_name, load));
  if (std::find(kModels.begin(), kModels.end(), model_name) == kModels.end())
    throw sg::IOError(fmt::format("{}: metadata model '{}' is not one of {}", load, model_name, choices(kModels)));
  Loaded r{nullptr, meta("dataset")};
  if (r.dataset.empty())  // sg::train::save_checkpoint without extra metadata: the geometry its shapes fit
    for (const std::string& d : kDatasets)
      if (build(model_name, d)->structure_hash() == meta("structure_hash")) r.dataset = d;
  if (r.dataset.empty())
    throw sg::IOError(fmt::format("{}: a '{}' checkpoint whose parameter shapes fit none of the datasets ({})", load,
                                  model_name, choices(kDatasets)));
  r.model = build(model_name, r.dataset);
  sg::train::load_checkpoint(load, *r.model, backend);
  return r;
}

int cmd_predict(const std::string& load, const std::string& image, const std::string& backend, bool invert) {
  sg::BackendOptions bo;
  bo.kind = backend;
  auto choice = sg::make_backend(bo);
  if (!choice.note.empty()) std::cerr << choice.note << "\n";
  Loaded loaded = load_for_predict(load, *choice.backend);
  const std::string dataset = loaded.dataset;
  sg::nn::Module& model = *loaded.model;
  const DatasetGeometry g = geometry(dataset);
  std::vector<float> px = sg::image::read_image_gray(image, static_cast<int>(g.h), static_cast<int>(g.w));
  if (invert)
    for (float& v : px) v = 1.f - v;
  for (const std::string& w : sg::image::input_warnings(px, static_cast<int>(g.h), static_cast<int>(g.w)))
    std::cerr << "shadergrad predict: warning: " << w << "\n";
  sg::Tensor x = sg::input("x", {1, g.c, g.h, g.w});
  sg::Program p;
  p.add_output("probs", sg::softmax(model(x), 1));
  auto exe = choice.backend->compile(p);
  std::vector<float> probs = exe->run({{"x", &px}})[0];
  size_t best = 0;
  for (size_t i = 1; i < probs.size(); ++i)
    if (probs[i] > probs[best]) best = i;
  auto label = [&](size_t i) {
    if (dataset == "fashion-mnist") return fmt::format("{} ({})", i, kFashionClasses[i]);
    if (dataset == "shapes") return fmt::format("{} ({})", i, sg::data::kShapeNames[i]);
    return std::to_string(i);
  };
  std::cout << fmt::format("prediction: {} (p = {:.4f})\n", label(best), probs[best]);
  for (size_t i = 0; i < probs.size(); ++i) std::cout << fmt::format("  {:<18} {:.4f}\n", label(i), probs[i]);
  return 0;
}

/// `shadergrad sample`: rebuilds the language model a checkpoint's metadata describes, loads it and prints the words.
int cmd_sample(const std::string& load, const sg::lm::SampleOptions& o, const std::string& backend) {
  sg::io::SafetensorsFile f = sg::io::load_safetensors(load);
  auto meta = [&](const std::string& k) { return f.metadata.count(k) ? f.metadata.at(k) : std::string(); };
  if (meta("format") != sg::train::kCheckpointFormat)
    throw sg::IOError(fmt::format("{}: metadata format '{}' is not a training checkpoint ({} from `shadergrad train "
                                  "--model charlm|lstm --save`)", load, meta("format"), sg::train::kCheckpointFormat));
  if (!sg::lm::is_lm_model(meta("model")))
    throw sg::IOError(fmt::format("{}: a '{}' checkpoint (an image classifier: `shadergrad predict` runs it); sample "
                                  "generates words with a charlm or lstm checkpoint (`shadergrad train --model charlm "
                                  "--save F`)", load, meta("model")));
  const sg::lm::LmSpec spec = sg::lm::LmSpec::from_metadata(f.metadata, load);
  if (spec.model != meta("model"))
    throw sg::IOError(fmt::format("{}: metadata model '{}' and lm_model '{}' differ", load, meta("model"), spec.model));
  sg::lm::encode_prefix(o.prefix, spec.context);  // a bad prefix fails before the backend starts
  sg::BackendOptions bo;
  bo.kind = backend;
  auto choice = sg::make_backend(bo);
  if (!choice.note.empty()) std::cerr << choice.note << "\n";
  auto model = sg::lm::make_lm(spec);
  sg::nn::Rng rng(0);
  model->build(rng);
  sg::train::load_checkpoint(load, *model, *choice.backend);
  for (const std::string& w : sg::lm::sample_words(*model, spec, *choice.backend, o)) std::cout << w << "\n";
  return 0;
}

/// `train` (also what runs when the command line names no subcommand): sg::train::run with the options parsed.
sg::cli::Subcommand add_train_command(CLI::App& app) {
  auto cfg_state = std::make_shared<sg::train::Config>();
  auto quiet_state = std::make_shared<bool>(false);
  sg::train::Config& cfg = *cfg_state;
  bool& quiet = *quiet_state;
  auto* train = app.add_subcommand("train", "train a model on a dataset (the default command)");
  std::vector<std::string> train_models = kModels, train_datasets = kDatasets;
  train_models.insert(train_models.end(), sg::lm::kLmModels.begin(), sg::lm::kLmModels.end());
  train_datasets.push_back("words");
  train->add_option("--model", cfg.model,
                    choices(train_models) + " (charlm: a character transformer, lstm: an LSTM character model, both on "
                    "--dataset words with their own defaults, sg::train::lm_defaults)")
      ->check(CLI::IsMember(train_models));
  train->add_option("--dataset", cfg.dataset,
                    choices(train_datasets) + " (shapes: generated 128x128, for cnn5; words: Debian's wamerican word "
                    "list, for charlm and lstm)")
      ->check(CLI::IsMember(train_datasets));
  train->add_option("--split", cfg.split,
                    "digits: ours (seeded mt19937_64 permutation) | seed002 (seed 002's torch.randperm split)")
      ->check(CLI::IsMember({"ours", "seed002"}));
  train->add_option("--backend", cfg.backend, choices(kBackends))->check(CLI::IsMember(kBackends));
  train->add_option("--epochs", cfg.epochs, "epochs")->check(count_up_to(1000000));
  train->add_option("--batch", cfg.batch, "batch size (more than the training samples: one batch of all of them)")
      ->check(count_up_to(INT64_MAX));
  train->add_option("--optimizer", cfg.optimizer,
                    choices(sg::cli::kOptimizers) + " (momentum: SGD with momentum 0.9; adamw: torch.optim.AdamW, weight decay 0.01)")
      ->check(CLI::IsMember(sg::cli::kOptimizers));
  train->add_option("--lr", cfg.lr, "learning rate (with --lr-schedule: the base learning rate)")->check(kPositive);
  train->add_option("--clip-grad-norm", cfg.clip_grad_norm,
                    "clip the gradients' global 2-norm to this in the compiled step (torch.nn.utils.clip_grad_norm_); "
                    "0: no clipping")
      ->check(kNonNegative);
  train->add_option("--lr-schedule", cfg.lr_schedule,
                    choices(sg::cli::kLrSchedules) + " (step: StepLR, --lr-gamma every --lr-step-size steps; warmup-cosine: "
                    "linear warmup over --warmup-steps, then cosine to --min-lr at the last step), computed in the step")
      ->check(CLI::IsMember(sg::cli::kLrSchedules));
  train->add_option("--lr-step-size", cfg.lr_step_size, "step schedule: optimizer steps between decays (0: one epoch)")
      ->check(kNonNegative);
  train->add_option("--lr-gamma", cfg.lr_gamma, "step schedule: the factor")->check(kNonNegative);
  train->add_option("--warmup-steps", cfg.warmup_steps, "warmup-cosine schedule: warmup steps")->check(kNonNegative);
  train->add_option("--min-lr", cfg.min_lr, "warmup-cosine schedule: the final learning rate")->check(kNonNegative);
  train->add_option("--seed", cfg.seed, "seed for init and shuffling (0 .. 2^64-1)")
      ->check(kNonNegative);
  train->add_option("--save", cfg.save, "write a safetensors checkpoint")->check(kFileName);
  train->add_option("--metrics", cfg.metrics, "write metrics JSON")->check(kFileName);
  train->add_option("--train-limit", cfg.train_limit, "use only the first N training samples (0: all)")->check(kNonNegative);
  train->add_option("--test-limit", cfg.test_limit, "evaluate only the first N test samples (0: all)")->check(kNonNegative);
  train->add_option("--max-texture-width", cfg.max_texture_width, "narrower textures (forces row wrapping)")
      ->check(kNonNegative);
  train->add_flag("--unfused", cfg.unfused, "one kernel per graph node");
  train->add_flag("--profile", cfg.profile, "print per-kernel times of the train step");
  train->add_flag("--autotune", [&cfg](int64_t) { cfg.autotune = true; },
                  "vulkan: time the tile configurations of every tiled kernel on the device and run the fastest (kept "
                  "in SG_KERNEL_CACHE for later runs; default: env SG_AUTOTUNE)");
  train->add_flag("--quiet", quiet, "no progress output");
  train->add_option("--context", cfg.context, "charlm, lstm: positions per row (words of up to N-1 letters fit whole)")
      ->check(count_up_to(4096));
  train->add_option("--d-model", cfg.d_model, "charlm: model width; lstm: embedding size")->check(count_up_to(65536));
  train->add_option("--layers", cfg.layers, "charlm: transformer blocks; lstm: LSTM layers")->check(count_up_to(1024));
  train->add_option("--heads", cfg.heads, "charlm: attention heads")->check(count_up_to(1024));
  train->add_option("--hidden", cfg.hidden, "lstm: hidden size")->check(count_up_to(65536));

  {  // the defaults above are the image models'; the language models' own, from sg::train::lm_defaults
    const sg::train::Config c = sg::train::lm_defaults("charlm"), l = sg::train::lm_defaults("lstm");
    train->footer(fmt::format(
        "charlm and lstm default what the command line leaves out to: --dataset {} --optimizer {} --lr {:g} (lstm {:g}) "
        "--lr-schedule {} --warmup-steps {} --min-lr lr/10 --clip-grad-norm {:g} --batch {} --epochs {}; a short run "
        "(--train-limit) needs fewer --warmup-steps than its steps",
        c.dataset, c.optimizer, c.lr, l.lr, c.lr_schedule, c.warmup_steps, c.clip_grad_norm, c.batch, c.epochs));
  }
  sg::cli::Subcommand cmd;
  cmd.sub = train;
  cmd.run = [cfg_state, quiet_state, train] {
    sg::train::Config& cfg = *cfg_state;
    const bool quiet = *quiet_state;
    cfg.progress = !quiet;
    if (sg::lm::is_lm_model(cfg.model)) {  // the language models' defaults for what the command line leaves out
      const sg::train::Config d = sg::train::lm_defaults(cfg.model);
      auto unset = [&](const char* name) { return train->get_option(name)->count() == 0; };
      if (unset("--dataset")) cfg.dataset = d.dataset;
      if (unset("--optimizer")) cfg.optimizer = d.optimizer;
      if (unset("--lr")) cfg.lr = d.lr;
      if (unset("--lr-schedule")) cfg.lr_schedule = d.lr_schedule;
      if (unset("--warmup-steps")) cfg.warmup_steps = d.warmup_steps;
      if (unset("--min-lr")) cfg.min_lr = unset("--lr") ? d.min_lr : cfg.lr / 10;
      if (unset("--clip-grad-norm")) cfg.clip_grad_norm = d.clip_grad_norm;
      if (unset("--batch")) cfg.batch = d.batch;
      if (unset("--epochs")) cfg.epochs = d.epochs;
    } else if (cfg.dataset == "words") {
      throw sg::ValueError(fmt::format("--dataset words is for the language models (--model charlm or lstm), not {}",
                                       cfg.model));
    }
    if (quiet) {  // the result line only: no header, progress or epoch lines
      std::ostringstream log;
      std::cout << sg::train::run(cfg, log).summary() << "\n";
    } else {
      sg::train::run(cfg, std::cout);
    }
    return 0;
  };
  return cmd;
}

/// `sample`: cmd_sample with the options parsed.
sg::cli::Subcommand add_sample_command(CLI::App& app) {
  struct State {
    std::string load, backend = "auto";
    sg::lm::SampleOptions opt;
  };
  auto st = std::make_shared<State>();
  auto* sample = app.add_subcommand("sample", "generate words with a charlm or lstm checkpoint, one per line");
  sample->add_option("--load", st->load, "checkpoint written by train --model charlm|lstm --save")->required();
  sample->add_option("--prefix", st->opt.prefix, "every word starts with these letters (a-z; A-Z are lower-cased)");
  sample->add_option("--count", st->opt.count, "words to generate")->check(count_up_to(100000));
  sample->add_option("--temperature", st->opt.temperature,
                     "softmax temperature of the sampler (0: always the most likely character)")
      ->check(kNonNegative);
  sample->add_option("--seed", st->opt.seed, "seed of the sampler's generator (std::mt19937_64; 0 .. 2^64-1)")
      ->check(kNonNegative);
  sample->add_option("--backend", st->backend, choices(kBackends))->check(CLI::IsMember(kBackends));

  return {sample, [st] { return cmd_sample(st->load, st->opt, st->backend); }};
}

/// `predict`: cmd_predict with the options parsed.
sg::cli::Subcommand add_predict_command(CLI::App& app) {
  struct State {
    std::string load, image, backend = "auto";
    bool invert = false;
  };
  auto st = std::make_shared<State>();
  auto* predict = app.add_subcommand("predict", "classify an image (PNG or PGM) with a saved checkpoint");
  predict->add_option("--load", st->load, "checkpoint written by train --save")->required();
  predict->add_option("--input", st->image, "image file (PNG or binary PGM)")->required();
  predict->add_option("--backend", st->backend, choices(kBackends))->check(CLI::IsMember(kBackends));
  predict->add_flag("--invert", st->invert, "invert grey levels (dark strokes on white paper)");

  return {predict, [st] { return cmd_predict(st->load, st->image, st->backend, st->invert); }};
}

/// `info`: cmd_info with the options parsed.
sg::cli::Subcommand add_info_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* info = app.add_subcommand("info", "probe the GLES and Vulkan devices (renderer, limits, fp32 round trip)");
  info->add_flag("--json", *json, "print JSON");

  return {info, [json] { return cmd_info(*json); }};
}

/// `dump`: cmd_dump with the options parsed.
sg::cli::Subcommand add_dump_command(CLI::App& app) {
  struct State {
    std::string model = "mlp", target = "all", out;
    int64_t batch = 0;
    bool unfused = false, gpu = false, no_union = false;
    int max_outputs = 8;  // the GLES backend uses the device's GL_MAX_DRAW_BUFFERS (8 on llvmpipe and NVIDIA)
  };
  auto st = std::make_shared<State>();
  auto* dump = app.add_subcommand("dump", "write a model's generated kernels (GLSL, SPIR-V, GLSL ES) and plan.json");
  dump->add_option("--model", st->model, choices(kModels))->check(CLI::IsMember(kModels));
  dump->add_option("--target", st->target,
                   "all (default: .glsl, .spv, .spvasm, .frag) | glsl450 | spirv | glsl-es | glsl-es-compute (.comp) | "
                   "spirv-vulkan (.glsl, .spv, .spvasm of the compute kernels) | wgsl (.wgsl compute kernels for WebGPU's "
                   "default limits) | wgsl-compat (the same for WebGPU compatibility mode) | cpu-simd (.c kernels of the "
                   "cpu-simd backend)");
  dump->add_option("--out", st->out, "output directory")->required();
  dump->add_option("--batch", st->batch, "batch size (0 = default: 128 mlp, 64 cnn)")->check(kNonNegative);
  dump->add_flag("--unfused", st->unfused, "one kernel per graph node");
  dump->add_flag("--gpu", st->gpu,
                 "schedule as the GLES backend does on a hardware GPU (split-K, row-aligned layouts, union-domain "
                 "kernels) instead of as on llvmpipe; SG_DUMP=DIR with `train` dumps the exact plans a run executes");
  dump->add_option("--max-outputs", st->max_outputs,
                   "render targets per kernel (default 8, what the GLES backend uses on llvmpipe and NVIDIA: the "
                   "device's GL_MAX_DRAW_BUFFERS; GLES 3.0 guarantees 4)")
      ->check(CLI::Range(1, 8));
  dump->add_flag("--no-union", st->no_union,
                 "with --gpu: one iteration domain per kernel (no union-domain kernels drawing independent values of "
                 "different shapes at once; llvmpipe's schedule has none)");

  return {dump, [st] {
            return cmd_dump(st->model, st->target, st->out, st->batch, st->unfused, st->gpu, st->max_outputs,
                            st->no_union);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shadergrad: train neural networks through generated shaders (Vulkan, GLES compute, GLES fragment, "
               "CPU; WebGPU and WebGL2 through `export`)"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", fmt::format("shadergrad {} (web bundles {}, checkpoints {})", SG_VERSION,
                                                sg::web::kBundleFormat, sg::train::kCheckpointFormat));
  app.option_defaults()->always_capture_default();  // --help shows every option's default (subcommands inherit it)
  const sg::cli::Subcommand train = add_train_command(app);
  const std::vector<sg::cli::Subcommand> others = {
      add_sample_command(app),        add_predict_command(app),        add_info_command(app),
      add_dump_command(app),          sg::cli::add_debug_command(app), sg::cli::add_export_command(app),
      sg::cli::add_compress_command(app), sg::cli::add_serve_command(app)};
  CLI11_PARSE(app, argc, argv);
  try {
    for (const sg::cli::Subcommand& c : others)
      if (c) return c();
    return train();  // `train`, or no subcommand at all
  } catch (const sg::Error& e) {
    std::cerr << "shadergrad: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // e.g. std::ios_base::failure reading a directory as a file
    std::cerr << "shadergrad: " << e.what() << "\n";
    return 1;
  }
}
