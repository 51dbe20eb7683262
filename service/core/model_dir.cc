#include "service/core/model_dir.h"

#include <vector>

namespace tfslurm {

std::string NormalizePath(const std::string& absolute) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= absolute.size()) {
    size_t slash = absolute.find('/', start);
    if (slash == std::string::npos) slash = absolute.size();
    std::string part = absolute.substr(start, slash - start);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(std::move(part));
    }
    start = slash + 1;
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

bool PathIsWithin(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

Status CheckModelDir(
    const ModelDirRequest& r,
    const std::function<std::optional<std::string>(const std::string&)>& owner_of) {
  if (r.model_dir.empty()) return Status::Ok();
  const std::string root = NormalizePath(r.output_root);
  const std::string own = root + "/" + r.id;
  const std::string allowed = "inside the output root " + root +
                              ", a model_dir must be under the experiment's own "
                              "directory " +
                              own + " or under the directory of another experiment of yours";
  auto refuse = [&](const std::string& why) {
    std::string reason = "'" + r.model_dir + "' " + why + "; " + allowed;
    return InvalidArgument("model_dir '" + r.model_dir + "' is not allowed: " + why,
                           {{"model_dir", reason}});
  };
  if (PathIsWithin(r.model_dir, root)) {
    if (r.model_dir == root) return refuse("is the output root itself");
    std::string first = r.model_dir.substr(root.size() + 1);
    first = first.substr(0, first.find('/'));
    if (first == r.id) return Status::Ok();
    if (std::optional<std::string> owner = owner_of(first); owner && *owner == r.owner)
      return Status::Ok();
    return refuse("is in " + root + "/" + first + ", which is not one of your experiments");
  }
  if (PathIsWithin(root, r.model_dir))
    return refuse("contains the output root, and so every experiment's directory");
  if (r.runs_as_root) {
    std::string reason = "'" + r.model_dir + "' is outside the output root " + root +
                         ", and jobs run as root here (personal mode as root), so tfslurmd "
                         "would create it as root; use a model_dir under " +
                         own + " (or model_dir: auto)";
    return InvalidArgument(
        "model_dir '" + r.model_dir + "' is not allowed: outside the output root",
        {{"model_dir", reason}});
  }
  return Status::Ok();
}

}  // namespace tfslurm
