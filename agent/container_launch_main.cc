// tfslurm-container-launch: what the agent starts as the program when the
// program runs through enroot or Apptainer (agent/container_command.h): it
// imports the image once per node, then becomes the runtime's start
// command. Errors are one line starting with kLauncherError, after the
// runtime's own output, so the agent reports them as the program's cause.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/container_command.h"

extern char** environ;

namespace tfslurm::agent {
namespace {

void Say(const std::string& line) { std::fprintf(stderr, "%s%s\n", kLauncherPrefix, line.c_str()); }

[[noreturn]] void Fail(const std::string& line, int code) {
  std::fprintf(stderr, "%s%s\n", kLauncherError, line.c_str());
  std::exit(code);
}

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

[[noreturn]] void Exec(std::vector<std::string> args) {
  std::vector<char*> argv = Argv(args);
  ::execvp(argv[0], argv.data());
  const char* path = std::getenv("PATH");
  Fail("cannot run '" + args[0] + "': " + std::strerror(errno) + " (PATH=" + (path ? path : "") +
           "); is the " + args[0] + " runtime installed on " + "this node?",
       127);
}

// Runs `args` with stdout and stderr into `output`; its exit status.
int Run(std::vector<std::string> args, std::string* output) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) Fail(std::string("pipe: ") + std::strerror(errno), 1);
  pid_t pid = ::fork();
  if (pid < 0) Fail(std::string("fork: ") + std::strerror(errno), 1);
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    std::vector<char*> argv = Argv(args);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot run '%s': %s\n", args[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The last non-empty line of `text`: the runtime's word on why it failed.
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// A directory of this user's own on this node for locks and the rc script.
std::string PrivateDirectory() {
  std::string dir = "/tmp/tfslurm-containers-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    Fail("cannot make " + dir + ": " + std::strerror(errno), 1);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    Fail(dir + " is not a directory of this user's own", 1);
  return dir;
}

// Imports the image under `name` unless this node has it; under a lock, so
// the node's tasks wait for one import instead of making one each.
void ImportOnce(const std::string& dir, const std::string& image, const std::string& name) {
  // Per Slurm node: the local cluster's nodes share a host's /tmp (their
  // imports are on disks of their own: start.sh --containers).
  const char* node = std::getenv("SLURMD_NODENAME");
  const std::string lock_path = dir + "/" + name + (node ? std::string(".") + node : "") + ".lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0)
    Fail("cannot lock " + lock_path + ": " + std::strerror(errno), 1);
  std::string listing;
  if (int rc = Run({"enroot", "list"}, &listing); rc != 0)
    Fail("enroot list failed (exit " + std::to_string(rc) + "): " + LastLine(listing), 1);
  bool present = false;
  for (size_t start = 0; start < listing.size();) {
    size_t end = listing.find('\n', start);
    if (end == std::string::npos) end = listing.size();
    if (listing.compare(start, end - start, name) == 0) present = true;
    start = end + 1;
  }
  if (present) {
    Say("image " + image + " is imported on this node already (enroot container " + name + ")");
  } else {
    const auto started = std::chrono::steady_clock::now();
    const std::string scratch = dir + "/" + name + ".sqsh";
    ::unlink(scratch.c_str());
    for (const std::vector<std::string>& step : EnrootImport(image, name, scratch)) {
      std::string output;
      int rc = Run(step, &output);
      std::fputs(output.c_str(), stderr);
      if (rc != 0) {
        ::unlink(scratch.c_str());
        Fail("enroot " + step[1] + " of " + image + " failed (exit " + std::to_string(rc) +
                 "): " + LastLine(output),
             1);
      }
    }
    ::unlink(scratch.c_str());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", s);
    Say("imported " + image + " as enroot container " + name + " in " + seconds + " s");
  }
  ::close(lock);
}

std::string WriteRcScript(const std::string& dir) {
  const std::string script = EnrootRcScript();
  const std::string path = dir + "/rc-" + EnrootName(script) + ".sh";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return path;
  const std::string tmp = path + "." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f || std::fputs(script.c_str(), f) < 0 || std::fclose(f) != 0 ||
      ::rename(tmp.c_str(), path.c_str()) != 0)
    Fail("cannot write " + path + ": " + std::strerror(errno), 1);
  return path;
}

// The image's identity: a registry reference's text; a file's path, size,
// mtime and inode (a rebuilt file is a new image). A file that cannot be
// read keeps its path, and enroot says what is wrong with it.
std::string Identity(const std::string& image) {
  struct stat st;
  if (image.empty() || image[0] != '/' || ::stat(image.c_str(), &st) != 0) return image;
  return image + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
}

int Main(int argc, char** argv) {
  std::string error;
  LauncherRequest r = ParseLauncherArgs(std::vector<std::string>(argv + 1, argv + argc), &error);
  if (r.argv.empty()) Fail(error, 2);
  if (r.launch.runtime == "apptainer") Exec(ApptainerExec(r.launch, r.workdir, r.argv));
  if (r.launch.runtime != "enroot") Fail("no such runtime: " + r.launch.runtime, 2);
  const std::string dir = PrivateDirectory();
  const std::string name = EnrootName(Identity(r.launch.image));
  ImportOnce(dir, r.launch.image, name);
  const std::string rc = WriteRcScript(dir);
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (!key.empty() && !StaysOnTheHost(key)) names.push_back(key);
  }
  ::setenv(kWorkdirVariable, r.workdir.c_str(), 1);
  Exec(EnrootStart(r.launch, name, rc, names, r.argv));
}

}  // namespace
}  // namespace tfslurm::agent

int main(int argc, char** argv) { return tfslurm::agent::Main(argc, argv); }
