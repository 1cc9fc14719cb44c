#pragma once
/// \file
/// The `memplan::allocator` concept (DESIGN.md §7): what the executor needs
/// of the sub-allocator behind a device's arena and its pinned host pool.
/// Both are one allocation each, made by the backend; the allocator hands
/// out byte offsets inside it and owns no memory. The executor places device
/// buffers at a memory layout's offsets (`allocate_at`) and host copies by
/// first fit (`allocate`), so an allocator must do both.
///
/// `runtime::arena` is the model memplan uses. A framework brings its own to
/// see every block the plan takes (memory statistics, a debugger's map of
/// the arena) or to keep its own bookkeeping of the bytes; the host device
/// takes it as a template argument (`host::basic_device<A>`).

#include <concepts>
#include <optional>

#include "memplan/fwd.hpp"

namespace memplan {

/// An offset allocator over a fixed capacity.
///
/// - `A::footprint(n)`: the bytes a block of `n` takes (its rounding);
/// - `allocate(n)`: the offset of a fresh block of `n` bytes, or nothing if
///   no free range can hold it;
/// - `allocate_at(offset, extent)`: takes exactly those bytes, or answers
///   false taking nothing if any of them is in use or past the capacity;
/// - `deallocate(offset, n)`: gives back a block `allocate(n)` made;
/// - `deallocate_extent(offset, extent)`: gives back bytes `allocate_at`
///   took, or any sub-range of them not given back yet;
/// - `clear()`: forgets every block at once (compaction starts with it);
/// - `capacity()`, `in_use()` (footprints), `peak()` (the most in use at once).
template <class A>
concept allocator = requires(A& a, const A& ca, bytes_t n, bytes_t offset) {
  { A::footprint(n) } -> std::same_as<bytes_t>;
  { a.allocate(n) } -> std::same_as<std::optional<bytes_t>>;
  { a.allocate_at(offset, n) } -> std::same_as<bool>;
  a.deallocate(offset, n);
  a.deallocate_extent(offset, n);
  a.clear();
  { ca.capacity() } -> std::same_as<bytes_t>;
  { ca.in_use() } -> std::same_as<bytes_t>;
  { ca.peak() } -> std::same_as<bytes_t>;
};

}  // namespace memplan
