#pragma once
/// \file
/// Reading the operator logs of the DTR prototype (Kirisame et al., ICLR
/// 2021; format in docs/formats.md) into a `memplan::graph` run in log order,
/// as the prototype's simulator reads them (simrd's parser).
///
/// One JSON object per line, every value a string. The log names *handles*;
/// each names a tensor (a storage: views share their argument's), which dies
/// when its last handle goes:
/// - CONSTANT + MEMORY: a tensor without a producer (on the device from the
///   start; DTR's simulator counts one that comes after the first op from
///   where it comes, as `refcount_peak` does: 12 MB of scalars in the
///   Unrolled GAN, bytes elsewhere);
/// - CALL + (MEMORY, ALIAS) per result: an op reading its arguments' tensors;
///   a result with ALIAS -1 is a new tensor it writes, one with ALIAS k a
///   handle on argument k's tensor (a view: no bytes, no tensor);
/// - MUTATE: an op reading its arguments and writing, per mutated argument, a
///   new tensor of the same bytes, which that argument's handle names from
///   then on (the simulator's rule: other handles keep the old tensor);
/// - COPY: one more handle on a tensor; COPY_FROM: a handle names another
///   tensor; RELEASE: a handle goes;
/// - ANNOTATE START: what came before is ignored; BACKWARD: later ops, and
///   ops whose name contains "backward", are backward ops.
/// Every op may be recomputed (DTR's assumption). A tensor still named by a
/// handle at the end is an output of the iteration and must persist: kind
/// `parameter`. Other tensors without a producer are `input`s, the rest
/// `activation`s (forward) or `gradient`s (backward). TIME is in ns.
///
/// memplan frees a tensor after its last reader; the framework holds it
/// until its last handle goes: `tensor_info::released_after` records the op
/// after which that happens, which `dtr` respects. `refcount_peak` is the
/// no-eviction peak under that rule, the base of DTR's budget ratios.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"

namespace memplan::io {

/// A DTR log read as a graph.
struct dtr_log {
  memplan::graph graph;        ///< the ops (CALL, MUTATE) and their tensors (storages)
  memplan::schedule schedule;  ///< log order
  bytes_t refcount_peak = 0;   ///< no-eviction peak as DTR's simulator counts it
};

namespace detail {

class dtr_log_reader {
 public:
  explicit dtr_log_reader(std::string name) : name_(std::move(name)) {}

  void line(std::string_view text) {
    ++line_;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("not JSON: ", e.what());
    }
    if (!j.is_object()) fail("not a JSON object");
    const std::string what = field(j, "INSTRUCTION");
    if (what == "ANNOTATE") {
      annotate(field(j, "ANNOTATION"));
      return;
    }
    if (what == "MEMORY" || what == "ALIAS") {
      result_line(j, what);
      return;
    }
    finish_call();
    if (what == "CONSTANT") {
      constant(field(j, "NAME"));
    } else if (what == "CALL") {
      call(j);
    } else if (what == "MUTATE") {
      mutate(j);
    } else if (what == "COPY") {
      bind(field(j, "DST"), tensor_of(field(j, "SRC")));
    } else if (what == "COPY_FROM") {
      rebind(field(j, "DST"), tensor_of(field(j, "SRC")));
    } else if (what == "RELEASE") {
      drop(field(j, "NAME"));
    } else {
      fail("unknown INSTRUCTION '", what, "'");
    }
  }

  dtr_log finish() && {
    finish_call();
    MEMPLAN_EXPECTS(pending_.empty(), invalid_graph, where(), "the log ends before the MEMORY of '",
                    pending_.empty() ? std::string() : pending_.front(), "'");
    for (const auto& [h, t] : handles_) tensors_[static_cast<std::size_t>(t)].kind = tensor_kind::parameter;
    dtr_log log;
    log.graph.set_name(name_);
    for (auto& t : tensors_) log.graph.add_tensor(std::move(t));
    for (auto& o : ops_) {
      log.schedule.push_back(log.graph.add_op(std::move(o)));
    }
    log.refcount_peak = peak_;
    return log;
  }

 private:
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw invalid_graph(memplan::detail::concat(where(), parts...));
  }
  [[nodiscard]] std::string where() const { return memplan::detail::concat("DTR log '", name_, "' line ", line_, ": "); }

  std::string field(const nlohmann::json& j, const char* key) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) fail("missing string field '", key, "'");
    return it->get<std::string>();
  }
  std::int64_t number(const nlohmann::json& j, const char* key, std::int64_t lo) const {
    const std::string text = field(j, key);
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() || v < lo) fail("field '", key, "' must be an integer >= ", lo, ", got '", text, "'");
    return v;
  }
  /// The tensor a handle names.
  [[nodiscard]] index_t tensor_of(const std::string& handle) const {
    const auto it = handles_.find(handle);
    if (it == handles_.end()) fail("handle '", handle, "' is not defined (or was released)");
    return it->second;
  }

  void annotate(const std::string& what) {
    if (what == "START") {  // the measured iteration starts: forget the warm-up
      std::string name = name_;
      *this = dtr_log_reader(std::move(name), line_);
    } else if (what == "BACKWARD") {
      backward_ = true;
    }
  }
  dtr_log_reader(std::string name, std::int64_t line) : name_(std::move(name)), line_(line) {}

  /// A new tensor (storage) of `bytes`, counted from now on.
  index_t new_tensor(const std::string& name, bytes_t bytes, tensor_kind kind) {
    tensors_.push_back({.id = static_cast<std::int64_t>(tensors_.size()), .name = name, .bytes = bytes, .kind = kind,
                        .shape = {}, .dtype = {}, .released_after = no_index});
    refs_.push_back(0);
    used_ += bytes;
    peak_ = std::max(peak_, used_);
    return static_cast<index_t>(tensors_.size() - 1);
  }
  void bind(const std::string& handle, index_t t) {
    if (handles_.contains(handle)) fail("handle '", handle, "' is defined twice");
    handles_.emplace(handle, t);
    ++refs_[static_cast<std::size_t>(t)];
  }
  /// One handle fewer on t: without handles it is dead after the latest op.
  void unref(index_t t) {
    if (--refs_[static_cast<std::size_t>(t)] > 0) return;
    tensor_info& info = tensors_[static_cast<std::size_t>(t)];
    used_ -= info.bytes;
    if (!ops_.empty()) info.released_after = static_cast<index_t>(ops_.size() - 1);
  }
  /// `handle` names t from now on (COPY_FROM; a new handle if undefined).
  void rebind(const std::string& handle, index_t t) {
    const auto it = handles_.find(handle);
    if (it == handles_.end()) return bind(handle, t);
    const index_t old = it->second;
    it->second = t;
    ++refs_[static_cast<std::size_t>(t)];
    unref(old);
  }
  void drop(const std::string& handle) {
    const index_t t = tensor_of(handle);
    handles_.erase(handle);
    unref(t);
  }

  void constant(const std::string& handle) {
    if (handles_.contains(handle)) fail("handle '", handle, "' is defined twice");
    pending_.push_back(handle);
    pending_constant_ = true;
  }
  [[nodiscard]] phase phase_of(const std::string& op) const {
    return backward_ || op.find("backward") != std::string::npos ? phase::backward : phase::forward;
  }
  [[nodiscard]] tensor_kind made_kind(phase ph) const {
    return ph == phase::backward ? tensor_kind::gradient : tensor_kind::activation;
  }
  op_info new_op(const nlohmann::json& j) {
    const std::string name = field(j, "NAME");
    op_info o{.id = static_cast<std::int64_t>(ops_.size()), .name = memplan::detail::concat(name, ".", ops_.size()),
              .type = name, .phase = phase_of(name), .time_us = static_cast<double>(number(j, "TIME", 0)) / 1e3,
              .workspace_bytes = 0, .inputs = {}, .outputs = {}, .recomputable = true, .split_dims = {}};
    const auto args = j.find("ARGS");
    if (args == j.end() || !args->is_array()) fail("missing array field 'ARGS'");
    for (const auto& a : *args) {
      if (!a.is_string()) fail("ARGS must hold handle names");
      arg_names_.push_back(a.get<std::string>());
      const index_t t = tensor_of(arg_names_.back());
      args_.push_back(t);
      if (std::ranges::find(o.inputs, t) == o.inputs.end()) o.inputs.push_back(t);
    }
    return o;
  }
  void call(const nlohmann::json& j) {
    args_.clear();
    arg_names_.clear();
    call_ = new_op(j);
    in_call_ = true;
    const auto results = j.find("RESULT");
    if (results == j.end() || !results->is_array()) fail("missing array field 'RESULT'");
    for (const auto& r : *results) {
      if (!r.is_string()) fail("RESULT must hold handle names");
      pending_.push_back(r.get<std::string>());
    }
  }
  /// DTR's simulator: a new tensor of the same bytes per mutated argument,
  /// which that argument's handle names from now on; the old tensor loses
  /// that handle (other handles still name it).
  void mutate(const nlohmann::json& j) {
    args_.clear();
    arg_names_.clear();
    op_info o = new_op(j);
    const auto which = j.find("MUTATE");
    if (which == j.end() || !which->is_array()) fail("missing array field 'MUTATE'");
    std::vector<std::size_t> mutated;
    for (const auto& m : *which) {
      if (!m.is_number_integer() || m.get<std::int64_t>() < 0 || m.get<std::size_t>() >= args_.size()) {
        fail("MUTATE index ", m.dump(), " is not an argument of the op (", args_.size(), " arguments)");
      }
      const tensor_info& old = tensors_[static_cast<std::size_t>(args_[m.get<std::size_t>()])];
      o.outputs.push_back(new_tensor(memplan::detail::concat(old.name, "'"), old.bytes, made_kind(o.phase)));
      mutated.push_back(m.get<std::size_t>());
    }
    ops_.push_back(std::move(o));
    const op_info& made = ops_.back();
    for (std::size_t k = 0; k < mutated.size(); ++k) {
      drop(arg_names_[mutated[k]]);
      bind(arg_names_[mutated[k]], made.outputs[k]);
    }
  }
  /// MEMORY or ALIAS of the oldest pending result (or constant).
  void result_line(const nlohmann::json& j, const std::string& what) {
    const std::string handle = field(j, "NAME");
    if (pending_.empty() || pending_.front() != handle) {
      fail(what, " for '", handle, "', which is not the pending result of a CONSTANT or CALL");
    }
    if (what == "MEMORY") {
      if (memory_ >= 0) fail("second MEMORY for '", handle, "'");
      memory_ = number(j, "MEMORY", 0);
      if (!pending_constant_) return;  // the ALIAS follows
      bind(handle, new_tensor(handle, memory_, tensor_kind::input));
    } else {
      if (!in_call_) fail("ALIAS for '", handle, "' outside a CALL");
      if (memory_ < 0) fail("ALIAS for '", handle, "' before its MEMORY");
      const std::int64_t alias = number(j, "ALIAS", -1);
      if (alias >= static_cast<std::int64_t>(args_.size())) {
        fail("ALIAS ", alias, " is not an argument of the op (", args_.size(), " arguments)");
      }
      if (alias >= 0) {
        bind(handle, args_[static_cast<std::size_t>(alias)]);
      } else {
        const index_t t = new_tensor(handle, memory_, made_kind(call_.phase));
        call_.outputs.push_back(t);
        bind(handle, t);
      }
    }
    pending_.erase(pending_.begin());
    pending_constant_ = pending_constant_ && !pending_.empty();
    memory_ = -1;
  }
  void finish_call() {
    if (!pending_.empty()) fail("expected the MEMORY/ALIAS of '", pending_.front(), "'");
    if (!in_call_) return;
    ops_.push_back(std::move(call_));
    in_call_ = false;
  }

  std::string name_;
  std::int64_t line_ = 0;
  bool backward_ = false;
  std::vector<tensor_info> tensors_;
  std::vector<op_info> ops_;
  std::vector<std::int64_t> refs_;    ///< per tensor: the handles naming it
  std::unordered_map<std::string, index_t> handles_;
  std::vector<index_t> args_;         ///< tensors of the current op's arguments
  std::vector<std::string> arg_names_;
  std::vector<std::string> pending_;  ///< results (or a constant) awaiting MEMORY/ALIAS
  bool pending_constant_ = false;
  bool in_call_ = false;
  op_info call_;
  std::int64_t memory_ = -1;
  bytes_t used_ = 0;
  bytes_t peak_ = 0;
};

}  // namespace detail

/// Reads a DTR operator log. `name` names the graph and the log in errors.
/// \throws invalid_graph naming the line for a malformed or inconsistent line.
[[nodiscard]] inline dtr_log read_dtr_log(std::istream& in, std::string name) {
  detail::dtr_log_reader reader(std::move(name));
  std::string text;
  while (std::getline(in, text)) reader.line(text);
  return std::move(reader).finish();
}

/// Reads the DTR operator log at `path`.
/// \throws invalid_argument if it cannot be opened; invalid_graph as `read_dtr_log`.
[[nodiscard]] inline dtr_log read_dtr_log_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  MEMPLAN_EXPECTS(in.good(), invalid_argument, "--dtr-log: cannot open '", path.string(), "'");
  return read_dtr_log(in, path.stem().string());
}

}  // namespace memplan::io
