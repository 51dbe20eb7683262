// What the spec tests share: a spec that must parse, one that must be
// refused, and the refusal's field errors as text for a failure message.
//
// Thread safety: call from the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/spec.h"

namespace tfslurm::testing {

// "FIELD: REASON", one line per error.
inline std::string Dump(const std::vector<FieldError>& errors) {
  std::string text;
  for (const auto& e : errors) text += e.field + ": " + e.reason + "\n";
  return text;
}

// The spec parsed; the test fails, with the errors, if it was refused.
inline ExperimentSpec ParsedSpec(const nlohmann::json& spec) {
  auto parsed = ParseSpec(spec);
  EXPECT_TRUE(parsed.ok()) << Dump(parsed.ok() ? std::vector<FieldError>{}
                                               : parsed.status().fields());
  return parsed.ok() ? *parsed : ExperimentSpec{};
}

// The errors of a spec that must be refused (as an invalid argument); the
// test fails if it was accepted.
inline std::vector<FieldError> SpecErrors(const nlohmann::json& spec) {
  auto parsed = ParseSpec(spec);
  EXPECT_FALSE(parsed.ok()) << "expected errors for " << spec.dump();
  if (parsed.ok()) return {};
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().fields();
}

}  // namespace tfslurm::testing
