#pragma once
/// \file
/// The umbrella header: every CPU part of memplan. The CUDA adapters are
/// separate (memplan/cuda/), so including this never pulls in CUDA.

#include "memplan/cost/device.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/training_graph.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/report_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/io/trace.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/report.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
