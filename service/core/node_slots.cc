#include "service/core/node_slots.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tfslurm {

NodeSlots NodeSlots::ForNewJob(int nodes, int spares, int tasks_per_node) {
  NodeSlots s;
  if (spares <= 0 || tasks_per_node < 1) return s;
  s.tasks_per_node_ = tasks_per_node;
  for (int n = 0; n < nodes; ++n) s.slots_.push_back(n);
  for (int n = nodes; n < nodes + spares; ++n) s.spares_.push_back(n);
  return s;
}

int NodeSlots::JobNodeOfSlot(int slot) const {
  return slots_.empty() || slot < 0 || slot >= static_cast<int>(slots_.size()) ? slot
                                                                               : slots_[slot];
}

ProcPlace NodeSlots::Place(ProcId proc_id, int tasks) const {
  const int tasks_per_node = tasks_per_node_;
  const int proc = proc_id.value();
  if (proc < 0) return {};
  if (slots_.empty())
    return proc < tasks ? ProcPlace{ProcPlace::kTask, TaskIndex(proc)} : ProcPlace{};
  const int node = proc / tasks_per_node;
  auto slot = std::find(slots_.begin(), slots_.end(), node);
  if (slot != slots_.end()) {
    const int task =
        static_cast<int>(slot - slots_.begin()) * tasks_per_node + proc % tasks_per_node;
    return task < tasks ? ProcPlace{ProcPlace::kTask, TaskIndex(task)} : ProcPlace{};
  }
  if (std::find(spares_.begin(), spares_.end(), node) != spares_.end())
    return {ProcPlace::kSpare, TaskIndex()};
  return {};
}

std::optional<NodeSlots> NodeSlots::Replacing(const std::vector<int>& failed,
                                              const std::vector<int>& ready) const {
  // No spare: every node runs a slot, and none can be replaced.
  if (slots_.empty()) return failed.empty() ? std::optional<NodeSlots>(*this) : std::nullopt;
  NodeSlots next = *this;
  for (int node : failed) {
    auto slot = std::find(next.slots_.begin(), next.slots_.end(), node);
    if (slot == next.slots_.end()) continue;  // not running a slot: nothing to replace
    auto spare = std::find_if(next.spares_.begin(), next.spares_.end(), [&](int n) {
      return std::find(ready.begin(), ready.end(), n) != ready.end();
    });
    if (spare == next.spares_.end()) return std::nullopt;
    *slot = *spare;
    next.spares_.erase(spare);
  }
  return next;
}

std::string NodeSlots::ToText() const {
  if (IsIdentity()) return "";
  return nlohmann::json{{"slots", slots_}, {"spares", spares_}, {"tasks_per_node", tasks_per_node_}}
      .dump();
}

std::optional<NodeSlots> NodeSlots::FromText(const std::string& text) {
  NodeSlots s;
  if (text.empty()) return s;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto ints = [](const nlohmann::json& v, std::vector<int>& out) {
    if (!v.is_array()) return false;
    for (const auto& n : v) {
      if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 1000000)
        return false;
      out.push_back(n.get<int>());
    }
    return true;
  };
  std::vector<int> per_node;
  if (!j.is_object() || !j.contains("slots") || !j.contains("spares") ||
      !j.contains("tasks_per_node") || !ints(j["slots"], s.slots_) ||
      !ints(j["spares"], s.spares_) ||
      !ints(nlohmann::json::array({j["tasks_per_node"]}), per_node) || per_node[0] < 1)
    return std::nullopt;
  s.tasks_per_node_ = per_node[0];
  return s;
}

}  // namespace tfslurm
