#pragma once
/// \file
/// Multi-GPU machines and what their collectives cost (DESIGN.md §7a): a
/// cluster is nodes of identical GPUs, linked by NVLink within a node and by
/// one network card per GPU between nodes. Collectives are NCCL's ring
/// algorithms, priced by the alpha-beta model with the link's sustained bus
/// bandwidth (what nccl-tests reports as busbw, so a ring's time is
/// steps x (latency + chunk / bandwidth)). docs/devices.md lists the sources.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memplan/cost/device.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/error.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

/// The collectives and transfers a rank's graph may hold, by op type
/// (graph/vocabulary.hpp's `communication_types`).
enum class collective : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, send_recv };

/// Nodes of identical GPUs: within a node every pair talks over NVLink (an
/// NVSwitch), between nodes through each GPU's own network card, which hangs
/// off the same PCIe switch as the GPU: inter-node traffic crosses the GPU's
/// host link, which swaps use too.
struct cluster_spec {
  std::string name;       ///< as the CLI names it ("a100-node", "dgx-h100")
  std::string gpu;        ///< the GPU's device name (cost/devices.hpp)
  int gpus_per_node = 8;  ///< GPUs one NVLink domain joins
  link_spec nvlink;       ///< per GPU within a node: ring bus bandwidth and per-step latency
  link_spec network;      ///< per GPU between nodes: its network card
};

namespace detail {

inline const std::array<cluster_spec, 2>& cluster_table() {
  // NVLink: nccl-tests' all_reduce busbw at large sizes on 8 GPUs (A100 SXM4,
  // NVLink 3: 230 of 300 GB/s per direction; H100 SXM5, NVLink 4: 460 of
  // 450 GB/s with NVLS in-switch reduction, taken as 450). Network: one
  // HDR (200 Gb/s = 25 GB/s) or NDR (400 Gb/s = 50 GB/s) card per GPU at
  // 92 % sustained. Latency per ring step: ~2 µs over NVLink, ~5 µs over
  // InfiniBand (NCCL's small-message all-reduce times).
  static const std::array<cluster_spec, 2> table{
      cluster_spec{"a100-node", "a100", 8, {230.0, 2.0}, {23.0, 5.0}},
      cluster_spec{"dgx-h100", "h100", 8, {450.0, 2.0}, {46.0, 5.0}},
  };
  return table;
}

}  // namespace detail

/// Every named cluster, in a fixed order.
[[nodiscard]] inline std::span<const cluster_spec> clusters() { return detail::cluster_table(); }

/// The cluster named `name` ("a100-node", "dgx-h100").
/// \throws invalid_argument naming it and listing the known ones.
[[nodiscard]] inline const cluster_spec& find_cluster(std::string_view name) {
  return detail::find_named(clusters(), name, "cluster");
}

/// A group of `ranks` GPUs of cluster `c`, packed onto as few nodes as they fit.
struct rank_group {
  const cluster_spec* cluster = nullptr;  ///< the machines
  int ranks = 1;                          ///< how many GPUs, >= 1

  /// The group spans more than one node.
  [[nodiscard]] bool crosses_nodes() const noexcept { return ranks > cluster->gpus_per_node; }
  /// The ring's slowest link: NVLink within a node, else the network card.
  [[nodiscard]] const link_spec& ring_link() const noexcept {
    return crosses_nodes() ? cluster->network : cluster->nvlink;
  }
  /// The device one rank plans for: the cluster's GPU, its collectives
  /// sharing the host link when the group spans nodes (device_spec).
  [[nodiscard]] device_spec rank_device() const {
    device_spec d = find_device(cluster->gpu);
    d.collectives_share_host_link = crosses_nodes();
    return d;
  }
};

/// µs that collective `k` of `bytes` takes on `g` (NCCL ring algorithms;
/// `bytes` is the whole buffer: the reduced one, the gathered output, the
/// scattered input, the message):
/// - all-reduce: 2(n-1) steps of bytes/n each (reduce-scatter, then all-gather);
/// - all-gather, reduce-scatter: n-1 steps of bytes/n;
/// - broadcast: pipelined along the ring, (n-1) latencies and bytes once;
/// - send/receive between two ranks: one latency and bytes once.
/// One rank communicates nothing and takes no time.
[[nodiscard]] inline double collective_us(const rank_group& g, collective k, bytes_t bytes) {
  MEMPLAN_EXPECTS(g.ranks >= 1, invalid_argument, "collective: the group needs at least 1 rank, got ", g.ranks);
  MEMPLAN_EXPECTS(bytes >= 0, invalid_argument, "collective: bytes must be non-negative, got ", bytes);
  const link_spec& link = g.ring_link();
  const double n = g.ranks;
  const double chunk_us = static_cast<double>(bytes) / n / (link.bandwidth_gb_s * 1e3);
  const double whole_us = static_cast<double>(bytes) / (link.bandwidth_gb_s * 1e3);
  if (g.ranks == 1 && k != collective::send_recv) return 0;
  switch (k) {
    case collective::all_reduce: return 2 * (n - 1) * (link.latency_us + chunk_us);
    case collective::all_gather:
    case collective::reduce_scatter: return (n - 1) * (link.latency_us + chunk_us);
    case collective::broadcast: return (n - 1) * link.latency_us + whole_us;
    case collective::send_recv: return link.latency_us + whole_us;
  }
  return 0;
}

}  // namespace memplan
