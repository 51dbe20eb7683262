#include "service/core/scalars.h"

#include <nlohmann/json.hpp>

namespace tfslurm {
namespace {

bool HasControlCharacter(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// nlohmann-json's serializer checks UTF-8 (it throws type_error 316 on an
// invalid byte), which is where a tag ends up.
bool IsUtf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

std::optional<std::string> ScalarProblem(const ScalarPoint& point) {
  if (point.tag.empty()) return "its tag is empty";
  if (point.tag.size() > kMaxScalarTagBytes)
    return "its tag is " + std::to_string(point.tag.size()) + " bytes long; at most " +
           std::to_string(kMaxScalarTagBytes) + " are allowed";
  if (HasControlCharacter(point.tag)) return "its tag has a control character";
  if (!IsUtf8(point.tag)) return "its tag is not valid UTF-8";
  return std::nullopt;
}

std::optional<StepRate> StepsPerSecond(const std::vector<ScalarSeries>& series) {
  const ScalarSeries* best = nullptr;
  for (const ScalarSeries& s : series) {
    if (s.points.size() < 2) continue;
    if (!best || s.points.back().step > best->points.back().step ||
        (s.points.back().step == best->points.back().step && s.points.size() > best->points.size()))
      best = &s;
  }
  if (!best) return std::nullopt;
  StepRate rate;
  rate.tag = best->tag;
  // From an anchor to the first point at least kMinRateInterval later: points
  // closer together than that (lines of a JSON-lines file the agent read in
  // one poll, stamped with that poll's time) would give absurd rates.
  const ScalarSeries::Point* anchor = &best->points.front();
  for (const ScalarSeries::Point& p : best->points) {
    if (p.attempt != anchor->attempt) {
      anchor = &p;
      continue;
    }
    double seconds = p.wall_time - anchor->wall_time;
    if (seconds < kMinRateIntervalS) continue;
    if (p.step > anchor->step) {
      rate.wall_time.push_back(p.wall_time);
      rate.value.push_back(static_cast<double>(p.step - anchor->step) / seconds);
      rate.attempt.push_back(p.attempt);
    }
    anchor = &p;
  }
  if (rate.value.empty()) return std::nullopt;
  return rate;
}

}  // namespace tfslurm
