// YAML syntax errors point at their cause (client/yaml_errors.h), as the
// issue-48 trial ran into them: through YamlToJson, with yaml-cpp's real
// messages and marks.
#include "client/yaml_errors.h"

#include <gtest/gtest.h>

#include "client/spec_file.h"

namespace tfslurm::client {
namespace {

std::string ErrorOf(const std::string& yaml) {
  auto j = YamlToJson(yaml, "spec.yaml");
  EXPECT_FALSE(j.ok()) << yaml;
  return j.ok() ? "" : j.status().message();
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(YamlErrorsTest, ATabInTheIndentationIsNamedWhereItIs) {
  // yaml-cpp: "illegal map value" at 3:7.
  std::string e = ErrorOf("id: x\nresources:\n\tnodes: 3\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:3:1: a tab in the indentation: YAML indents with spaces "
                         "only; replace it with spaces (YAML parser: illegal map value at 3:7)"))
      << e;
  e = ErrorOf("id: x\nresources:\n  nodes: 3\n  \ttasks_per_node: 2\n");
  EXPECT_TRUE(StartsWith(e, "spec.yaml:4:3: a tab in the indentation")) << e;
}

TEST(YamlErrorsTest, AnUnclosedBracketIsNamedOnItsOwnLineNotWhereTheParserStopped) {
  // yaml-cpp: "end of sequence flow not found" at 3:8.
  std::string e = ErrorOf("id: x\ncommand: [python3, train.py\ncluster: {worker: 1}\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:2:10: this `[` is never closed: end the list with `]` "
                         "(YAML parser: end of sequence flow not found at 3:8)"))
      << e;
  e = ErrorOf("resources: {nodes: 3, tasks_per_node: 2\ncluster: {worker: 1}\n");
  EXPECT_TRUE(StartsWith(e, "spec.yaml:1:12: this `{` is never closed: end the mapping with `}`"))
      << e;
  e = ErrorOf("command: [\"python3, train.py]\ncluster: {worker: 1}\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:1:11: this `\"` is never closed: end the quoted text "
                         "with `\"`"))
      << e;
  // Brackets inside quotes, comments and a plain value do not count.
  e = ErrorOf("workdir: /a/[b # ]\ncommand: ['[x', python3  # ]\n");
  EXPECT_TRUE(StartsWith(e, "spec.yaml:2:10: this `[` is never closed")) << e;
}

TEST(YamlErrorsTest, AMisalignedKeyIsNamedWithTheIndentationAroundIt) {
  std::string e = ErrorOf("resources:\n  nodes: 3\n   tasks_per_node: 2\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:3:4: line 3 (`tasks_per_node:`) is indented 3 spaces, more "
                         "than line 2 (`nodes:`, indented 2), which has its value already"))
      << e;
  e = ErrorOf("resources:\n   nodes: 3\n  tasks_per_node: 2\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:3:3: line 3 (`tasks_per_node:`) is indented 2 spaces, "
                         "which lines up with no key above it (they are indented 0 or 3)"))
      << e;
  e = ErrorOf("id: x\nenv:\n  A: 1\n B: 2\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:4:2: line 4 (`B:`) is indented 1 space, which lines up with no "
                         "key above it (they are indented 0 or 2)"))
      << e;
  e = ErrorOf("id: x\n command: [a]\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:2:2: line 2 (`command:`) is indented 1 space, more than "
                         "line 1 (`id:`, indented 0)"))
      << e;
}

TEST(YamlErrorsTest, AValueHoldingAColonIsToldToBeQuoted) {
  std::string e = ErrorOf("id: x: y\n");
  EXPECT_TRUE(StartsWith(e,
                         "spec.yaml:1:6: the value holds \": \", which YAML reads as another "
                         "key; put the value in quotes"))
      << e;
}

TEST(YamlErrorsTest, WhatItCannotExplainKeepsTheParsersWordsAndMark) {
  EXPECT_EQ(ExplainYamlError("a: b\n", "f.yaml", 0, 3, "unknown token"),
            "f.yaml:1:4: not valid YAML: unknown token");
}

}  // namespace
}  // namespace tfslurm::client
