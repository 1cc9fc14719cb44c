#pragma once
/// \file
/// Every CPU part of memplan: the core (memplan/memplan.hpp) and the opt-in
/// parts, the JSON formats (io/, needs nlohmann_json: CMake component `io`),
/// the model zoo, the registry of all planners, the executor and
/// `host::device`, and distributed ranks (cost/cluster.hpp, distributed/). The CUDA adapters stay separate (memplan/cuda/).

#include "memplan/memplan.hpp"
#include "memplan/cost/cluster.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/distributed/data_parallel.hpp"
#include "memplan/host/device.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/report_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/io/trace.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/plan_walk.hpp"
#include "memplan/planners/max_batch.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/runtime/executor.hpp"
