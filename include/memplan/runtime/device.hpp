#pragma once
/// \file
/// The `memplan::device` concept (DESIGN.md §7): what the executor needs of
/// a backend. Streams run work in issue order; events mark a point in a
/// stream (record), make another stream wait for it (wait), and tell the
/// host whether it has passed (query, synchronize); one device arena and one
/// pinned host pool, each a single allocation sub-allocated by the device's
/// `allocator_type` (a `memplan::allocator`: `runtime::arena`, or one the
/// framework brings); asynchronous copies each way.
///
/// Models: `host::basic_device<A>` (threads as streams; CI runs it;
/// `host::device` takes `runtime::arena`) and
/// `cuda::device` (include/memplan/cuda/, only with MEMPLAN_ENABLE_CUDA).
///
/// Work is issued with `launch(s, f)`: `f(view)` issues work on stream `s`,
/// where `view` is the non-owning `stream_view` of `s`. A CUDA backend calls
/// `f` at once and `f` enqueues kernels and copies on the view; the host
/// backend calls `f` on the stream's thread when its turn comes, so `f`'s
/// work happens then. Either way `copy(dst, src, n, kind, view)` inside `f`
/// is ordered on the stream, and code written against a view runs on both.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memplan/runtime/allocator.hpp"

namespace memplan {

/// Direction of a copy.
enum class copy_kind : std::uint8_t { device_to_host, host_to_device, device_to_device };

/// `k` as the enumerator spells it (for messages and traces).
[[nodiscard]] constexpr std::string_view to_string(copy_kind k) noexcept {
  switch (k) {
    case copy_kind::device_to_host: return "device_to_host";
    case copy_kind::host_to_device: return "host_to_device";
    default: return "device_to_device";
  }
}

namespace detail {
/// A stand-in for the callables `launch` accepts, to state the concept.
template <class View>
struct launch_probe {
  void operator()(View) const noexcept {}
};
}  // namespace detail

/// A backend the executor can run a plan on.
///
/// - `stream`, `event`: move-only owning handles, made by `make_stream()`
///   and `make_event()`; `stream_view`: a copyable non-owning view.
/// - `record(e, s)`: `e` completes once the work issued on `s` so far has
///   ended. `wait(s, e)`: work issued on `s` afterwards starts only once the
///   work `e` last recorded has ended. `query(e)`: whether it has (an event
///   never recorded has). `synchronize(e)`, `synchronize(s)`: block the
///   calling thread until `e` / everything issued on `s` has ended;
///   `synchronize(s)` rethrows a failure the backend met on `s`.
/// - `launch(s, f)`: see the file comment. `copy(dst, src, bytes, kind, view)`.
/// - `allocator_type`: the `memplan::allocator` of both arenas.
///   `arena()` over `device_memory()`: the one device allocation;
///   `pinned()` over `pinned_memory()`: the one pinned host allocation.
///   Offsets from the arenas index these base pointers.
template <class D>
concept device = std::movable<typename D::stream> && std::movable<typename D::event> &&
                 std::copyable<typename D::stream_view> && allocator<typename D::allocator_type> &&
                 requires(D& d, typename D::stream& s, typename D::event& e, const typename D::event& ce,
                          typename D::stream_view v, void* dst, const void* src, std::size_t n, copy_kind k) {
                   { d.make_stream() } -> std::same_as<typename D::stream>;
                   { d.make_event() } -> std::same_as<typename D::event>;
                   d.record(e, s);
                   d.wait(s, ce);
                   { d.query(ce) } -> std::same_as<bool>;
                   d.synchronize(ce);
                   d.synchronize(s);
                   d.launch(s, detail::launch_probe<typename D::stream_view>{});
                   d.copy(dst, src, n, k, v);
                   { d.arena() } -> std::same_as<typename D::allocator_type&>;
                   { d.device_memory() } -> std::same_as<std::byte*>;
                   { d.pinned() } -> std::same_as<typename D::allocator_type&>;
                   { d.pinned_memory() } -> std::same_as<std::byte*>;
                 };

}  // namespace memplan
