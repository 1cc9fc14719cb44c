#pragma once
/// \file
/// `runtime::executor`: runs a plan's action list on a `memplan::device`
/// (DESIGN.md §7), exactly as plan.hpp defines it. The executor owns where
/// every managed tensor lives (device arena, pinned pool); the framework
/// supplies two callbacks and never allocates:
///
///   run_op(const op_call& call, stream_view s)  runs step call.step's op on
///       s (recomputations too) — or, with call.part >= 0, micro-op
///       call.part of call.parts (TSPLIT §V-A) — reading call.inputs and
///       writing the non-null call.outputs (call.input_regions /
///       call.output_regions say which bytes, and where a tensor held as
///       micro-tensors lies in several pieces);
///   load(index_t t, void* device_address, stream_view s)  fills a tensor
///       without a producer (input, parameter, state) before the run.
///
/// The device's pinned pool must hold `pinned_bytes(p, pl, timing)` bytes
/// (`layout_of(p, pl).pinned_peak` when issuing in list order).
///
/// How the actions map to the device: three streams (compute, d2h, h2d, the
/// simulator's), one event per action recorded after it; a wait becomes an
/// event wait on the action's stream. Memory is taken when an action is
/// issued and given back, stream-ordered, when its release is issued: the
/// block is reused only after the events of its holders (the last action
/// per stream that touches it) complete — a release "takes effect once every
/// earlier-issued action that reads or writes that copy has ended"
/// (plan.hpp). An allocation that does not fit waits for pending frees.
///
/// Why a plan the validator accepts under budget B runs in an arena of B
/// bytes: once every pending free has come back, the bytes in use are those
/// of the buffers allocated by earlier-issued actions and not released by an
/// earlier-issued action. The simulator allocates in issue order too, but a
/// later-issued action of another stream may have ended, and released its
/// tensors, before an earlier-issued allocation starts; so when an
/// allocation cannot fit with nothing pending, the executor issues such
/// later actions ahead (`issue_ahead`) and waits for their releases. If
/// holes between blocks are what stands in the way, it waits for every
/// stream and compacts the arena (moving blocks down), which the framework
/// never notices because it gets addresses per call.
///
/// Micro-ops and micro-tensors (plan.hpp): a micro-tensor is a buffer of its
/// own (layout.hpp) — a block of the arena made by its micro-op or micro
/// swap-in, or a sub-range of a whole tensor's block split in place, given
/// back on its own. The op of micro-op k gets, per sample tensor, micro-tensor
/// k's bytes: a view into the whole block, the micro-tensor's block, or the
/// pieces of micro-tensors of another parts count that cover it; a tensor
/// read whole while held as micro-tensors comes as its pieces (the merge
/// copies nothing). The argument above holds piece by piece: the budget
/// counts every micro-tensor's bytes as the simulator does, and the arena
/// adds only the rounding of micro-tensors' own blocks to 64 bytes
/// (`micro_alignment`).

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/device.hpp"
#include "memplan/runtime/layout.hpp"
#include "memplan/runtime/pool.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::runtime {

/// The order in which an executor made with `timing` issues `pl`'s
/// actions: the order the simulator starts them in on that device
/// (`action_interval::order`), or list order without `timing` or where the simulator finds the
/// plan infeasible. (The simulator may start a micro-op reading micro-tensor
/// k of a whole tensor before a copy stream's release splits it, and an
/// action reading the whole tensor after: the executor splits a tensor when
/// the first of them is issued, and hands a whole read of a split tensor its
/// pieces.)
[[nodiscard]] inline std::vector<index_t> issue_order(const problem& p, const plan& pl, const device_spec* timing) {
  std::vector<index_t> order(pl.actions.size());
  for (std::size_t a = 0; a < order.size(); ++a) order[a] = static_cast<index_t>(a);
  if (timing == nullptr) return order;
  const report r = simulator().run(p, pl, *timing, pl.budget, simulate_options{true, false});
  if (!r.feasible || r.timeline.size() != pl.actions.size()) return order;
  for (const action_interval& row : r.timeline) order[static_cast<std::size_t>(row.order)] = row.action;
  return order;
}

/// The pinned bytes an executor made with `timing` needs for `pl`: host
/// copies live at once in its issue order (`layout_of(p, pl).pinned_peak`
/// without timing).
[[nodiscard]] inline bytes_t pinned_bytes(const problem& p, const plan& pl, const device_spec* timing = nullptr) {
  return pinned_peak(layout_of(p, pl), issue_order(p, pl, timing));
}

/// Contiguous device bytes of a tensor.
struct piece {
  void* address = nullptr;
  bytes_t bytes = 0;
};

/// The bytes [offset, offset + bytes) of a tensor that an op reads or
/// writes — all of it, or micro-tensor k's range for micro-op k — lying in
/// `pieces`, in order: one, unless the tensor is held as micro-tensors made
/// apart and the op reads more than one of them (a merge, TSPLIT Fig. 10).
/// An output the op must leave alone has no pieces.
struct region {
  bytes_t offset = 0;
  bytes_t bytes = 0;
  std::span<const piece> pieces;
};

/// What `run_op` is asked to do.
struct op_call {
  index_t action = no_index;  ///< its index in the plan
  index_t step = no_index;    ///< the schedule step (problem arrays)
  index_t op = no_index;      ///< the graph's dense op index
  index_t parts = 1;          ///< micro-batches the plan splits the op into (1 = whole)
  /// With parts > 1: micro-op `part` only — on micro-tensor `part` of each
  /// input and output that splits with the batch (`splits_with_batch`);
  /// other tensors are whole, and a whole output (a parameter gradient, the
  /// micro-ops' sum) is made by micro-op 0 and added to by the later ones.
  /// no_index: the whole op (its `parts` blocks back to back).
  index_t part = no_index;
  bool recompute = false;
  /// Per input, in problem::inputs(step) order: the address of its region's
  /// bytes, or null where they lie in several pieces (`input_regions`).
  std::span<void* const> inputs;
  /// Addresses, in problem::outputs(step) order; null where a recompute finds
  /// the output still on the device: the op must leave it alone. An output's
  /// region is always one piece.
  std::span<void* const> outputs;
  std::span<const region> input_regions;   ///< per input: which bytes, where
  std::span<const region> output_regions;  ///< per output: which bytes, where (no pieces: leave it alone)
  void* workspace = nullptr;  ///< scratch for one part, `workspace_bytes` long (null if none)
  bytes_t workspace_bytes = 0;
};

/// An action's callback (or its copy, or an issue-time device call) failed.
/// Everything the run allocated has been given back when this is thrown.
struct action_failed : error {
  action_failed(index_t a, const std::string& message) : error(message), action(a) {}
  index_t action;  ///< the failed action's index; no_index for the initial load
};

/// Figures of one run, measured by the arenas.
struct run_stats {
  bytes_t peak_bytes = 0;         ///< most device bytes in use at once, as the plan counts them
  bytes_t arena_peak_bytes = 0;   ///< the same in arena footprints (rounded to its alignment)
  bytes_t pinned_peak_bytes = 0;  ///< most pinned host bytes in use at once (footprints)
  bytes_t swapped_out_bytes = 0;
  bytes_t swapped_in_bytes = 0;
  index_t ops_run = 0;            ///< compute and recompute actions
  index_t micro_actions = 0;      ///< actions on one micro-op or micro-tensor (part >= 0)
  index_t splits_in_place = 0;    ///< whole tensors split in place into micro-tensors
  index_t issued_ahead = 0;       ///< actions issued before an earlier one whose memory waited for their releases
  index_t compactions = 0;        ///< times the arena was compacted
};

template <memplan::device D>
class executor {
 public:
  using stream_view = typename D::stream_view;

  /// Prepares `pl` (for `p`) to run on `dev`; both must outlive the executor.
  /// Actions are issued in list order.
  /// \throws invalid_plan (an invalid_argument of kind
  ///         `failure_kind::invalid_plan`) if the action list is malformed.
  executor(D& dev, const problem& p, const plan& pl) : executor(dev, p, pl, nullptr) {}

  /// The same, issuing the actions in the order the simulator starts them
  /// on `timing` (the device the plan was made and validated for), so that
  /// allocations come in the simulator's order: an action queued behind
  /// its stream allocates when it would start, not when it is listed (a
  /// swap-in behind another lets a later-listed op allocate first). Falls
  /// back to list order if the simulator finds the plan infeasible.
  executor(D& dev, const problem& p, const plan& pl, const device_spec& timing) : executor(dev, p, pl, &timing) {}

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor() { release(); }

 private:
  executor(D& dev, const problem& p, const plan& pl, const device_spec* timing)
      : dev_(&dev), p_(&p), pl_(&pl), layout_(layout_of(p, pl)), extents_(device_extents(layout_)),
        device_pool_(dev, dev.arena(), pl.budget > 0 ? pl.budget : dev.arena().capacity()),
        pinned_pool_(dev, dev.pinned()) {
    events_.reserve(pl.actions.size() + 1);
    for (std::size_t a = 0; a <= pl.actions.size(); ++a) events_.push_back(dev.make_event());
    streams_.reserve(stream_count);
    for (int s = 0; s < stream_count; ++s) streams_.push_back(dev.make_stream());
    calls_.resize(pl.actions.size());
    std::size_t slots = 0, pieces = 0;
    for (const auto& ab : layout_.actions) {
      slots += ab.reads.size() + ab.writes.size();
      for (const auto* list : {&ab.reads, &ab.writes}) {
        for (const access& x : *list) {
          for (const slice& sl : x.slices) pieces += piece_count(sl.buffer);
        }
      }
    }
    addresses_.resize(slots);
    regions_.resize(slots);
    pieces_.resize(pieces);
    order_ = issue_order(p, pl, timing);
  }

 public:
  /// Runs the plan once: loads the tensors without a producer, issues every
  /// action, waits for all streams. Tensors kept after the run (persistent
  /// ones) can then be `read` until `release` or the next run.
  /// `load(t, address, stream)` writes tensor t's initial bytes at `address`
  /// on `stream`: device memory, or pinned host memory for the plan's
  /// offloaded state (a CUDA loader copies with cudaMemcpyDefault).
  /// \throws action_failed naming the action whose callback or copy threw;
  ///         infeasible_budget (kind `failure_kind::out_of_memory`) if an
  ///         allocation cannot fit even with nothing pending (the plan
  ///         exceeds the budget); after either, every byte is back in the arenas.
  template <class RunOp, class Load>
  run_stats run(RunOp&& run_op, Load&& load) {
    release();
    failed_.store(false, std::memory_order_relaxed);
    failure_ = nullptr;
    stats_ = {};
    try {
      start(load);
      issued_.assign(pl_->actions.size(), 0);
      deferred_device_.clear();
      deferred_host_.clear();
      for (std::size_t i = 0; i < order_.size(); ++i) {
        const index_t a = order_[i];
        if (issued_[static_cast<std::size_t>(a)] != 0) continue;  // issued ahead
        // An allocation that cannot fit with nothing pending may wait for
        // releases of later actions on other streams (see issue_ahead).
        while (!checked_issue(a, run_op)) {
          if (!issue_ahead(i, run_op)) out_of_memory(a, layout_.actions[static_cast<std::size_t>(a)].allocates);
        }
      }
      synchronize_all();
      throw_if_failed();
    } catch (...) {
      release();
      throw;
    }
    stats_.peak_bytes = device_pool_.peak();
    stats_.arena_peak_bytes = dev_->arena().peak();
    stats_.pinned_peak_bytes = dev_->pinned().peak();
    return stats_;
  }

  /// Copies tensor `t`, kept after the run, into `out` (exactly its bytes).
  /// \throws invalid_argument if t is not kept or `out` has the wrong size.
  void read(index_t t, std::span<std::byte> out) {
    MEMPLAN_EXPECTS(t >= 0 && static_cast<std::size_t>(t) < p_->num_tensors(), invalid_argument, "read: tensor ", t,
                    " is out of range");
    const std::string& name = p_->tensor_name[static_cast<std::size_t>(t)];
    MEMPLAN_EXPECTS(static_cast<bytes_t>(out.size()) == p_->bytes[static_cast<std::size_t>(t)], invalid_argument,
                    "read: tensor '", name, "' has ", p_->bytes[static_cast<std::size_t>(t)], " bytes, the output ",
                    out.size());
    const index_t d = layout_.kept_device[static_cast<std::size_t>(t)];
    const index_t h = layout_.kept_host[static_cast<std::size_t>(t)];
    if (d != no_index && state(device_state_, d) == held::live) {
      void* src = dev_->device_memory() + offset(device_offset_, d);
      dev_->launch(stream(stream_kind::d2h), [this, dst = out.data(), src, n = out.size()](stream_view v) {
        dev_->copy(dst, src, n, copy_kind::device_to_host, v);
      });
      dev_->synchronize(stream(stream_kind::d2h));
      return;
    }
    MEMPLAN_EXPECTS(h != no_index && state(host_state_, h) == held::live, invalid_argument, "read: tensor '", name,
                    "' is not kept after the run (only parameters and optimizer state are)");
    std::memcpy(out.data(), dev_->pinned_memory() + offset(host_offset_, h), out.size());
  }

  /// Waits for the streams and gives every byte back to the arenas. Never throws.
  void release() noexcept {
    try {
      synchronize_all();
    } catch (...) {  // a failure already reported, or a device that can no longer run: give back regardless
    }
    give_back(device_pool_, device_state_, device_offset_, layout_.device, &extents_);
    give_back(pinned_pool_, host_state_, host_offset_, layout_.host, nullptr);
  }

 private:
  enum class held : std::uint8_t { none, live, pending };

  static held& state(std::vector<held>& v, index_t i) { return v[static_cast<std::size_t>(i)]; }
  static bytes_t& offset(std::vector<bytes_t>& v, index_t i) { return v[static_cast<std::size_t>(i)]; }
  typename D::stream& stream(stream_kind k) { return streams_[static_cast<std::size_t>(k)]; }
  const action& act(index_t a) const { return pl_->actions[static_cast<std::size_t>(a)]; }
  std::string name(index_t a) const { return a == layout_.load ? "the initial load" : detail::action_name(*p_, *pl_, a); }

  void synchronize_all() {
    for (auto& s : streams_) dev_->synchronize(s);
  }

  /// Drains a pool and returns every live block (after synchronize_all).
  void give_back(ordered_pool<D>& pool, std::vector<held>& states, std::vector<bytes_t>& offsets,
                 const std::vector<buffer>& buffers, const std::vector<extent>* extents) noexcept {
    try {
      pool.drain();
    } catch (...) {
    }
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (states[i] != held::live) continue;
      pool.deallocate_extent(offsets[i], buffers[i].bytes,
                             extents != nullptr ? (*extents)[i].bytes : arena::footprint(buffers[i].bytes));
    }
    states.assign(buffers.size(), held::none);
    offsets.assign(buffers.size(), 0);
  }

  /// Records the first failure; work issued after it is skipped.
  void fail(index_t a, std::exception_ptr e) noexcept {
    const std::lock_guard lock(failure_mutex_);
    if (failure_) return;
    failure_ = std::move(e);
    failed_action_ = a;
    failed_.store(true, std::memory_order_release);
  }
  void throw_if_failed() {
    if (!failed_.load(std::memory_order_acquire)) return;
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(failure_);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    throw action_failed(failed_action_, memplan::detail::concat("executor: ", name(failed_action_), " failed: ", what));
  }
  /// Launches `body(view)` on `s` for action `a`: an exception it throws
  /// (or one from issuing it) is recorded against `a`.
  template <class Body>
  void launch(index_t a, typename D::stream& s, Body body) {
    try {
      dev_->launch(s, [this, a, body = std::move(body)](stream_view v) {
        if (failed_.load(std::memory_order_acquire)) return;
        try {
          body(v);
        } catch (...) {
          fail(a, std::current_exception());
        }
      });
    } catch (...) {
      fail(a, std::current_exception());
    }
  }

  template <class Load>
  void start(Load& load) {
    slot_ = 0;
    piece_slot_ = 0;
    device_state_.assign(layout_.device.size(), held::none);
    device_offset_.assign(layout_.device.size(), 0);
    host_state_.assign(layout_.host.size(), held::none);
    host_offset_.assign(layout_.host.size(), 0);
    if (!allocate(layout_.initial)) out_of_memory(layout_.load, layout_.initial);
    auto& h2d = stream(stream_kind::h2d);
    for (const index_t b : layout_.initial) {
      const index_t t = layout_.device[static_cast<std::size_t>(b)].tensor;
      void* address = dev_->device_memory() + offset(device_offset_, b);
      launch(layout_.load, h2d, [&load, t, address](stream_view v) { load(t, address, v); });
    }
    for (const index_t h : layout_.initial_host) {  // offloaded state, into pinned memory
      allocate_host(layout_.load, h);
      const index_t t = layout_.host[static_cast<std::size_t>(h)].tensor;
      void* address = dev_->pinned_memory() + offset(host_offset_, h);
      launch(layout_.load, h2d, [&load, t, address](stream_view v) { load(t, address, v); });
    }
    auto& loaded = events_[static_cast<std::size_t>(layout_.load)];
    dev_->record(loaded, h2d);
    dev_->wait(stream(stream_kind::compute), loaded);
    dev_->wait(stream(stream_kind::d2h), loaded);
    for (const index_t b : layout_.released_at_load) release_device(b);
  }

  /// `issue`, naming `a` in an issue-time failure.
  template <class RunOp>
  bool checked_issue(index_t a, RunOp& run_op) {
    try {
      return issue(a, run_op);
    } catch (const action_failed&) {
      throw;
    } catch (const infeasible_budget&) {  // these two name the action already
      throw;
    } catch (const invalid_argument&) {
      throw;
    } catch (const std::exception& e) {  // an issue-time device failure (cuda_error, bad_alloc): name the action
      throw action_failed(a, memplan::detail::concat("executor: ", name(a), " failed: ", e.what()));
    }
  }

  /// Action `blocked` cannot allocate with nothing pending. In the
  /// simulator it would wait until enough in-flight frees complete — and
  /// those include releases by later-issued actions of the other streams,
  /// which run ahead of a blocked stream (their last reader may end before
  /// `blocked` starts). So: issue the first later action that can go now —
  /// the next one of a stream other than `blocked`'s, allocating no device
  /// memory (memory waits stay first come, first served), whose waits and
  /// whose released buffers' holders are all issued. Issuing it before
  /// `blocked` only reorders actions that nothing orders (plan.hpp).
  /// \returns false if no action can go.
  template <class RunOp>
  bool issue_ahead(std::size_t position, RunOp& run_op) {
    const index_t blocked = order_[position];
    std::array<bool, stream_count> stuck{};
    stuck[static_cast<std::size_t>(stream_of(act(blocked).kind))] = true;
    const auto done = [&](index_t a) { return issued_[static_cast<std::size_t>(a)] != 0; };
    for (std::size_t i = position + 1; i < order_.size() && !std::ranges::all_of(stuck, [](bool x) { return x; }); ++i) {
      const index_t b = order_[i];
      if (done(b)) continue;
      const auto st = static_cast<std::size_t>(stream_of(act(b).kind));
      if (stuck[st]) continue;
      const action_buffers& ab = layout_.actions[static_cast<std::size_t>(b)];
      bool ready = ab.allocates.empty() && std::ranges::all_of(pl_->waits_of(static_cast<std::size_t>(b)), done);
      const auto held_by_issued = [&](const buffer& x) {
        return std::ranges::all_of(x.holders, [&](index_t h) { return h == no_index || h == b || done(h); });
      };
      for (const index_t d : ab.releases_device) ready = ready && held_by_issued(layout_.device[static_cast<std::size_t>(d)]);
      for (const index_t h : ab.releases_host) ready = ready && held_by_issued(layout_.host[static_cast<std::size_t>(h)]);
      // What it touches exists already (a valid plan's waits imply it; checked, not assumed).
      const auto live = [&](index_t d) { return d == no_index || state(device_state_, d) == held::live; };
      for (const auto* list : {&ab.reads, &ab.writes}) {
        for (const access& x : *list) {
          for (const slice& sl : x.slices) ready = ready && live(sl.buffer);
        }
      }
      ready = ready && live(ab.splits) && (ab.splits != no_index || act(b).kind == action_kind::swap_in || live(ab.device));
      if (!ready) {
        stuck[st] = true;  // its stream's later actions come after it
        continue;
      }
      if (!checked_issue(b, run_op)) return false;  // (allocates nothing: cannot happen)
      ++stats_.issued_ahead;
      return true;
    }
    return false;
  }

  /// Throws: `a` cannot allocate with nothing pending and nothing to issue ahead.
  [[noreturn]] void out_of_memory(index_t a, const std::vector<index_t>& list) {
    bytes_t need = 0;
    for (const index_t b : list) need += layout_.device[static_cast<std::size_t>(b)].bytes;
    throw infeasible_budget(memplan::detail::concat(
        "executor: out of device memory at ", name(a), ": it needs ", need, " bytes (", footprints(list),
        " in the arena) with ", device_pool_.in_use(), " in use (", dev_->arena().in_use(),
        " in the arena) and nothing left to free; budget ", device_pool_.limit(), ", arena ",
        dev_->arena().capacity(), " bytes"));
  }

  /// Issues action `a`. \returns false, having done nothing, if its device
  /// memory cannot be allocated with nothing pending.
  template <class RunOp>
  bool issue(index_t a, RunOp& run_op) {
    throw_if_failed();
    const action& x = act(a);
    const action_buffers& ab = layout_.actions[static_cast<std::size_t>(a)];
    auto& s = stream(stream_of(x.kind));
    if (!allocate(ab.allocates)) return false;
    issued_[static_cast<std::size_t>(a)] = 1;
    split_before(ab);
    if (ab.splits != no_index && state(device_state_, ab.splits) == held::live) split_in_place(ab.splits);
    if (detail::part_of(x) != no_index) ++stats_.micro_actions;
    for (const index_t w : pl_->waits_of(static_cast<std::size_t>(a))) {
      if (stream_of(act(w).kind) != stream_of(x.kind)) dev_->wait(s, events_[static_cast<std::size_t>(w)]);
    }
    std::byte* const device = dev_->device_memory();
    std::byte* const pinned = dev_->pinned_memory();
    switch (x.kind) {
      case action_kind::compute:
      case action_kind::recompute: {
        op_call& call = calls_[static_cast<std::size_t>(a)];
        call = {a, x.step, p_->op[static_cast<std::size_t>(x.step)], x.parts, detail::part_of(x),
                x.kind == action_kind::recompute, {}, {}, {}, {}, nullptr, 0};
        call.inputs = {addresses_.data() + slot_, ab.reads.size()};
        call.input_regions = {regions_.data() + slot_, ab.reads.size()};
        for (const access& in : ab.reads) place(in);
        call.outputs = {addresses_.data() + slot_, ab.writes.size()};
        call.output_regions = {regions_.data() + slot_, ab.writes.size()};
        for (const access& out : ab.writes) place(out);
        if (ab.workspace != no_index) {
          call.workspace = device + offset(device_offset_, ab.workspace);
          call.workspace_bytes = layout_.device[static_cast<std::size_t>(ab.workspace)].bytes;
        }
        ++stats_.ops_run;
        launch(a, s, [&run_op, &call](stream_view v) { run_op(static_cast<const op_call&>(call), v); });
        break;
      }
      case action_kind::swap_out: {
        allocate_host(a, ab.host);
        void* dst = pinned + offset(host_offset_, ab.host);
        const void* src = device + offset(device_offset_, ab.device);
        const auto n = static_cast<std::size_t>(layout_.device[static_cast<std::size_t>(ab.device)].bytes);
        stats_.swapped_out_bytes += static_cast<bytes_t>(n);
        launch(a, s, [this, dst, src, n](stream_view v) { dev_->copy(dst, src, n, copy_kind::device_to_host, v); });
        break;
      }
      case action_kind::swap_in: {
        void* dst = device + offset(device_offset_, ab.device);
        const void* src = pinned + offset(host_offset_, ab.host) + ab.host_start;
        const auto n = static_cast<std::size_t>(layout_.device[static_cast<std::size_t>(ab.device)].bytes);
        stats_.swapped_in_bytes += static_cast<bytes_t>(n);
        launch(a, s, [this, dst, src, n](stream_view v) { dev_->copy(dst, src, n, copy_kind::host_to_device, v); });
        break;
      }
      case action_kind::free: break;  // nothing runs; the release below is the action
    }
    dev_->record(events_[static_cast<std::size_t>(a)], s);
    // A release goes once every holder is issued (with its event recorded):
    // in list order at once; issued in start order, a holder listed earlier
    // may start, and so be issued, after the release.
    for (const index_t b : ab.releases_device) deferred_device_.push_back(b);
    for (const index_t h : ab.releases_host) deferred_host_.push_back(h);
    const auto issued = [&](const buffer& x) {
      return std::ranges::all_of(x.holders, [&](index_t h) { return h == no_index || issued_[static_cast<std::size_t>(h)] != 0; });
    };
    std::erase_if(deferred_device_, [&](index_t b) {
      if (!issued(layout_.device[static_cast<std::size_t>(b)])) return false;
      release_device(b);
      return true;
    });
    std::erase_if(deferred_host_, [&](index_t h) {
      if (!issued(layout_.host[static_cast<std::size_t>(h)])) return false;
      release_host(h);
      return true;
    });
    return true;
  }

  /// The holders' events of `b` (at most one per stream).
  std::vector<const typename D::event*> gates(const buffer& b) const {
    std::vector<const typename D::event*> out;
    for (const index_t h : b.holders) {
      if (h != no_index) out.push_back(&events_[static_cast<std::size_t>(h)]);
    }
    if (out.empty()) out.push_back(&events_[static_cast<std::size_t>(layout_.load)]);
    return out;
  }
  void release_device(index_t b) {
    const buffer& buf = layout_.device[static_cast<std::size_t>(b)];
    device_pool_.deallocate_extent(offset(device_offset_, b), buf.bytes, extents_[static_cast<std::size_t>(b)].bytes,
                                   gates(buf));
    state(device_state_, b) = held::pending;
  }
  /// A whole tensor's block becomes its micro-tensors' sub-ranges (plan.hpp's
  /// in-place split): nothing moves, each is given back on its own from now on.
  void split_in_place(index_t w) {
    const buffer& whole = layout_.device[static_cast<std::size_t>(w)];
    const bytes_t base = offset(device_offset_, w);
    for (index_t j = 0; j < layout_.device[static_cast<std::size_t>(whole.split_into)].parts; ++j) {
      const index_t m = whole.split_into + j;
      offset(device_offset_, m) = base + layout_.device[static_cast<std::size_t>(m)].start;
      state(device_state_, m) = held::live;
    }
    state(device_state_, w) = held::none;
    ++stats_.splits_in_place;
  }
  /// Pieces a slice of device buffer `b` may come in: a whole buffer that is
  /// split in place, its micro-tensors (it may be read after an early split).
  std::size_t piece_count(index_t b) const {
    const buffer& buf = layout_.device[static_cast<std::size_t>(b)];
    return buf.split_into == no_index ? 1
                                      : static_cast<std::size_t>(layout_.device[static_cast<std::size_t>(buf.split_into)].parts);
  }
  /// Issued in start order, an action may touch a micro-tensor of a whole
  /// tensor before the release that splits it in place is issued: split it
  /// now (bookkeeping only; the bytes are where they were).
  void split_before(const action_buffers& ab) {
    const auto early = [&](index_t b) {
      if (b == no_index) return;
      const index_t w = layout_.device[static_cast<std::size_t>(b)].whole;
      if (w != no_index && state(device_state_, w) == held::live) split_in_place(w);
    };
    for (const auto* list : {&ab.reads, &ab.writes}) {
      for (const access& x : *list) {
        for (const slice& sl : x.slices) early(sl.buffer);
      }
    }
    early(ab.device);
    for (const index_t b : ab.releases_device) early(b);
  }
  /// Fills the next address and region slot (and its pieces) for `x`. A
  /// slice of a whole buffer split in place already (issued in start order)
  /// comes as the parts of its micro-tensors that cover it.
  void place(const access& x) {
    std::byte* const device = dev_->device_memory();
    piece* const first = pieces_.data() + piece_slot_;
    for (const slice& sl : x.slices) {
      const buffer& buf = layout_.device[static_cast<std::size_t>(sl.buffer)];
      if (buf.split_into == no_index || state(device_state_, sl.buffer) == held::live) {
        pieces_[piece_slot_++] = {device + offset(device_offset_, sl.buffer) + sl.offset, sl.bytes};
        continue;
      }
      const index_t parts = layout_.device[static_cast<std::size_t>(buf.split_into)].parts;
      for (index_t j = 0; j < parts; ++j) {
        const index_t m = buf.split_into + j;
        const buffer& micro = layout_.device[static_cast<std::size_t>(m)];
        const bytes_t from = std::max(sl.offset, micro.start);
        const bytes_t to = std::min(sl.offset + sl.bytes, micro.start + micro.bytes);
        if (to > from) pieces_[piece_slot_++] = {device + offset(device_offset_, m) + (from - micro.start), to - from};
      }
    }
    const auto pieces = std::span<const piece>(first, static_cast<std::size_t>(pieces_.data() + piece_slot_ - first));
    regions_[slot_] = {x.offset, x.bytes, pieces};
    addresses_[slot_] = pieces.size() == 1 ? pieces.front().address : nullptr;
    ++slot_;
  }
  void release_host(index_t h) {
    const buffer& buf = layout_.host[static_cast<std::size_t>(h)];
    pinned_pool_.deallocate(offset(host_offset_, h), buf.bytes, gates(buf));
    state(host_state_, h) = held::pending;
  }

  /// Allocates every buffer in `list` (of one action), all or none, waiting
  /// for pending frees and compacting when only holes stand in the way.
  /// \returns false (nothing allocated) if they cannot fit with nothing pending.
  bool allocate(const std::vector<index_t>& list) {
    if (list.empty()) return true;
    bytes_t need = 0;
    for (const index_t b : list) need += layout_.device[static_cast<std::size_t>(b)].bytes;
    bool compacted = false;
    for (;;) {
      std::size_t got = 0;
      for (; got < list.size(); ++got) {
        const index_t b = list[got];
        const extent& e = extents_[static_cast<std::size_t>(b)];
        const auto o = device_pool_.try_allocate_extent(layout_.device[static_cast<std::size_t>(b)].bytes, e.bytes, e.align);
        if (!o) break;
        offset(device_offset_, b) = *o;
        state(device_state_, b) = held::live;
      }
      if (got == list.size()) return true;
      for (std::size_t i = 0; i < got; ++i) {  // roll back: all or none
        const auto b = static_cast<std::size_t>(list[i]);
        device_pool_.deallocate_extent(offset(device_offset_, list[i]), layout_.device[b].bytes, extents_[b].bytes);
        state(device_state_, list[i]) = held::none;
      }
      if (device_pool_.wait_one()) continue;
      const bool bytes_fit = device_pool_.in_use() + need <= device_pool_.limit() &&
                             dev_->arena().in_use() + footprints(list) <= dev_->arena().capacity();
      if (!bytes_fit || compacted) return false;
      compact();
      compacted = true;
    }
  }
  bytes_t footprints(const std::vector<index_t>& list) const {
    bytes_t sum = 0;
    for (const index_t b : list) sum += extents_[static_cast<std::size_t>(b)].bytes;
    return sum;
  }
  void allocate_host(index_t a, index_t h) {
    const bytes_t bytes = layout_.host[static_cast<std::size_t>(h)].bytes;
    for (bool compacted = false;;) {
      if (const auto o = pinned_pool_.try_allocate(bytes)) {
        offset(host_offset_, h) = *o;
        state(host_state_, h) = held::live;
        return;
      }
      if (pinned_pool_.wait_one()) continue;
      MEMPLAN_EXPECTS(!compacted && dev_->pinned().in_use() + arena::footprint(bytes) <= dev_->pinned().capacity(),
                      invalid_argument, "executor: the pinned pool (", dev_->pinned().capacity(), " bytes, ",
                      dev_->pinned().in_use(), " in use) cannot hold the host copy of ", name(a), " (", bytes,
                      " bytes); this plan needs ", pinned_peak(layout_, order_), " pinned bytes");
      compact();
      compacted = true;
    }
  }

  /// Waits for every stream, then closes the holes of both arenas.
  void compact() {
    synchronize_all();
    throw_if_failed();
    device_pool_.drain();
    pinned_pool_.drain();
    ++stats_.compactions;
    std::byte* const device = dev_->device_memory();
    auto& s = stream(stream_kind::compute);
    device_pool_.compact(live(device_state_, device_offset_, layout_.device, &extents_), [&](bytes_t from, bytes_t to, bytes_t n) {
      // Chunks no longer than the gap never overlap, so a plain copy is safe.
      const bytes_t gap = from - to;
      dev_->launch(s, [this, device, from, to, n, gap](stream_view v) {
        for (bytes_t done = 0; done < n; done += gap) {
          dev_->copy(device + to + done, device + from + done, static_cast<std::size_t>(std::min(gap, n - done)),
                     copy_kind::device_to_device, v);
        }
      });
    });
    dev_->synchronize(s);
    std::byte* const pinned = dev_->pinned_memory();
    pinned_pool_.compact(live(host_state_, host_offset_, layout_.host, nullptr), [&](bytes_t from, bytes_t to, bytes_t n) {
      std::memmove(pinned + to, pinned + from, static_cast<std::size_t>(n));
    });
  }
  std::vector<typename ordered_pool<D>::block> live(std::vector<held>& states, std::vector<bytes_t>& offsets,
                                                    const std::vector<buffer>& buffers,
                                                    const std::vector<extent>* extents) {
    std::vector<typename ordered_pool<D>::block> out;
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (states[i] != held::live) continue;
      if (extents != nullptr) {
        out.push_back({&offsets[i], buffers[i].bytes, (*extents)[i].bytes, (*extents)[i].align});
      } else {
        out.push_back({&offsets[i], buffers[i].bytes, 0, arena::alignment});
      }
    }
    return out;
  }

  D* dev_;
  const problem* p_;
  const plan* pl_;
  layout layout_;
  std::vector<extent> extents_;  ///< per device buffer: its arena bytes and alignment
  ordered_pool<D> device_pool_;
  ordered_pool<D> pinned_pool_;
  std::vector<typename D::event> events_;  ///< per action, then the initial load
  std::vector<typename D::stream> streams_;  ///< after the events: joined before they go
  std::vector<op_call> calls_;             ///< per action: what its launched work reads
  std::vector<void*> addresses_;           ///< the spans of calls_: an address per input and output
  std::vector<region> regions_;            ///< the same slots' regions
  std::vector<piece> pieces_;              ///< the regions' pieces
  std::size_t slot_ = 0;
  std::size_t piece_slot_ = 0;
  std::vector<std::uint8_t> issued_;       ///< per action: issued in this run
  std::vector<index_t> order_;             ///< the actions in the order they are issued
  std::vector<index_t> deferred_device_, deferred_host_;  ///< releases waiting for a holder to be issued
  std::vector<held> device_state_, host_state_;
  std::vector<bytes_t> device_offset_, host_offset_;
  run_stats stats_;
  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
  index_t failed_action_ = no_index;
};

}  // namespace memplan::runtime
