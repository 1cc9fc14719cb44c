// The plan walk (include/memplan/plan_walk.hpp) with a visitor that keeps
// no record: what reading a plan costs the simulator's pass 1 before its
// resolver does any work (issue 29: where a simulation's time goes).
#pragma once

#include "memplan/plan_walk.hpp"

namespace memplan::bench {

/// Hands the walk fresh copy ids and records nothing else.
struct walk_only {
  index_t copies = 0;

  void begin(index_t) {}
  void end(index_t) {}
  index_t initial_copy(index_t) { return copies++; }
  index_t initial_host(index_t) { return copies++; }
  void begin_access(index_t, bytes_t, bytes_t, bool) {}
  void read(index_t, bytes_t, bytes_t) {}
  void write(index_t, bytes_t, bytes_t) {}
  index_t make(index_t, bytes_t, index_t, index_t) { return copies++; }
  void update(index_t) {}
  void workspace(bytes_t) {}
  index_t swap_in(index_t, bytes_t, index_t, bytes_t) { return copies++; }
  void split(index_t) {}
  index_t split_part(index_t, index_t, bytes_t, bytes_t, index_t, index_t) { return copies++; }
  void release(index_t, bool) {}
  index_t save(index_t, bytes_t, index_t, index_t) { return copies++; }
};

}  // namespace memplan::bench
