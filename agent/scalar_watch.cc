#include "agent/scalar_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "agent/scalars_jsonl.h"
#include "agent/tfrecord_reader.h"

namespace tfslurm::agent {
namespace {

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";
// How many bytes before the read position are kept and compared on the next
// read: enough to notice a file rewritten from its start.
constexpr size_t kBeforeBytes = 16;

double SystemWallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Reads up to `length` bytes at `offset`; nullopt on an error.
std::optional<std::string> PRead(const std::string& path, uint64_t offset, uint64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string buffer(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, buffer.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  buffer.resize(done);
  return buffer;
}

// Newlines in the first `size` bytes, for the line numbers of messages.
int64_t CountLines(const std::string& path, uint64_t size) {
  int64_t lines = 0;
  constexpr uint64_t kChunk = 1 << 20;
  for (uint64_t at = 0; at < size; at += kChunk) {
    std::optional<std::string> chunk = PRead(path, at, std::min(kChunk, size - at));
    if (!chunk || chunk->empty()) break;
    lines += std::count(chunk->begin(), chunk->end(), '\n');
  }
  return lines;
}

}  // namespace

ScalarWatch::ScalarWatch(ScalarWatchOptions options) : options_(std::move(options)) {
  if (!options_.scalars_file.empty()) {
    FollowedFile f;
    f.path = options_.scalars_file;
    f.jsonl = true;
    files_.emplace(f.path, std::move(f));
  }
}

void ScalarWatch::Warn(const std::string& message) {
  if (options_.warn) {
    options_.warn(message);
  } else {
    spdlog::warn("{}", message);
  }
}

void ScalarWatch::Baseline() {
  size_t entries = 0;
  if (!options_.model_dir.empty()) Walk(options_.model_dir, "", 0, true, entries);
  if (!options_.scalars_file.empty()) TakeBaseline(files_.at(options_.scalars_file));
}

void ScalarWatch::TakeBaseline(FollowedFile& f) {
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // read from 0 once there
  f.inode = st.st_ino;
  f.offset = static_cast<uint64_t>(st.st_size);
  const uint64_t keep = std::min<uint64_t>(kBeforeBytes, f.offset);
  f.before = PRead(f.path, f.offset - keep, keep).value_or("");
  if (f.before.size() != keep) f.before.clear();
  if (f.jsonl) f.lines = CountLines(f.path, f.offset);
}

void ScalarWatch::Walk(const std::string& dir, const std::string& run, int depth, bool baseline,
                       size_t& entries) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;  // MODEL_DIR may not exist yet
  std::vector<std::pair<std::string, unsigned char>> children;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (++entries > options_.limits.max_dir_entries) {
      if (!warned_entry_limit_) {
        warned_entry_limit_ = true;
        Warn(fmt::format(
            "more than {} entries under {}: looking for TensorBoard event files only among the "
            "first {}",
            options_.limits.max_dir_entries, options_.model_dir, options_.limits.max_dir_entries));
      }
      break;
    }
    children.emplace_back(e->d_name, e->d_type);
  }
  ::closedir(d);
  std::sort(children.begin(), children.end());
  for (auto& [name, type] : children) {
    const std::string path = dir + "/" + name;
    if (type == DT_UNKNOWN) {  // a file system that does not say
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
    }
    if (type == DT_DIR) {
      // A symlink is DT_LNK: symlinked directories are not followed.
      if (depth < options_.limits.max_depth) {
        Walk(path, run.empty() ? name : run + "/" + name, depth + 1, baseline, entries);
      }
    } else if ((type == DT_REG || type == DT_LNK) && name.starts_with(kEventFilePrefix)) {
      AddEventFile(path, run, baseline);
    }
  }
}

void ScalarWatch::AddEventFile(const std::string& path, const std::string& run, bool baseline) {
  if (files_.contains(path) || not_followed_.contains(path)) return;
  size_t& count = baseline ? baseline_files_ : new_files_;
  if (count >= options_.limits.max_files) {
    not_followed_.insert(path);
    if (!warned_file_limit_) {
      warned_file_limit_ = true;
      Warn(fmt::format(
          "more than {} TensorBoard event files {} under {}: not following {} and any further "
          "ones",
          options_.limits.max_files, baseline ? "already" : "written", options_.model_dir, path));
    }
    return;
  }
  ++count;
  FollowedFile f;
  f.path = path;
  f.run = run;
  f.need = kRecordHeaderBytes;
  if (baseline) TakeBaseline(f);
  files_.emplace(path, std::move(f));
}

std::vector<ScalarPoint> ScalarWatch::Poll(bool final) {
  ++polls_;
  if (!options_.model_dir.empty() &&
      (final || polls_ - last_walk_poll_ >= options_.limits.rescan_every_polls)) {
    last_walk_poll_ = polls_;
    size_t entries = 0;
    Walk(options_.model_dir, "", 0, false, entries);
  }
  std::vector<ScalarPoint> out;
  for (auto& [path, f] : files_) {
    if (f.jsonl) {
      ReadLines(f, out);
    } else if (!f.corrupt) {
      ReadEvents(f, out);
    }
  }
  if (held_back_lines_ > 0 &&
      (final || polls_ - *line_warning_poll_ >= options_.limits.warning_every_polls)) {
    Warn(fmt::format("{}: {} more invalid line{} skipped (the last: {})", options_.scalars_file,
                     held_back_lines_, held_back_lines_ == 1 ? "" : "s", last_held_back_));
    line_warning_poll_ = polls_;
    held_back_lines_ = 0;
  }
  return out;
}

void ScalarWatch::StartOver(FollowedFile& f, const char* why) {
  spdlog::info("{} was {}: reading it from its start", f.path, why);
  f.offset = 0;
  f.need = f.jsonl ? 1 : kRecordHeaderBytes;
  f.skip = 0;
  f.before.clear();
  f.corrupt = false;
  f.warned_bad_record = false;
  f.lines = 0;
  f.skipping_long_line = false;
}

std::optional<uint64_t> ScalarWatch::CurrentSize(FollowedFile& f) {
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (f.inode != st.st_ino) {
    if (f.inode != 0) StartOver(f, "replaced");
    f.inode = st.st_ino;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < f.offset) StartOver(f, "truncated");
  return size;
}

std::optional<std::string> ScalarWatch::ReadAt(FollowedFile& f, uint64_t length) {
  const uint64_t back = f.before.size();
  std::optional<std::string> bytes = PRead(f.path, f.offset - back, back + length);
  if (!bytes) return std::nullopt;
  if (bytes->compare(0, back, f.before) != 0) {
    StartOver(f, "rewritten");
    return std::nullopt;  // read from the start at the next poll
  }
  bytes->erase(0, back);
  return bytes;
}

void ScalarWatch::Consumed(FollowedFile& f, const std::string& chunk, uint64_t bytes) {
  f.offset += bytes;
  if (bytes >= kBeforeBytes) {
    f.before = chunk.substr(bytes - kBeforeBytes, kBeforeBytes);
    return;
  }
  f.before += chunk.substr(0, bytes);
  if (f.before.size() > kBeforeBytes) f.before.erase(0, f.before.size() - kBeforeBytes);
}

void ScalarWatch::ReadEvents(FollowedFile& f, std::vector<ScalarPoint>& out) {
  std::optional<uint64_t> size = CurrentSize(f);
  if (!size) return;
  if (f.skip > 0) {
    if (*size - f.offset < f.skip) return;  // size >= offset; offset + skip may wrap
    f.offset += f.skip;
    f.skip = 0;
    f.before.clear();  // not read: nothing to compare
    f.need = kRecordHeaderBytes;
  }
  if (*size < f.offset + f.need) return;
  const uint64_t length =
      std::min(*size - f.offset, std::max(options_.limits.max_read_bytes, f.need));
  std::optional<std::string> chunk = ReadAt(f, length);
  if (!chunk) return;

  std::string_view rest = *chunk;
  uint64_t used = 0;
  while (true) {
    RecordRead r = ReadRecord(rest.substr(used), options_.limits.max_record_bytes);
    if (r.kind == RecordRead::Kind::kRecord) {
      if (!DecodeEventScalars(r.data, f.run, plugins_, out) && !f.warned_bad_record) {
        f.warned_bad_record = true;
        Warn(fmt::format("{}: the record at byte {} is not a TensorBoard Event; skipped", f.path,
                         f.offset + used));
      }
      used += r.size;
      continue;
    }
    if (r.kind == RecordRead::Kind::kTooLarge) {
      f.skip = r.size;  // from the record's start, once its bytes exist
    } else if (r.kind == RecordRead::Kind::kCorrupt) {
      f.corrupt = true;
      Warn(fmt::format(
          "{}: {} at byte {}: the file is corrupt; its scalars after that point are not read",
          f.path, r.error, f.offset + used));
    } else {
      f.need = r.size;  // a record still being written: wait for its bytes
    }
    break;
  }
  Consumed(f, *chunk, used);
}

void ScalarWatch::ReadLines(FollowedFile& f, std::vector<ScalarPoint>& out) {
  std::optional<uint64_t> size = CurrentSize(f);
  if (!size || *size < f.offset + f.need) return;
  const uint64_t length =
      std::min(*size - f.offset, std::max(options_.limits.max_read_bytes, f.need));
  std::optional<std::string> chunk = ReadAt(f, length);
  if (!chunk) return;

  const std::string_view text = *chunk;
  uint64_t used = 0;
  f.need = 1;
  while (used < text.size()) {
    const size_t eol = text.find('\n', used);
    if (eol == std::string_view::npos) {
      const uint64_t partial = text.size() - used;
      if (f.skipping_long_line) {
        used = text.size();  // the rest of a line already given up on
      } else if (partial > options_.limits.max_line_bytes) {
        f.skipping_long_line = true;
        InvalidLine(f, fmt::format("line {}: longer than {} bytes", f.lines + 1,
                                   options_.limits.max_line_bytes));
        used = text.size();
      } else {
        f.need = partial + 1;  // the line is not finished yet
      }
      break;
    }
    const std::string_view line = text.substr(used, eol - used);
    used = eol + 1;
    ++f.lines;
    if (f.skipping_long_line) {
      f.skipping_long_line = false;
      continue;
    }
    const double now = options_.wall_clock ? options_.wall_clock() : SystemWallClock();
    StatusOr<std::vector<ScalarPoint>> points = ParseScalarsLine(line, now);
    if (!points.ok()) {
      InvalidLine(f, fmt::format("line {}: {}", f.lines, points.status().message()));
      continue;
    }
    for (ScalarPoint& p : *points) out.push_back(std::move(p));
  }
  Consumed(f, *chunk, used);
}

void ScalarWatch::InvalidLine(const FollowedFile& f, const std::string& reason) {
  const bool quiet_enough =
      !line_warning_poll_ || polls_ - *line_warning_poll_ >= options_.limits.warning_every_polls;
  if (held_back_lines_ == 0 && quiet_enough) {
    Warn(fmt::format(
        "{} {}; the line is skipped (further invalid lines are summed up at most once a minute)",
        f.path, reason));
    line_warning_poll_ = polls_;
    return;
  }
  ++held_back_lines_;
  last_held_back_ = reason;
}

// ---------------------------------------------------------------- ScalarBuffer

ScalarBuffer::ScalarBuffer(size_t capacity, std::function<void(const std::string&)> warn)
    : capacity_(capacity), warn_(std::move(warn)) {}

void ScalarBuffer::Warn(const std::string& message) {
  if (warn_) {
    warn_(message);
  } else {
    spdlog::warn("{}", message);
  }
}

void ScalarBuffer::Add(std::vector<ScalarPoint> points) {
  for (ScalarPoint& p : points) points_.push_back(std::move(p));
  if (points_.size() <= capacity_) return;
  const size_t drop = points_.size() - capacity_;
  if (dropped_since_empty_ == 0) {
    Warn(fmt::format(
        "more than {} training scalars are waiting for the service: dropping the oldest",
        capacity_));
  }
  points_.erase(points_.begin(), points_.begin() + static_cast<std::ptrdiff_t>(drop));
  dropped_since_empty_ += drop;
  dropped_total_ += drop;
}

std::vector<ScalarPoint> ScalarBuffer::Take(size_t max) {
  const size_t n = std::min(max, points_.size());
  std::vector<ScalarPoint> out(
      std::make_move_iterator(points_.begin()),
      std::make_move_iterator(points_.begin() + static_cast<std::ptrdiff_t>(n)));
  points_.erase(points_.begin(), points_.begin() + static_cast<std::ptrdiff_t>(n));
  if (points_.empty() && dropped_since_empty_ > 0) {
    Warn(fmt::format("{} training scalars were dropped while the service could not take them",
                     dropped_since_empty_));
    dropped_since_empty_ = 0;
  }
  return out;
}

}  // namespace tfslurm::agent
