#include "service/api/request_params.h"

#include <cstdio>
#include <regex>

#include "base/unsafe_text.h"

namespace tfslurm::api {
namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kInteger("0|[1-9][0-9]{0,17}");

// Rejects JSON nested deeper than `max_depth` before parsing it: the parser
// recurses, and a body of a million '[' must not exhaust the stack.
Status CheckNesting(const std::string& body, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return InvalidArgument(
            "the request body nests deeper than " + std::to_string(max_depth) + " levels",
            {{"", "nested deeper than " + std::to_string(max_depth) + " levels"}});
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<nlohmann::json> ParseJsonBody(const httplib::Request& req) {
  using nlohmann::json;
  if (req.body.empty()) return InvalidArgument("the request body is empty; send the spec as JSON");
  if (Status s = CheckNesting(req.body, 64); !s.ok()) return s;
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) {
    try {
      // Parsed again only for the exception's position. A named result:
      // GCC's warn_unused_result ignores a (void) cast.
      [[maybe_unused]] json reparsed = json::parse(req.body);
    } catch (const json::parse_error& e) {
      return InvalidArgument(std::string("the request body is not valid JSON: ") + e.what(),
                             {{"", "not valid JSON at byte " + std::to_string(e.byte)}});
    }
    return InvalidArgument("the request body is not valid JSON");
  }
  return body;
}

// Values are echoed in errors; a megabyte of query string is not.
std::string ShortForError(const std::string& value) {
  return value.size() <= 64 ? value : value.substr(0, 61) + "...";
}

StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t fallback,
                           int64_t min, int64_t max) {
  if (!req.has_param(name)) return fallback;
  std::string v = req.get_param_value(name);
  if (std::regex_match(v, kInteger)) {
    int64_t n = std::stoll(v);
    if (n >= min && n <= max) return n;
  }
  std::string allowed =
      "must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
  return InvalidArgument(
      std::string("query parameter ") + name + " " + allowed + ", got '" + ShortForError(v) + "'",
      {{name, allowed + ", got '" + ShortForError(v) + "'"}});
}

bool IsTrue(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  std::string v = req.get_param_value(name);
  return v.empty() || v == "1" || v == "true" || v == "yes";
}

namespace {

// The bytes of `text` that are not UTF-8 as \xNN, so that the error can quote
// the value (the JSON writer would refuse it as it is).
std::string Utf8Quoted(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    bool truncated;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X",
                    static_cast<unsigned>(static_cast<unsigned char>(text[i])));
      out += buf;
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

bool IsUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t c;
    bool truncated;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

}  // namespace

Status CheckQueryIsUtf8(const httplib::Request& req) {
  for (const auto& [name, value] : req.params) {
    if (IsUtf8(name) && IsUtf8(value)) continue;
    std::string shown = Utf8Quoted(ShortForError(IsUtf8(name) ? value : name));
    std::string field = IsUtf8(name) ? name : Utf8Quoted(ShortForError(name));
    std::string reason = std::string(IsUtf8(name) ? "value" : "name") +
                         " must be valid UTF-8 (percent-encoded in the URL), got '" + shown + "'";
    return InvalidArgument("query parameter " + field + ": " + reason, {{field, reason}});
  }
  return Status::Ok();
}

std::string PercentEncodedForLog(const std::string& text) {
  std::string out;
  for (char ch : text) {
    auto b = static_cast<unsigned char>(ch);
    if (b > 0x20 && b < 0x7F && b != '%') {
      out += ch;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned>(b));
      out += buf;
    }
  }
  return out;
}

}  // namespace tfslurm::api
