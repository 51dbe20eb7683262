#include "client/yaml_errors.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

namespace tfslurm::client {
namespace {

struct Position {
  int line = 0;    // 0-based
  int column = 0;  // 0-based, in bytes
};

std::string Where(const std::string& name, const Position& p) {
  return name + ":" + std::to_string(p.line + 1) + ":" + std::to_string(p.column + 1);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// A line with nothing but spaces, tabs or a comment.
bool Blank(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t");
  return first == std::string::npos || line[first] == '#';
}

std::string Spaces(int n) { return std::to_string(n) + (n == 1 ? " space" : " spaces"); }

int Indent(const std::string& line) {
  const size_t first = line.find_first_not_of(' ');
  return first == std::string::npos ? static_cast<int>(line.size()) : static_cast<int>(first);
}

// The line's key, "nodes" of "  nodes: 3" or of "  - nodes: 3"; "" when the
// line is not `key:`.
std::string KeyOf(const std::string& line) {
  size_t start = line.find_first_not_of(" -");
  if (start == std::string::npos) return "";
  size_t colon = line.find(':', start);
  if (colon == std::string::npos || (colon + 1 < line.size() && line[colon + 1] != ' ')) return "";
  std::string key = line.substr(start, colon - start);
  if (key.find_first_of(" [{\"'#") != std::string::npos) return "";
  return key;
}

// The first line up to `last` whose indentation holds a tab.
std::optional<Position> TabInIndentation(const std::vector<std::string>& lines, int last) {
  for (int i = 0; i <= last && i < static_cast<int>(lines.size()); ++i) {
    const std::string& l = lines[i];
    const size_t first = l.find_first_not_of(" \t");
    const size_t tab = l.find('\t');
    if (tab != std::string::npos && (first == std::string::npos || tab < first))
      return Position{i, static_cast<int>(tab)};
  }
  return std::nullopt;
}

// A bracket or quote opened before `end` and not closed by it: the
// innermost. Flow indicators count outside quotes and comments, and a `[`
// or `{` only where a value starts (block context) or anywhere in a flow.
struct Open {
  char what = 0;
  Position at;
};
std::optional<Open> UnclosedBefore(const std::vector<std::string>& lines, Position end) {
  std::vector<Open> open;
  char quote = 0;
  Position quote_at;
  for (int i = 0; i < static_cast<int>(lines.size()) && i <= end.line; ++i) {
    const std::string& l = lines[i];
    const int size = static_cast<int>(l.size());
    const int stop = i == end.line ? std::min(end.column, size) : size;
    bool value_starts = true;  // at the line's start, after ": ", "- ", or in a flow
    for (int c = 0; c < stop; ++c) {
      const char ch = l[c];
      if (quote) {
        if (quote == '"' && ch == '\\') {
          ++c;
        } else if (ch == quote) {
          if (quote == '\'' && c + 1 < stop && l[c + 1] == '\'')
            ++c;  // '' is a quote inside single quotes
          else
            quote = 0;
        }
        continue;
      }
      if (ch == ' ') continue;
      if (ch == '#' && (c == 0 || l[c - 1] == ' ')) break;  // a comment to the line's end
      const bool in_flow = !open.empty();
      if ((ch == '"' || ch == '\'') && (value_starts || in_flow)) {
        quote = ch;
        quote_at = {i, c};
      } else if ((ch == '[' || ch == '{') && (value_starts || in_flow)) {
        open.push_back({ch, {i, c}});
      } else if ((ch == ']' || ch == '}') && in_flow) {
        open.pop_back();
      }
      value_starts =
          in_flow ? (ch == ',' || ch == '[' || ch == '{' || ch == ':') : (ch == '-' || ch == ':');
    }
  }
  if (quote) return Open{quote, quote_at};
  if (!open.empty()) return open.back();
  return std::nullopt;
}

// Why line `bad` is indented wrongly against the lines above it, or "".
std::string Misaligned(const std::vector<std::string>& lines, int bad) {
  if (bad <= 0 || bad >= static_cast<int>(lines.size()) || Blank(lines[bad])) return "";
  int prev = bad - 1;
  while (prev >= 0 && Blank(lines[prev])) --prev;
  if (prev < 0) return "";
  const int k = Indent(lines[bad]), p = Indent(lines[prev]);
  const std::string here = "line " + std::to_string(bad + 1);
  const std::string key = KeyOf(lines[bad]);
  const std::string what = key.empty() ? here : here + " (`" + key + ":`)";
  // The indentations open above it: each deeper line opens a level.
  std::vector<int> levels;
  for (int i = 0; i < bad; ++i) {
    if (Blank(lines[i])) continue;
    const int n = Indent(lines[i]);
    while (!levels.empty() && levels.back() > n) levels.pop_back();
    if (levels.empty() || levels.back() < n) levels.push_back(n);
  }
  const std::string prev_key = KeyOf(lines[prev]);
  const size_t colon = lines[prev].find(": ");
  const bool prev_has_value = !prev_key.empty() && colon != std::string::npos &&
                              lines[prev].find_first_not_of(' ', colon + 1) != std::string::npos;
  if (k > p && prev_has_value)
    return what + " is indented " + Spaces(k) + ", more than line " + std::to_string(prev + 1) +
           " (`" + prev_key + ":`, indented " + std::to_string(p) +
           "), which has its value already: the keys of one mapping line up, and a key's "
           "value goes on its line or, indented, under a key with nothing after its colon";
  for (int level : levels)
    if (level == k) return "";
  std::string aligned;
  for (int level : levels) aligned += (aligned.empty() ? "" : " or ") + std::to_string(level);
  return what + " is indented " + Spaces(k) +
         ", which lines up with no key "
         "above it (they are indented " +
         aligned +
         "): the keys of one mapping line up, and "
         "YAML counts the spaces";
}

// A value holding ": " on a line that is `key: value`: yaml-cpp reads a
// second key in it.
bool ValueHoldsColon(const std::string& line, int column) {
  const size_t first = line.find(": ");
  return first != std::string::npos && static_cast<int>(first) < column &&
         line.find(": ", first + 2) != std::string::npos;
}

}  // namespace

std::string ExplainYamlError(const std::string& text, const std::string& name, int line, int column,
                             const std::string& parser_message) {
  const std::vector<std::string> lines = Lines(text);
  const Position mark{line, column};
  const std::string parser = " (YAML parser: " + parser_message + " at " +
                             std::to_string(line + 1) + ":" + std::to_string(column + 1) + ")";
  if (auto tab = TabInIndentation(lines, line))
    return Where(name, *tab) +
           ": a tab in the indentation: YAML indents with spaces only; "
           "replace it with spaces" +
           parser;
  if (auto open = UnclosedBefore(lines, mark)) {
    const bool is_quote = open->what == '"' || open->what == '\'';
    const char close = open->what == '[' ? ']' : open->what == '{' ? '}' : open->what;
    return Where(name, open->at) + ": this `" + std::string(1, open->what) + "` is never closed: " +
           (is_quote ? "end the quoted text with `" + std::string(1, close) + "`"
                     : std::string("end the ") + (open->what == '[' ? "list" : "mapping") +
                           " with `" + std::string(1, close) + "`") +
           parser;
  }
  if (line >= 0 && line < static_cast<int>(lines.size())) {
    if (ValueHoldsColon(lines[line], column))
      return Where(name, mark) +
             ": the value holds \": \", which YAML reads as another key; "
             "put the value in quotes" +
             parser;
    // The misaligned line is the mark's, or the line yaml-cpp came to next.
    for (int at : {line, line + 1})
      if (std::string why = Misaligned(lines, at); !why.empty())
        return Where(name, Position{at, Indent(lines[at])}) + ": " + why + parser;
  }
  return Where(name, mark) + ": not valid YAML: " + parser_message;
}

}  // namespace tfslurm::client
