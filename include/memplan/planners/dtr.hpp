#pragma once
/// \file
/// The online policies, the one header to include for them: `dtr` (Kirisame
/// et al., "Dynamic Tensor Rematerialization", ICLR 2021: evict by
/// h = c / (m · s), dtr/dtr.hpp) and `delta` (DELTA: filter, director Eq. 4
/// and prefetcher, dtr/delta.hpp). Both run in the online runtime of
/// dtr/online.hpp, which keeps DTR's equivalence-class cost (dtr/online_state.hpp).

#include "memplan/planners/dtr/delta.hpp"
#include "memplan/planners/dtr/dtr.hpp"
