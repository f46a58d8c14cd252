// shadergrad — the one header a program includes: the DSL (tensors, ops, sg::map), autodiff (grad, optimizers,
// make_train_step), backends (make_backend: Vulkan, GLES compute, GLES, CPU), the CPU reference with its gradient check
// (sg::cpu::check_gradients), and the standard library (layers, datasets, checkpoints, images, the trainer, the character language models).
//
//   #include "sg/shadergrad.h"      // CMake: find_package(shadergrad CONFIG REQUIRED)
//                                   //        target_link_libraries(app PRIVATE shadergrad::shadergrad)
#pragma once

#include "sg/sg.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compress.h"
#include "sg/cpu_reference.h"
#include "sg/datasets.h"
#include "sg/image.h"
#include "sg/lm.h"
#include "sg/nn.h"
#include "sg/safetensors.h"
#include "sg/train.h"
