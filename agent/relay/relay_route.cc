#include "agent/relay/relay_route.h"

#include <fcntl.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "agent/fnv1a.h"

extern char** environ;

namespace tfslurm::agent {
namespace {

// A Unix socket's path must fit sockaddr_un.sun_path with its NUL.
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

std::string FileNameSafe(const std::string& s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out;
}

bool Connectable(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

StatusOr<std::optional<RelayPlace>> RelayPlaceFor(const EnvLookup& env, unsigned uid,
                                                  const std::string& service) {
  const std::string mode = env(kAgentRelayVariable).value_or("");
  if (mode.empty() || mode == "off") return std::optional<RelayPlace>();
  if (mode != "node")
    return InvalidArgument(std::string(kAgentRelayVariable) + "='" + mode +
                           "': the values are 'node' (through the node's relay) and 'off'");
  const std::string job = env("SLURM_JOB_ID").value_or("");
  const std::string step = env("SLURM_STEP_ID").value_or("");
  const std::string node = env("SLURMD_NODENAME").value_or("");
  if (job.empty() || step.empty() || node.empty())
    return InvalidArgument(
        "the node's relay needs SLURM_JOB_ID, SLURM_STEP_ID and SLURMD_NODENAME (srun sets them)");
  std::string tmp = env("TMPDIR").value_or("");
  if (tmp.empty() || tmp[0] != '/') tmp = "/tmp";
  const std::string dir = tmp + "/tfslurm-relay-" + std::to_string(uid);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Unavailable("cannot make the relay directory " + dir + ": " + strerror(errno));
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return Unavailable("cannot inspect the relay directory " + dir + ": " + strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0)
    return FailedPrecondition("the relay directory " + dir +
                              " is not a directory of this user's alone (mode 0700, uid " +
                              std::to_string(uid) + "); not using a relay");
  // The service and the cluster too: job ids repeat across clusters, and
  // a relay carries its agents to one service only. FNV-1a, the same in
  // every build of the agent: agents of two builds may share a node.
  const std::string to =
      Fnv1a64Hex(env("SLURM_CLUSTER_NAME").value_or("") + " " + service).substr(0, 8);
  std::string base =
      FileNameSafe(job) + "." + FileNameSafe(step) + "." + FileNameSafe(node) + "." + to;
  if (dir.size() + 1 + base.size() + 5 > kMaxSocketPath) {
    // A long TMPDIR or node name: a hash keeps the names apart within the limit.
    base = FileNameSafe(job) + "." + FileNameSafe(step) + "." + Fnv1a64Hex(node) + "." + to;
    if (dir.size() + 1 + base.size() + 5 > kMaxSocketPath)
      return FailedPrecondition("TMPDIR '" + tmp + "' is too long for a Unix socket's path (" +
                                std::to_string(kMaxSocketPath) + " bytes); not using a relay");
  }
  RelayPlace place;
  place.socket_path = dir + "/" + base + ".sock";
  place.lock_path = dir + "/" + base + ".lock";
  place.log_path = dir + "/" + base + ".log";
  return std::optional<RelayPlace>(std::move(place));
}

RelayRoute::RelayRoute(RelayPlace place, std::vector<std::string> relay_command,
                       std::chrono::milliseconds wait_for_socket)
    : place_(std::move(place)),
      relay_command_(std::move(relay_command)),
      wait_for_socket_(wait_for_socket) {}

std::optional<std::string> RelayRoute::SocketForNextStream() {
  ReapRelay();
  for (int tries = 0;; ++tries) {
    int fd = open(place_.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      if (failures_logged_++ < 3)
        spdlog::warn("cannot open the relay's lock {}: {}; going straight to the service",
                     place_.lock_path, strerror(errno));
      return std::nullopt;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);  // a relay runs, or is being started by another agent
      break;
    }
    // A relay that ended removed the lock file while holding it: the file
    // this agent holds may be that one, no longer at the path.
    struct stat held, at_path;
    if (fstat(fd, &held) != 0 || stat(place_.lock_path.c_str(), &at_path) != 0 ||
        held.st_ino != at_path.st_ino || held.st_dev != at_path.st_dev) {
      close(fd);
      if (tries < 3) continue;
      return std::nullopt;
    }
    // No relay holds it: this agent starts one, which keeps the lock.
    const bool started = StartRelay(fd);
    close(fd);
    if (!started) return std::nullopt;
    break;
  }
  if (WaitForSocket()) return place_.socket_path;
  if (failures_logged_++ < 3)
    spdlog::warn(
        "the node's relay did not answer at {} within {} ms (its log: {}); going "
        "straight to the service",
        place_.socket_path, wait_for_socket_.count(), place_.log_path);
  return std::nullopt;
}

bool RelayRoute::StartRelay(int lock_fd) {
  // The relay gets the lock as descriptor 3, its log as stdout and stderr,
  // and nothing else of the agent's (not the program's reserved port).
  int log_fd =
      open(place_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  int high_lock_fd = fcntl(lock_fd, F_DUPFD_CLOEXEC, 10);
  if (log_fd < 0 || high_lock_fd < 0) {
    spdlog::warn("cannot start the node's relay: {}", strerror(errno));
    if (log_fd >= 0) close(log_fd);
    if (high_lock_fd >= 0) close(high_lock_fd);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  posix_spawn_file_actions_adddup2(&actions, high_lock_fd, 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own session: the agent's signals to its program's group never reach
  // it. It stays this agent's child: Slurm's proctrack/linuxproc finds a
  // step's processes by their parents.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);

  std::vector<std::string> words = relay_command_;
  words.push_back("--lock-fd");
  words.push_back("3");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(log_fd);
  close(high_lock_fd);
  if (rc != 0) {
    spdlog::warn("cannot start the node's relay ({}): {}", words[0], strerror(rc));
    return false;
  }
  relay_pid_ = pid;
  spdlog::info("started the node's relay at {} (its log: {})", place_.socket_path, place_.log_path);
  return true;
}

void RelayRoute::ReapRelay() {
  if (relay_pid_ <= 0) return;
  int status = 0;
  if (waitpid(relay_pid_, &status, WNOHANG) != relay_pid_) return;
  relay_pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    spdlog::warn("the node's relay this agent started ended with status {}; its log: {}", status,
                 place_.log_path);
}

bool RelayRoute::WaitForSocket() {
  const auto deadline = std::chrono::steady_clock::now() + wait_for_socket_;
  while (true) {
    if (Connectable(place_.socket_path)) return true;
    const pid_t started = relay_pid_;
    ReapRelay();
    if (started > 0 && relay_pid_ < 0) return false;  // the one it started has ended
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

StatusOr<std::vector<std::string>> SelfRelayCommand(
    int argc, const std::vector<std::string>& relay_arguments) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> words;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    words.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (argc < 1 || words.size() < static_cast<size_t>(argc))
    return Internal("cannot read this agent's command line from /proc/self/cmdline");
  const size_t agent_word = words.size() - static_cast<size_t>(argc);
  std::vector<std::string> command(words.begin(), words.begin() + agent_word + 1);
  // The program itself (the agent, or the loader running it), whatever
  // PATH or working directory the relay starts with.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return Internal("cannot read /proc/self/exe: " + std::string(strerror(errno)));
  command[0] = std::string(exe, static_cast<size_t>(n));
  command.push_back("relay");
  command.insert(command.end(), relay_arguments.begin(), relay_arguments.end());
  return command;
}

}  // namespace tfslurm::agent
