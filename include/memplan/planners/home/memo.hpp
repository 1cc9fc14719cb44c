#pragma once
/// \file
/// The fitnesses of the placements HOME's search has simulated, shared by
/// its threads (issue 29): a swarm that converges proposes the same
/// placements again and again. Exact: an entry is found only under its
/// whole placement (two bits a feature map), compared in full on every hit,
/// and nothing is evicted until the table reaches its size limit, when it
/// starts again empty. So the search simulates each placement once, and
/// every answer is the one a simulation gives.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "memplan/planners/home/fitness.hpp"

namespace memplan::detail::home {

/// splitmix64's finaliser (Steele et al. 2014): every output bit depends
/// on every input bit, so a key's hash depends on every feature map.
[[nodiscard]] inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// A placement packed two bits a feature map (map j: bits 2 (j mod 32) of
/// word j / 32), and its hash.
struct placement_key {
  std::vector<std::uint64_t> words;
  std::uint64_t hash = 0;

  void assign(std::span<const placement> x) {
    words.assign((x.size() + 31) / 32, 0);
    for (std::size_t at = 0; at < x.size(); at += 8) {
      words[at / 32] |= pack8(x.subspan(at, std::min<std::size_t>(8, x.size() - at))) << (2 * (at % 32));
    }
    hash = 0;
    for (const std::uint64_t w : words) hash = mix64(hash ^ w);
  }

 private:
  /// Up to eight placements (each below 4), one a byte, into two bits each:
  /// the byte pairs, then the nibble pairs, then the byte pairs of the
  /// 32-bit halves come together.
  [[nodiscard]] static std::uint64_t pack8(std::span<const placement> x) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < x.size(); ++i) v |= static_cast<std::uint64_t>(x[i]) << (8 * i);
    v = (v | v >> 6) & 0x000F000F000F000FULL;
    v = (v | v >> 12) & 0x000000FF000000FFULL;
    return (v | v >> 24) & 0xFFFFULL;
  }
};

/// An open-addressing table (linear probing, at most half full) of the
/// placements of `feature_maps` feature maps and their fitnesses, safe to
/// share between threads.
class placement_memo {
 public:
  /// `max_bytes`: the size at which the table empties and starts again.
  explicit placement_memo(std::size_t feature_maps, std::size_t max_bytes = std::size_t{1} << 30)
      : words_((feature_maps + 31) / 32),
        max_entries_(std::max<std::size_t>(1, max_bytes / (words_ * sizeof(std::uint64_t) + sizeof(fitness) + 24))) {
    clear();
  }

  /// The fitness stored for `key`, if any.
  [[nodiscard]] std::optional<fitness> find(const placement_key& key) const {
    const std::lock_guard hold(lock_);
    const std::size_t s = slot_of(key);
    if (slot_entry_[s] == empty) return std::nullopt;
    return fitness_[slot_entry_[s]];
  }

  /// Stores `f` for `key` (a key stored already keeps its fitness: the same).
  void insert(const placement_key& key, fitness f) {
    const std::lock_guard hold(lock_);
    if (fitness_.size() >= max_entries_) clear();
    const std::size_t s = slot_of(key);
    if (slot_entry_[s] != empty) return;
    slot_hash_[s] = key.hash;
    slot_entry_[s] = static_cast<std::uint32_t>(fitness_.size());
    keys_.insert(keys_.end(), key.words.begin(), key.words.end());
    fitness_.push_back(f);
    if (2 * fitness_.size() > slot_entry_.size()) grow();
  }

  /// Placements stored now.
  [[nodiscard]] std::size_t size() const {
    const std::lock_guard hold(lock_);
    return fitness_.size();
  }

 private:
  static constexpr std::uint32_t empty = 0xFFFFFFFFU;

  /// The slot holding `key`, or the empty slot where it would go.
  [[nodiscard]] std::size_t slot_of(const placement_key& key) const {
    const std::size_t mask = slot_entry_.size() - 1;
    for (std::size_t s = static_cast<std::size_t>(key.hash) & mask;; s = (s + 1) & mask) {
      const std::uint32_t e = slot_entry_[s];
      if (e == empty) return s;
      if (slot_hash_[s] == key.hash &&
          std::ranges::equal(std::span(keys_).subspan(e * words_, words_), key.words)) {
        return s;
      }
    }
  }

  void grow() {
    std::vector<std::uint32_t> entries(2 * slot_entry_.size(), empty);
    std::vector<std::uint64_t> hashes(entries.size());
    const std::size_t mask = entries.size() - 1;
    for (std::size_t old = 0; old < slot_entry_.size(); ++old) {
      if (slot_entry_[old] == empty) continue;
      std::size_t s = static_cast<std::size_t>(slot_hash_[old]) & mask;
      while (entries[s] != empty) s = (s + 1) & mask;
      entries[s] = slot_entry_[old];
      hashes[s] = slot_hash_[old];
    }
    slot_entry_ = std::move(entries);
    slot_hash_ = std::move(hashes);
  }

  void clear() {
    slot_entry_.assign(1024, empty);
    slot_hash_.assign(1024, 0);
    keys_.clear();
    fitness_.clear();
  }

  std::size_t words_;
  std::size_t max_entries_;
  mutable std::mutex lock_;
  std::vector<std::uint32_t> slot_entry_;  ///< per slot, its entry or `empty`
  std::vector<std::uint64_t> slot_hash_;   ///< per slot, its key's hash
  std::vector<std::uint64_t> keys_;        ///< per entry, `words_` words
  std::vector<fitness> fitness_;           ///< per entry
};

}  // namespace memplan::detail::home
