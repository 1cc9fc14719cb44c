// libFuzzer target: memplan::fuzz::plan_json (fuzz_inputs.hpp).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memplan::fuzz::plan_json(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
