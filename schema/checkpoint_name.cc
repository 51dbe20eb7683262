#include "schema/checkpoint_name.h"

#include <charconv>

namespace tfslurm::wire {

std::optional<int64_t> TorchCheckpointStep(std::string_view name) {
  std::string_view stem;
  for (std::string_view extension : {".pt", ".pth"}) {
    if (name.size() > extension.size() && name.ends_with(extension)) {
      stem = name.substr(0, name.size() - extension.size());
      break;
    }
  }
  size_t digits = stem.size();
  while (digits > 0 && stem[digits - 1] >= '0' && stem[digits - 1] <= '9') --digits;
  // At least one digit, at most 18 (an int64 without overflow), after a
  // '-' or '_' that follows a name.
  if (digits == stem.size() || stem.size() - digits > 18 || digits < 2) return std::nullopt;
  if (stem[digits - 1] != '-' && stem[digits - 1] != '_') return std::nullopt;
  int64_t step = 0;
  std::from_chars(stem.data() + digits, stem.data() + stem.size(), step);
  return step;
}

std::optional<int64_t> JaxCheckpointStep(std::string_view name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  for (char ch : name)
    if (ch < '0' || ch > '9') return std::nullopt;
  int64_t step = 0;
  std::from_chars(name.data(), name.data() + name.size(), step);
  return step;
}

void LatestCheckpoint::See(std::string_view file_name) {
  std::optional<int64_t> step = step_of_(file_name);
  if (!step) return;
  if (step_ && (*step < *step_ || (*step == *step_ && file_name <= file_name_))) return;
  step_ = step;
  file_name_ = std::string(file_name);
}

}  // namespace tfslurm::wire
