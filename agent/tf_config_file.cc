#include "agent/tf_config_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "schema/tf_config_wire.h"

namespace tfslurm::agent {
namespace {

constexpr std::string_view kTfConfigPrefix = "TF_CONFIG=";
constexpr std::string_view kPythonPathPrefix = "PYTHONPATH=";

// Imported by Python's site module at startup (tf_config_file.h says why).
constexpr char kSiteCustomize[] =
    R"PY(# Written by tfslurm-agent. This task's TF_CONFIG is longer than Linux
# passes in one environment variable (131,072 bytes), so the agent wrote it
# to the file TFSLURM_TF_CONFIG_FILE names and put this directory first on
# PYTHONPATH. Python imports this module at startup; it puts TF_CONFIG in
# os.environ, where TensorFlow reads it, and then imports the sitecustomize
# module it hides, if there is one.
import os as _os
import sys as _sys


def _tfslurm_tf_config():
    path = _os.environ.get("TFSLURM_TF_CONFIG_FILE")
    if not path or "TF_CONFIG" in _os.environ:
        return
    with open(path, encoding="utf-8") as f:
        value = f.read()
    # os.environ only, not the C environment (putenv): a program started
    # from this one could not be exec'd with it (E2BIG), and a Python one
    # reads the file again through this module.
    _os.environ._data[_os.environ.encodekey("TF_CONFIG")] = _os.environ.encodevalue(value)


def _tfslurm_next_sitecustomize():
    here = _os.path.dirname(_os.path.abspath(__file__))
    saved = list(_sys.path)
    mine = _sys.modules.pop("sitecustomize", None)
    _sys.path[:] = [p for p in saved if _os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  (the site's or the image's own)
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        if mine is not None:
            _sys.modules["sitecustomize"] = mine
    finally:
        _sys.path[:] = saved


_tfslurm_tf_config()
_tfslurm_next_sitecustomize()
)PY";

Status WriteFile(const std::string& path, std::string_view content) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) return Error("cannot write " + partial + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) return Error("cannot rename " + partial + " to " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string TemporaryDirectory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && tmpdir[0] == '/' ? tmpdir : "/tmp";
}

TfConfigFile::TfConfigFile(std::string parent) : parent_(std::move(parent)) {}

TfConfigFile::~TfConfigFile() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status TfConfigFile::MakeDir() {
  if (!dir_.empty()) return Status::Ok();
  std::string pattern = parent_ + "/tfslurm-agent-XXXXXX";
  // mkdtemp: mode 0700, so only the task's user reads what is in it.
  if (::mkdtemp(pattern.data()) == nullptr)
    return Error("cannot make a directory in " + parent_ +
                 " for TF_CONFIG: " + std::strerror(errno));
  dir_ = pattern;
  std::error_code ec;
  std::filesystem::create_directory(dir_ + "/python", ec);
  if (ec) return Error("cannot make " + dir_ + "/python: " + ec.message());
  return WriteFile(dir_ + "/python/sitecustomize.py", kSiteCustomize);
}

StatusOr<bool> TfConfigFile::Apply(std::vector<std::string>& env) {
  auto tf_config = env.end();
  auto python_path = env.end();
  for (auto it = env.begin(); it != env.end(); ++it) {
    if (it->starts_with(kTfConfigPrefix)) tf_config = it;
    if (it->starts_with(kPythonPathPrefix)) python_path = it;
  }
  if (tf_config == env.end() ||
      tf_config->size() - kTfConfigPrefix.size() <= wire::kMaxTfConfigBytes)
    return false;
  if (Status s = MakeDir(); !s.ok()) return s;
  const std::string file = dir_ + "/tf_config.json";
  if (Status s = WriteFile(file, std::string_view(*tf_config).substr(kTfConfigPrefix.size()));
      !s.ok())
    return s;
  *tf_config = std::string(kTfConfigFileVariable) + "=" + file;
  const std::string modules = dir_ + "/python";
  if (python_path == env.end()) {
    env.push_back(std::string(kPythonPathPrefix) + modules);
  } else {
    const std::string old = python_path->substr(kPythonPathPrefix.size());
    *python_path = std::string(kPythonPathPrefix) + modules + (old.empty() ? "" : ":" + old);
  }
  auto name = [](const std::string& entry) {
    return std::string_view(entry).substr(0, entry.find('='));
  };
  std::sort(env.begin(), env.end(),
            [&](const std::string& a, const std::string& b) { return name(a) < name(b); });
  return true;
}

}  // namespace tfslurm::agent
