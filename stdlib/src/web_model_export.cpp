// The bundles of the built-in image models (`shadergrad export --model mlp|cnn|cnn-large|cnn5|resnet`,
// sg::web::model_bundle_spec): program "infer" built in eval mode, "train" (and "train_debug") in training mode, the
// checkpoint metadata a page needs, the fixed check inputs. The models are sg::nn::make_module's: a Sequential, or
// the ResNet (a module tree with BatchNorm running statistics and a dropout step counter as State).
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/datasets.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/train.h"
#include "sg/web_export.h"

namespace sg::web {

using nlohmann::json;

namespace {

/// One sample's geometry and the classes `shadergrad train` gives the model on the dataset (so its checkpoints load).
struct Geometry {
  std::string dataset;
  int64_t c = 1, h = 0, w = 0, classes = 10;
};

Geometry geometry_of(const ModelExportOptions& opt) {
  Geometry g;
  g.dataset = !opt.dataset.empty() ? opt.dataset : train::default_dataset(opt.model);
  if (g.dataset == "fashion-mnist") g.h = g.w = 28;
  else if (g.dataset == "digits") g.h = g.w = 8;
  else if (g.dataset == "shapes") g.h = g.w = 128, g.classes = data::kShapeClasses;
  else throw ValueError(fmt::format("export: unknown dataset '{}' (choose fashion-mnist, digits or shapes)", g.dataset));
  return g;
}

/// The train step of `model` that also outputs every layer's activation and gradient and every parameter's
/// gradient (ModelExportOptions::debug_program).
Program debug_train_step(nn::Sequential& model, Optimizer& adam, int64_t batch, const Geometry& g) {
  Tensor x = input("x", {batch, g.c, g.h, g.w});
  Tensor labels = input("labels", {batch}, DType::i32);
  std::vector<Tensor> acts;
  Tensor loss = cross_entropy(model.forward_layers(x, acts), labels);
  TrainStepGradients inspect;
  inspect.also = acts;
  std::vector<std::pair<std::string, Tensor>> extra;
  for (size_t i = 0; i < acts.size(); ++i) extra.emplace_back(fmt::format("act/{}", i), acts[i]);
  const auto params = model.named_parameters();
  std::vector<Tensor> ps;
  for (auto& [n, t] : params) ps.push_back(t);
  Program p = make_train_step(loss, ps, adam, extra, inspect);
  for (size_t i = 0; i < params.size(); ++i) p.add_output("gradp/" + params[i].first, inspect.grads[i]);
  for (size_t i = 0; i < acts.size(); ++i) p.add_output(fmt::format("grad/{}", i), inspect.grads[params.size() + i]);
  return p;
}

/// The programs: "infer" (probs) in eval mode — BatchNorm reads its running statistics, dropout is the identity —
/// then "train" (one Adam step) and "train_debug" in training mode, whose steps commit the running statistics,
/// num_batches_tracked and the dropout step counters with the parameters. The model is left in training mode (as
/// make_module made it). `--debug-program` needs a Sequential (its activations are the layers' outputs).
void add_programs(BundleSpec& spec, nn::Module& model, const ModelExportOptions& opt, const Geometry& g, int64_t batch,
                  int64_t ibatch, double lr) {
  auto* seq = dynamic_cast<nn::Sequential*>(&model);
  if (opt.debug_program && !opt.infer_only && !seq)
    throw ValueError(fmt::format("export --model {}: --debug-program needs a model that is a Sequential (mlp, cnn, "
                                 "cnn-large, cnn5): its act/I and grad/I are the outputs of layer I; export without it",
                                 opt.model));
  model.eval();
  {
    Program infer;
    infer.add_output("probs", softmax(model(input("x", {ibatch, g.c, g.h, g.w})), 1));
    spec.programs.push_back({"infer", std::move(infer)});
  }
  model.train();
  if (opt.infer_only) return;
  std::shared_ptr<Optimizer> adam = make_adam({.lr = lr});  // one Adam: train and train_debug share its state
  Tensor x = input("x", {batch, g.c, g.h, g.w});
  Tensor labels = input("labels", {batch}, DType::i32);
  spec.programs.push_back({"train", make_train_step(cross_entropy(model(x), labels), model.parameters(), *adam)});
  if (opt.debug_program) spec.programs.push_back({"train_debug", debug_train_step(*seq, *adam, batch, g)});
}

/// metadata "layers": a Sequential's "I: repr" per layer (the act/I of train_debug); another module's "name: repr"
/// per child, a child with children of its own as "name: TypeName" (ResNet: conv1, bn1, relu, layer1.., dropout, fc).
json layer_names(const nn::Module& model) {
  json layers = json::array();
  if (auto* seq = dynamic_cast<const nn::Sequential*>(&model)) {
    for (size_t i = 0; i < seq->size(); ++i) layers.push_back(seq->layer_name(i));
    return layers;
  }
  for (auto& [name, child] : model.children())
    layers.push_back(name + ": " + (child->children().empty() ? child->describe() : child->type_name()));
  return layers;
}

/// The metadata of docs/BUNDLE.md ("metadata"); checkpoint_buffers names the state_dict's buffers (BatchNorm's
/// running statistics) that a checkpoint holds besides the parameters, so a page writes and reads them too.
void add_metadata(BundleSpec& spec, const nn::Module& model, const ModelExportOptions& opt, const Geometry& g,
                  int64_t batch, int64_t ibatch, double lr) {
  json buffers = json::array();
  for (auto& [name, t] : model.named_buffers()) buffers.push_back(name);
  spec.metadata = {{"dataset", g.dataset},
                   {"layers", layer_names(model).dump()},
                   {"checkpoint_model", opt.model},
                   {"checkpoint_structure_hash", model.structure_hash()},
                   {"checkpoint_buffers", buffers.dump()},
                   {"batch", std::to_string(batch)},
                   {"infer_batch", std::to_string(ibatch)},
                   {"optimizer", fmt::format("adam(lr={})", lr)},
                   {"seed", std::to_string(opt.seed)},
                   {"initial_parameters", opt.load.empty() ? "fresh init (seed)" : opt.load}};
}

/// --load: the checkpoint's parameters and buffers become the initial values (BundleSpec::prepare, on the CPU
/// reference before the checks); what it records of its training goes into the metadata for pages to show.
void add_checkpoint(BundleSpec& spec, const std::shared_ptr<nn::Module>& model, const std::string& path) {
  const io::SafetensorsFile ck = io::load_safetensors(path);
  for (const char* key : {"test_accuracy", "dataset"})
    if (auto it = ck.metadata.find(key); it != ck.metadata.end()) spec.metadata[std::string("checkpoint_") + key] = it->second;
  spec.prepare = [model, path](Backend& be) { train::load_checkpoint(path, *model, be); };
}

/// The checks: infer, check_steps train steps on one fixed batch, train_debug, infer. Fixed inputs bit-exact
/// everywhere (mt19937 is specified; the distributions of <random> are not).
void add_checks(BundleSpec& spec, const ModelExportOptions& opt, const Geometry& g, int64_t batch, int64_t ibatch) {
  std::mt19937 gen(static_cast<uint32_t>(opt.seed ^ (opt.seed >> 32)));
  auto uniform = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = static_cast<float>(gen() >> 8) * (1.0f / 16777216.0f);
    return v;
  };
  const int64_t sample = g.c * g.h * g.w;
  std::vector<float> xi = uniform(ibatch * sample);
  std::vector<float> xt = ibatch == batch ? xi : uniform(batch * sample);
  std::vector<float> yt(static_cast<size_t>(batch));
  for (float& y : yt) y = static_cast<float>(gen() % g.classes);
  spec.checks.push_back({"infer", {{"x", xi}}, opt.check_nodes});
  if (opt.infer_only) return;
  for (int s = 0; s < opt.check_steps; ++s)
    spec.checks.push_back({"train", {{"x", xt}, {"labels", yt}}, opt.check_nodes && s == 0});
  if (opt.debug_program) spec.checks.push_back({"train_debug", {{"x", xt}, {"labels", yt}}});
  spec.checks.push_back({"infer", {{"x", xi}}});
}

}  // namespace

BundleSpec model_bundle_spec(const ModelExportOptions& opt) {
  const Geometry g = geometry_of(opt);
  if (opt.batch < 0 || opt.infer_batch < 0 || opt.check_steps < 0 || opt.lr < 0)
    throw ValueError("export: batch, infer batch, check steps and learning rate must not be negative");
  const int64_t batch = opt.batch > 0 ? opt.batch : opt.model == "mlp" ? 128 : 64;
  const int64_t ibatch = opt.infer_batch > 0 ? opt.infer_batch : batch;
  const double lr = opt.lr > 0 ? opt.lr : opt.model == "mlp" ? 1e-3 : 2e-3;

  std::shared_ptr<nn::Module> model = nn::make_module(opt.model, g.c, g.h, g.w, g.classes);
  nn::Rng rng(opt.seed);
  model->build(rng);
  BundleSpec spec;
  spec.model = opt.model;
  add_programs(spec, *model, opt, g, batch, ibatch, lr);
  add_metadata(spec, *model, opt, g, batch, ibatch, lr);
  if (!opt.load.empty()) add_checkpoint(spec, model, opt.load);
  add_checks(spec, opt, g, batch, ibatch);
  // resnet and cnn-large (docs/BUNDLE.md "Checks"): Adam divides each gradient by its own running RMS, so an element
  // whose gradient is near zero (a ReLU mask flipping at a tie, a near-cancelling sum) takes a step of up to about lr
  // in a direction set by f32 rounding noise; f32 backends (native cpu-simd, gles, vulkan; wasm; WebGPU's cpu plan)
  // miss the f64-accumulated reference on some parameters by more than the norm tolerance (1e-4) allows. What Adam
  // guarantees is the step: each parameter is judged by max |a - e| <= 2 lr steps (each of the two runs moves an
  // element by about lr a step at most). resnet's Adam moments: its later steps' gradients are taken at parameters
  // that differ so, and differ by up to 3% of their tensor's scale: measured bounds (default export) with a margin.
  if ((opt.model == "resnet" || opt.model == "cnn-large") && !opt.infer_only && opt.check_steps > 0) {
    const bool resnet = opt.model == "resnet";
    const std::string measured =
        resnet ? "the default export (fresh init, 3 steps): 16 of resnet's parameters miss norm 1e-4 on native "
                 "cpu-simd and on wasm, by up to 0.27 lr in an element"
               : "the default export (fresh init, 3 steps): 9.weight misses norm 1e-4 on native cpu-simd (1.4e-4), "
                 "gles (1.2e-4) and vulkan (3.7e-4) and on wasm (1.4e-4), by up to 0.33 lr in an element";
    for (auto& [name, t] : model->named_parameters()) {
      spec.persistent_tolerance[name] = {
          2 * lr * opt.check_steps,
          "Adam steps every element by about lr at most, whatever its gradient's size, and f32 rounding noise in a "
          "near-zero gradient (a ReLU mask flipping at a tie, a near-cancelling sum) sets that step's sign and size: "
          "an f32 backend misses the f64-accumulated reference by a fraction of lr there (" + measured +
          "); 2 lr per step bounds the two runs"};
      if (!resnet || !opt.load.empty() || opt.check_steps != 3) continue;  // measured for the default export only
      spec.persistent_tolerance[name + ".exp_avg"] = {
          1e-3, "Adam's first moment of steps 2 and 3, whose gradients are taken at parameters that differ by "
                "rounding noise amplified by Adam (the parameter's why): in the default export it missed the "
                "reference by up to 1.31e-4 (2.4% of its tensor's largest element) on native cpu-simd and on wasm; "
                "1e-3 is 7.6x that"};
      spec.persistent_tolerance[name + ".exp_avg_sq"] = {
          1e-6, "Adam's second moment of steps 2 and 3, whose gradients are taken at parameters that differ by "
                "rounding noise amplified by Adam (the parameter's why): in the default export it missed the "
                "reference by up to 1.17e-7 (3.1% of its tensor's largest element) on native cpu-simd and on wasm; "
                "1e-6 is 8.5x that"};
    }
  }
  return spec;
}

}  // namespace sg::web
