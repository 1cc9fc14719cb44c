#pragma once
// tests/data/regression.json, the pinned numbers of test_regression.cpp
// (zoo models) and test_dtr_corpus.cpp (DTR logs): cells chosen by hand,
// numbers written by the command the file names (tools/regression.py).

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace memplan::test {

/// The parsed tests/data/regression.json.
inline nlohmann::json regression_data() {
  const auto path = std::filesystem::path(MEMPLAN_SOURCE_DIR) / "tests" / "data" / "regression.json";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path.string());
  return nlohmann::json::parse(in);
}

/// The pinned `expected`, within the file's tolerance (doctest::Approx's epsilon).
inline doctest::Approx pinned(double expected, const nlohmann::json& data) {
  return doctest::Approx(expected).epsilon(data.at("tolerance").get<double>());
}

}  // namespace memplan::test
