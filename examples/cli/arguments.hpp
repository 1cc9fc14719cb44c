#pragma once
// Command-line parsing for the memplan CLI: `memplan COMMAND [--option value | --flag]...`.
// Each command declares the options it takes; anything else is an error
// that names the option and lists the accepted ones.

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/error.hpp"

namespace memplan::cli {

struct option_spec {
  std::string_view name;   ///< without the leading "--"
  std::string_view value;  ///< what it takes, for the help ("SIZE"); empty: a flag
  std::string_view help;
  bool required = false;
  [[nodiscard]] constexpr bool takes_value() const noexcept { return !value.empty(); }
};

class arguments {
 public:
  arguments(std::string_view command, std::span<const option_spec> accepted, std::span<const char* const> argv)
      : command_(command) {
    for (const char* word : argv) help_ = help_ || std::string_view(word) == "--help";
    if (help_) {  // --help wins over everything else; the planner named, if any, narrows it
      for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
        if (std::string_view(argv[i]) == "--planner") values_["planner"] = argv[i + 1];
      }
      return;
    }
    for (std::size_t i = 0; i < argv.size(); ++i) {
      const std::string_view word = argv[i];
      MEMPLAN_EXPECTS(word.starts_with("--"), invalid_argument, "memplan ", command, ": unexpected argument '", word,
                      "'", see_help(command));
      const std::string_view name = word.substr(2);
      const option_spec* spec = nullptr;
      for (const auto& s : accepted) {
        if (s.name == name) spec = &s;
      }
      MEMPLAN_EXPECTS(spec != nullptr, invalid_argument, "memplan ", command, ": unknown option '", word, "'",
                      see_help(command));
      MEMPLAN_EXPECTS(!values_.contains(std::string(name)), invalid_argument, "memplan ", command, ": option '",
                      word, "' given twice");
      if (spec->takes_value()) {
        MEMPLAN_EXPECTS(i + 1 < argv.size(), invalid_argument, "memplan ", command, ": option '", word,
                        "' needs a value");
        values_[std::string(name)] = argv[++i];
      } else {
        values_[std::string(name)] = "";
      }
    }
  }

  /// Whether `--help` was given (nothing else was checked).
  [[nodiscard]] bool wants_help() const noexcept { return help_; }
  /// \throws invalid_argument naming the first required option missing.
  void check_required(std::span<const option_spec> accepted) const {
    for (const auto& s : accepted) {
      MEMPLAN_EXPECTS(!s.required || has(s.name), invalid_argument, "memplan ", command_, ": option '--", s.name,
                      "' is required (memplan ", command_, " --help)");
    }
  }

  [[nodiscard]] bool has(std::string_view name) const { return values_.contains(std::string(name)); }
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  [[nodiscard]] std::string require(std::string_view name) const {
    const auto v = get(name);
    MEMPLAN_EXPECTS(v.has_value(), invalid_argument, "memplan ", command_, ": option '--", name,
                    "' is required (memplan ", command_, " --help)");
    return *v;
  }
  /// An integer option in [lo, hi], or `fallback` when absent.
  [[nodiscard]] long long integer(std::string_view name, long long fallback, long long lo, long long hi) const {
    const auto v = get(name);
    if (!v) return fallback;
    long long out = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    MEMPLAN_EXPECTS(ec == std::errc{} && end == v->data() + v->size() && out >= lo && out <= hi, invalid_argument,
                    "memplan ", command_, ": option '--", name, "' takes an integer from ", lo, " to ", hi,
                    ", got '", *v, "'");
    return out;
  }
  /// A number option in [lo, hi], or `fallback` when absent.
  [[nodiscard]] double number(std::string_view name, double fallback, double lo, double hi) const {
    const auto v = get(name);
    if (!v) return fallback;
    double out = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    MEMPLAN_EXPECTS(ec == std::errc{} && end == v->data() + v->size() && out >= lo && out <= hi, invalid_argument,
                    "memplan ", command_, ": option '--", name, "' takes a number from ", lo, " to ", hi, ", got '",
                    *v, "'");
    return out;
  }
  /// A comma-separated list option, or `fallback` when absent.
  [[nodiscard]] std::vector<std::string> list(std::string_view name, std::vector<std::string> fallback) const {
    const auto v = get(name);
    if (!v) return fallback;
    std::vector<std::string> out;
    std::size_t begin = 0;
    while (begin <= v->size()) {
      const std::size_t comma = std::min(v->find(',', begin), v->size());
      out.push_back(v->substr(begin, comma - begin));
      MEMPLAN_EXPECTS(!out.back().empty(), invalid_argument, "memplan ", command_, ": option '--", name,
                      "' has an empty item in '", *v, "'");
      begin = comma + 1;
    }
    return out;
  }

 private:
  static std::string see_help(std::string_view command) {
    return memplan::detail::concat(" (memplan ", command, " --help lists its options)");
  }

  std::string command_;
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

}  // namespace memplan::cli
