// One table per enum of its values and their names, and the two lookups
// every such enum needs: the name of a value (what the store, the wire and
// the JSON carry) and the value of a name. Both read the same table, so
// they cannot disagree, and a test can walk it (tests/unit/names_test.cc
// checks that every value of every enum is in its table, round-trips, and
// that schema/openapi.yaml's enums are these names).
//
// Thread safety: constant tables and pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tfslurm {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`; `missing` for a value the table lacks
// (a complete table, as tests/unit/names_test.cc checks, has none).
template <typename E, size_t N>
constexpr const char* NameIn(const EnumName<E> (&table)[N], E value, const char* missing = "") {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return missing;
}

// The value named `name` in `table`; nullopt for a name it lacks.
template <typename E, size_t N>
constexpr std::optional<E> ValueIn(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

}  // namespace tfslurm
