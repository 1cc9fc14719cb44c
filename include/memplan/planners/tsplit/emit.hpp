#pragma once
/// \file
/// TSPLIT (Nie et al., ICDE 2022) §V-A and §V-D: the augmented schedule of
/// Algo 2's evictions, an action list with swap-outs and swap-ins on the d2h/h2d streams (events
/// from plan_builder, each swap-in triggered by the start of its prefetch
/// step p of Eq. 3) and frees with memory-centric recomputation.
///
/// Memory-centric recomputation (§V-D, Fig. 11): to bring a tensor back,
/// its producer runs again after the producers of those of its inputs that
/// are off the device, recursively from tensors still on it (the
/// checkpoints); every intermediate made on the way is freed as soon as the
/// last recomputation that reads it is issued, so a chain needs O(1) extra
/// memory and is redone from the checkpoint for each later use.
///
/// With the LRU improvement of §V-D ("execute as the speed-centric manner
/// and abandon the least recently used intermediate tensor once the
/// available memory is not enough"), an intermediate that the schedule
/// reads again is kept instead, until that read, as long as the kept ones
/// fit the room left at each step (`room`, tsplit.hpp: what the simulated
/// memory-centric plan or Algo 2's model leaves), during the step too; at
/// the next step, the least recently used go first. A later recomputation
/// or the schedule's own read then finds it on the device. Checkpoints a
/// recomputation swaps in on demand are kept the same way.
///
/// A split op (§V-A, Fig. 10) runs as its micro-ops, and after micro-op k
/// micro-tensor k of the chosen input is swapped out or freed. Its outputs
/// stay micro-tensors; readers take them whole without a copy (plan.hpp), and
/// a later swap or free of such a tensor moves each micro-tensor.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/planners/tsplit/algo2.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::tsplit {

class emitter {
 public:
  /// \param free_dead per tensor: free it after its last use in the
  ///        schedule, because a recomputation reads it later (else the
  ///        contract keeps it on the device until then).
  /// \param room per step: the bytes that recomputed intermediates may
  ///        keep on the device (§V-D's LRU improvement); empty: none, pure
  ///        memory-centric recomputation.
  /// \param due_first issue the swap-ins in the order they are due: the
  ///        h2d stream runs them in issue order, so before a swap-in due at
  ///        step q, those due before q whose own prefetch step comes later
  ///        are issued too (see issue_due_before).
  /// \param state_stays state that Algo 2 swaps out after its last use with
  ///        no time left to bring it back stays in host memory between
  ///        iterations, swapped in as the iteration starts (stays_in_host);
  ///        else its swap-in follows the last op.
  emitter(const problem& p, std::span<const eviction> evictions, std::span<const split_choice> splits,
          std::string planner, bytes_t budget, const std::vector<std::uint8_t>& free_dead,
          std::span<const bytes_t> room = {}, bool due_first = false, bool state_stays = false)
      : p_(&p), evictions_(evictions), free_dead_(&free_dead), room_(room), due_first_(due_first),
        state_stays_(state_stays),
        b_(p, std::move(planner), budget),
        where_(p.num_tensors(), residence::device), has_host_(p.num_tensors(), 0), held_parts_(p.num_tensors(), 1),
        host_parts_(p.num_tensors(), 1), split_at_(p.num_steps(), no_index),
        read_dead_(p.num_tensors(), 0), tensor_stamp_(p.num_tensors(), 0), step_stamp_(p.num_steps(), 0),
        last_reader_(p.num_tensors(), 0), kept_until_(p.num_tensors(), no_index),
        last_read_(p.num_tensors(), 0), read_at_(room.empty() ? 0 : p.num_steps()), evict_after_(p.num_steps() + 1), prefetch_at_(p.num_steps() + 1) {
    for (std::size_t k = splits.size(); k-- > 0;) split_at_[static_cast<std::size_t>(splits[k].step)] = static_cast<index_t>(k);
    splits_ = splits;
    std::vector<index_t> offloaded;
    std::vector<std::uint8_t> leaves_at_start(p.num_tensors(), 0);
    for (std::size_t e = 0; e < evictions.size(); ++e) {
      const eviction& ev = evictions[e];
      // Offloaded state starts in host memory: no swap-out at the start.
      const bool from_host = ev.offload && ev.from == no_index;
      const bool could_stay = stays_in_host(ev);
      if (could_stay) ++could_stay_;
      const bool stays = could_stay && state_stays_;
      if (from_host || stays) offloaded.push_back(ev.tensor);
      if (ev.from == no_index) leaves_at_start[static_cast<std::size_t>(ev.tensor)] = 1;
      if (stays) start_in_.push_back(ev.tensor);
      if (ev.parts == 1 && !from_host) {
        // from = no_index: the tensor has no producer and leaves at the start.
        evict_after_[static_cast<std::size_t>(ev.from + 1)].push_back(static_cast<index_t>(e));
      }
      // An offloaded state's last gap has no swap-in. Other state swapped
      // out after its last use is back by the end (plan.hpp); where Eq. 3
      // finds no idle link before the end (prefetch = the step count), a
      // parameter or optimizer state without a producer stays in host
      // memory instead (stays_in_host), and any other tensor's swap-in
      // starts after the last op, as Algo 2 charged it.
      const bool at_end = static_cast<std::size_t>(ev.prefetch) >= p.num_steps();
      if (ev.how == option::swap && !(at_end && (ev.offload || stays))) {
        prefetch_at_[static_cast<std::size_t>(ev.prefetch)].push_back(static_cast<index_t>(e));
        if (due_first) due_.insert({ev.to, static_cast<index_t>(e)});
      }
    }
    // State that stays in host memory is swapped in as the iteration
    // starts, unless an eviction at the start already brings it in later.
    std::erase_if(start_in_, [&](index_t t) { return leaves_at_start[static_cast<std::size_t>(t)] != 0; });
    std::ranges::sort(start_in_, {}, [&](index_t t) { return p.uses(t).front(); });  // the h2d stream runs them in order
    std::ranges::sort(offloaded);
    offloaded.erase(std::ranges::unique(offloaded).begin(), offloaded.end());
    for (const index_t t : offloaded) {
      b_.offload(t);
      where_[static_cast<std::size_t>(t)] = residence::host;
      has_host_[static_cast<std::size_t>(t)] = 1;
    }
  }

  /// Emits every step in schedule order.
  void run() {
    const problem& p = *p_;
    leave(0);
    for (const index_t t : start_in_) bring_back(t, no_index);
    for (std::size_t si = 0; si < p.num_steps(); ++si) {
      const auto s = static_cast<index_t>(si);
      keep_within(s);
      prefetch(s);
      bring_inputs(s);
      keep_within(s);
      if (split_at_[si] == no_index) {
        last_compute_ = b_.compute(s);
      } else {
        run_split(static_cast<std::size_t>(split_at_[si]));
      }
      for (const auto& list : {p.inputs(s), p.outputs(s)}) {
        for (const index_t x : list) {
          const auto xi = static_cast<std::size_t>(x);
          if (p.persistent(x) || p.live_end(x) != s || where_[xi] != residence::device) continue;
          if ((*free_dead_)[xi]) {
            release(x, false);
            where_[xi] = residence::freed;
          } else {
            where_[xi] = residence::dead;
          }
        }
      }
      leave(si + 1);
    }
    prefetch(static_cast<index_t>(p.num_steps()));  // state that is due at the end
  }

  /// State tensors that stay in host memory with `state_stays` (stays_in_host),
  /// whether or not it is set: 0 means the flag changes nothing.
  [[nodiscard]] std::size_t could_stay() const noexcept { return could_stay_; }
  /// Swap-ins issued before their prefetch step because they are due
  /// earlier than one issued there (`due_first`).
  [[nodiscard]] std::size_t issued_early() const noexcept { return issued_early_; }
  /// Reads of kept intermediates, by a recomputation or by the schedule,
  /// each one recomputation spared (§V-D's LRU improvement).
  [[nodiscard]] std::size_t kept_reads() const noexcept { return kept_reads_; }
  /// Tensors a recomputation read after their last use in the schedule.
  [[nodiscard]] const std::vector<std::uint8_t>& read_dead() const noexcept { return read_dead_; }
  [[nodiscard]] plan finish() && { return std::move(b_).finish(); }

 private:
  enum class residence : std::uint8_t { device, freed, host, dead };

  /// Algo 2 swaps state out after its last use, and Eq. 3 finds no idle
  /// h2d link to bring it back before the end (prefetch = the step count),
  /// so the swap-in would follow the last op, the iteration waiting for it.
  /// A parameter or optimizer state without a producer may rather stay in
  /// host memory between iterations (plan::offloaded_state, TSPLIT Table
  /// V's parameter scale): saved after its update as planned, and swapped
  /// in as the next iteration starts, where Algo 2 had it on the device
  /// anyway: the copy overlaps the ops before its first use, but takes the
  /// h2d link from swap-ins planned there. tsplit.hpp simulates both ways.
  /// (Eq. 3's latest start before the first use, tried too, stalled more.)
  [[nodiscard]] bool stays_in_host(const eviction& ev) const {
    const problem& p = *p_;
    const auto ti = static_cast<std::size_t>(ev.tensor);
    return !ev.offload && ev.how == option::swap && ev.parts == 1 && p.persistent(ev.tensor) &&
           p.producer[ti] == no_index && static_cast<std::size_t>(ev.to) >= p.num_steps() &&
           static_cast<std::size_t>(ev.prefetch) >= p.num_steps();
  }

  /// The swap-ins whose prefetch step is s, triggered by its start (the
  /// end of the compute before it); s = the step count: the end.
  void prefetch(index_t s) {
    for (const index_t e : prefetch_at_[static_cast<std::size_t>(s)]) {
      const eviction& ev = evictions_[static_cast<std::size_t>(e)];
      if (where_[static_cast<std::size_t>(ev.tensor)] != residence::host) continue;  // a recomputation made it
      if (due_first_) issue_due_before(ev, e, s);
      bring_back(ev.tensor, last_compute_);  // in-trigger: the start of step p
    }
  }
  /// The evictions of slot k of evict_after_ (after step k - 1; 0: at the start).
  void leave(std::size_t k) {
    for (const index_t e : evict_after_[k]) {
      const eviction& ev = evictions_[static_cast<std::size_t>(e)];
      const auto ti = static_cast<std::size_t>(ev.tensor);
      if (where_[ti] != residence::device) continue;
      b_.decide(ev.tensor, ev.how == option::swap ? decision::swap : decision::recompute);
      // Offloaded state that no update writes keeps its host copy.
      release(ev.tensor, ev.how == option::swap && !(ev.offload && !updated(*p_, ev.tensor)));
    }
  }
  /// Swaps t out (`save`) or frees it, whole or micro-tensor by micro-tensor.
  void release(index_t t, bool save) {
    const auto ti = static_cast<std::size_t>(t);
    if (kept_until_[ti] != no_index) unkeep(t);  // an eviction's gap starts while it is kept
    const index_t parts = held_parts_[ti];
    for (index_t k = 0; k < parts; ++k) {
      if (parts == 1) {
        save ? b_.swap_out(t) : b_.free(t);
      } else {
        save ? b_.swap_out(t, parts, k) : b_.free(t, parts, k);
      }
    }
    if (save) {
      has_host_[ti] = 1;
      host_parts_[ti] = parts;
    }
    where_[ti] = has_host_[ti] ? residence::host : residence::freed;
  }
  /// Before eviction `e`'s swap-in, issued as step s starts: the swap-ins
  /// due before it (earlier `to`) that are on the host now and planned
  /// for a later step. Eq. 3 gives each swap-in the link's idle time from
  /// its own prefetch step on, op by op, so a small one planned inside a
  /// large one's window fits there in Algo 2's model; the stream runs them
  /// in issue order, and the small one would wait for the large one.
  /// Issued first, it holds its memory from now.
  void issue_due_before(const eviction& ev, index_t e, index_t s) {
    due_.erase({ev.to, e});
    for (auto it = due_.lower_bound({s + 1, index_t{0}}); it != due_.end() && it->first < ev.to;) {
      const eviction& d = evictions_[static_cast<std::size_t>(it->second)];
      if (d.from >= s) {  // its gap has not started
        ++it;
        continue;
      }
      if (where_[static_cast<std::size_t>(d.tensor)] == residence::host) {
        bring_back(d.tensor, last_compute_);
        ++issued_early_;
      }
      it = due_.erase(it);
    }
  }
  /// Swaps t in, as it was saved; `trigger`: an action to start after.
  void bring_back(index_t t, index_t trigger) {
    const auto ti = static_cast<std::size_t>(t);
    const std::span<const index_t> after = trigger == no_index ? std::span<const index_t>{} : std::span(&trigger, 1);
    const index_t parts = host_parts_[ti];
    for (index_t k = 0; k < parts; ++k) {
      if (parts == 1) {
        b_.swap_in(t, after);
      } else {
        b_.swap_in(t, parts, k, after);
      }
    }
    held_parts_[ti] = parts;
    where_[ti] = residence::device;
  }
  /// TSPLIT Fig. 8: the micro-ops of a split op (splits_ from `first` on,
  /// all of its step); micro-tensor k of each chosen input leaves after
  /// micro-op k.
  void run_split(std::size_t first) {
    const problem& p = *p_;
    const index_t step = splits_[first].step;
    const index_t parts = splits_[first].parts;
    std::size_t last = first;
    while (last < splits_.size() && splits_[last].step == step) ++last;
    for (index_t k = 0; k < parts; ++k) {
      last_compute_ = b_.compute(step, parts, k);
      for (std::size_t c = first; c < last; ++c) {
        const index_t t = splits_[c].tensor;
        // Micro-tensors of another parts count cannot go one by one.
        const index_t held = held_parts_[static_cast<std::size_t>(t)];
        if (held != 1 && held != parts) continue;
        if (saves(c)) {
          b_.swap_out(t, parts, k);
        } else {
          b_.free(t, parts, k);
        }
      }
    }
    for (const index_t o : p.outputs(step)) {
      if (splits_with_batch(p.kind[static_cast<std::size_t>(o)])) held_parts_[static_cast<std::size_t>(o)] = parts;
    }
    for (std::size_t c = first; c < last; ++c) {
      const index_t t = splits_[c].tensor;
      const auto ti = static_cast<std::size_t>(t);
      b_.decide(t, decision::split);
      if (held_parts_[ti] != 1 && held_parts_[ti] != parts) {
        if (!splits_[c].dead) release(t, saves(c));
        continue;
      }
      if (saves(c)) {
        has_host_[ti] = 1;
        host_parts_[ti] = parts;
      }
      held_parts_[ti] = parts;
      where_[ti] = saves(c) ? residence::host : residence::freed;
    }
  }
  /// Whether split choice c swaps its input's micro-tensors out (else frees them).
  [[nodiscard]] bool saves(std::size_t c) const {
    const index_t e = splits_[c].eviction;
    return e != no_index && evictions_[static_cast<std::size_t>(e)].how == option::swap;
  }

  /// How an input of a recomputation gets onto the device.
  enum class need : std::uint8_t { nothing, swap_in, recompute };

  need classify(index_t x) {
    const problem& p = *p_;
    const auto xi = static_cast<std::size_t>(x);
    switch (where_[xi]) {
      case residence::device:
        if (kept_until_[xi] != no_index) touch(x);
        return need::nothing;
      case residence::host: return need::swap_in;
      case residence::freed: {
        // Freed for a recomputation to bring back; a tensor no op may make
        // again (an input freed by a split of its last reader, whose
        // recomputation a later one needs) cannot come back: the plan then
        // reads it off the device, and the simulator rejects it.
        const index_t made = p.producer[xi];
        return made == no_index || !p.recomputable[static_cast<std::size_t>(made)] ? need::nothing
                                                                                    : need::recompute;
      }
      case residence::dead: {
        // Dead by the schedule but still on the device unless freed: a
        // recomputable one is freed after its last use instead (second pass).
        const index_t made = p.producer[xi];
        if (made == no_index || !p.recomputable[static_cast<std::size_t>(made)]) return need::nothing;
        read_dead_[xi] = 1;
        return need::recompute;
      }
    }
    return need::nothing;
  }

  /// Adds to `seq_` what brings x back, inputs first (iterative post-order).
  void visit(index_t x) {
    const problem& p = *p_;
    const need n = classify(x);
    if (n == need::swap_in) {
      if (tensor_stamp_[static_cast<std::size_t>(x)] != stamp_) {
        tensor_stamp_[static_cast<std::size_t>(x)] = stamp_;
        seq_.push_back(-x - 1);
      }
      return;
    }
    if (n == need::nothing) return;
    const index_t root = p.producer[static_cast<std::size_t>(x)];
    if (step_stamp_[static_cast<std::size_t>(root)] == stamp_) return;
    step_stamp_[static_cast<std::size_t>(root)] = stamp_;
    frames_.push_back({root, 0});
    while (!frames_.empty()) {
      frame& f = frames_.back();
      const auto ins = p.inputs(f.step);
      if (f.next == ins.size()) {
        seq_.push_back(f.step);
        frames_.pop_back();
        continue;
      }
      const index_t y = ins[f.next++];
      const need ny = classify(y);
      if (ny == need::swap_in) {
        if (tensor_stamp_[static_cast<std::size_t>(y)] != stamp_) {
          tensor_stamp_[static_cast<std::size_t>(y)] = stamp_;
          seq_.push_back(-y - 1);
        }
      } else if (ny == need::recompute) {
        const index_t r = p.producer[static_cast<std::size_t>(y)];
        if (step_stamp_[static_cast<std::size_t>(r)] != stamp_) {
          step_stamp_[static_cast<std::size_t>(r)] = stamp_;
          frames_.push_back({r, 0});
        }
      }
    }
  }

  /// Brings the inputs of step s onto the device, memory-centric.
  void bring_inputs(index_t s) {
    const problem& p = *p_;
    ++stamp_;
    now_ = s;
    seq_.clear();
    for (const index_t t : p.inputs(s)) visit(t);
    if (seq_.empty()) return;
    // Intermediates: what the sequence makes; each is last read by ...
    for (std::size_t k = 0; k < seq_.size(); ++k) {
      if (seq_[k] < 0) {
        last_reader_[static_cast<std::size_t>(-seq_[k] - 1)] = k;
        continue;
      }
      for (const index_t o : p.outputs(seq_[k])) {
        if (where_[static_cast<std::size_t>(o)] == residence::device) continue;
        tensor_stamp_[static_cast<std::size_t>(o)] = stamp_;
        last_reader_[static_cast<std::size_t>(o)] = k;
      }
    }
    for (std::size_t k = 0; k < seq_.size(); ++k) {
      if (seq_[k] < 0) continue;
      for (const index_t x : p.inputs(seq_[k])) {
        if (tensor_stamp_[static_cast<std::size_t>(x)] == stamp_) last_reader_[static_cast<std::size_t>(x)] = k;
      }
    }
    for (const index_t t : p.inputs(s)) tensor_stamp_[static_cast<std::size_t>(t)] = 0;  // kept for step s
    for (std::size_t k = 0; k < seq_.size(); ++k) {
      if (seq_[k] < 0) {
        const index_t t = -seq_[k] - 1;
        bring_back(t, no_index);
        drop(t, k);
        continue;
      }
      const index_t r = seq_[k];
      last_compute_ = b_.recompute(r);
      for (const index_t o : p.outputs(r)) {
        const auto oi = static_cast<std::size_t>(o);
        // A dead one is still there (plan.hpp): the recompute leaves it as it is.
        if (where_[oi] == residence::freed || where_[oi] == residence::host) held_parts_[oi] = 1;
        where_[oi] = residence::device;
      }
      for (const index_t x : p.inputs(r)) drop(x, k);
      for (const index_t o : p.outputs(r)) drop(o, k);
    }
  }
  /// Frees intermediate x if entry k of the sequence is its last reader,
  /// or keeps it until the schedule's next read of it (§V-D, LRU) if there
  /// is room for it: a recomputed one, or a checkpoint swapped in on demand
  /// (its host copy stays valid, so abandoning it is a free, and keeping it
  /// spares the h2d stream a transfer for each later read).
  void drop(index_t x, std::size_t k) {
    const auto xi = static_cast<std::size_t>(x);
    if (tensor_stamp_[xi] != stamp_ || last_reader_[xi] != k || where_[xi] != residence::device) return;
    const problem& p = *p_;
    const auto uses = p.uses(x);
    const auto next = std::upper_bound(uses.begin(), uses.end(), now_);
    // The kept ones fit the room at this step too, not only from the next
    // (a chain run once would keep all its intermediates through the step).
    // Older ones are not abandoned for it here: this step's recomputations
    // may still read them.
    if (room_.empty() || held_parts_[xi] != 1 || next == uses.end() ||
        kept_bytes_ + p.bytes[xi] > room_[static_cast<std::size_t>(now_)]) {
      release(x, false);
      return;
    }
    kept_until_[xi] = *next;
    read_at_[static_cast<std::size_t>(*next)].push_back(x);
    kept_bytes_ += p.bytes[xi];
    last_read_[xi] = ++clock_;
    lru_.insert({clock_, x});
  }
  /// A kept intermediate read again: it becomes the most recently used.
  void touch(index_t x) {
    const auto xi = static_cast<std::size_t>(x);
    lru_.erase({last_read_[xi], x});
    last_read_[xi] = ++clock_;
    lru_.insert({clock_, x});
    ++kept_reads_;
  }
  /// Before step s and before its compute: the kept intermediates the
  /// schedule reads at s are Algo 2's again (its model counts them from
  /// there); the others must fit room_[s], least recently used freed first.
  void keep_within(index_t s) {
    if (room_.empty()) return;
    for (const index_t x : read_at_[static_cast<std::size_t>(s)]) {
      const auto xi = static_cast<std::size_t>(x);
      if (kept_until_[xi] != s) continue;  // abandoned since (and maybe kept again for s: listed twice)
      unkeep(x);
      ++kept_reads_;
    }
    while (kept_bytes_ > room_[static_cast<std::size_t>(s)]) release(lru_.begin()->second, false);
  }
  /// Ends the keeping of intermediate x.
  void unkeep(index_t x) {
    const auto xi = static_cast<std::size_t>(x);
    lru_.erase({last_read_[xi], x});
    kept_until_[xi] = no_index;
    kept_bytes_ -= p_->bytes[xi];
  }

  struct frame {
    index_t step;
    std::size_t next;
  };

  const problem* p_;
  std::span<const eviction> evictions_;
  const std::vector<std::uint8_t>* free_dead_;
  std::span<const bytes_t> room_;
  bool due_first_;
  bool state_stays_;
  std::set<std::pair<index_t, index_t>> due_;  ///< with due_first_: (to, eviction) of swaps not yet swapped in
  std::size_t issued_early_ = 0;
  plan_builder b_;
  std::vector<residence> where_;
  std::vector<std::uint8_t> has_host_;  ///< a swap-out saved it; the host copy stays valid
  std::vector<index_t> held_parts_;     ///< per tensor: micro-tensors its device copy is in (1: whole)
  std::vector<index_t> host_parts_;     ///< per tensor: micro-tensors its host copy is in
  std::vector<index_t> split_at_;       ///< per step: into splits_, or no_index
  std::span<const split_choice> splits_;
  std::vector<std::uint8_t> read_dead_;
  std::vector<std::uint32_t> tensor_stamp_;
  std::vector<std::uint32_t> step_stamp_;
  std::uint32_t stamp_ = 0;
  std::vector<std::size_t> last_reader_;
  std::vector<index_t> kept_until_;  ///< per kept intermediate: the schedule's next read of it
  std::vector<std::uint64_t> last_read_;  ///< per kept intermediate: when it was last read (clock_)
  std::set<std::pair<std::uint64_t, index_t>> lru_;  ///< the kept intermediates, least recently read first
  std::vector<std::vector<index_t>> read_at_;  ///< per step: intermediates kept until it reads them
  std::uint64_t clock_ = 0;
  index_t now_ = 0;  ///< the step whose inputs are being brought
  bytes_t kept_bytes_ = 0;
  std::size_t kept_reads_ = 0;
  std::vector<index_t> seq_;  ///< step to recompute, or -t-1: swap t in
  std::vector<frame> frames_;
  std::vector<std::vector<index_t>> evict_after_;  ///< per step + 1: evictions leaving after it
  std::vector<std::vector<index_t>> prefetch_at_;  ///< per step, and the end: swap-ins issued as it starts
  std::vector<index_t> start_in_;  ///< state that stays in host memory, swapped in as the iteration starts
  std::size_t could_stay_ = 0;
  index_t last_compute_ = no_index;
};

}  // namespace memplan::detail::tsplit
