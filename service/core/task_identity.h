// The two numbers that name a task of an attempt, as distinct types so that
// the compiler refuses a mix.
//
// `TaskIndex` is the task's place in the experiment (0 .. tasks-1, numbered
// as placement.h does): its role, its TF_CONFIG index, its RANK, and its row
// in the store. `ProcId` is the SLURM_PROCID of the agent running it: what
// the agent says on the wire, what its output file is named after, and what
// views show. The two are equal until a spare node takes a failed node's
// place in a restart in place (node_slots.h), and differ from then on; most
// tests cannot see a mix-up, so none is allowed to compile.
//
// Thread safety: value types.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>

namespace tfslurm {

class TaskIndex {
 public:
  constexpr TaskIndex() = default;
  constexpr explicit TaskIndex(int value) : value_(value) {}
  constexpr int value() const { return value_; }
  constexpr auto operator<=>(const TaskIndex&) const = default;

 private:
  int value_ = 0;
};

class ProcId {
 public:
  constexpr ProcId() = default;
  constexpr explicit ProcId(int value) : value_(value) {}
  constexpr int value() const { return value_; }
  constexpr auto operator<=>(const ProcId&) const = default;

 private:
  int value_ = 0;
};

// The indices 0 .. size-1 of an attempt's tasks, for a range-for.
class TaskIndices {
 public:
  class Iterator {
   public:
    constexpr explicit Iterator(int i) : i_(i) {}
    constexpr TaskIndex operator*() const { return TaskIndex(i_); }
    constexpr Iterator& operator++() {
      ++i_;
      return *this;
    }
    constexpr bool operator==(const Iterator&) const = default;

   private:
    int i_;
  };
  constexpr explicit TaskIndices(int size) : size_(size) {}
  constexpr Iterator begin() const { return Iterator(0); }
  constexpr Iterator end() const { return Iterator(size_); }

 private:
  int size_;
};

}  // namespace tfslurm

template <>
struct std::hash<tfslurm::TaskIndex> {
  size_t operator()(tfslurm::TaskIndex t) const noexcept { return std::hash<int>()(t.value()); }
};

template <>
struct std::hash<tfslurm::ProcId> {
  size_t operator()(tfslurm::ProcId p) const noexcept { return std::hash<int>()(p.value()); }
};
