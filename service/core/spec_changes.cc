#include "service/core/spec_changes.h"

#include <set>
#include <vector>

namespace tfslurm {
namespace {

using nlohmann::json;

std::string Unescape(std::string token) {
  // JSON pointer escapes: ~1 is '/', ~0 is '~' (in that order, RFC 6901).
  for (size_t at; (at = token.find("~1")) != std::string::npos;) token.replace(at, 2, "/");
  for (size_t at; (at = token.find("~0")) != std::string::npos;) token.replace(at, 2, "~");
  return token;
}

std::vector<std::string> Tokens(const std::string& pointer) {
  std::vector<std::string> out;
  for (size_t start = 1; start <= pointer.size();) {
    size_t slash = pointer.find('/', start);
    if (slash == std::string::npos) slash = pointer.size();
    out.push_back(Unescape(pointer.substr(start, slash - start)));
    start = slash + 1;
  }
  return out;
}

// The field a change is reported under: the top-level key, and the key in it
// for the objects whose keys are fields of their own (command and placement
// are one value each, whatever element of theirs changed).
std::string FieldOf(const std::vector<std::string>& t) {
  static const std::set<std::string> kWhole = {"command", "placement", "workdir", "framework",
                                               "id",      "model_dir", "success"};
  if (t.empty()) return "";
  if (t.size() == 1 || kWhole.contains(t[0])) return t[0];
  return t[0] + "." + t[1];
}

std::string ShortValue(const json& spec, const std::vector<std::string>& t) {
  const json* v = &spec;
  for (size_t i = 0; i < t.size() && i < 2; ++i) {
    if (v->is_object() && v->contains(t[i])) {
      v = &(*v)[t[i]];
    } else {
      return "(none)";
    }
    if (i == 0 && (t[0] == "command" || t[0] == "placement" || t[0] == "workdir")) break;
  }
  std::string s = v->dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// The tasks a spec's JSON asks for (resources.nodes x tasks_per_node); -1
// when either is not an integer yet (ParseSpec names that).
int64_t TasksOf(const json& spec) {
  const json& r = spec.value("resources", json::object());
  if (!r.is_object()) return -1;
  const json nodes = r.value("nodes", json(1)), per_node = r.value("tasks_per_node", json(1));
  if (!nodes.is_number_integer() || !per_node.is_number_integer()) return -1;
  return nodes.get<int64_t>() * per_node.get<int64_t>();
}

// Why a resume may not change the field at `t`; empty when it may.
std::string RefusalOf(const std::vector<std::string>& t, const ExperimentSpec& current,
                      const json& before, const json& after) {
  const std::string& top = t[0];
  if (top == "id")
    return "names the experiment, which a resume keeps ('" + current.id +
           "'); to run under another id, submit a new experiment";
  if (top == "framework")
    return std::string("the checkpoint in model_dir is in ") + FrameworkName(current.framework) +
           "'s format; to use another framework, submit a new experiment";
  if (top == "model_dir")
    return "the next attempt resumes from the checkpoint in model_dir; to start from another "
           "directory, submit a new experiment";
  if (top == "cluster" || top == "roles" || top == "placement" ||
      (top == "resources" && t.size() > 1 && (t[1] == "nodes" || t[1] == "tasks_per_node") &&
       TasksOf(after) != TasksOf(before)))
    return "the checkpoint was written by this cluster's shape (cluster, roles, placement and "
           "the number of tasks), which a resume keeps; to train with another shape, submit a "
           "new experiment";
  if (top == "success" || top == "pytorch")
    return std::string("is not among what a resume may change (") + kResumableFields +
           "); submit a new experiment to change it";
  return "";
}

// The fields `before` and `after` differ in, each once, in the diff's order,
// with their path's tokens.
std::vector<std::pair<std::string, std::vector<std::string>>> ChangedFields(const json& before,
                                                                            const json& after) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::set<std::string> seen;
  for (const json& op : json::diff(before, after)) {
    std::vector<std::string> t = Tokens(op.at("path").get<std::string>());
    std::string field = FieldOf(t);
    if (!field.empty() && seen.insert(field).second) out.emplace_back(field, std::move(t));
  }
  return out;
}

}  // namespace

StatusOr<ChangedSpec> ApplySpecChanges(const ExperimentSpec& current, const json& changes,
                                       const SpecLimits& limits) {
  if (!changes.is_object()) {
    std::string got = changes.dump(-1, ' ', false, json::error_handler_t::replace);
    if (got.size() > 80) got = got.substr(0, 77) + "...";
    return InvalidArgument("changes must be an object of spec fields",
                           {{"changes", "must be an object of the spec fields to change (" +
                                            std::string(kResumableFields) + "), got " + got}});
  }
  const json before = current.ToJson();
  json merged = before;
  merged.merge_patch(changes);
  // What may not change is refused first, whether or not the rest is valid:
  // a new shape is refused for being new, not for a count that disagrees.
  std::vector<FieldError> refused;
  for (const auto& [field, t] : ChangedFields(before, merged))
    if (std::string why = RefusalOf(t, current, before, merged); !why.empty())
      refused.push_back({field, "cannot change on resume: " + why + " (was " +
                                    ShortValue(before, t) + ", asked " + ShortValue(merged, t) +
                                    ")"});
  if (!refused.empty()) {
    std::string names;
    for (const FieldError& f : refused) names += (names.empty() ? "" : ", ") + f.field;
    return InvalidArgument("a resume cannot change " + names +
                               ": the next attempt must fit the checkpoint in model_dir; it may "
                               "change " +
                               kResumableFields,
                           std::move(refused));
  }
  // Checked as a new spec would be: every problem named by its field.
  auto parsed = ParseSpec(merged, limits);
  if (!parsed.ok()) return parsed.status();
  const json after = parsed->ToJson();
  std::string summary;
  for (const auto& [field, t] : ChangedFields(before, after)) {
    if (!summary.empty()) summary += "; ";
    summary += field;
    // An env value may be a secret: its name only.
    if (t[0] != "env") summary += " " + ShortValue(before, t) + " -> " + ShortValue(after, t);
  }
  return ChangedSpec{std::move(parsed).value(), summary};
}

}  // namespace tfslurm
