// The spec parser's checker, shared by spec.cc, spec_roles.cc,
// spec_resources.cc and the sweeps' spec parser: it walks the input and
// collects FieldErrors with the field's path, what it got and what is
// allowed. Nothing but those parsers includes it.
//
// Thread safety: a Checker is used by one parse at a time.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/nearest_word.h"
#include "base/unsafe_text.h"
#include "service/core/model_dir.h"
#include "service/core/spec.h"

namespace tfslurm::spec_internal {

using nlohmann::json;

inline const std::regex kEnvNamePattern("[A-Za-z_][A-Za-z0-9_]*");
inline const std::regex kPartitionPattern("[A-Za-z0-9_.-]{1,64}");
inline const std::regex kInterfacePattern("[A-Za-z0-9_.:-]{1,32}");
// Slurm's feature expressions (--constraint): names joined by & | , with
// optional [ ] ( ) * and counts. No space, quote or $: it is shown in the
// script's #SBATCH line as it is.
inline const std::regex kConstraintPattern(R"([A-Za-z0-9_.:&|,*()\[\]!-]{1,256})");

inline std::string TypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Error messages show a bad value only up to this depth: json::dump recurses
// once per level, and no field of a spec nests deeper than two.
constexpr int kMaxShownDepth = 8;

// True when `v` nests more than `levels` arrays or objects deep ([[1]] is
// two). Recurses at most levels + 1 deep, however deep `v` is.
inline bool NestsDeeperThan(const json& v, int levels) {
  if (!v.is_structured()) return false;
  if (levels == 0) return true;
  for (const json& child : v)
    if (NestsDeeperThan(child, levels - 1)) return true;
  return false;
}

// Short rendering of a bad value for messages; long values are cut, and a
// value nested too deep to dump is named, not shown.
inline std::string Show(const json& v) {
  if (NestsDeeperThan(v, kMaxShownDepth))
    return TypeName(v) + " nested more than " + std::to_string(kMaxShownDepth) + " levels";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// "an array [1]": the type, then the value (Show names the type itself when
// it does not show the value).
inline std::string TypeAndValue(const json& v) {
  if (NestsDeeperThan(v, kMaxShownDepth)) return Show(v);
  return TypeName(v) + " " + Show(v);
}

inline std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Collects FieldErrors while walking the input. Each accessor reports the
// field's path, what it got and what is allowed.
class Checker {
 public:
  // The first kMaxSpecFieldErrors; `more` counts the rest.
  std::vector<FieldError> errors;
  size_t more = 0;

  void Fail(const std::string& field, std::string reason) {
    if (errors.size() < kMaxSpecFieldErrors)
      errors.push_back({field, std::move(reason)});
    else
      ++more;
  }

  // Refuses keys not in `allowed`: a typo must not silently become a default.
  // `owner_of` (when given) names the object an unknown key is a field of
  // ("resources" for "nodes"), or "": such a key is said to belong there,
  // which in YAML is a key not indented under its object's line.
  void OnlyKeys(const json& obj, const std::string& path,
                std::initializer_list<const char*> allowed,
                const std::function<std::string(const std::string& key)>& owner_of = nullptr) {
    for (const auto& item : obj.items()) {
      const std::string& key = item.key();
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
        const std::string owner = owner_of ? owner_of(key) : "";
        if (!owner.empty()) {
          Fail(Join(path, key), "unknown field here: it is a field of " + owner + " (" +
                                    Join(owner, key) + "); in YAML, indent it under `" + owner +
                                    ":`, as far as the other fields of " + owner);
          continue;
        }
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        const std::string near = NearestWord(key, {allowed.begin(), allowed.end()});
        Fail(Join(path, key),
             "unknown field;" + (near.empty() ? "" : " did you mean '" + Join(path, near) + "'?") +
                 " allowed here: " + list);
      }
    }
  }

  bool IsObject(const json& v, const std::string& path) {
    if (v.is_object()) return true;
    const size_t dot = path.rfind('.');
    const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
    // YAML's `resources:` with nothing after it is null, and what should have
    // been its fields went to the object around it.
    Fail(path, "must be an object, got " + TypeName(v) +
                   (v.is_null() ? " (in YAML, `" + key +
                                      ":` with nothing after it: its fields go on the lines "
                                      "below it, indented further than `" +
                                      key + ":`)"
                                : ""));
    return false;
  }

  std::optional<int64_t> Int(const json& v, const std::string& path, int64_t min, int64_t max) {
    if (!v.is_number_integer() && !v.is_number_unsigned()) {
      Fail(path, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                     ", got " + TypeAndValue(v));
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail(path, "must be from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
                     Show(v));
      return std::nullopt;
    }
    int64_t n = v.get<int64_t>();
    if (n < min || n > max) {
      Fail(path, "must be from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
                     std::to_string(n));
      return std::nullopt;
    }
    return n;
  }

  std::optional<std::string> String(const json& v, const std::string& path,
                                    size_t max_bytes = 4096) {
    if (!v.is_string()) {
      Fail(path, "must be a string, got " + TypeAndValue(v));
      return std::nullopt;
    }
    const auto& s = v.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) {
      Fail(path, "must not contain NUL bytes");
      return std::nullopt;
    }
    if (s.size() > max_bytes) {
      Fail(path, "is " + std::to_string(s.size()) + " bytes; at most " + std::to_string(max_bytes) +
                     " allowed");
      return std::nullopt;
    }
    return s;
  }

  std::optional<std::string> OneOf(const json& v, const std::string& path,
                                   std::initializer_list<const char*> choices) {
    std::string list;
    for (const char* c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      for (const char* c : choices)
        if (s == c) return s;
    }
    Fail(path, "must be one of " + list + ", got " + Show(v));
    return std::nullopt;
  }

  // The value of an enum named by `v`, one of the names of `table`.
  template <typename E, size_t N>
  std::optional<E> OneOf(const json& v, const std::string& path, const EnumName<E> (&table)[N]) {
    if (v.is_string())
      if (std::optional<E> value = ValueIn(table, v.get_ref<const std::string&>())) return value;
    std::string list;
    for (const EnumName<E>& e : table) list += (list.empty() ? "" : " | ") + std::string(e.name);
    Fail(path, "must be one of " + list + ", got " + Show(v));
    return std::nullopt;
  }

  // An absolute path, normalized (NormalizePath: "/a//b/./c/../" is "/a/b").
  // Control characters and bidi controls are refused: the path is shown to
  // admins in tfctl and on the dashboard, and goes into the job's
  // environment.
  std::optional<std::string> AbsolutePath(const json& v, const std::string& path) {
    auto s = String(v, path);
    if (!s) return std::nullopt;
    if (s->empty() || (*s)[0] != '/') {
      Fail(path, "must be an absolute path (starting with /), got " + Show(v));
      return std::nullopt;
    }
    if (std::optional<std::string> unsafe = UnsafeCharacter(*s)) {
      Fail(path, "must be " + std::string(kSafeTextRule) + "; " + Show(v) + " has " + *unsafe);
      return std::nullopt;
    }
    return NormalizePath(*s);
  }
};

// The node-shape fields that `resources` and each `roles.<role>` share:
// partition, nodes, tasks_per_node, cpus_per_task, gpus_per_node,
// gpus_per_task, mem_per_task_mb and the per-component site options
// constraint, nodelist and exclusive of object `v` at `path`, each only when
// present (spec_resources.cc). Returns whether tasks_per_node was given.
bool ParseNodeShape(Checker& c, const nlohmann::json& v, const std::string& path, Resources& out);

// A field holding a Slurm node list (--nodelist, --exclude) at `path`: its
// count of names, or nullopt when refused (a FieldError says why).
std::optional<int64_t> NodeList(Checker& c, const nlohmann::json& v, const std::string& path,
                                std::string& out);

// The number of node names in a Slurm hostlist expression ("gpu[01-04],cpu7"
// is 5), or nullopt when `list` is not one: names of letters, digits, _ . -
// with bracketed numeric ranges, joined by ','. Counts names as written
// (duplicates twice); at most 1000000.
std::optional<int64_t> CountHostlist(const std::string& list);

// Parses the optional per-role block `roles` (spec_roles.cc) into
// spec.roles; `resources` and `cluster` are parsed already.
void ParseRoles(Checker& c, const nlohmann::json& v, ExperimentSpec& spec);
// The optional `container` section (spec_container.cc); `cluster` is parsed
// already (per-role images name its roles). ContainerJson is its canonical form.
void ParseContainer(Checker& c, const nlohmann::json& v, ExperimentSpec& spec);
nlohmann::json ContainerJson(const ContainerSpec& container);
// Rules between roles, cluster, resources and placement (spec_roles.cc).
void CheckRoles(Checker& c, const nlohmann::json& input, const ExperimentSpec& spec,
                const SpecLimits& limits);

}  // namespace tfslurm::spec_internal
