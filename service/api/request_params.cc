#include "service/api/request_params.h"

#include <regex>

namespace tfslurm::api {
namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kInteger("0|[1-9][0-9]{0,17}");

}  // namespace

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

}  // namespace tfslurm::api
