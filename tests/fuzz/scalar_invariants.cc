#include "tests/fuzz/scalar_invariants.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "agent/event_scalars.h"
#include "agent/scalar_watch.h"
#include "agent/scalars_jsonl.h"
#include "agent/tfrecord_reader.h"

namespace tfslurm::fuzz {
namespace {

namespace fs = std::filesystem;
using agent::ScalarPoint;

constexpr double kNow = 1234.5;  // ScalarWatch's clock: the default wall_time
constexpr std::string_view kRecordsPrefix = "REC:";

// A temporary directory for the process's files, removed at exit.
class TempDir {
 public:
  TempDir() {
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) base = fs::temp_directory_path().string();
    std::string pattern = base + "/tfslurm-fuzz-scalars-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string& Dir() {
  static TempDir dir;
  return dir.path();
}

// splitmix64 over an FNV-1a hash of the input: the same input is always
// split the same way, and every mutation splits it differently.
class Rng {
 public:
  explicit Rng(std::string_view bytes) {
    state_ = 0xcbf29ce484222325u;
    for (unsigned char c : bytes) state_ = (state_ ^ c) * 0x100000001b3u;
  }
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

 private:
  uint64_t state_;
};

// Where the file is cut into appends: sorted ends of the pieces, the last
// one the whole size. `pieces` 1: one append.
std::vector<size_t> Cuts(size_t size, Rng& rng, size_t pieces) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < pieces && size > 0; ++i) cuts.push_back(rng.Below(size + 1));
  cuts.push_back(size);
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

bool SameDouble(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

bool SamePoint(const ScalarPoint& a, const ScalarPoint& b) {
  return a.tag == b.tag && a.step == b.step && SameDouble(a.wall_time, b.wall_time) &&
         SameDouble(a.value, b.value);
}

std::string Show(const ScalarPoint& p) {
  return "{" + p.tag + ", step " + std::to_string(p.step) + ", wall_time " +
         std::to_string(p.wall_time) + ", value " + std::to_string(p.value) + "}";
}

// "" when `got` is `want`, point for point.
std::string Compare(const std::vector<ScalarPoint>& got, const std::vector<ScalarPoint>& want,
                    const std::string& when) {
  for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
    if (i >= got.size())
      return when + ": point " + std::to_string(i) + " " + Show(want[i]) + " not reported (" +
             std::to_string(got.size()) + " were)";
    if (i >= want.size())
      return when + ": point " + std::to_string(i) + " " + Show(got[i]) +
             " reported but not in the file (" + std::to_string(want.size()) + " are)";
    if (!SamePoint(got[i], want[i]))
      return when + ": point " + std::to_string(i) + " is " + Show(got[i]) + ", should be " +
             Show(want[i]);
  }
  return "";
}

// "" when `got` is a subsequence of `want`.
std::string CompareSubsequence(const std::vector<ScalarPoint>& got,
                               const std::vector<ScalarPoint>& want, const std::string& when) {
  size_t j = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    while (j < want.size() && !SamePoint(got[i], want[j])) ++j;
    if (j == want.size())
      return when + ": point " + std::to_string(i) + " " + Show(got[i]) +
             " is not one of the file's, in order";
    ++j;
  }
  return "";
}

std::string CheckTags(const std::vector<ScalarPoint>& points, std::string_view run,
                      const std::string& when) {
  for (const ScalarPoint& p : points) {
    if (p.tag.empty()) return when + ": a point with an empty tag";
    if (!run.empty() &&
        (p.tag.size() <= run.size() + 1 || !p.tag.starts_with(run) || p.tag[run.size()] != '/'))
      return when + ": tag \"" + p.tag + "\" is not in run \"" + std::string(run) + "\"";
  }
  return "";
}

// What a model reads from a whole file: the points of each complete record
// or line, with the offset where its bytes end. What it reads from the file's
// first N bytes is the same up to the first unit ending after N (PointsUpTo):
// it only ever stops at a unit that is incomplete or bad, which are so in
// every prefix that holds them.
struct Unit {
  uint64_t end = 0;
  std::vector<ScalarPoint> points;
};

std::vector<ScalarPoint> PointsUpTo(const std::vector<Unit>& units, uint64_t written) {
  std::vector<ScalarPoint> out;
  for (const Unit& u : units) {
    if (u.end > written) break;
    out.insert(out.end(), u.points.begin(), u.points.end());
  }
  return out;
}

// One file, written append by append, followed by a ScalarWatch.
class Follower {
 public:
  Follower(const std::string& path, agent::ScalarWatchOptions options) : path_(path) {
    std::error_code ignored;
    fs::create_directories(fs::path(path).parent_path(), ignored);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      std::perror(path.c_str());
      std::abort();
    }
    options.wall_clock = [] { return kNow; };
    options.warn = [](const std::string&) {};
    watch_.emplace(std::move(options));
    watch_->Baseline();
  }
  ~Follower() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }

  void Append(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::perror(path_.c_str());
        std::abort();
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  // Polls until `want` points have been reported, at most `polls` times,
  // then twice more (anything extra would show then).
  void PollFor(size_t want, size_t polls) {
    for (size_t i = 0; i < polls && got_.size() < want; ++i) Poll(false);
    Poll(false);
    Poll(false);
  }
  void Poll(bool final) {
    for (ScalarPoint& p : watch_->Poll(final)) got_.push_back(std::move(p));
  }
  const std::vector<ScalarPoint>& got() const { return got_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::optional<agent::ScalarWatch> watch_;
  std::vector<ScalarPoint> got_;
};

// ------------------------------------------------------------- event files

uint64_t LoadLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void AppendLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The event file a "REC:" input stands for (see the header).
std::string FrameRecords(std::string_view in) {
  std::string out;
  while (in.size() >= 2) {
    const auto length = static_cast<size_t>(LoadLe(in.data(), 2));
    in.remove_prefix(2);
    if (length == 0xffff) {
      std::string header;
      AppendLe(header, in.size() >= 8 ? LoadLe(in.data(), 8) : 0xffffffffffffffffu, 8);
      in.remove_prefix(std::min<size_t>(8, in.size()));
      AppendLe(header, agent::MaskedCrc32c(header), 4);
      out += header;
      continue;
    }
    std::string_view data = in.substr(0, length);
    in.remove_prefix(data.size());
    out += agent::FrameRecord(data);
  }
  return out;
}

// ReadRecord on `buffer` (the file from a record boundary on), and on its
// prefixes that end in the header, the data and the footer, must answer
// consistently. Returns "" when it does.
std::string CheckReadRecord(std::string_view buffer, uint64_t max_data, uint64_t at) {
  const std::string where =
      "ReadRecord at byte " + std::to_string(at) + " (limit " + std::to_string(max_data) + ")";
  agent::RecordRead r = agent::ReadRecord(buffer, max_data);
  using Kind = agent::RecordRead::Kind;
  constexpr uint64_t kFrame = agent::kRecordHeaderBytes + agent::kRecordFooterBytes;
  switch (r.kind) {
    case Kind::kRecord:
      if (r.size != r.data.size() + kFrame || r.size > buffer.size() ||
          r.data.data() != buffer.data() + agent::kRecordHeaderBytes)
        return where + ": a record's size or data is not its framing's";
      if (r.data.size() > max_data) return where + ": a record over the limit was read";
      if (agent::FrameRecord(r.data) != buffer.substr(0, r.size))
        return where + ": the record does not frame back to its bytes";
      break;
    case Kind::kIncomplete:
      if (r.size <= buffer.size() || r.size < agent::kRecordHeaderBytes)
        return where + ": incomplete, yet asks for " + std::to_string(r.size) + " bytes of " +
               std::to_string(buffer.size());
      break;
    case Kind::kCorrupt:
      if (r.error.empty()) return where + ": corrupt without an error";
      break;
    case Kind::kTooLarge: {
      const uint64_t length = LoadLe(buffer.data(), 8);
      if (length <= max_data) return where + ": too large, but the length is within the limit";
      if (r.size < kFrame || r.size <= max_data ||
          (length <= std::numeric_limits<uint64_t>::max() - kFrame && r.size != length + kFrame))
        return where + ": too large, length " + std::to_string(length) + ", yet size " +
               std::to_string(r.size) + " (wrapped around?)";
      break;
    }
  }
  if (r.kind == Kind::kRecord || r.kind == Kind::kIncomplete) {
    // The same record torn anywhere is incomplete, and asks for more.
    for (uint64_t cut :
         {uint64_t{0}, agent::kRecordHeaderBytes - 1, agent::kRecordHeaderBytes, r.size - 1}) {
      if (cut >= std::min<uint64_t>(r.size, buffer.size())) continue;
      agent::RecordRead torn = agent::ReadRecord(buffer.substr(0, cut), max_data);
      if (torn.kind != Kind::kIncomplete || torn.size <= cut)
        return where + ": the record cut at " + std::to_string(cut) + " is not incomplete";
    }
  }
  return "";
}

// What the reader must report from `file` read whole: the scalars of the
// records up to the first bad CRC, records over `max_data` skipped once all
// their bytes are there. Records read independently of ScalarWatch's loop.
std::string ModelEvents(std::string_view file, std::string_view run, uint64_t max_data,
                        std::vector<Unit>& out) {
  agent::PluginsByTag plugins;
  uint64_t at = 0;
  constexpr uint64_t kFrame = agent::kRecordHeaderBytes + agent::kRecordFooterBytes;
  while (true) {
    std::string_view rest = file.substr(at);
    if (std::string violation = CheckReadRecord(rest, max_data, at); !violation.empty())
      return violation;
    if (rest.size() < agent::kRecordHeaderBytes) break;
    if (agent::MaskedCrc32c(rest.substr(0, 8)) != LoadLe(rest.data() + 8, 4)) break;
    const uint64_t length = LoadLe(rest.data(), 8);
    if (length > rest.size() || rest.size() - length < kFrame) break;  // not all there (yet)
    std::string_view data = rest.substr(agent::kRecordHeaderBytes, length);
    Unit unit{at + length + kFrame, {}};
    if (length <= max_data) {
      if (agent::MaskedCrc32c(data) != LoadLe(rest.data() + agent::kRecordHeaderBytes + length, 4))
        break;
      agent::DecodeEventScalars(data, run, plugins, unit.points);
    }
    out.push_back(std::move(unit));
    at += length + kFrame;
  }
  return "";
}

std::string CheckEventsFollowed(std::string_view file, Rng& rng, bool split) {
  const std::string_view run = rng.Below(2) ? "run/sub" : "";
  agent::ScalarWatchOptions options;
  options.model_dir = Dir() + "/model";
  options.limits.rescan_every_polls = std::numeric_limits<int>::max();
  if (split) {
    options.limits.max_read_bytes = 1 + rng.Below(64);
    options.limits.max_record_bytes = rng.Below(2) ? rng.Below(256) : 16 << 20;
  }
  const uint64_t max_data = options.limits.max_record_bytes;
  const std::string path = options.model_dir + "/" + (run.empty() ? "" : std::string(run) + "/") +
                           "events.out.tfevents.1.fuzz";
  const std::string what = std::string(split ? "split" : "whole") + ", read size " +
                           std::to_string(options.limits.max_read_bytes) + ", record limit " +
                           std::to_string(max_data) + ", run \"" + std::string(run) + "\"";
  std::vector<Unit> units;
  if (std::string violation = ModelEvents(file, run, max_data, units); !violation.empty())
    return violation;
  Follower follower(path, std::move(options));
  size_t written = 0;
  for (size_t cut : Cuts(file.size(), rng, split ? 1 + rng.Below(12) : 1)) {
    follower.Append(file.substr(written, cut - written));
    written = cut;
    const std::vector<ScalarPoint> want = PointsUpTo(units, written);
    follower.PollFor(want.size(), 3 * (written / agent::kRecordHeaderBytes) + 8);
    const std::string when = what + ", after " + std::to_string(written) + " bytes";
    if (std::string v = CheckTags(follower.got(), run, when); !v.empty()) return v;
    if (std::string v = Compare(follower.got(), want, when); !v.empty()) return v;
  }
  follower.Poll(/*final=*/true);
  return Compare(follower.got(), PointsUpTo(units, file.size()), what + ", final poll");
}

// ---------------------------------------------------------------- JSON lines

std::string CheckLine(std::string_view line, std::vector<ScalarPoint>& out) {
  const std::string where = "line \"" + std::string(line.substr(0, 60)) + "\"";
  auto first = agent::ParseScalarsLine(line, kNow);
  auto again = agent::ParseScalarsLine(line, kNow + 1);
  if (first.ok() != again.ok()) return where + ": parses differently with another default time";
  if (!first.ok()) {
    if (first.status().message().empty()) return where + ": rejected without a reason";
    return "";
  }
  if (first->size() != again->size()) return where + ": points depend on the default time";
  bool defaulted = false;
  for (size_t i = 0; i < first->size(); ++i) {
    const ScalarPoint& p = (*first)[i];
    if (p.tag.empty() || p.tag == "step" || p.tag == "wall_time")
      return where + ": a point with tag \"" + p.tag + "\"";
    // A tag is a key of the line: unless escaped, it is there as such.
    if (line.find('\\') == std::string_view::npos && line.find(p.tag) == std::string_view::npos)
      return where + ": tag \"" + p.tag + "\" is not in the line";
    if (p.step != (*first)[0].step || !SameDouble(p.wall_time, (*first)[0].wall_time))
      return where + ": the points of one line differ in step or wall_time";
    if (!std::isfinite(p.wall_time)) return where + ": a wall_time that is not finite";
    const ScalarPoint& q = (*again)[i];
    if (q.tag != p.tag || q.step != p.step || !SameDouble(q.value, p.value))
      return where + ": points depend on the default time";
    const bool d = p.wall_time == kNow && q.wall_time == kNow + 1;
    if (!d && !SameDouble(p.wall_time, q.wall_time))
      return where + ": wall_time neither the line's nor the default";
    if (i == 0) defaulted = d;
    if (d != defaulted) return where + ": some points have the default wall_time, some not";
  }
  if (!first->empty() && line.find("\"step\"") == std::string_view::npos &&
      line.find('\\') == std::string_view::npos)
    return where + ": points from a line without \"step\"";
  for (ScalarPoint& p : *first) out.push_back(std::move(p));
  return "";
}

// The points of the complete lines of `text`.
std::string ModelLines(std::string_view text, std::vector<Unit>& out) {
  size_t at = 0;
  while (true) {
    const size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) break;
    Unit unit{eol + 1, {}};
    if (std::string v = CheckLine(text.substr(at, eol - at), unit.points); !v.empty()) return v;
    out.push_back(std::move(unit));
    at = eol + 1;
  }
  return "";
}

// `mode` 0: one append; 1: split, reads of a few bytes; 2: split, and a line
// limit shorter than some lines.
std::string CheckLinesFollowed(std::string_view file, const std::vector<Unit>& lines, Rng& rng,
                               int mode) {
  agent::ScalarWatchOptions options;
  options.scalars_file = Dir() + "/scalars.jsonl";
  if (mode == 1) options.limits.max_read_bytes = 1 + rng.Below(64);
  if (mode == 2) {
    options.limits.max_read_bytes = 16 + rng.Below(64);
    options.limits.max_line_bytes = rng.Below(48);
  }
  const uint64_t read_size = options.limits.max_read_bytes;
  const std::string what = "mode " + std::to_string(mode) + ", read size " +
                           std::to_string(options.limits.max_read_bytes) + ", line limit " +
                           std::to_string(options.limits.max_line_bytes);
  const std::string path = options.scalars_file;
  Follower follower(path, std::move(options));
  size_t written = 0;
  for (size_t cut : Cuts(file.size(), rng, mode == 0 ? 1 : 1 + rng.Below(12))) {
    follower.Append(file.substr(written, cut - written));
    written = cut;
    const std::vector<ScalarPoint> want = PointsUpTo(lines, written);
    const std::string when = what + ", after " + std::to_string(written) + " bytes";
    if (mode == 2) {
      // Long lines are skipped a read at a time: enough polls for every read
      // after the last append, a few after the others.
      const size_t polls = written == file.size() ? 2 * (written / read_size) + 2 * lines.size() + 8
                                                  : 1 + rng.Below(4);
      for (size_t i = 0; i < polls; ++i) follower.Poll(false);
      if (std::string v = CheckTags(follower.got(), "", when); !v.empty()) return v;
      if (std::string v = CompareSubsequence(follower.got(), want, when); !v.empty()) return v;
      continue;
    }
    follower.PollFor(want.size(), 2 * written + 8);
    if (std::string v = CheckTags(follower.got(), "", when); !v.empty()) return v;
    if (std::string v = Compare(follower.got(), want, when); !v.empty()) return v;
  }
  const std::vector<ScalarPoint> want = PointsUpTo(lines, file.size());
  follower.Poll(/*final=*/true);
  if (mode == 2) return CompareSubsequence(follower.got(), want, what + ", final poll");
  return Compare(follower.got(), want, what + ", final poll");
}

}  // namespace

std::string CheckEventFileInput(std::string_view bytes) {
  std::string framed;
  std::string_view file = bytes;
  if (bytes.starts_with(kRecordsPrefix)) {
    framed = FrameRecords(bytes.substr(kRecordsPrefix.size()));
    file = framed;
  }
  Rng rng(bytes);
  if (std::string v = CheckEventsFollowed(file, rng, /*split=*/false); !v.empty()) return v;
  return CheckEventsFollowed(file, rng, /*split=*/true);
}

std::string CheckScalarsJsonlInput(std::string_view bytes) {
  std::vector<Unit> lines;
  if (std::string v = ModelLines(bytes, lines); !v.empty()) return v;
  Rng rng(bytes);
  for (int mode = 0; mode < 3; ++mode)
    if (std::string v = CheckLinesFollowed(bytes, lines, rng, mode); !v.empty()) return v;
  return "";
}

}  // namespace tfslurm::fuzz
