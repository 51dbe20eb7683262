// YAML syntax errors said the way JSON's are: what is wrong and where, with
// what to do. yaml-cpp's own message names the token it could not place
// ("illegal map value", "end of sequence flow not found") where it noticed,
// which is often a line after the cause: a `[` left open on line 2 is
// noticed on line 3, a tab or a misaligned key only as the value after it.
// These read the text again and point at the cause: a tab in an indentation,
// a bracket or quote never closed, a key indented unlike the keys around it,
// a value holding ": ". yaml-cpp's words follow in parentheses.
//
// Thread safety: pure functions.
#pragma once

#include <string>

namespace tfslurm::client {

// "NAME:LINE:COLUMN: what is wrong and what to do (YAML parser: its message
// at LINE:COLUMN)". `line` and `column` are yaml-cpp's mark, 0-based.
std::string ExplainYamlError(const std::string& text, const std::string& name, int line, int column,
                             const std::string& parser_message);

}  // namespace tfslurm::client
