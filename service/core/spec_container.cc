// The spec's `container` section (docs/containers.md): parsing, its
// canonical form, and the checks that need the site's runtime.
#include <regex>
#include <set>

#include "service/core/components.h"
#include "service/core/spec_checker.h"

namespace tfslurm {
namespace spec_internal {
namespace {

// A registry reference as pyxis, enroot and Apptainer take it:
// [SCHEME://][USER@][REGISTRY#]IMAGE[:TAG][@DIGEST]. One word of letters,
// digits and . _ / : @ # + -: it reaches srun's and the runtimes' command
// lines as one argument, and a leading '-' would read as an option.
const std::regex kImageReferencePattern("([a-z][a-z0-9+.-]*://)?[A-Za-z0-9_][A-Za-z0-9._/:@#+-]*");
// Paths of images and mounts: no whitespace, quotes, '$', '`', '\\' or ','
// (pyxis separates --container-mounts with ',' and its fields with ':', so a
// mount's paths have no ':' either; checked where it matters).
const std::regex kPathPattern("/[A-Za-z0-9._/+@=:~-]*");
const std::regex kMountPathPattern("/[A-Za-z0-9._/+@=~-]*");
constexpr size_t kMaxMounts = 64;

std::optional<std::string> Image(Checker& c, const json& v, const std::string& path) {
  auto s = c.String(v, path, 1024);
  if (!s) return std::nullopt;
  if (s->empty()) {
    c.Fail(path,
           "must name an image: an absolute path on the nodes (a squashfs file, an OCI "
           "bundle directory, a SIF file) or a registry reference (nvcr.io#nvidia/"
           "pytorch:24.01-py3, docker://ubuntu:22.04)");
    return std::nullopt;
  }
  if ((*s)[0] == '.') {
    c.Fail(path, "must be an absolute path (starting with /) or a registry reference, got " +
                     Show(v) + ": a relative path is relative to nothing the tasks share");
    return std::nullopt;
  }
  if ((*s)[0] == '/') {
    if (!std::regex_match(*s, kPathPattern)) {
      c.Fail(path,
             "must be an absolute path of letters, digits and . _ / + @ = : ~ - (no "
             "spaces, quotes, commas or $), got " +
                 Show(v));
      return std::nullopt;
    }
    return NormalizePath(*s);
  }
  if (!std::regex_match(*s, kImageReferencePattern)) {
    c.Fail(path,
           "must be an absolute path or a registry reference of letters, digits and "
           ". _ / : @ # + - (e.g. nvcr.io#nvidia/tensorflow:24.01-tf2-py3), got " +
               Show(v));
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> MountPath(Checker& c, const json& v, const std::string& path) {
  auto s = c.String(v, path, 4096);
  if (!s) return std::nullopt;
  if (s->empty() || (*s)[0] != '/' || !std::regex_match(*s, kMountPathPattern)) {
    c.Fail(path,
           "must be an absolute path of letters, digits and . _ / + @ = ~ - (pyxis "
           "separates mounts with ',' and a mount's fields with ':'), got " +
               Show(v));
    return std::nullopt;
  }
  return NormalizePath(*s);
}

// "SRC", "SRC:DST" or "SRC:DST:ro|rw", as pyxis's --container-mounts and
// Apptainer's --bind write one; or {source, target, read_only}.
std::optional<ContainerMount> Mount(Checker& c, const json& v, const std::string& path) {
  ContainerMount m;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t colon; (colon = s.find(':', start)) != std::string::npos; start = colon + 1)
      parts.push_back(s.substr(start, colon - start));
    parts.push_back(s.substr(start));
    if (parts.size() > 3 || (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw")) {
      c.Fail(path, "must be SRC, SRC:DST or SRC:DST:ro|rw (absolute paths), got " + Show(v));
      return std::nullopt;
    }
    auto source = MountPath(c, parts[0], path);
    auto target = MountPath(c, parts.size() > 1 ? parts[1] : parts[0], path);
    if (!source || !target) return std::nullopt;
    m = {*source, *target, parts.size() == 3 && parts[2] == "ro"};
    return m;
  }
  if (!v.is_object()) {
    c.Fail(path, "must be a string SRC:DST[:ro] or an object {source, target, read_only}, got " +
                     TypeAndValue(v));
    return std::nullopt;
  }
  c.OnlyKeys(v, path, {"source", "target", "read_only"});
  if (!v.contains("source")) {
    c.Fail(path + ".source", "is required: the path on the node");
    return std::nullopt;
  }
  auto source = MountPath(c, v["source"], path + ".source");
  auto target = v.contains("target") ? MountPath(c, v["target"], path + ".target") : source;
  if (v.contains("read_only")) {
    if (v["read_only"].is_boolean())
      m.read_only = v["read_only"].get<bool>();
    else
      c.Fail(path + ".read_only", "must be true or false, got " + TypeAndValue(v["read_only"]));
  }
  if (!source || !target) return std::nullopt;
  m.source = *source;
  m.target = *target;
  return m;
}

void ParseMounts(Checker& c, const json& v, ContainerSpec& out) {
  if (!v.is_array()) {
    c.Fail("container.mounts", "must be an array of mounts, got " + TypeAndValue(v));
    return;
  }
  if (v.size() > kMaxMounts)
    c.Fail("container.mounts", "has " + std::to_string(v.size()) + " mounts; at most " +
                                   std::to_string(kMaxMounts) + " allowed");
  std::set<std::string> targets;
  for (size_t i = 0; i < v.size() && i < kMaxMounts; ++i) {
    const std::string path = "container.mounts[" + std::to_string(i) + "]";
    auto m = Mount(c, v[i], path);
    if (!m) continue;
    if (m->target == "/")
      c.Fail(path, "mounts over the image's root (/); mount below it");
    else if (!targets.insert(m->target).second)
      c.Fail(path, "mounts onto " + m->target + ", which an earlier mount already uses");
    else
      out.mounts.push_back(*m);
  }
}

void ParseRoleImages(Checker& c, const json& v, const ExperimentSpec& spec, ContainerSpec& out) {
  if (spec.framework != Framework::kTensorflow) {
    c.Fail("container.roles",
           "applies only to framework tensorflow, whose tasks have roles; "
           "every rank of a " +
               std::string(FrameworkName(spec.framework)) + " experiment runs container.image");
    return;
  }
  if (!c.IsObject(v, "container.roles")) return;
  c.OnlyKeys(v, "container.roles", {"chief", "ps", "worker", "evaluator"});
  for (const auto& [role, block] : v.items()) {
    if (!IsRole(role)) continue;
    const std::string path = "container.roles." + role;
    if (spec.cluster.Count(role) == 0) {
      c.Fail(path, "names role " + role + ", which cluster." + role + " does not have");
      continue;
    }
    if (!c.IsObject(block, path)) continue;
    c.OnlyKeys(block, path, {"image"});
    if (!block.contains("image")) {
      c.Fail(path + ".image", "is required: the image of role " + role + "'s tasks");
      continue;
    }
    if (auto image = Image(c, block["image"], path + ".image")) out.role_images[role] = *image;
  }
}

}  // namespace

void ParseContainer(Checker& c, const json& v, ExperimentSpec& spec) {
  if (!c.IsObject(v, "container")) return;
  c.OnlyKeys(v, "container", {"image", "runtime", "mounts", "roles"});
  ContainerSpec& out = spec.container;
  if (!v.contains("image"))
    c.Fail("container.image",
           "is required: the image the tasks run in, an absolute path on "
           "the nodes or a registry reference");
  else if (auto image = Image(c, v["image"], "container.image"))
    out.image = *image;
  if (v.contains("runtime"))
    if (auto s = c.OneOf(v["runtime"], "container.runtime",
                         {"auto", "pyxis", "enroot", "oci", "apptainer"}))
      out.runtime = *s == "pyxis"       ? ContainerRuntime::kPyxis
                    : *s == "enroot"    ? ContainerRuntime::kEnroot
                    : *s == "oci"       ? ContainerRuntime::kOci
                    : *s == "apptainer" ? ContainerRuntime::kApptainer
                                        : ContainerRuntime::kAuto;
  if (v.contains("mounts")) ParseMounts(c, v["mounts"], out);
  if (v.contains("roles")) ParseRoleImages(c, v["roles"], spec, out);
}

json ContainerJson(const ContainerSpec& container) {
  json mounts = json::array();
  for (const ContainerMount& m : container.mounts)
    mounts.push_back({{"source", m.source}, {"target", m.target}, {"read_only", m.read_only}});
  json j = {{"image", container.image},
            {"runtime", ContainerRuntimeName(container.runtime)},
            {"mounts", mounts}};
  if (!container.role_images.empty()) {
    json roles = json::object();
    for (const auto& [role, image] : container.role_images) roles[role] = {{"image", image}};
    j["roles"] = roles;
  }
  return j;
}

}  // namespace spec_internal

const char* ContainerRuntimeName(ContainerRuntime runtime) {
  switch (runtime) {
    case ContainerRuntime::kPyxis:
      return "pyxis";
    case ContainerRuntime::kEnroot:
      return "enroot";
    case ContainerRuntime::kOci:
      return "oci";
    case ContainerRuntime::kApptainer:
      return "apptainer";
    case ContainerRuntime::kAuto:
      break;
  }
  return "auto";
}

ContainerRuntime ResolveContainerRuntime(const ContainerSpec& spec, ContainerRuntime site) {
  return spec.runtime == ContainerRuntime::kAuto ? site : spec.runtime;
}

Status CheckContainerForSite(const ExperimentSpec& spec, ContainerRuntime site,
                             const std::string& oci_unable_slurm_release) {
  const ContainerSpec& container = spec.container;
  if (!container.enabled()) return Status::Ok();
  std::vector<FieldError> fields;
  const ContainerRuntime runtime = ResolveContainerRuntime(container, site);
  if (runtime == ContainerRuntime::kAuto)
    fields.push_back({"container.runtime",
                      "is auto, but this tfslurmd names no site runtime (its "
                      "--container-runtime); name one: pyxis | enroot | oci | apptainer"});
  std::vector<std::pair<std::string, std::string>> images = {{"container.image", container.image}};
  for (const auto& [role, image] : container.role_images)
    images.push_back({"container.roles." + role + ".image", image});
  if (runtime == ContainerRuntime::kOci && !oci_unable_slurm_release.empty())
    fields.push_back({"container.runtime",
                      "is oci, but this cluster's slurmctld runs Slurm " +
                          oci_unable_slurm_release +
                          ", whose OCI support ignores a bundle's root.path and runs one task "
                          "per node (src/slurmd/slurmstepd/container.c); runtime oci needs Slurm "
                          "23.02 or later: use pyxis or enroot here"});
  if (runtime == ContainerRuntime::kOci)
    for (const auto& [field, image] : images)
      if (image[0] != '/')
        fields.push_back(
            {field, "is the registry reference '" + image +
                        "', but runtime oci (Slurm's srun --container) runs an OCI bundle "
                        "directory (config.json and rootfs/) on the nodes' file system; unpack "
                        "the image there (umoci unpack), or use runtime pyxis or enroot"});
  // pyxis and Slurm's OCI support take the image from srun's options, which
  // are one per component of the job: the roles of a component share one.
  if (AgentRunsInside(runtime))
    for (const JobComponent& component : JobComponents(spec))
      for (const std::string& role : component.roles)
        if (container.ImageFor(role) != container.ImageFor(component.roles.front()))
          fields.push_back(
              {"container.roles." +
                   (container.role_images.count(role) ? role : component.roles.front()),
               "gives roles " + component.roles.front() + " and " + role +
                   " different images, but with runtime " + ContainerRuntimeName(runtime) +
                   " the tasks of one Slurm job component run srun's one image, and these roles "
                   "share " +
                   component.field +
                   "; give the role resources of its own (roles.<role>, a component of its own) "
                   "or the same image"});
  if (fields.empty()) return Status::Ok();
  std::string message = "the container section cannot run with runtime " +
                        std::string(ContainerRuntimeName(runtime)) + ": " + fields.front().field +
                        " " + fields.front().reason;
  return InvalidArgument(message, std::move(fields));
}

}  // namespace tfslurm
