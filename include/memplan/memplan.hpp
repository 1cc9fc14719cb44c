#pragma once
/// \file
/// The core umbrella: the graph concept and `compile` (compile.hpp, the
/// one that needs Boost's graph_traits), the problem, plans
/// and their builder, device specs and op-time estimates, the simulator,
/// the validator, layouts (`assign_layout`), the planner interface and the
/// classic baselines (vDNN, checkpointing, SuperNeurons). Needs Boost's
/// headers alone: no JSON, no CBC, no CUDA. The rest is opt-in, one include each: a paper's planner
/// (memplan/planners/capuchin.hpp, tsplit.hpp, home.hpp, dtr.hpp), the
/// registry of all of them (planners/registry.hpp), the model zoo
/// (model/zoo.hpp), the executor (runtime/executor.hpp, host/device.hpp),
/// the JSON formats (io/; CMake component `io`), or everything
/// (memplan/all.hpp).

#include "memplan/compile.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/training_graph.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/planners/baselines.hpp"
#include "memplan/planners/none.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/assign_layout.hpp"
#include "memplan/sim/report.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "memplan/version.hpp"
