#pragma once
/// \file
/// HOME (He et al.) §3.3: a particle's dimensions and what the swarm
/// minimises.

#include <compare>
#include <cstdint>

#include "memplan/fwd.hpp"

namespace memplan::detail::home {

/// HOME §3.3's numbering of the actions a feature map may take.
enum class placement : std::uint8_t { retain = 0, swap = 1, recompute = 2 };

/// What the swarm minimises: the simulated iteration time of a placement
/// that fits, and for one that does not, how far its peak exceeds the
/// budget first, so that the swarm moves towards feasibility (any plan that
/// fits beats every plan that does not; among those, the smaller excess).
struct fitness {
  bytes_t excess_bytes = 0;
  double time_us = 0;
  auto operator<=>(const fitness&) const = default;
};

/// A fitness no greater than a placement's, and whether it is its fitness.
struct estimate {
  fitness value;
  bool exact = false;
};

}  // namespace memplan::detail::home
