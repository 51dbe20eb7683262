#include "agent/scalars_jsonl.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace tfslurm::agent {
namespace {

// Python's json.dumps writes float('nan') as NaN and infinities as Infinity
// and -Infinity; nlohmann's parser rejects them. Outside strings, these
// tokens become strings that no program writes (they start with a NUL),
// turned back into numbers after parsing.
constexpr std::string_view kNanMarker = "\\u0000NaN";
constexpr std::string_view kInfMarker = "\\u0000Infinity";
constexpr std::string_view kNegInfMarker = "\\u0000-Infinity";

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string QuoteNonFiniteTokens(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < line.size()) {
        out.push_back(line[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
      continue;
    }
    const bool word_start = i == 0 || !IsWordChar(line[i - 1]);
    auto token_at = [&](std::string_view token) {
      return word_start && line.substr(i, token.size()) == token &&
             (i + token.size() == line.size() || !IsWordChar(line[i + token.size()]));
    };
    std::string_view marker;
    size_t length = 0;
    if (token_at("NaN")) {
      marker = kNanMarker, length = 3;
    } else if (token_at("Infinity")) {
      marker = kInfMarker, length = 8;
    } else if (token_at("-Infinity")) {
      marker = kNegInfMarker, length = 9;
    }
    if (length == 0) {
      out.push_back(c);
      continue;
    }
    out.push_back('"');
    out.append(marker);
    out.push_back('"');
    i += length - 1;
  }
  return out;
}

// A line is one flat object; deeper nesting than this is refused before
// parsing. nlohmann's ordered_json copies an object's members, recursively,
// when the object grows (its std::pair<const std::string, json> cannot be
// moved), and dump recurses too, once per level: a line of many '[' or '{'
// would overflow the stack.
constexpr int kMaxNesting = 32;

bool NestsDeeperThan(std::string_view line, int levels) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > levels) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::optional<double> NumberOf(const nlohmann::ordered_json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.front() != '\0') return std::nullopt;
  if (s == std::string_view("\0NaN", 4)) return std::numeric_limits<double>::quiet_NaN();
  if (s == std::string_view("\0Infinity", 9)) return std::numeric_limits<double>::infinity();
  if (s == std::string_view("\0-Infinity", 10)) return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

std::string Shown(const nlohmann::ordered_json& v) {
  if (std::optional<double> n = NumberOf(v)) return nlohmann::ordered_json(*n).dump();
  std::string s = v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

}  // namespace

StatusOr<std::vector<ScalarPoint>> ParseScalarsLine(std::string_view line, double now) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::vector<ScalarPoint>{};
  if (NestsDeeperThan(line, kMaxNesting)) {
    return InvalidArgument("nested more than " + std::to_string(kMaxNesting) + " levels deep");
  }
  nlohmann::ordered_json object =
      nlohmann::ordered_json::parse(QuoteNonFiniteTokens(line), nullptr, false);
  if (object.is_discarded()) return InvalidArgument("not valid JSON");
  if (!object.is_object()) return InvalidArgument("not a JSON object");
  auto step = object.find("step");
  if (step == object.end()) return InvalidArgument("no \"step\"");
  if (!step->is_number_integer()) {
    return InvalidArgument("\"step\" must be an integer, got " + Shown(*step));
  }
  if (step->is_number_unsigned() &&
      step->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgument("\"step\" is out of range: " + step->dump());
  }
  double wall_time = now;
  if (auto w = object.find("wall_time"); w != object.end()) {
    std::optional<double> seconds = NumberOf(*w);
    if (!seconds || !std::isfinite(*seconds)) {
      return InvalidArgument("\"wall_time\" must be a number of seconds since the epoch, got " +
                             Shown(*w));
    }
    wall_time = *seconds;
  }
  // A key that begins with the marker was a bare NaN or Infinity in a key's
  // place (`{"step": 1, Infinity: 2}`), which no JSON allows: QuoteNonFiniteTokens
  // made it a string. Found by scalars_jsonl_fuzzer.
  for (const auto& [key, v] : object.items()) {
    if (!key.empty() && key.front() == '\0') return InvalidArgument("not valid JSON");
  }
  std::vector<ScalarPoint> points;
  for (const auto& [key, v] : object.items()) {
    if (key == "step" || key == "wall_time" || key.empty()) continue;
    if (std::optional<double> number = NumberOf(v)) {
      points.push_back(ScalarPoint{key, step->get<int64_t>(), wall_time, *number});
    }
  }
  return points;
}

}  // namespace tfslurm::agent
