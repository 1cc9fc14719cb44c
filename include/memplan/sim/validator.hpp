#pragma once
/// \file
/// The validator: an independent re-check of a plan (DESIGN.md §5, last
/// paragraph). N-version programming: it shares no code with simulator.hpp
/// and is written to be obviously right rather than fast — device buffers
/// are a plain list, memory in use is summed afresh whenever it is needed,
/// and time advances by rescanning every action (O(actions^2)).
///
/// It enforces the contract of plan.hpp more strictly than the simulator:
/// a read of a copy, and a swap-in of a host copy, must be *guaranteed* to
/// come after the action that made it — by the order of one stream or a
/// chain of waits — not merely happen to in the simulated timing. On plans
/// it accepts, its peak and time equal the simulator's.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/error.hpp"
#include "memplan/failure.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// The validator's verdict.
struct validation {
  bool ok = true;                   ///< no violation found
  /// `none` when ok; out_of_memory when the only violation is the budget;
  /// else invalid_plan.
  failure_kind kind = failure_kind::none;
  std::vector<std::string> errors;  ///< one message per violation, naming the action, op and tensor
  bytes_t peak_bytes = 0;           ///< highest device memory in use
  double time_us = 0;               ///< when the last action ends
};

namespace detail::validator {

/// A device allocation: a copy of a tensor, or an action's workspace.
struct buffer {
  index_t tensor = no_index;  ///< no_index for workspace
  bytes_t bytes = 0;
  index_t maker = no_index;   ///< the action that allocates it; no_index: there at time 0
  std::vector<index_t> holders;  ///< actions that must end before it can go
  bool goes = false;             ///< released at all (explicitly, or dead and not persistent)
  index_t writer = no_index;     ///< a later micro-op that wrote this whole output after its maker
};

/// "action 5 (compute 'relu1')" or "action 7 (free 'a1')".
inline std::string name_of(const problem& p, const plan& pl, index_t a) {
  const action& act = pl.actions[static_cast<std::size_t>(a)];
  const bool op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
  return concat("action ", a, " (", to_string(act.kind), " '",
                op ? p.op_name[static_cast<std::size_t>(act.step)] : p.tensor_name[static_cast<std::size_t>(act.tensor)],
                "')");
}

}  // namespace detail::validator

/// Checks `pl` against plan.hpp's rules and `budget`, re-deriving every
/// start and end time. Slow (quadratic); meant for tests and the CLI's
/// `validate`.
/// \returns every violation found; `ok` when there are none.
[[nodiscard]] inline validation validate(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget) {
  using detail::concat;
  using detail::validator::buffer;
  using detail::validator::name_of;
  validation v;
  const auto error = [&v](std::string message) {
    v.ok = false;
    v.kind = failure_kind::invalid_plan;
    v.errors.push_back(std::move(message));
  };
  const auto over_budget = [&v, &error](std::string message) {
    const bool only = v.ok;
    error(std::move(message));
    if (only) v.kind = failure_kind::out_of_memory;
  };
  const auto n = static_cast<index_t>(pl.actions.size());
  const auto steps = static_cast<index_t>(p.num_steps());
  const auto tensors = static_cast<index_t>(p.num_tensors());
  const auto at = [](auto& vec, index_t i) -> auto& { return vec[static_cast<std::size_t>(i)]; };

  // 1. Shape: everything named must exist, waits must point backwards.
  bool offsets_ok = static_cast<index_t>(pl.wait_begin.size()) == n + 1 && pl.wait_begin[0] == 0 &&
                    static_cast<std::size_t>(pl.wait_begin.back()) == pl.waits.size();
  for (index_t a = 0; offsets_ok && a < n; ++a) offsets_ok = at(pl.wait_begin, a) <= at(pl.wait_begin, a + 1);
  if (!offsets_ok) {
    error("wait_begin is not a list of actions + 1 non-decreasing offsets into waits");
    return v;
  }
  for (index_t a = 0; a < n; ++a) {
    const action& act = at(pl.actions, a);
    const bool op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
    const bool tensor = act.kind == action_kind::swap_out || act.kind == action_kind::swap_in ||
                        act.kind == action_kind::free;
    if (!op && !tensor) error(concat("action ", a, ": unknown kind ", static_cast<int>(act.kind)));
    if (op && (act.step < 0 || act.step >= steps)) {
      error(concat("action ", a, " (", to_string(act.kind), "): step ", act.step, " is out of range [0, ", steps, ")"));
    }
    if (act.parts < 1) error(concat("action ", a, " (", to_string(act.kind), "): parts ", act.parts, " < 1"));
    if (act.part != no_index && (act.part < 0 || act.part >= act.parts)) {
      error(concat("action ", a, " (", to_string(act.kind), "): part ", act.part, " is not in [0, ", act.parts, ")"));
    }
    if (tensor && act.part != no_index && act.tensor >= 0 && act.tensor < tensors &&
        !splits_with_batch(at(p.kind, act.tensor))) {
      error(concat("action ", a, " (", to_string(act.kind), "): tensor '", at(p.tensor_name, act.tensor),
                   "' is not of kind input, activation or gradient, so it has no micro-tensors"));
    }
    if (tensor && (act.tensor < 0 || act.tensor >= tensors)) {
      error(concat("action ", a, " (", to_string(act.kind), "): tensor ", act.tensor, " is out of range [0, ",
                   tensors, ")"));
    }
    for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) {
      if (w < 0 || w >= a) error(concat("action ", a, " waits on action ", w, ", which does not come before it"));
    }
  }
  // Offloaded state: parameters and optimizer state, each named once.
  std::vector<std::uint8_t> offloaded(static_cast<std::size_t>(tensors), 0);
  for (const index_t t : pl.offloaded_state) {
    if (t < 0 || t >= tensors) {
      error(concat("offloaded_state: tensor ", t, " is out of range [0, ", tensors, ")"));
    } else if (!is_persistent(at(p.kind, t)) || at(p.producer, t) != no_index) {
      error(concat("offloaded_state: tensor '", at(p.tensor_name, t), "' is of kind ", to_string(at(p.kind, t)),
                   at(p.producer, t) != no_index ? " and made by an op" : "",
                   ", not a parameter or optimizer state there at the start"));
    } else if (at(offloaded, t)) {
      error(concat("offloaded_state: tensor '", at(p.tensor_name, t), "' is named twice"));
    } else {
      at(offloaded, t) = 1;
    }
  }
  if (!std::ranges::is_sorted(pl.offloaded_state)) error("offloaded_state is not in increasing order");
  if (!v.ok) return v;

  // 2. Streams and happens-before. seen[a][s] is the latest action of
  // stream s guaranteed to have ended before a starts (a vector clock).
  std::vector<int> stream(static_cast<std::size_t>(n));
  std::vector<index_t> previous(static_cast<std::size_t>(n), no_index);
  std::vector<std::array<index_t, stream_count>> seen(static_cast<std::size_t>(n));
  std::array<index_t, stream_count> last{no_index, no_index, no_index};
  for (index_t a = 0; a < n; ++a) {
    at(stream, a) = static_cast<int>(stream_of(at(pl.actions, a).kind));
    at(previous, a) = last[static_cast<std::size_t>(at(stream, a))];
    last[static_cast<std::size_t>(at(stream, a))] = a;
    auto& clock = at(seen, a);
    clock = {no_index, no_index, no_index};
    std::vector<index_t> before(pl.waits_of(static_cast<std::size_t>(a)).begin(),
                                pl.waits_of(static_cast<std::size_t>(a)).end());
    if (at(previous, a) != no_index) before.push_back(at(previous, a));
    for (const index_t b : before) {
      for (std::size_t s = 0; s < stream_count; ++s) clock[s] = std::max(clock[s], at(seen, b)[s]);
      clock[static_cast<std::size_t>(at(stream, b))] = std::max(clock[static_cast<std::size_t>(at(stream, b))], b);
    }
  }
  const auto ordered = [&](index_t first, index_t then) {
    return at(seen, then)[static_cast<std::size_t>(at(stream, first))] >= first;
  };

  // 3. Device contents in issue order.
  std::vector<buffer> buffers;
  std::vector<index_t> on_device(static_cast<std::size_t>(tensors), -1);  // buffer, or -1
  std::vector<index_t> host_copy(static_cast<std::size_t>(tensors), no_index);
  // Offloaded state has a host copy from the start (host_copy stays
  // no_index until a swap_out replaces it).
  std::vector<index_t> last_update(static_cast<std::size_t>(tensors), no_index);  // update-phase compute reading it
  std::vector<index_t> released(static_cast<std::size_t>(tensors), no_index);
  std::vector<int> computes(static_cast<std::size_t>(steps), 0);
  std::vector<index_t> step_parts(static_cast<std::size_t>(steps), 1);  // micro-ops: their parts
  std::vector<double> duration(static_cast<std::size_t>(n), 0);
  // Micro-tensors: parts per tensor (0: none), (tensor, k) -> buffer, and
  // (tensor, parts, k) -> the swap_out holding its host copy.
  std::vector<index_t> micro_parts(static_cast<std::size_t>(tensors), 0);
  std::map<std::pair<index_t, index_t>, index_t> micro_on;
  std::map<std::tuple<index_t, index_t, index_t>, index_t> micro_host;
  const auto micro_count = [&](index_t t) {
    int c = 0;
    for (index_t k = 0; k < at(micro_parts, t); ++k) c += micro_on.count({t, k}) != 0 ? 1 : 0;
    return c;
  };
  const auto new_micro = [&](index_t t, index_t parts, index_t k, bytes_t bytes, index_t maker) {
    micro_on[{t, k}] = static_cast<index_t>(buffers.size());
    buffers.push_back({t, bytes, maker, {}, true});
    (void)parts;
  };
  for (index_t t = 0; t < tensors; ++t) {
    if (at(p.producer, t) == no_index && !at(offloaded, t)) {
      at(on_device, t) = static_cast<index_t>(buffers.size());
      buffers.push_back({t, at(p.bytes, t), no_index, {}, false});
    }
  }
  const auto missing = [&](index_t a, index_t t, const char* what) {
    const std::string who = name_of(p, pl, a) + what + "tensor '" + at(p.tensor_name, t) + "'";
    if (at(released, t) != no_index) {
      error(concat(who, " after ", name_of(p, pl, at(released, t)), " released it and nothing brought it back"));
    } else if (at(offloaded, t)) {
      error(concat(who, ", which is offloaded state, in host memory until a swap_in brings it"));
    } else {
      error(concat(who, ", which no earlier action has made"));
    }
  };
  const auto made_before = [&](index_t a, index_t t, const buffer& b) {
    const index_t made = b.writer != no_index ? b.writer : b.maker;
    if (made != no_index && !ordered(made, a)) {
      error(concat(name_of(p, pl, a), " uses tensor '", at(p.tensor_name, t), "' made by ", name_of(p, pl, made),
                   ", but no wait or stream order makes it start after that ends"));
    }
  };
  for (index_t a = 0; a < n; ++a) {
    const action& act = at(pl.actions, a);
    if (act.kind == action_kind::compute || act.kind == action_kind::recompute) {
      const index_t s = act.step;
      const bool micro = act.part != no_index;
      // Computed whole once, or by micro-ops 0 .. parts-1 in order.
      if (act.kind == action_kind::compute) {
        const int expected = micro ? act.part : 0;
        if (at(computes, s) != expected || (micro && act.part > 0 && at(step_parts, s) != act.parts)) {
          error(concat(name_of(p, pl, a), ": step ", s, " is computed more than once, or its micro-op ",
                       act.part, " of ", act.parts, " is out of order (", at(computes, s), " computed before)"));
        }
        at(computes, s) = micro ? act.part + 1 : 1;
        at(step_parts, s) = micro ? act.parts : 1;
      }
      if (act.kind == action_kind::recompute && (at(computes, s) == 0 || at(computes, s) != at(step_parts, s))) {
        error(concat(name_of(p, pl, a), ": recomputes step ", s, " before it is computed"));
      }
      for (const index_t t : p.inputs(s)) {
        const bool split = micro && splits_with_batch(at(p.kind, t));
        if (at(p.op_phase, s) == phase::update) at(last_update, t) = a;
        if (at(on_device, t) >= 0) {
          buffer& b = at(buffers, at(on_device, t));
          made_before(a, t, b);
          b.holders.push_back(a);
          continue;
        }
        // Held as micro-tensors: this one, or all of them (read whole).
        std::vector<index_t> parts_read;
        if (split && at(micro_parts, t) == act.parts) {
          parts_read.push_back(act.part);
        } else {  // whole, or of another parts count: every micro-tensor
          for (index_t k = 0; k < at(micro_parts, t); ++k) parts_read.push_back(k);
        }
        bool all = !parts_read.empty();
        for (const index_t k : parts_read) all = all && micro_on.count({t, k}) != 0;
        if (!all) {
          missing(a, t, " reads ");
          continue;
        }
        for (const index_t k : parts_read) {
          buffer& b = at(buffers, micro_on[{t, k}]);
          made_before(a, t, b);
          b.holders.push_back(a);
        }
      }
      for (const index_t t : p.outputs(s)) {
        if (micro && splits_with_batch(at(p.kind, t)) && at(on_device, t) < 0) {
          if (at(micro_parts, t) != act.parts) {
            if (micro_count(t) > 0) {
              error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t),
                           "' is held as micro-tensors of another parts count"));
            }
            for (index_t k = 0; k < at(micro_parts, t); ++k) micro_on.erase({t, k});
            at(micro_parts, t) = act.parts;
          }
          if (micro_on.count({t, act.part}) != 0) continue;
          new_micro(t, act.parts, act.part, micro_bytes(at(p.bytes, t), act.parts, act.part), a);
          at(buffers, micro_on[{t, act.part}]).holders.push_back(a);
          continue;
        }
        if (at(on_device, t) >= 0) {
          if (micro && act.kind == action_kind::compute) {  // micro-op 0 made this whole output; this one writes it
            at(buffers, at(on_device, t)).holders.push_back(a);
            at(buffers, at(on_device, t)).writer = a;
          }
          continue;
        }
        if (at(micro_parts, t) > 0 && micro_count(t) == at(micro_parts, t)) {
          if (micro && act.kind == action_kind::compute) {
            error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t),
                         "' is held as micro-tensors but this micro-op makes it whole"));
          }
          continue;  // on the device as micro-tensors
        }
        if (micro_count(t) > 0) {
          error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t),
                       "' is partly on the device as micro-tensors"));
        }
        at(micro_parts, t) = 0;
        at(on_device, t) = static_cast<index_t>(buffers.size());
        buffers.push_back({t, at(p.bytes, t), a, {a}, false});
      }
      const bytes_t w = at(p.workspace, s);
      // One part's scratch at a time: ceil(workspace / parts), as the simulator.
      buffers.push_back({no_index, w / act.parts + (w % act.parts != 0 ? 1 : 0), a, {a}, true});
      at(duration, a) = split_time_us(dev, at(p.time_us, s), act.parts) / (micro ? act.parts : 1);
      continue;
    }
    const index_t t = act.tensor;
    const tensor_kind kind = at(p.kind, t);
    if (act.part != no_index) {
      const index_t k = act.part;
      const bytes_t mb = micro_bytes(at(p.bytes, t), act.parts, k);
      if (act.kind == action_kind::swap_in) {
        if (at(on_device, t) >= 0 || (at(micro_parts, t) == act.parts && micro_on.count({t, k}) != 0)) {
          error(concat(name_of(p, pl, a), ": micro-tensor ", k, " of tensor '", at(p.tensor_name, t),
                       "' is already on the device"));
          continue;
        }
        if (at(micro_parts, t) != act.parts && micro_count(t) > 0) {
          error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t),
                       "' is held as micro-tensors of another parts count"));
          continue;
        }
        if (at(micro_parts, t) != act.parts) {
          for (index_t j = 0; j < at(micro_parts, t); ++j) micro_on.erase({t, j});
          at(micro_parts, t) = act.parts;
        }
        const auto host = micro_host.find({t, act.parts, k});
        const index_t source = host != micro_host.end() ? host->second : at(host_copy, t);
        if (source == no_index) {
          error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t), "' was never swapped out"));
          continue;
        }
        if (!ordered(source, a)) {
          error(concat(name_of(p, pl, a), ": not ordered after the end of ", name_of(p, pl, source),
                       " (add a wait); it could copy back tensor '", at(p.tensor_name, t), "' before it is saved"));
        }
        new_micro(t, act.parts, k, mb, a);
        at(buffers, micro_on[{t, k}]).holders.push_back(a);
        at(duration, a) = dev.h2d.transfer_us(mb);
        continue;
      }
      if (at(on_device, t) >= 0) {
        // In-place split of the whole tensor: its holders so far must be done.
        buffer& whole = at(buffers, at(on_device, t));
        for (const index_t h : whole.holders) {
          if (!ordered(h, a)) {
            error(concat(name_of(p, pl, a), " splits tensor '", at(p.tensor_name, t), "' in place, but ",
                         name_of(p, pl, h), " that holds it is not ordered before it (add a wait)"));
          }
        }
        const bytes_t total = whole.bytes;
        const index_t maker = whole.maker;
        whole.holders.push_back(a);
        whole.goes = true;
        whole.bytes = 0;
        at(on_device, t) = -1;
        for (index_t j = 0; j < at(micro_parts, t); ++j) micro_on.erase({t, j});
        at(micro_parts, t) = act.parts;
        for (index_t j = 0; j < act.parts; ++j) {
          new_micro(t, act.parts, j, micro_bytes(total, act.parts, j), maker);
          at(buffers, micro_on[{t, j}]).holders.push_back(a);
        }
      }
      if (at(micro_parts, t) != act.parts || micro_on.count({t, k}) == 0) {
        missing(a, t, " releases a micro-tensor of ");
        continue;
      }
      buffer& b = at(buffers, micro_on[{t, k}]);
      if (act.kind == action_kind::swap_out) {
        made_before(a, t, b);
        micro_host[{t, act.parts, k}] = a;
        at(duration, a) = dev.d2h.transfer_us(mb);
      }
      b.holders.push_back(a);
      micro_on.erase({t, k});
      at(released, t) = a;
      continue;
    }
    if (at(on_device, t) < 0 && micro_count(t) > 0) {
      error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t),
                   "' is held as micro-tensors; a whole swap or release needs the whole tensor"));
      continue;
    }
    if (act.kind == action_kind::swap_in) {
      if (at(on_device, t) >= 0) {
        error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t), "' is already on the device"));
        continue;
      }
      if (at(host_copy, t) == no_index && !at(offloaded, t)) {
        error(concat(name_of(p, pl, a), ": tensor '", at(p.tensor_name, t), "' was never swapped out"));
        continue;
      }
      if (at(host_copy, t) != no_index && !ordered(at(host_copy, t), a)) {
        error(concat(name_of(p, pl, a), ": not ordered after the end of ", name_of(p, pl, at(host_copy, t)),
                     " (add a wait); it could copy back tensor '", at(p.tensor_name, t), "' before it is saved"));
      }
      at(on_device, t) = static_cast<index_t>(buffers.size());
      buffers.push_back({t, at(p.bytes, t), a, {a}, false});
      at(duration, a) = dev.h2d.transfer_us(at(p.bytes, t));
      continue;
    }
    // swap_out or free: a release.
    if (at(on_device, t) < 0) {
      missing(a, t, at(released, t) != no_index ? " releases (twice) " : " releases ");
      continue;
    }
    buffer& b = at(buffers, at(on_device, t));
    if (act.kind == action_kind::swap_out) {
      made_before(a, t, b);
      at(host_copy, t) = a;
      at(duration, a) = dev.d2h.transfer_us(at(p.bytes, t));
    } else if (is_persistent(kind) && at(last_update, t) != no_index && at(host_copy, t) != no_index &&
               at(host_copy, t) < at(last_update, t)) {
      // An update writes the state it reads, in place: a host copy from before it is stale.
      error(concat(name_of(p, pl, a), ": loses the update of ", to_string(kind), " '", at(p.tensor_name, t), "' by ",
                   name_of(p, pl, at(last_update, t)), ", which no later swap_out saved"));
    } else if (at(host_copy, t) == no_index && !at(offloaded, t)) {
      // Parameters and optimizer state live across iterations; a parameter
      // gradient is the iteration's result: neither may vanish unsaved.
      if (is_persistent(kind)) {
        error(concat(name_of(p, pl, a), ": loses ", to_string(kind), " '", at(p.tensor_name, t),
                     "', which has no host copy"));
      } else if (kind == tensor_kind::parameter_gradient) {
        for (const index_t u : p.uses(t)) {
          if (at(computes, u) == 0) {
            error(concat(name_of(p, pl, a), ": loses parameter_gradient '", at(p.tensor_name, t),
                         "' before its use by op '", at(p.op_name, u), "', with no host copy"));
            break;
          }
        }
      }
    }
    b.holders.push_back(a);
    b.goes = true;
    at(on_device, t) = -1;
    at(released, t) = a;
  }
  for (index_t s = 0; s < steps; ++s) {
    if (at(computes, s) == 0) error(concat("step ", s, " (op '", at(p.op_name, s), "') is never computed"));
    else if (at(computes, s) != at(step_parts, s)) {
      error(concat("step ", s, " (op '", at(p.op_name, s), "'): ", at(computes, s), " of its ", at(step_parts, s),
                   " micro-ops are computed"));
    }
  }
  // Offloaded state ends in host memory, saved after its update.
  for (const index_t t : pl.offloaded_state) {
    if (at(on_device, t) >= 0) {
      error(concat("offloaded state '", at(p.tensor_name, t), "' is still on the device at the end of the iteration"));
    }
    const index_t u = at(last_update, t);
    if (u == no_index) continue;
    const index_t saved = at(host_copy, t);
    const auto waits = saved == no_index ? std::span<const index_t>() : pl.waits_of(static_cast<std::size_t>(saved));
    if (std::ranges::find(waits, u) == waits.end()) {
      error(concat("offloaded state '", at(p.tensor_name, t), "': its last host copy does not wait on its update, ",
                   name_of(p, pl, u)));
    }
  }
  // What is still on the device at the end dies after its last holder,
  // unless it persists across iterations (DESIGN.md §4).
  for (index_t t = 0; t < tensors; ++t) {
    if (at(on_device, t) >= 0 && !is_persistent(at(p.kind, t))) at(buffers, at(on_device, t)).goes = true;
  }

  // 4. Time, by brute force. At each instant, start the earliest-issued
  // action that may start; when none may, move to the next end or free.
  constexpr double never = std::numeric_limits<double>::infinity();
  std::vector<double> end(static_cast<std::size_t>(n), never);
  const auto freed_at = [&](const buffer& b) {  // never while a holder has not started
    double when = 0;
    for (const index_t h : b.holders) when = std::max(when, at(end, h));
    return b.goes ? when : never;
  };
  const auto in_use = [&](double t) {
    bytes_t sum = 0;
    for (const buffer& b : buffers) {
      const bool allocated = b.maker == no_index || at(end, b.maker) != never;
      if (allocated && freed_at(b) > t) sum += b.bytes;
    }
    return sum;
  };
  std::vector<bytes_t> needs(static_cast<std::size_t>(n), 0);
  for (const buffer& b : buffers) {
    if (b.maker == no_index) v.peak_bytes += b.bytes;
    else at(needs, b.maker) += b.bytes;
  }
  if (v.peak_bytes > budget) {
    over_budget(concat("over budget at time 0: the tensors without a producer take ", v.peak_bytes,
                       " bytes, budget ", budget));
    return v;
  }
  double now = 0;
  index_t started = 0;
  while (started < n) {
    index_t waiting = no_index;  // earliest action held back by memory: later ones may not allocate
    index_t chosen = no_index;
    bytes_t used = 0;
    for (index_t a = 0; a < n && chosen == no_index; ++a) {
      if (at(end, a) != never) continue;
      const index_t before = at(previous, a);
      if (before != no_index && !(at(end, before) <= now)) continue;
      bool ready = true;
      for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) ready = ready && at(end, w) <= now;
      if (!ready) continue;
      used = in_use(now);
      if (at(needs, a) > 0 && (waiting != no_index || used + at(needs, a) > budget)) {
        if (waiting == no_index) waiting = a;
        continue;
      }
      chosen = a;
    }
    if (chosen != no_index) {
      at(end, chosen) = now + at(duration, chosen);
      v.peak_bytes = std::max(v.peak_bytes, used + at(needs, chosen));
      v.time_us = std::max(v.time_us, at(end, chosen));
      ++started;
      continue;
    }
    double next = never;
    for (index_t a = 0; a < n; ++a) {
      if (at(end, a) > now) next = std::min(next, at(end, a));
    }
    for (const buffer& b : buffers) {
      if (freed_at(b) > now) next = std::min(next, freed_at(b));
    }
    if (next == never) {
      over_budget(concat("over budget: ", name_of(p, pl, waiting), " needs ", at(needs, waiting), " bytes at ",
                         now, " us with ", in_use(now), " in use and nothing left to free; budget ", budget));
      break;
    }
    now = next;
  }
  return v;
}

}  // namespace memplan
