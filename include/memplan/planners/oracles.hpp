#pragma once
/// \file
/// `revolve` and `milp`, the exact oracles: binomial checkpointing of a
/// chain (Griewank 1992; Griewank and Walther, ACM TOMS 2000) and, where
/// memplan is built with CBC (MEMPLAN_ENABLE_MILP), Checkmate's integer
/// program (Jain et al., MLSys 2020, §4), solved to optimality on small
/// graphs.

#ifdef MEMPLAN_ENABLE_MILP
#include "memplan/planners/oracles/milp.hpp"
#endif
#include "memplan/planners/oracles/revolve.hpp"
