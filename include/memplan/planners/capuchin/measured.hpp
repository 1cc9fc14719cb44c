#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.2 and §5.2: measured execution,
/// the first iteration run in passive mode while the Tensor Access Tracker
/// records every tensor access.
///
/// Passive mode: when an allocation does not fit, tensors are evicted from
/// the start of the tensor access list — first one of approximately the
/// missing size, else the oldest ones — until it fits, each copied to the
/// host synchronously; a tensor that is accessed while on the host (access
/// failure) is copied back synchronously. The tracker records
/// {tensor, access count, timestamp} per access, with the on-demand swap
/// time subtracted from the timestamp (§5.2), i.e. the times the accesses
/// would have with unlimited memory. An op reads its inputs when it starts
/// and writes its outputs when it ends, so the recomputation time of an op
/// is the gap between the accesses of its inputs and outputs (§4.3).

#include <cstddef>
#include <string>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::capuchin {

/// One entry of the tensor access list (Capuchin §5.2, Listing 1).
struct tensor_access {
  index_t tensor = no_index;
  index_t count = 0;    ///< access_count: 1 for the first access of the iteration
  double time_us = 0;   ///< timestamp, on-demand swap time subtracted
  /// The step whose op made the access: it read the tensor when it started,
  /// or wrote it (`write`) when it ended; no_index for tensors there at time 0.
  index_t step = no_index;
  bool write = false;
};

/// What the measured iteration observed.
struct measured_execution {
  std::vector<tensor_access> accesses;  ///< the tensor access list, in time order
  std::vector<index_t> access_begin;    ///< per tensor: CSR offsets into `tensor_access_list`
  std::vector<index_t> tensor_access_list;  ///< indices into `accesses`, per tensor in time order
  std::vector<double> start_us;  ///< per step: when its op started, swap time subtracted
  std::vector<double> end_us;    ///< per step: when it ended, swap time subtracted
  std::vector<bytes_t> memory;   ///< per step: memory in use with unlimited memory (from the allocations seen)
  double time_us = 0;            ///< the passive iteration's time, on-demand swaps included
  double swap_time_us = 0;       ///< of which synchronous on-demand swaps
  bytes_t evicted_bytes = 0;     ///< bytes passive mode evicted: the memory reduction needed (§4.5)
  index_t evictions = 0;
  std::string failure;           ///< non-empty if one op alone does not fit (§4.2's exception)

  /// The accesses of tensor t, in time order.
  [[nodiscard]] std::span<const index_t> accesses_of(index_t t) const {
    const auto b = static_cast<std::size_t>(access_begin[static_cast<std::size_t>(t)]);
    const auto e = static_cast<std::size_t>(access_begin[static_cast<std::size_t>(t) + 1]);
    return {tensor_access_list.data() + b, e - b};
  }
};

/// Runs the first iteration of `p` in passive mode under `budget` (Capuchin §4.2, §5.2).
[[nodiscard]] inline measured_execution measure(const problem& p, const device_spec& dev, bytes_t budget) {
  const std::size_t n = p.num_steps();
  const std::size_t tensors = p.num_tensors();
  measured_execution m;
  m.start_us.resize(n);
  m.end_us.resize(n);
  m.memory = p.baseline_memory();

  std::vector<std::uint8_t> on_device(tensors, 0);
  std::vector<std::uint8_t> on_host(tensors, 0);
  std::vector<index_t> count(tensors, 0);
  std::vector<index_t> in_use_at(tensors, no_index);  // the step that needs t now: not evictable
  bytes_t used = 0;
  double clock = 0;
  const auto record = [&](index_t t, index_t step, bool write, double at) {
    m.accesses.push_back({t, ++count[static_cast<std::size_t>(t)], at, step, write});
  };
  for (std::size_t t = 0; t < tensors; ++t) {
    if (p.producer[t] != no_index) continue;
    on_device[t] = 1;
    used += p.bytes[t];
    record(static_cast<index_t>(t), no_index, true, 0);
  }

  // Evicts from the start of the access list until `need` more bytes fit
  // (§5.2: "one or multiple tensors with an approximate size ... from the
  // beginning until the current allocation is successful").
  const auto make_room = [&](bytes_t need, index_t s) {
    while (used + need > budget) {
      const bytes_t missing = used + need - budget;
      index_t oldest = no_index;
      index_t close = no_index;
      for (const tensor_access& a : m.accesses) {
        const auto t = static_cast<std::size_t>(a.tensor);
        if (!on_device[t] || p.persistent(a.tensor) || in_use_at[t] == s || p.bytes[t] == 0) continue;
        if (oldest == no_index) oldest = a.tensor;
        if (p.bytes[t] >= missing && p.bytes[t] <= 2 * missing) {
          close = a.tensor;
          break;
        }
      }
      const index_t victim = close != no_index ? close : oldest;
      if (victim == no_index) return false;
      const auto v = static_cast<std::size_t>(victim);
      on_device[v] = 0;
      on_host[v] = 1;
      used -= p.bytes[v];
      const double copy = dev.d2h.transfer_us(p.bytes[v]);
      clock += copy;
      m.swap_time_us += copy;
      m.evicted_bytes += p.bytes[v];
      ++m.evictions;
    }
    return true;
  };

  for (std::size_t s = 0; s < n; ++s) {
    const auto si = static_cast<index_t>(s);
    for (const index_t t : p.inputs(si)) in_use_at[static_cast<std::size_t>(t)] = si;
    for (const index_t t : p.outputs(si)) in_use_at[static_cast<std::size_t>(t)] = si;
    bytes_t need = p.workspace[s];
    for (const index_t t : p.outputs(si)) need += p.bytes[static_cast<std::size_t>(t)];
    bytes_t reads = 0;
    for (const index_t t : p.inputs(si)) {
      if (!on_device[static_cast<std::size_t>(t)]) reads += p.bytes[static_cast<std::size_t>(t)];
    }
    // Access failure: inputs on the host come back synchronously.
    if (!make_room(reads + need, si)) {
      m.failure = detail::concat("op '", p.op_name[s], "' needs ", format_bytes(reads + need),
                                 " beyond what it cannot evict (its own inputs and persistent tensors), with ",
                                 format_bytes(used), " in use; the budget is ", format_bytes(budget));
      return m;
    }
    for (const index_t t : p.inputs(si)) {
      const auto ti = static_cast<std::size_t>(t);
      if (on_device[ti]) continue;
      const double copy = dev.h2d.transfer_us(p.bytes[ti]);
      clock += copy;
      m.swap_time_us += copy;
      on_device[ti] = 1;
      on_host[ti] = 0;
      used += p.bytes[ti];
    }
    used += need;
    m.start_us[s] = clock - m.swap_time_us;
    for (const index_t t : p.inputs(si)) record(t, si, false, m.start_us[s]);
    clock += p.time_us[s];
    m.end_us[s] = clock - m.swap_time_us;
    for (const index_t t : p.outputs(si)) {
      on_device[static_cast<std::size_t>(t)] = 1;
      record(t, si, true, m.end_us[s]);
    }
    used -= p.workspace[s];
    // Tensors whose last access this was are deallocated.
    const auto release = [&](index_t t) {
      const auto ti = static_cast<std::size_t>(t);
      if (p.persistent(t) || p.live_end(t) != si || !on_device[ti]) return;
      on_device[ti] = 0;
      used -= p.bytes[ti];
    };
    for (const index_t t : p.inputs(si)) release(t);
    for (const index_t t : p.outputs(si)) release(t);
  }
  m.time_us = clock;

  m.access_begin.assign(tensors + 1, 0);
  for (const tensor_access& a : m.accesses) ++m.access_begin[static_cast<std::size_t>(a.tensor) + 1];
  for (std::size_t t = 0; t < tensors; ++t) m.access_begin[t + 1] += m.access_begin[t];
  m.tensor_access_list.resize(m.accesses.size());
  std::vector<index_t> fill(m.access_begin.begin(), m.access_begin.end() - 1);
  for (std::size_t i = 0; i < m.accesses.size(); ++i) {
    m.tensor_access_list[static_cast<std::size_t>(fill[static_cast<std::size_t>(m.accesses[i].tensor)]++)] =
        static_cast<index_t>(i);
  }
  return m;
}

}  // namespace memplan::detail::capuchin
