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
/// How the actions map to the device: four streams (compute, d2h, h2d and
/// comm, the simulator's: an op that communicates runs on comm), one event
/// per action recorded after it; a wait becomes an
/// event wait on the action's stream.
///
/// Device memory is a memory layout (DESIGN.md §6, plan_layout.hpp): every
/// device buffer lives at its offset in the arena — the plan's layout, or,
/// for a plan without one, the layout of the timeline the executor issues
/// in (placement.hpp) — so nothing is searched for, nothing fragments and
/// nothing moves. Why a plan runs in an arena of the layout's size: the
/// layout lets two buffers share bytes only if the earlier one is freed
/// (all its holders ended) strictly before the later one is made in the
/// timeline it was derived from, and
/// the executor issues the actions in that timeline's start order; so when
/// an action that takes such bytes is issued, the earlier buffer's release
/// and holders have been issued, and its stream waits (device-side) on the
/// holders' events before it runs (`reuse_waits`). A layout that does not
/// fit the issue order is refused at construction, as is an arena smaller
/// than the layout. A release "takes effect once every earlier-issued
/// action that reads or writes that copy has ended" (plan.hpp): here, the
/// next buffer placed over it waits for those actions.
///
/// Host copies live in the pinned pool, first fit through an ordered_pool
/// (stream-ordered reuse), compacted when only holes stand in the way.
///
/// Micro-ops and micro-tensors (plan.hpp): a micro-tensor is a buffer of its
/// own (layout.hpp) — at its own offset when a micro-op or micro swap-in
/// makes it, or a sub-range of its whole tensor's block when that tensor is
/// split in place, given back on its own. The op of micro-op k gets, per
/// sample tensor, micro-tensor k's bytes: a view into the whole block, the
/// micro-tensor's block, or the pieces of micro-tensors of another parts
/// count that cover it (adjacent pieces come as one).

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
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
#include "memplan/format_bytes.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/device.hpp"
#include "memplan/runtime/layout.hpp"
#include "memplan/runtime/placement.hpp"
#include "memplan/runtime/pool.hpp"

namespace memplan::runtime {

/// Contiguous device bytes of a tensor.
struct piece {
  void* address = nullptr;  ///< where they start (in the device arena)
  bytes_t bytes = 0;        ///< how many
};

/// The bytes [offset, offset + bytes) of a tensor that an op reads or
/// writes — all of it, or micro-tensor k's range for micro-op k — lying in
/// `pieces`, in order: one, unless the tensor is held as micro-tensors made
/// apart and the op reads more than one of them (a merge, TSPLIT Fig. 10).
/// An output the op must leave alone has no pieces.
struct region {
  bytes_t offset = 0;             ///< first byte, from the start of the tensor
  bytes_t bytes = 0;              ///< length of the range
  std::span<const piece> pieces;  ///< where the range lies, in order; empty: leave it alone
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
  bool recompute = false;  ///< a recompute action: outputs still on the device come as null
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
  bytes_t workspace_bytes = 0;  ///< the length of `workspace` (0 if none)
};

/// An action's callback (or its copy, or an issue-time device call) failed.
/// Everything the run allocated has been given back when this is thrown.
struct action_failed : error {
  /// Failure of action `a` (no_index: the initial load); `message` is what().
  action_failed(index_t a, const std::string& message) : error(message), action(a) {}
  index_t action;  ///< the failed action's index; no_index for the initial load
};

/// Figures of one run.
struct run_stats {
  bytes_t arena_bytes = 0;             ///< the layout's arena (highest offset + footprint)
  bytes_t peak_live_bytes = 0;         ///< most device bytes in live buffers at once, as the plan counts them
  bytes_t arena_high_water_bytes = 0;  ///< the highest offset + footprint of a buffer the run placed
  bytes_t pinned_peak_bytes = 0;       ///< most pinned host bytes in use at once (footprints)
  bytes_t swapped_out_bytes = 0;       ///< device bytes the swap-outs copied to the pinned pool
  bytes_t swapped_in_bytes = 0;        ///< pinned bytes the swap-ins copied back to the device
  index_t ops_run = 0;            ///< compute and recompute actions
  index_t micro_actions = 0;      ///< actions on one micro-op or micro-tensor (part >= 0)
  index_t splits_in_place = 0;    ///< whole tensors split in place into micro-tensors
  index_t compactions = 0;        ///< times device blocks were moved: 0, a layout never moves them
  bytes_t compacted_bytes = 0;    ///< device bytes moved: 0
  index_t pinned_compactions = 0; ///< times the pinned pool was compacted
};

/// A framework's `run_op` callback (see the file comment): runs the op an
/// `op_call` names on the stream it is given.
template <class F, class View>
concept op_runner = std::invocable<F&, const op_call&, View>;

/// A framework's `load` callback (see the file comment): writes tensor t's
/// initial bytes at an address on the stream it is given.
template <class F, class View>
concept tensor_loader = std::invocable<F&, index_t, void*, View>;

/// Runs one plan of one problem on a `D`, as often as asked (see the file
/// comment): owns its streams, events and the tensors' places in the arenas.
template <memplan::device D>
class executor {
 public:
  using stream_view = typename D::stream_view;  ///< what `run_op` and `load` are handed

  /// Prepares `pl` (for `p`) to run on `dev`; both must outlive the executor.
  /// Actions are issued in list order; a plan without a layout gets the one
  /// of its list-order lifetimes (`placement_of`).
  /// \throws invalid_plan (an invalid_argument of kind
  ///         `failure_kind::invalid_plan`) if the action list is malformed
  ///         or its layout does not fit the issue order; infeasible_budget
  ///         (kind `out_of_memory`) if the device arena is smaller than the
  ///         layout's arena.
  executor(D& dev, const problem& p, const plan& pl) : executor(dev, p, pl, nullptr) {}

  /// The same, issuing the actions in the order the simulator starts them
  /// on `timing` (the device the plan was made and validated for), the
  /// order a layout derived from the simulator's timeline fits; a plan
  /// without a layout gets that one (`assign_layout` on a copy). Falls back
  /// to list order if the simulator finds the plan infeasible.
  executor(D& dev, const problem& p, const plan& pl, const device_spec& timing) : executor(dev, p, pl, &timing) {}

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor() { release(); }

  /// The layout's arena: the device arena must hold it.
  [[nodiscard]] bytes_t arena_bytes() const noexcept { return at_.arena_bytes; }
  /// The order in which the actions are issued.
  [[nodiscard]] std::span<const index_t> order() const noexcept { return at_.order; }
  /// Device buffer b's arena offset (b indexes `layout_of(p, pl).device`).
  [[nodiscard]] bytes_t offset_of(index_t b) const { return at_.offsets[static_cast<std::size_t>(b)]; }

 private:
  executor(D& dev, const problem& p, const plan& pl, const device_spec* timing)
      : dev_(&dev), p_(&p), pl_(&pl), layout_(layout_of(p, pl)), at_(placement_of(p, pl, layout_, timing)),
        pinned_pool_(dev, dev.pinned()) {
    check_arena();
    gates_ = reuse_waits(p, pl, layout_, at_);
    events_.reserve(pl.actions.size() + 1);
    for (std::size_t a = 0; a <= pl.actions.size(); ++a) events_.push_back(dev.make_event());
    streams_.reserve(stream_count);
    for (int s = 0; s < stream_count; ++s) streams_.push_back(dev.make_stream());
    calls_.resize(pl.actions.size());
    std::size_t slots = 0, pieces = 0;
    for (const auto& ab : layout_.actions) {
      slots += ab.reads.size() + ab.writes.size();
      for (const auto* list : {&ab.reads, &ab.writes}) {
        for (const access& x : *list) pieces += x.slices.size();
      }
    }
    addresses_.resize(slots);
    regions_.resize(slots);
    pieces_.resize(pieces);
  }

  /// The arena holds the layout, and the layout its buffers.
  void check_arena() const {
    const bytes_t capacity = dev_->arena().capacity();
    if (at_.arena_bytes > capacity) {
      throw infeasible_budget(memplan::detail::concat(
          "executor: ", at_.derived ? "the memory layout the executor derived for the plan" : "the plan's memory layout",
          " needs an arena of ", at_.arena_bytes, " bytes (", format_bytes(at_.arena_bytes), "); the device arena has ",
          capacity, " bytes (", format_bytes(capacity), ")"));
    }
    for (std::size_t b = 0; b < layout_.device.size(); ++b) {
      const bytes_t end = at_.offsets[b] + layout_.device[b].bytes;
      MEMPLAN_EXPECTS(at_.offsets[b] >= 0 && (layout_.device[b].bytes == 0 || end <= at_.arena_bytes), invalid_plan,
                      "invalid plan: the layout puts device buffer ", b, " at [", at_.offsets[b], ", ", end,
                      "), outside its arena of ", at_.arena_bytes, " bytes");
    }
  }

 public:
  /// Runs the plan once: loads the tensors without a producer, issues every
  /// action, waits for all streams. Tensors kept after the run (persistent
  /// ones) can then be `read` until `release` or the next run.
  /// `load(t, address, stream)` writes tensor t's initial bytes at `address`
  /// on `stream`: device memory, or pinned host memory for the plan's
  /// offloaded state (a CUDA loader copies with cudaMemcpyDefault).
  /// \throws action_failed naming the action whose callback or copy threw;
  ///         invalid_argument if the pinned pool cannot hold the host
  ///         copies or the device arena's bytes are taken by someone else;
  ///         after either, every byte is back in the arenas.
  template <op_runner<stream_view> RunOp, tensor_loader<stream_view> Load>
  run_stats run(RunOp&& run_op, Load&& load) {
    release();
    failed_.store(false, std::memory_order_relaxed);
    failure_ = nullptr;
    stats_ = {};
    stats_.arena_bytes = at_.arena_bytes;
    live_bytes_ = 0;
    try {
      start(load);
      issued_.assign(pl_->actions.size(), 0);
      deferred_device_.clear();
      deferred_host_.clear();
      for (const index_t a : at_.order) checked_issue(a, run_op);
      synchronize_all();
      throw_if_failed();
    } catch (...) {
      release();
      throw;
    }
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
    if (d != no_index && device_live_[static_cast<std::size_t>(d)] != 0) {
      void* src = dev_->device_memory() + offset_of(d);
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
    for (std::size_t b = 0; b < device_live_.size(); ++b) {
      if (device_live_[b] != 0) dev_->arena().deallocate_extent(at_.offsets[b], layout_.device[b].bytes);
    }
    device_live_.assign(layout_.device.size(), 0);
    try {
      pinned_pool_.drain();
    } catch (...) {
    }
    for (std::size_t h = 0; h < host_state_.size(); ++h) {
      if (host_state_[h] == held::live) pinned_pool_.deallocate(host_offset_[h], layout_.host[h].bytes);
    }
    host_state_.assign(layout_.host.size(), held::none);
    host_offset_.assign(layout_.host.size(), 0);
  }

 private:
  enum class held : std::uint8_t { none, live, pending };

  static held& state(std::vector<held>& v, index_t i) { return v[static_cast<std::size_t>(i)]; }
  static bytes_t& offset(std::vector<bytes_t>& v, index_t i) { return v[static_cast<std::size_t>(i)]; }
  typename D::stream& stream(stream_kind k) { return streams_[static_cast<std::size_t>(k)]; }
  const action& act(index_t a) const { return pl_->actions[static_cast<std::size_t>(a)]; }
  const buffer& device_buffer(index_t b) const { return layout_.device[static_cast<std::size_t>(b)]; }
  std::string name(index_t a) const { return a == layout_.load ? "the initial load" : detail::action_name(*p_, *pl_, a); }

  void synchronize_all() {
    for (auto& s : streams_) dev_->synchronize(s);
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
    device_live_.assign(layout_.device.size(), 0);
    host_state_.assign(layout_.host.size(), held::none);
    host_offset_.assign(layout_.host.size(), 0);
    for (const index_t b : layout_.initial) place_device(layout_.load, b);
    auto& h2d = stream(stream_kind::h2d);
    for (const index_t b : layout_.initial) {
      const index_t t = device_buffer(b).tensor;
      void* address = dev_->device_memory() + offset_of(b);
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
    // Every other stream reads what the load wrote (h2d orders itself).
    for (const stream_kind k : {stream_kind::compute, stream_kind::d2h, stream_kind::comm}) dev_->wait(stream(k), loaded);
    for (const index_t b : layout_.released_at_load) release_device(b);
  }

  /// `issue`, naming `a` in an issue-time failure.
  template <class RunOp>
  void checked_issue(index_t a, RunOp& run_op) {
    try {
      issue(a, run_op);
    } catch (const action_failed&) {
      throw;
    } catch (const invalid_argument&) {  // names the action already
      throw;
    } catch (const std::exception& e) {  // an issue-time device failure (cuda_error, bad_alloc): name the action
      throw action_failed(a, memplan::detail::concat("executor: ", name(a), " failed: ", e.what()));
    }
  }

  /// Issues action `a`: places what it allocates at its offsets, makes its
  /// stream wait for its gates (plan waits, holders of the bytes it takes),
  /// launches its work, records its event and issues the releases it
  /// completes.
  template <class RunOp>
  void issue(index_t a, RunOp& run_op) {
    throw_if_failed();
    const action& x = act(a);
    const action_buffers& ab = layout_.actions[static_cast<std::size_t>(a)];
    auto& s = stream(stream_of(*p_, x));
    issued_[static_cast<std::size_t>(a)] = 1;
    for (const index_t b : ab.allocates) place_device(a, b);
    for (const index_t g : gates_[static_cast<std::size_t>(a)]) {
      if (g != no_index) dev_->wait(s, events_[static_cast<std::size_t>(g)]);
    }
    split_before(ab);
    if (ab.splits != no_index && device_live_[static_cast<std::size_t>(ab.splits)] != 0) split_in_place(ab.splits);
    if (detail::part_of(x) != no_index) ++stats_.micro_actions;
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
          call.workspace = device + offset_of(ab.workspace);
          call.workspace_bytes = device_buffer(ab.workspace).bytes;
        }
        ++stats_.ops_run;
        launch(a, s, [&run_op, &call](stream_view v) { run_op(static_cast<const op_call&>(call), v); });
        break;
      }
      case action_kind::swap_out: {
        allocate_host(a, ab.host);
        void* dst = pinned + offset(host_offset_, ab.host);
        const void* src = device + offset_of(ab.device);
        const auto n = static_cast<std::size_t>(device_buffer(ab.device).bytes);
        stats_.swapped_out_bytes += static_cast<bytes_t>(n);
        launch(a, s, [this, dst, src, n](stream_view v) { dev_->copy(dst, src, n, copy_kind::device_to_host, v); });
        break;
      }
      case action_kind::swap_in: {
        void* dst = device + offset_of(ab.device);
        const void* src = pinned + offset(host_offset_, ab.host) + ab.host_start;
        const auto n = static_cast<std::size_t>(device_buffer(ab.device).bytes);
        stats_.swapped_in_bytes += static_cast<bytes_t>(n);
        launch(a, s, [this, dst, src, n](stream_view v) { dev_->copy(dst, src, n, copy_kind::host_to_device, v); });
        break;
      }
      case action_kind::free: break;  // nothing runs; the release below is the action
    }
    dev_->record(events_[static_cast<std::size_t>(a)], s);
    // A release goes once every holder is issued (with its event recorded):
    // in list order at once; issued in start order, a holder listed earlier
    // may start, and so be issued, after the release. reuse_waits counts
    // on exactly this.
    for (const index_t b : ab.releases_device) deferred_device_.push_back(b);
    for (const index_t h : ab.releases_host) deferred_host_.push_back(h);
    const auto issued = [&](const buffer& buf) {
      return std::ranges::all_of(buf.holders, [&](index_t h) { return h == no_index || issued_[static_cast<std::size_t>(h)] != 0; });
    };
    std::erase_if(deferred_device_, [&](index_t b) {
      if (!issued(device_buffer(b))) return false;
      release_device(b);
      return true;
    });
    std::erase_if(deferred_host_, [&](index_t h) {
      if (!issued(layout_.host[static_cast<std::size_t>(h)])) return false;
      release_host(h);
      return true;
    });
  }

  /// Device buffer `b`, made by `a`, takes its bytes of the arena.
  void place_device(index_t a, index_t b) {
    const buffer& buf = device_buffer(b);
    const bytes_t at = offset_of(b);
    MEMPLAN_EXPECTS(dev_->arena().allocate_at(at, buf.bytes), invalid_argument, "executor: ", name(a),
                    " cannot take bytes [", at, ", ", at + buf.bytes, ") of the device arena (", dev_->arena().capacity(),
                    " bytes, ", dev_->arena().in_use(), " in use): something else holds them");
    device_live_[static_cast<std::size_t>(b)] = 1;
    live_bytes_ += buf.bytes;
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, live_bytes_);
    if (buf.bytes > 0) {
      const bytes_t footprint = (buf.bytes + at_.alignment - 1) / at_.alignment * at_.alignment;
      stats_.arena_high_water_bytes = std::max(stats_.arena_high_water_bytes, at + footprint);
    }
  }
  /// Gives device buffer `b`'s bytes back: the next buffer placed over them
  /// waits on its holders' events (reuse_waits).
  void release_device(index_t b) {
    dev_->arena().deallocate_extent(offset_of(b), device_buffer(b).bytes);
    device_live_[static_cast<std::size_t>(b)] = 0;
    live_bytes_ -= device_buffer(b).bytes;
  }
  /// A whole tensor's block becomes its micro-tensors' sub-ranges (plan.hpp's
  /// in-place split): nothing moves, each is given back on its own from now on.
  void split_in_place(index_t w) {
    const buffer& whole = device_buffer(w);
    for (index_t j = 0; j < device_buffer(whole.split_into).parts; ++j) {
      device_live_[static_cast<std::size_t>(whole.split_into + j)] = 1;
    }
    device_live_[static_cast<std::size_t>(w)] = 0;
    ++stats_.splits_in_place;
  }
  /// Issued in start order, an action may touch a micro-tensor of a whole
  /// tensor before the release that splits it in place is issued: split it
  /// now (bookkeeping only; the bytes are where they were).
  void split_before(const action_buffers& ab) {
    const auto early = [&](index_t b) {
      if (b == no_index) return;
      const index_t w = device_buffer(b).whole;
      if (w != no_index && device_live_[static_cast<std::size_t>(w)] != 0) split_in_place(w);
    };
    for (const auto* list : {&ab.reads, &ab.writes}) {
      for (const access& x : *list) {
        for (const slice& sl : x.slices) early(sl.buffer);
      }
    }
    early(ab.device);
    for (const index_t b : ab.releases_device) early(b);
  }
  /// Fills the next address and region slot (and its pieces) for `x`: one
  /// piece per slice, adjacent ones merged (a tensor split in place lies
  /// where it lay whole).
  void place(const access& x) {
    std::byte* const device = dev_->device_memory();
    piece* const first = pieces_.data() + piece_slot_;
    for (const slice& sl : x.slices) {
      std::byte* const at = device + offset_of(sl.buffer) + sl.offset;
      if (pieces_.data() + piece_slot_ != first) {
        piece& last = pieces_[piece_slot_ - 1];
        if (static_cast<std::byte*>(last.address) + last.bytes == at) {
          last.bytes += sl.bytes;
          continue;
        }
      }
      pieces_[piece_slot_++] = {at, sl.bytes};
    }
    const auto pieces = std::span<const piece>(first, static_cast<std::size_t>(pieces_.data() + piece_slot_ - first));
    regions_[slot_] = {x.offset, x.bytes, pieces};
    addresses_[slot_] = pieces.size() == 1 ? pieces.front().address : nullptr;
    ++slot_;
  }

  void release_host(index_t h) {
    const buffer& buf = layout_.host[static_cast<std::size_t>(h)];
    std::vector<const typename D::event*> after;
    for (const index_t x : buf.holders) {
      if (x != no_index) after.push_back(&events_[static_cast<std::size_t>(x)]);
    }
    if (after.empty()) after.push_back(&events_[static_cast<std::size_t>(layout_.load)]);
    pinned_pool_.deallocate(offset(host_offset_, h), buf.bytes, after);
    state(host_state_, h) = held::pending;
  }
  /// A host copy for `a`: first fit in the pinned pool, waiting for pending
  /// frees, compacting the pool when only holes stand in the way.
  void allocate_host(index_t a, index_t h) {
    const bytes_t bytes = layout_.host[static_cast<std::size_t>(h)].bytes;
    for (bool compacted = false;;) {
      if (const auto o = pinned_pool_.try_allocate(bytes)) {
        offset(host_offset_, h) = *o;
        state(host_state_, h) = held::live;
        return;
      }
      if (pinned_pool_.wait_one()) continue;
      MEMPLAN_EXPECTS(!compacted && dev_->pinned().in_use() + D::allocator_type::footprint(bytes) <= dev_->pinned().capacity(),
                      invalid_argument, "executor: the pinned pool (", dev_->pinned().capacity(), " bytes, ",
                      dev_->pinned().in_use(), " in use) cannot hold the host copy of ", name(a), " (", bytes,
                      " bytes); this plan needs ", pinned_peak(layout_, at_.order), " pinned bytes");
      compact_pinned();
      compacted = true;
    }
  }
  /// Waits for every stream, then closes the pinned pool's holes.
  void compact_pinned() {
    synchronize_all();
    throw_if_failed();
    pinned_pool_.drain();
    ++stats_.pinned_compactions;
    std::vector<typename ordered_pool<D>::block> live;
    for (std::size_t h = 0; h < host_state_.size(); ++h) {
      if (host_state_[h] == held::live) live.push_back({&host_offset_[h], layout_.host[h].bytes});
    }
    std::byte* const pinned = dev_->pinned_memory();
    pinned_pool_.compact(std::move(live), [&](bytes_t from, bytes_t to, bytes_t n) {
      std::memmove(pinned + to, pinned + from, static_cast<std::size_t>(n));
    });
  }

  D* dev_;
  const problem* p_;
  const plan* pl_;
  layout layout_;
  placement at_;                           ///< issue order, offsets, arena
  std::vector<stream_gates> gates_;        ///< per action: the events its stream waits on
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
  std::vector<index_t> deferred_device_, deferred_host_;  ///< releases waiting for a holder to be issued
  std::vector<std::uint8_t> device_live_;  ///< per device buffer: holds its bytes of the arena now
  std::vector<held> host_state_;
  std::vector<bytes_t> host_offset_;
  bytes_t live_bytes_ = 0;
  run_stats stats_;
  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
  index_t failed_action_ = no_index;
};

}  // namespace memplan::runtime
