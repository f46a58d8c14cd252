// shadergrad — umbrella header for the DSL (graph, tensors, ops).
#pragma once
#include "sg/error.h"
#include "sg/graph.h"
#include "sg/philox.h"
#include "sg/program.h"
#include "sg/scalar_expr.h"
#include "sg/shape.h"
#include "sg/tensor.h"
