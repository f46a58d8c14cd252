// digits_compress — seed 002's compression recipe on its 8x8 digits CNN, end to end with sg::compress:
// train a float model, prune half its weights (global L1) and fine-tune under the masks, fold the masks, quantise
// to 8 bits (post-training, calibrated on the training images), export int8 and run the int8 file on the CPU with
// integer arithmetic and on the GPU backend as a fake-quantised graph. Every training step and evaluation on the
// backend is generated shaders. The full study with seed 002's tables is bench/bench_seed002.cpp.
//
// The PyTorch it mirrors (seed 002): prune.global_unstructured(..., L1Unstructured, amount=0.5); train(model, 10,
// lr=1e-3); prune.remove(...); then quantize(model, 8) (QuantAct/QuantWeight) and torch.ao's convert for int8.
//
// Usage: digits_compress [--epochs N] [--backend auto|gles|gles-compute|vulkan] [--out DIR]
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sg/shadergrad.h"

int main(int argc, char** argv) {
  int64_t epochs = 40;
  std::string backend = "auto", out = std::filesystem::temp_directory_path().string();
  CLI::App app{"seed 002's compression recipe on the digits CNN"};
  app.add_option("--epochs", epochs, "float training epochs (seed 002: 150)")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "auto | gles | gles-compute | vulkan");
  app.add_option("--out", out, "directory for the saved files");
  CLI11_PARSE(app, argc, argv);
  namespace c = sg::compress;
  try {
    c::Data data = c::load_data("seed002");  // seed 002's split: torch.randperm(1797, seed 0), 600 / 400 / 797
    auto be = sg::make_backend({.kind = backend}).backend;
    std::printf("backend %s [%s]\n", be->name().c_str(), be->device().c_str());

    c::Model m = c::init_cnn({8, 16, 32}, /*seed=*/0);  // make_cnn(8, 16, 32): 3,658 parameters
    c::train(m, data, {.epochs = epochs, .lr = 2e-3}, *be);
    std::printf("float:   test accuracy %.4f\n", c::evaluate(m, data, *be));

    c::prune_global_l1(m, 0.5);                                   // masks: the pruned half is 0 ...
    std::printf("pruned:  test accuracy %.4f\n", c::evaluate(m, data, *be));
    c::train(m, data, {.epochs = 10, .lr = 1e-3}, *be);           // ... and stays 0 while the rest is fine-tuned
    c::remove_masks(m);
    for (auto& s : c::sparsity(m)) std::printf("  %-9s sparsity %.3f\n", s.name.c_str(), s.sparsity());
    std::printf("tuned:   test accuracy %.4f\n", c::evaluate(m, data, *be));
    std::string fp = out + "/digits_pruned.safetensors";
    c::save(fp, m);
    auto fs = c::file_size(fp);

    c::Model q = c::quantize(m, {.bits = 8}, data, *be);          // PTQ: activation ranges from the 600 images
    std::printf("int8 fake-quantised: test accuracy %.4f\n", c::evaluate(q, data, *be));
    std::string ip = out + "/digits_int8.safetensors";
    c::save_int8(ip, c::to_int8(q));
    c::Int8Model back = c::load_int8(ip);
    auto is = c::file_size(ip);
    std::printf("int8 file: CPU integer inference %.4f, %s %.4f\n",
                c::accuracy(c::int8_logits_cpu(back, data, data.split.test), data), be->name().c_str(),
                c::evaluate(c::from_int8(back), data, *be));
    std::printf("files: float %.1f KB (gzip %.1f KB), int8 %.1f KB (gzip %.1f KB)\n", fs.raw / 1024.0,
                fs.gzipped / 1024.0, is.raw / 1024.0, is.gzipped / 1024.0);
    return 0;
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "digits_compress: %s\n", e.what());
    return 1;
  }
}
