#include "service/core/scalars.h"

#include "base/unsafe_text.h"

namespace tfslurm {

std::optional<std::string> ScalarProblem(const ScalarPoint& point) {
  if (point.tag.empty()) return "its tag is empty";
  if (point.tag.size() > kMaxScalarTagBytes)
    return "its tag is " + std::to_string(point.tag.size()) + " bytes long; at most " +
           std::to_string(kMaxScalarTagBytes) + " are allowed";
  // Other users read tags, in tfctl and on the dashboard: an ESC or a C1
  // control acts on a terminal, a bidi override reverses the page's own text
  // around it, and the JSON writer refuses bytes that are not UTF-8.
  if (std::optional<std::string> unsafe = UnsafeCharacter(point.tag))
    return "its tag has " + *unsafe + "; a tag must be " + kSafeTextRule;
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
