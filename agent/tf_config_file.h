// TF_CONFIG for a TensorFlow cluster too large for one environment variable.
//
// TF_CONFIG carries the whole cluster, so it grows with the tasks: 278,598
// bytes at 16,384 tasks. Linux refuses an exec whose one environment string
// is longer than 131,072 bytes (MAX_ARG_STRLEN; schema/tf_config_wire.h),
// and TensorFlow reads the cluster from os.environ only
// (tfconfig_cluster_resolver.py, _load_tf_config:
// json.loads(os.environ.get('TF_CONFIG', '{}'))). Past about 7,700 tasks
// no program could start with it.
//
// So a TF_CONFIG past the limit leaves the environment: the agent writes it
// to a file in a private directory of its own, names the file in
// TFSLURM_TF_CONFIG_FILE, and puts a `sitecustomize` module first on
// PYTHONPATH (Python's site module imports it at every start, as
// OpenTelemetry's and ddtrace's launchers do). The module puts TF_CONFIG in
// os.environ, where TensorFlow reads it, without putenv: a program the
// Python program starts could not exec with it either, and a Python one
// reads the file again. Then it imports the sitecustomize it hides (the
// site's or the image's), if there is one. A program run with `python -S`
// or `-I` (isolated) does not import it and gets no TF_CONFIG.
//
// Thread safety: not thread-safe; one per agent session.
#ifndef TFSLURM_AGENT_TF_CONFIG_FILE_H_
#define TFSLURM_AGENT_TF_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm::agent {

inline constexpr char kTfConfigFileVariable[] = "TFSLURM_TF_CONFIG_FILE";

class TfConfigFile {
 public:
  // `parent`: where the private directory is made ($TMPDIR, else /tmp).
  explicit TfConfigFile(std::string parent);
  ~TfConfigFile();  // removes the directory it made
  TfConfigFile(const TfConfigFile&) = delete;
  TfConfigFile& operator=(const TfConfigFile&) = delete;

  // `env`: the program's "NAME=value" entries (child_env.h), sorted by name.
  // A TF_CONFIG entry longer than one environment string may be is replaced
  // as described above; an entry that fits is left alone, and so is every
  // entry when there is no TF_CONFIG. True when TF_CONFIG went to the
  // file; an error names what could not be written.
  StatusOr<bool> Apply(std::vector<std::string>& env);

  // The directory, "" until a TF_CONFIG needed it.
  const std::string& dir() const { return dir_; }

 private:
  Status MakeDir();

  std::string parent_;
  std::string dir_;
};

// $TMPDIR when set and absolute, else /tmp.
std::string TemporaryDirectory();

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_TF_CONFIG_FILE_H_
