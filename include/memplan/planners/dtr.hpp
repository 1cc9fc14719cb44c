#pragma once
/// \file
/// `dtr` and `delta`, the online policies: DTR (Kirisame et al., "Dynamic
/// Tensor Rematerialization", ICLR 2021), eviction by h = c / (m · s)
/// (dtr/dtr.hpp), and DELTA (Tang et al., "DELTA: Dynamically Optimizing
/// GPU Memory beyond Tensor Recomputation"), Algo 1-4 with Eq. 1-6
/// (dtr/delta.hpp). Both run in the online runtime of dtr/online.hpp.

#include "memplan/planners/dtr/delta.hpp"
#include "memplan/planners/dtr/dtr.hpp"
