#pragma once
/// \file
/// Reading a device profile (cost/profile.hpp's JSON object) from text or a
/// file with the checks memplan's documents get: JSON syntax errors with
/// their line and column, and no object that repeats a key.

#include <filesystem>
#include <string_view>
#include <utility>

#include "memplan/cost/device.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/io/json_fields.hpp"

namespace memplan::io {

/// How errors name a device profile document.
inline constexpr std::string_view device_profile_format = "device profile";

/// `base` with every figure the profile in `text` names replaced (named
/// `parse_`: a string converts to a json as well as to a string_view).
/// \throws invalid_graph if the text is not JSON, an object in it repeats a
///         key (`device profile: the object at h2d repeats the key
///         "latency_us" ...`), or a field is wrong (`memplan::read_device_profile`).
[[nodiscard]] inline device_spec parse_device_profile(std::string_view text, device_spec base) {
  return memplan::read_device_profile(detail::parse_document(text, device_profile_format), std::move(base));
}

/// `parse_device_profile` of the file at `path`.
/// \throws invalid_argument if the file cannot be read; invalid_graph as `parse_device_profile`.
[[nodiscard]] inline device_spec read_device_profile_file(const std::filesystem::path& path, device_spec base) {
  return parse_device_profile(detail::read_text_file(path, device_profile_format), std::move(base));
}

}  // namespace memplan::io
