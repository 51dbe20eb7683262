#include "service/api/logs_api.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <thread>

#include "base/mutex.h"
#include "service/api/errors.h"
#include "service/api/request_params.h"

namespace tfslurm::api {
namespace {

constexpr const char* kOffsetHeader = "X-Tfslurm-Log-Offset";
constexpr size_t kChunkBytes = 64 * 1024;
constexpr auto kFollowPollInterval = std::chrono::milliseconds(250);
constexpr int kMaxTailLines = 1000000;

struct TaskName {
  std::string role;
  int index = 0;
};

namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kTask("(chief|ps|worker|evaluator|rank):(0|[1-9][0-9]{0,5})");

}  // namespace

// ROLE:INDEX, strictly: the value selects a task record, and nothing else.
// A PyTorch or JAX task is rank:RANK.
StatusOr<TaskName> ParseTask(const std::string& value) {
  std::smatch m;
  if (!std::regex_match(value, m, kTask)) {
    std::string allowed =
        "must be ROLE:INDEX with ROLE one of chief, ps, worker, evaluator (rank for PyTorch and "
        "JAX) and INDEX a number, e.g. worker:1 or rank:3";
    return InvalidArgument("task " + allowed + "; got '" + ShortForError(value) + "'",
                           {{"task", allowed + "; got '" + ShortForError(value) + "'"}});
  }
  return TaskName{m[1], std::stoi(m[2])};
}

// "ps:0-1, worker:0-3": the tasks an attempt has, for a message.
std::string DescribeTasks(const std::vector<TaskRecord>& tasks) {
  std::map<std::string, int> count;
  for (const TaskRecord& t : tasks) count[t.role]++;
  std::string out;
  for (const auto& [role, n] : count)
    out += (out.empty() ? "" : ", ") + role + ":0" + (n > 1 ? "-" + std::to_string(n - 1) : "");
  return out;
}

StatusOr<ProcId> ProcIdOf(Experiments& experiments, const std::string& id, int attempt,
                          const TaskName& task) {
  auto tasks = experiments.ListTasks(id, attempt);
  if (!tasks.ok()) return tasks.status();
  for (const TaskRecord& t : *tasks) {
    if (t.role != task.role || t.index != task.index) continue;
    // A spare node that took a node's place runs the task under its own
    // SLURM_PROCID, the name of its output file (node_slots.h).
    auto attempts = experiments.ListAttempts(id);
    if (attempts.ok())
      for (const AttemptRecord& a : *attempts)
        if (a.number == attempt) return a.node_slots.ProcOfTask(t.task);
    return ProcId(t.task.value());
  }
  std::string name = task.role + ":" + std::to_string(task.index);
  std::string has = "attempt " + std::to_string(attempt) + " has " + DescribeTasks(*tasks);
  return InvalidArgument("experiment '" + id + "' has no task " + name + "; " + has,
                         {{"task", "no task " + name + "; " + has}});
}

bool AttemptEnded(Experiments& experiments, const std::string& id, int attempt) {
  auto attempts = experiments.ListAttempts(id);
  if (!attempts.ok()) return false;  // unknown now; the follow window still ends the response
  for (const AttemptRecord& a : *attempts)
    if (a.number == attempt) return a.state == AttemptState::kEnded;
  return true;
}

// Opens `root`/`relative` for reading without following a symlink anywhere
// below `root`, and keeps it only if it is a regular file with one link.
// Below `root` everything may belong to the experiment's owner (site mode
// runs jobs as their owners, and tfslurmd reads as root): a symlink or a
// renamed directory planted there must not lead the read elsewhere, nor a
// hard link to a file outside (fs.protected_hardlinks usually forbids making
// one; this does not rely on it). openat2's RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS make the kernel check every component during the open
// itself, so nothing can be swapped in between a check and the open; on a
// kernel before 5.6 (ENOSYS), the path the descriptor really opened is
// checked instead. O_NONBLOCK: a FIFO planted under the name must not block
// the open. NotFound when there is no file (yet).
StatusOr<int> OpenBeneath(const std::string& root, const std::string& relative) {
  const Status refused(
      StatusCode::kPermissionDenied,
      "refused: the log file is not a regular file inside the experiment's log directory");
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  int fd = -1;
  int root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd >= 0) {
    open_how how{};
    how.flags = kFlags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    fd = static_cast<int>(syscall(SYS_openat2, root_fd, relative.c_str(), &how, sizeof how));
    int err = errno;
    close(root_fd);
    errno = err;
  }
  if (fd < 0 && (root_fd < 0 || errno == ENOSYS)) {
    fd = open((root + "/" + relative).c_str(), kFlags | O_NOFOLLOW);
    if (fd >= 0) {
      std::error_code ec;
      std::string real =
          std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
      if (ec || real != root + "/" + relative) {
        close(fd);
        return refused;
      }
    }
  }
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no such log file");
    if (errno == ELOOP || errno == EXDEV) return refused;  // a symlink on the way, or ..
    return Unavailable(std::string("cannot open the log file: ") + strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    close(fd);
    return refused;
  }
  return fd;
}

// Where the last `lines` lines of the file start. A newline that ends the
// file ends the last line rather than starting an empty one.
int64_t TailOffset(int fd, int64_t size, int64_t lines) {
  char buf[kChunkBytes];
  int64_t end = size;
  int64_t seen = 0;
  bool skip_final_newline = true;
  while (end > 0) {
    int64_t start = std::max<int64_t>(0, end - static_cast<int64_t>(sizeof buf));
    ssize_t n = pread(fd, buf, static_cast<size_t>(end - start), start);
    if (n <= 0) return 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      if (buf[i] != '\n') {
        skip_final_newline = false;
        continue;
      }
      if (skip_final_newline) {
        skip_final_newline = false;
        continue;
      }
      if (++seen == lines) return start + i + 1;
    }
    end = start;
  }
  return 0;
}

// The follow responses in progress, in all and per user.
class Followers {
 public:
  Followers(int max, int max_per_user) : max_(max), max_per_user_(max_per_user) {}
  // Takes a slot for `user`, or says which limit is reached.
  Status Take(const std::string& user) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (total_ >= max_)
      return Status(StatusCode::kResourceExhausted,
                    "too many logs are being followed at once (" + std::to_string(max_) +
                        "); try again later, or read without follow");
    int& mine = per_user_[user];
    if (mine >= max_per_user_)
      return Status(StatusCode::kResourceExhausted,
                    user + " follows " + std::to_string(mine) + " logs already, at most " +
                        std::to_string(max_per_user_) +
                        " at once; end one, or read without follow");
    ++mine;
    ++total_;
    return Status::Ok();
  }
  void Give(const std::string& user) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    --total_;
    if (--per_user_[user] == 0) per_user_.erase(user);
  }

 private:
  const int max_;
  const int max_per_user_;
  Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> per_user_ ABSL_GUARDED_BY(mu_);
};

// Holds one follower's slot while a follow response lives.
class FollowerSlot {
 public:
  FollowerSlot(std::shared_ptr<Followers> followers, std::string user)
      : followers_(std::move(followers)), user_(std::move(user)) {}
  ~FollowerSlot() { followers_->Give(user_); }
  FollowerSlot(const FollowerSlot&) = delete;
  FollowerSlot& operator=(const FollowerSlot&) = delete;

 private:
  std::shared_ptr<Followers> followers_;
  std::string user_;
};

// One log response in progress: the chunked content provider's state.
struct LogStream {
  Experiments* experiments = nullptr;
  std::string id;
  int attempt = 0;
  std::string root;      // the output root, canonical
  std::string relative;  // <id>/logs/attempt-<N>/<file>, below root
  int fd = -1;           // -1 until the file exists (a follower may wait for it)
  int64_t offset = 0;
  bool follow = false;
  bool attempt_ended = false;
  std::chrono::steady_clock::time_point deadline;
  std::unique_ptr<FollowerSlot> slot;

  ~LogStream() {
    if (fd >= 0) close(fd);
  }

  // Bytes read into `buf`: 0 at the end of the file or while it does not
  // exist; -1 when it cannot be read.
  ssize_t Read(char* buf, size_t size) {
    if (fd < 0) {
      auto opened = OpenBeneath(root, relative);
      if (!opened.ok()) return opened.status().code() == StatusCode::kNotFound ? 0 : -1;
      fd = *opened;
    }
    ssize_t n = pread(fd, buf, size, offset);
    if (n > 0) offset += n;
    return n;
  }

  // The content provider: sends what is there; a follower then waits for
  // more until the attempt has ended (and its output is drained) or the
  // window is over.
  bool Provide(httplib::DataSink& sink) {
    char buf[kChunkBytes];
    ssize_t n = Read(buf, sizeof buf);
    if (n < 0) return false;
    if (n > 0) return sink.write(buf, static_cast<size_t>(n));
    if (!follow || attempt_ended || std::chrono::steady_clock::now() >= deadline) {
      sink.done();
      return true;
    }
    // Slurm has written everything once the job has ended: one more pass
    // to the end of the file and the response is complete.
    attempt_ended = AttemptEnded(*experiments, id, attempt);
    if (!attempt_ended) std::this_thread::sleep_for(kFollowPollInterval);
    return true;
  }
};

// What a request asks for, checked against the experiment.
struct LogRequest {
  std::string id;
  int attempt = 0;
  std::string file;  // batch.out or task-<proc id>.out: built from integers only
  std::string what;  // "the batch script" or "worker:1", for messages
  std::optional<int64_t> tail;
  int64_t offset = 0;
  bool follow = false;
};

StatusOr<LogRequest> ParseLogRequest(const httplib::Request& req, Experiments& experiments,
                                     const Principal& who) {
  LogRequest r;
  r.id = req.matches[1];
  auto experiment = experiments.GetExperiment(r.id);
  if (!experiment.ok()) return experiment.status();
  if (Status s = CheckAccess(who, *experiment); !s.ok()) return s;
  auto attempt = IntParam(req, "attempt", experiment->current_attempt, 1,
                          std::max(experiment->current_attempt, 1));
  if (!attempt.ok()) return attempt.status();
  r.attempt = static_cast<int>(*attempt);
  auto tail = IntParam(req, "tail", 0, 1, kMaxTailLines);
  if (!tail.ok()) return tail.status();
  if (req.has_param("tail")) r.tail = *tail;
  auto offset = IntParam(req, "offset", 0, 0, INT64_MAX / 2);
  if (!offset.ok()) return offset.status();
  r.offset = *offset;
  if (r.tail && req.has_param("offset"))
    return InvalidArgument("give tail or offset, not both",
                           {{"offset", "cannot be combined with tail"}});
  r.follow = IsTrue(req, "follow");

  r.file = "batch.out";
  r.what = "the batch script";
  if (req.has_param("task")) {
    auto task = ParseTask(req.get_param_value("task"));
    if (!task.ok()) return task.status();
    auto proc_id = ProcIdOf(experiments, r.id, r.attempt, *task);
    if (!proc_id.ok()) return proc_id.status();
    r.file = "task-" + std::to_string(proc_id->value()) + ".out";
    r.what = task->role + ":" + std::to_string(task->index);
  }
  return r;
}

// Opens the log and finds where the response starts. A follower may wait
// for a file that does not exist yet; a plain read has nothing to show.
StatusOr<std::shared_ptr<LogStream>> StartLogStream(const LogRequest& r, Experiments& experiments,
                                                    const std::string& root,
                                                    std::chrono::milliseconds follow_window) {
  auto stream = std::make_shared<LogStream>();
  stream->experiments = &experiments;
  stream->id = r.id;
  stream->attempt = r.attempt;
  stream->root = root;
  stream->relative = r.id + "/logs/attempt-" + std::to_string(r.attempt) + "/" + r.file;
  stream->follow = r.follow;
  stream->deadline = std::chrono::steady_clock::now() + follow_window;

  auto opened = OpenBeneath(stream->root, stream->relative);
  if (!opened.ok()) {
    if (opened.status().code() != StatusCode::kNotFound) return opened.status();
    if (r.follow) return stream;
    return NotFound("attempt " + std::to_string(r.attempt) + " of '" + r.id +
                    "' has no output from " + r.what +
                    " yet: it has not started, or wrote nothing");
  }
  stream->fd = *opened;
  struct stat st {};
  fstat(stream->fd, &st);
  stream->offset = r.tail ? TailOffset(stream->fd, st.st_size, *r.tail)
                          : std::min<int64_t>(r.offset, st.st_size);
  return stream;
}

}  // namespace

void RegisterLogRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                       const LogOptions& options) {
  std::error_code ec;
  // Canonical, so that it compares with the real path of an opened file.
  std::string root = std::filesystem::weakly_canonical(options.output_root, ec).string();
  if (ec) root = options.output_root;
  auto followers =
      std::make_shared<Followers>(options.max_followers, options.max_followers_per_user);

  auto handler = [&experiments, options, root, followers](
                     const httplib::Request& req, httplib::Response& res, const Principal& who) {
    auto request = ParseLogRequest(req, experiments, who);
    if (!request.ok()) return ReplyError(res, request.status());
    auto stream = StartLogStream(*request, experiments, root, options.follow_window);
    if (!stream.ok()) return ReplyError(res, stream.status());
    if (request->follow) {
      if (Status s = followers->Take(who.user); !s.ok()) return ReplyError(res, s);
      (*stream)->slot = std::make_unique<FollowerSlot>(followers, who.user);
    }
    res.set_header(kOffsetHeader, std::to_string((*stream)->offset));
    res.set_chunked_content_provider(
        "text/plain; charset=utf-8",
        [stream = *stream](size_t, httplib::DataSink& sink) { return stream->Provide(sink); });
  };
  server.Get(std::string("/experiments/") + kIdPattern + "/logs", Guard(auth, handler));
}

}  // namespace tfslurm::api
