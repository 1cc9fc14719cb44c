#pragma once
/// \file
/// The exact oracles, the one header to include for them: `revolve`
/// (Griewank and Walther's binomial checkpointing of a chain) and, where
/// memplan is built with CBC (MEMPLAN_ENABLE_MILP), `milp` (a Checkmate-style
/// mixed-integer program solved to optimality on small graphs).

#ifdef MEMPLAN_ENABLE_MILP
#include "memplan/planners/oracles/milp.hpp"
#endif
#include "memplan/planners/oracles/revolve.hpp"
