#pragma once
/// \file
/// The umbrella header: every CPU part of memplan. The CUDA adapters are
/// separate (memplan/cuda/), so including this never pulls in CUDA.

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/training_graph.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
