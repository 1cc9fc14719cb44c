#pragma once
/// \file
/// `dtr` and `delta`, the online policies: DTR (Kirisame et al., "Dynamic
/// Tensor Rematerialization", ICLR 2021), eviction by h = c / (m · s)
/// (dtr/dtr.hpp), and DELTA (Tang et al., "DELTA: Dynamically Optimizing
/// GPU Memory beyond Tensor Recomputation"), Algo 1-4 with Eq. 1-6
/// (dtr/delta.hpp). `dtr` runs in DTR's simulator (dtr/dtr_runtime.hpp) or,
/// with `--allocator caching`, like `delta` in the online runtime on PyTorch's
/// caching allocator (dtr/online.hpp).

#include "memplan/planners/dtr/delta.hpp"
#include "memplan/planners/dtr/dtr.hpp"
#include "memplan/planners/dtr/dtr_runtime.hpp"
#include "memplan/planners/dtr/online.hpp"
#include "memplan/planners/dtr/online_state.hpp"

/// The online runtime's extension point: a type modelling `eviction_policy`
/// chooses what to release (`release`, `release_kind`) from what it sees
/// (`online_state`) whenever an allocation does not fit; `run_online` runs a
/// schedule with it and returns what it did as an ordinary plan.
namespace memplan::online {
using detail::dtr::eviction_policy;
using detail::dtr::fetch_kind;
using detail::dtr::online_counts;
using detail::dtr::online_result;
using detail::dtr::online_state;
using detail::dtr::release;
using detail::dtr::release_kind;
using detail::dtr::residence;
using detail::dtr::run_online;
using detail::dtr::dtr_counts;
using detail::dtr::run_dtr;
}  // namespace memplan::online
