#include "agent/checkpoint_watch.h"

#include <dirent.h>
#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "schema/checkpoint_name.h"

namespace tfslurm::agent {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads a protobuf text-format string literal ("..." or '...', C escapes) at
// the start of `s`. Returns nullopt when it is not a complete literal.
std::optional<std::string> ReadQuoted(std::string_view s) {
  if (s.empty() || (s.front() != '"' && s.front() != '\'')) return std::nullopt;
  const char quote = s.front();
  std::string out;
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == quote) return out;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i >= s.size()) return std::nullopt;
    c = s[i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x': {
        int value = 0;
        int digits = 0;
        while (digits < 2 && i + 1 < s.size() && HexValue(s[i + 1]) >= 0) {
          value = value * 16 + HexValue(s[++i]);
          ++digits;
        }
        if (digits == 0) return std::nullopt;
        out.push_back(static_cast<char>(value));
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int value = c - '0';
          for (int digits = 1; digits < 3 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7';
               ++digits) {
            value = value * 8 + (s[++i] - '0');
          }
          out.push_back(static_cast<char>(value));
        } else {
          out.push_back(c);  // \\ \" \' \?
        }
    }
  }
  return std::nullopt;
}

std::optional<int64_t> StepFromPath(std::string_view path) {
  std::string_view base = path;
  if (size_t slash = base.find_last_of('/'); slash != std::string_view::npos) {
    base.remove_prefix(slash + 1);
  }
  size_t dash = base.find_last_of('-');
  if (dash == std::string_view::npos || dash + 1 >= base.size()) return std::nullopt;
  std::string_view digits = base.substr(dash + 1);
  int64_t step = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || step < 0) return std::nullopt;
  return step;
}

}  // namespace

std::optional<CheckpointState> ParseCheckpointState(std::string_view contents,
                                                    std::string_view model_dir) {
  constexpr std::string_view kField = "model_checkpoint_path";
  while (!contents.empty()) {
    size_t eol = contents.find('\n');
    std::string_view line = contents.substr(0, eol);
    contents.remove_prefix(eol == std::string_view::npos ? contents.size() : eol + 1);

    line = TrimLeft(line);
    if (!line.starts_with(kField)) continue;
    line = TrimLeft(line.substr(kField.size()));
    if (line.empty() || line.front() != ':') continue;  // e.g. a longer field name
    std::optional<std::string> path = ReadQuoted(TrimLeft(line.substr(1)));
    if (!path || path->empty()) return std::nullopt;
    std::optional<int64_t> step = StepFromPath(*path);
    if (!step) return std::nullopt;
    CheckpointState state;
    state.step = *step;
    if (path->front() == '/' || model_dir.empty()) {
      state.path = *path;
    } else {
      state.path = std::string(model_dir);
      if (state.path.back() != '/') state.path.push_back('/');
      state.path += *path;
    }
    return state;
  }
  return std::nullopt;
}

CheckpointWatch::CheckpointWatch(std::string model_dir, CheckpointLayout layout)
    : model_dir_(std::move(model_dir)),
      layout_(layout),
      state_file_(model_dir_ + (layout == CheckpointLayout::kTorchFiles ? "/<name>-<step>.pt"
                                : layout == CheckpointLayout::kJaxStepDirectories
                                    ? "/<step>/"
                                    : "/checkpoint")) {}

std::optional<CheckpointState> CheckpointWatch::ScanDirectory() const {
  DIR* dir = ::opendir(model_dir_.c_str());
  if (dir == nullptr) return std::nullopt;
  const bool jax = layout_ == CheckpointLayout::kJaxStepDirectories;
  wire::LatestCheckpoint latest(jax ? wire::JaxCheckpointStep : wire::TorchCheckpointStep);
  while (const dirent* entry = ::readdir(dir)) {
    // DT_UNKNOWN: a file system that does not say; the name decides.
    if (entry->d_type == (jax ? DT_DIR : DT_REG) || entry->d_type == DT_UNKNOWN)
      latest.See(entry->d_name);
  }
  ::closedir(dir);
  if (!latest.found()) return std::nullopt;
  return CheckpointState{latest.step(), model_dir_ + "/" + latest.file_name()};
}

std::optional<CheckpointState> CheckpointWatch::Poll() {
  const bool scan = layout_ != CheckpointLayout::kTensorflowStateFile;
  struct stat st {};
  if (::stat(scan ? model_dir_.c_str() : state_file_.c_str(), &st) != 0) {
    seen_.reset();  // so that a re-created file is read again
    return std::nullopt;
  }
  Fingerprint now{st.st_mtim, st.st_size, st.st_ino};
  if (seen_ && seen_->mtime.tv_sec == now.mtime.tv_sec &&
      seen_->mtime.tv_nsec == now.mtime.tv_nsec && seen_->size == now.size &&
      seen_->inode == now.inode) {
    return std::nullopt;
  }
  std::optional<CheckpointState> state;
  if (scan) {
    seen_ = now;
    state = ScanDirectory();
  } else {
    std::ifstream in(state_file_, std::ios::binary);
    if (!in) return std::nullopt;  // retried on the next poll
    seen_ = now;
    std::ostringstream contents;
    contents << in.rdbuf();
    state = ParseCheckpointState(contents.str(), model_dir_);
  }
  if (!state || (latest_ && latest_->step == state->step && latest_->path == state->path)) {
    return std::nullopt;
  }
  latest_ = state;
  return state;
}

}  // namespace tfslurm::agent
