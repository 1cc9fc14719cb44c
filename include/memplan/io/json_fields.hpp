#pragma once
/// \file
/// Internals shared by the JSON readers and writers of memplan's documents
/// (`memplan-graph`, `memplan-plan`): parsing with positions in the error,
/// the format/version check, a reader of one object's fields whose every
/// error names the object and the field, and the one-element-per-line
/// layout the writers use.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/error.hpp"

namespace memplan::io::detail {

using json = nlohmann::json;
using memplan::detail::concat;

inline constexpr std::int64_t max_int64 = std::numeric_limits<std::int64_t>::max();

/// Tracks where nlohmann's parser is, as a stack of open objects and arrays,
/// and rejects an object that repeats a key: nlohmann keeps the last value
/// silently, so a doubled `time_us` would change a plan's numbers unseen.
/// Per object it counts keys and keeps them; only when the finished object
/// holds fewer members than keys were read does it look for the repeat.
class duplicate_key_check {
 public:
  explicit duplicate_key_check(std::string_view format) : format_(format) {}

  /// nlohmann's `parser_callback_t`; keeps every value.
  /// \throws invalid_graph naming the object's path and the repeated key.
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        count_element();
        open_.push_back({event == json::parse_event_t::object_start, 0, {}});
        break;
      case json::parse_event_t::key:
        open_.back().keys.push_back(parsed.get<std::string>());
        break;
      case json::parse_event_t::value:
        count_element();
        break;
      case json::parse_event_t::object_end:
        if (parsed.size() != open_.back().keys.size()) repeated();
        open_.pop_back();
        break;
      case json::parse_event_t::array_end:
        open_.pop_back();
        break;
    }
    return true;
  }

 private:
  struct container {
    bool object;
    std::size_t elements;           ///< arrays: elements started so far
    std::vector<std::string> keys;  ///< objects: keys read so far, in order
  };

  void count_element() {
    if (!open_.empty() && !open_.back().object) ++open_.back().elements;
  }

  /// "ops[3]", "layout", "decisions": the innermost open object's path.
  [[nodiscard]] std::string path() const {
    std::string out;
    for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
      if (open_[i].object) {
        out += concat(out.empty() ? "" : ".", open_[i].keys.back());
      } else {
        out += concat("[", open_[i].elements - 1, "]");
      }
    }
    return out;
  }

  [[noreturn]] void repeated() const {
    const auto& keys = open_.back().keys;
    std::vector<std::string_view> seen;
    std::string_view key;
    for (const auto& k : keys) {
      if (std::ranges::find(seen, k) != seen.end()) {
        key = k;
        break;
      }
      seen.push_back(k);
    }
    const auto where = path();
    throw invalid_graph(concat(format_, ": ", where.empty() ? "the top-level object" : concat("the object at ", where),
                               " repeats the key ", json(key).dump(), " (a JSON object's keys must differ)"));
  }

  std::string_view format_;
  std::vector<container> open_;
};

/// Parses `text`; a syntax error, truncation or a number out of range becomes
/// `invalid_graph` carrying nlohmann's message (with its line and column),
/// and so does an object that repeats a key (naming the object's path and
/// the key).
[[nodiscard]] inline json parse_document(std::string_view text, std::string_view format) {
  try {
    return json::parse(text.begin(), text.end(), duplicate_key_check(format));
  } catch (const json::exception& e) {
    throw invalid_graph(concat(format, ": not valid JSON: ", e.what()));
  }
}

/// The whole content of `path`.
/// \throws invalid_argument if it cannot be opened or read.
[[nodiscard]] inline std::string read_text_file(const std::filesystem::path& path, std::string_view format) {
  std::ifstream in(path, std::ios::binary);
  MEMPLAN_EXPECTS(in.is_open(), invalid_argument, format, ": cannot open '", path.string(), "'");
  std::ostringstream text;
  text << in.rdbuf();
  MEMPLAN_EXPECTS(!in.bad(), invalid_argument, format, ": cannot read '", path.string(), "'");
  return std::move(text).str();
}

/// A value as an error message quotes it: compact and at most ~60 characters.
[[nodiscard]] inline std::string quote(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t limit = 60;
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return text;
}

/// The value as an integer in [min, max], or nothing if it is not an integer
/// literal in that range (floats such as 1.5 or 1e30, strings, booleans are not).
[[nodiscard]] inline std::optional<std::int64_t> integer_in(const json& value, std::int64_t min, std::int64_t max) {
  if (!value.is_number_integer()) return std::nullopt;
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max_int64)) {
    return std::nullopt;
  }
  const auto v = value.get<std::int64_t>();
  if (v < min || v > max) return std::nullopt;
  return v;
}

/// "op 'conv1' (id 3)", or as much of it as the entry's own `name` and `id`
/// allow, falling back to its position ("ops[3]"): how errors name an entry
/// even before its fields are known to be valid.
[[nodiscard]] inline std::string describe_entry(std::string_view what, std::string_view array, const json& entry,
                                                std::size_t position) {
  const auto at = concat(array, "[", position, "]");
  if (!entry.is_object()) return at;
  const auto name = entry.find("name");
  const auto id = entry.find("id");
  const bool has_name = name != entry.end() && name->is_string();
  const bool has_id = id != entry.end() && integer_in(*id, 0, max_int64).has_value();
  if (has_name && has_id) return concat(what, " '", name->get<std::string>(), "' (id ", id->get<std::int64_t>(), ")");
  if (has_name) return concat(what, " '", name->get<std::string>(), "' (", at, ")");
  if (has_id) return concat(what, " id ", id->get<std::int64_t>(), " (", at, ")");
  return at;
}

/// Reads the fields of one JSON object. Every error is an `invalid_graph`
/// that names the object (`where`) and the field:
/// `op 'conv1' (id 3): field 'time_us' must be a non-negative number, got "12"`.
/// Fields not asked for are ignored.
class field_reader {
 public:
  /// \throws invalid_graph if `object` is not a JSON object.
  field_reader(const json& object, std::string where) : object_(&object), where_(std::move(where)) {
    MEMPLAN_EXPECTS(object.is_object(), invalid_graph, where_, ": must be a JSON object, got ", quote(object));
  }

  [[nodiscard]] bool has(std::string_view field) const { return object_->contains(field); }

  /// Throws `invalid_graph("<where>: field '<field>' <parts...>")`.
  template <class... Parts>
  [[noreturn]] void fail(std::string_view field, Parts&&... parts) const {
    throw invalid_graph(concat(where_, ": field '", field, "' ", std::forward<Parts>(parts)...));
  }

  /// The field's value. \throws invalid_graph if it is absent.
  [[nodiscard]] const json& get(std::string_view field) const {
    const auto it = object_->find(field);
    if (it == object_->end()) fail(field, "is missing");
    return *it;
  }

  /// A required integer in [min, max] (by default any non-negative 64-bit integer).
  [[nodiscard]] std::int64_t integer(std::string_view field, std::int64_t min = 0, std::int64_t max = max_int64) const {
    return checked_integer(get(field), field, min, max);
  }
  /// An optional integer in [min, max]; `fallback` when absent.
  [[nodiscard]] std::int64_t integer_or(std::string_view field, std::int64_t fallback, std::int64_t min = 0,
                                        std::int64_t max = max_int64) const {
    return has(field) ? integer(field, min, max) : fallback;
  }
  /// A required array of integers in [min, max].
  [[nodiscard]] std::vector<std::int64_t> integers(std::string_view field, std::int64_t min = 0,
                                                   std::int64_t max = max_int64) const {
    const json& values = array(field);
    std::vector<std::int64_t> out;
    out.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      out.push_back(checked_integer(values[i], element(field, i), min, max));
    }
    return out;
  }
  /// An optional array of integers in [min, max]; empty when absent.
  [[nodiscard]] std::vector<std::int64_t> integers_or_empty(std::string_view field, std::int64_t min = 0,
                                                            std::int64_t max = max_int64) const {
    return has(field) ? integers(field, min, max) : std::vector<std::int64_t>{};
  }
  /// A required finite, non-negative number (integer or not).
  [[nodiscard]] double non_negative_number(std::string_view field) const {
    const json& value = get(field);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      fail(field, "must be a non-negative number, got ", quote(value));
    }
    return value.get<double>();
  }
  /// A required string.
  [[nodiscard]] std::string string(std::string_view field) const {
    const json& value = get(field);
    if (!value.is_string()) fail(field, "must be a string, got ", quote(value));
    return value.get<std::string>();
  }
  /// An optional string; `fallback` when absent.
  [[nodiscard]] std::string string_or(std::string_view field, std::string fallback) const {
    return has(field) ? string(field) : std::move(fallback);
  }
  /// A required boolean.
  [[nodiscard]] bool boolean(std::string_view field) const {
    const json& value = get(field);
    if (!value.is_boolean()) fail(field, "must be true or false, got ", quote(value));
    return value.get<bool>();
  }
  /// An optional boolean; `fallback` when absent.
  [[nodiscard]] bool boolean_or(std::string_view field, bool fallback) const {
    return has(field) ? boolean(field) : fallback;
  }
  /// A required array.
  [[nodiscard]] const json& array(std::string_view field) const {
    const json& value = get(field);
    if (!value.is_array()) fail(field, "must be an array, got ", quote(value));
    return value;
  }
  /// A required object.
  [[nodiscard]] const json& object(std::string_view field) const {
    const json& value = get(field);
    if (!value.is_object()) fail(field, "must be an object, got ", quote(value));
    return value;
  }
  /// A required string naming one of `names`; returns the enumerator with
  /// that position.
  template <class Enum, std::size_t N>
  [[nodiscard]] Enum choice(std::string_view field, const std::array<std::string_view, N>& names) const {
    return choice_of<Enum>(get(field), field, names);
  }
  /// Like `choice`, for a value found elsewhere (an element, an object member)
  /// but reported as `field`.
  template <class Enum, std::size_t N>
  [[nodiscard]] Enum choice_of(const json& value, std::string_view field,
                               const std::array<std::string_view, N>& names) const {
    if (value.is_string()) {
      const auto& text = value.get_ref<const std::string&>();
      for (std::size_t i = 0; i < N; ++i) {
        if (names[i] == text) return static_cast<Enum>(i);
      }
    }
    fail(field, "must be one of ", join(names), "; got ", quote(value));
  }

  /// "inputs[2]": how errors name an element of an array field.
  [[nodiscard]] static std::string element(std::string_view field, std::size_t i) {
    return concat(field, "[", i, "]");
  }

 private:
  [[nodiscard]] std::int64_t checked_integer(const json& value, std::string_view field, std::int64_t min,
                                             std::int64_t max) const {
    const auto v = integer_in(value, min, max);
    if (!v) {
      if (max == max_int64) {
        fail(field, "must be an integer of at least ", min, " (and at most 2^63 - 1), got ", quote(value));
      }
      fail(field, "must be an integer in [", min, ", ", max, "], got ", quote(value));
    }
    return *v;
  }
  template <std::size_t N>
  [[nodiscard]] static std::string join(const std::array<std::string_view, N>& names) {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) out += concat(i == 0 ? "" : ", ", "\"", names[i], "\"");
    return out;
  }

  const json* object_;
  std::string where_;
};

/// Checks the `format` and `version` fields of a document.
/// \throws invalid_graph if the document is not an object or either field is wrong.
inline void expect_header(const json& doc, std::string_view format, std::int64_t version) {
  const field_reader top(doc, std::string(format));
  if (top.string("format") != format) top.fail("format", "must be \"", format, "\", got ", quote(top.get("format")));
  if (top.integer("version") != version) {
    top.fail("version", "must be ", version, " (the only version this reader knows), got ", quote(top.get("version")));
  }
}

/// Writes `doc`'s members in `keys` order (those present), one per line; an
/// array of objects gets one element per line, so that large documents stay
/// readable and diff well. Members not in `keys` are not written.
template <std::size_t N>
void write_lines(std::ostream& out, const json& doc, const std::array<std::string_view, N>& keys) {
  out << "{";
  const char* separator = "\n";
  for (const auto key : keys) {
    const auto it = doc.find(key);
    if (it == doc.end()) continue;
    out << separator << "  " << json(key).dump() << ": ";
    separator = ",\n";
    if (!it->is_array() || it->empty() || !it->front().is_object()) {
      out << it->dump();
      continue;
    }
    out << "[";
    const char* item_separator = "\n";
    for (const auto& item : *it) {
      out << item_separator << "    " << item.dump();
      item_separator = ",\n";
    }
    out << "\n  ]";
  }
  out << "\n}\n";
}

}  // namespace memplan::io::detail
