// Follows the training scalars the program writes, for the reporting task's
// agent (the one asked to report checkpoints): TensorBoard event files
// anywhere under MODEL_DIR (agent/event_scalars.h) and the JSON-lines file
// TFSLURM_SCALARS_FILE (agent/scalars_jsonl.h). The agent sends what Poll
// returns to the service (agent.proto, Scalars); see agent/README.md.
//
// Only what the current attempt's program writes is reported: the same
// MODEL_DIR is reused across attempts, so Baseline, called before the program
// starts, records every event file with its size and the JSON-lines file's
// size, and Poll reads only files created later and bytes appended past the
// baseline. A file that shrinks, is replaced (another inode) or whose bytes
// before the read position change (rewritten) is read again from its start.
//
// Polls are cheap when nothing changed: one stat(2) per followed file, and a
// read only when it grew; per-file offsets, never a whole file again. The
// directory walk that finds new event files runs every few polls, not every
// one. What a poll may cost is bounded (ScalarWatchLimits): files followed,
// directory depth and entries, bytes read per file and poll, record and line
// sizes. Symlinked directories are not followed.
//
// Thread safety: not thread-safe; one ScalarWatch belongs to the agent's main
// loop. ScalarBuffer likewise.
#ifndef TFSLURM_AGENT_SCALAR_WATCH_H_
#define TFSLURM_AGENT_SCALAR_WATCH_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/event_scalars.h"

namespace tfslurm::agent {

struct ScalarWatchLimits {
  // Event files followed: up to this many present at the baseline, and as
  // many again created after it.
  size_t max_files = 1000;
  int max_depth = 6;                     // directory levels below MODEL_DIR walked
  size_t max_dir_entries = 100'000;      // entries looked at per walk
  int rescan_every_polls = 5;            // the walk for new event files
  uint64_t max_read_bytes = 8 << 20;     // per file and poll (more is read next poll)
  uint64_t max_record_bytes = 16 << 20;  // larger records (images?) are skipped unread
  uint64_t max_line_bytes = 1 << 20;     // a longer JSON line is skipped
  // After one warning about invalid JSON lines, the next ones are summed up
  // in one warning at most this many polls later (and at the final poll).
  int warning_every_polls = 60;
};

struct ScalarWatchOptions {
  std::string model_dir;     // "" when there is none: no event files are followed
  std::string scalars_file;  // TFSLURM_SCALARS_FILE, absolute; "" when not set
  ScalarWatchLimits limits;
  // Seconds since the epoch: a JSON line's default wall_time. The system
  // clock when unset.
  std::function<double()> wall_clock;
  // Where warnings go; spdlog::warn when unset.
  std::function<void(const std::string&)> warn;
};

class ScalarWatch {
 public:
  explicit ScalarWatch(ScalarWatchOptions options);

  // Records what exists now; Poll reports only what is written after. Call
  // before the program starts.
  void Baseline();

  // The points written since the last poll, in the order written per file.
  // `final`: the program has ended; walk for new files now and report the
  // warnings held back.
  std::vector<ScalarPoint> Poll(bool final = false);

  // Files followed: event files and the JSON-lines file when it exists.
  size_t followed_files() const { return files_.size(); }

 private:
  struct FollowedFile {
    std::string path;
    std::string run;  // event files: the tag prefix
    bool jsonl = false;
    ino_t inode = 0;       // 0: not seen yet
    uint64_t offset = 0;   // bytes consumed
    uint64_t need = 1;     // bytes past offset that must exist before reading again
    uint64_t skip = 0;     // a too-large record to pass over once its bytes exist
    std::string before;    // the last bytes before offset, to notice a rewrite
    bool corrupt = false;  // a CRC mismatch: not read any further
    bool warned_bad_record = false;
    int64_t lines = 0;  // JSON-lines: lines before offset, for messages
    bool skipping_long_line = false;
  };

  void Walk(const std::string& dir, const std::string& run, int depth, bool baseline,
            size_t& entries);
  void AddEventFile(const std::string& path, const std::string& run, bool baseline);
  void TakeBaseline(FollowedFile& f);
  // The file's size after checking it is the same file: a replaced,
  // truncated or rewritten file starts over at 0. nullopt when absent.
  std::optional<uint64_t> CurrentSize(FollowedFile& f);
  std::optional<std::string> ReadAt(FollowedFile& f, uint64_t length);
  void Consumed(FollowedFile& f, const std::string& chunk, uint64_t bytes);
  void StartOver(FollowedFile& f, const char* why);
  void ReadEvents(FollowedFile& f, std::vector<ScalarPoint>& out);
  void ReadLines(FollowedFile& f, std::vector<ScalarPoint>& out);
  void InvalidLine(const FollowedFile& f, const std::string& reason);
  void Warn(const std::string& message);

  ScalarWatchOptions options_;
  std::map<std::string, FollowedFile> files_;  // by path
  std::set<std::string> not_followed_;         // over the file limit
  size_t baseline_files_ = 0;
  size_t new_files_ = 0;
  bool warned_file_limit_ = false;
  bool warned_entry_limit_ = false;
  PluginsByTag plugins_;
  int64_t polls_ = 0;
  int64_t last_walk_poll_ = 0;

  // Invalid JSON lines held back from the log (see warning_every_polls).
  std::optional<int64_t> line_warning_poll_;
  int64_t held_back_lines_ = 0;
  std::string last_held_back_;
};

// The points waiting for a stream to the service, oldest first, at most
// `capacity`: beyond it the oldest are dropped, with one warning when
// dropping starts and one with the count when the buffer is next emptied.
class ScalarBuffer {
 public:
  explicit ScalarBuffer(size_t capacity = 20'000,
                        std::function<void(const std::string&)> warn = nullptr);

  void Add(std::vector<ScalarPoint> points);
  // Up to `max` of the oldest points.
  std::vector<ScalarPoint> Take(size_t max);
  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }
  uint64_t dropped() const { return dropped_total_; }

 private:
  void Warn(const std::string& message);

  size_t capacity_;
  std::function<void(const std::string&)> warn_;
  std::deque<ScalarPoint> points_;
  uint64_t dropped_since_empty_ = 0;
  uint64_t dropped_total_ = 0;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SCALAR_WATCH_H_
