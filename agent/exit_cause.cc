#include "agent/exit_cause.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <vector>

namespace tfslurm::agent {
namespace {

constexpr size_t kMaxLine = 300;

std::string Bounded(std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.size() <= kMaxLine) return line;
  size_t cut = kMaxLine - 3;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return line.substr(0, cut) + "...";
}

const std::regex& CannotOpenFile() {
  static const std::regex re(R"(can't open file )");
  return re;
}

// The container launcher's own failures (container_command.h): the
// runtime missing, the image not importable, the command not in the image.
const std::regex& LauncherError() {
  static const std::regex re(R"(^tfslurm-container: error: )");
  return re;
}

const std::regex& ShellNotFound() {
  static const std::regex re(R"(^(/\S*/)?(ba|da)?sh: .*: (not found|command not found)$)");
  return re;
}

}  // namespace

std::string LastErrorLine(std::string_view output) {
  // "ValueError: bad", "tensorflow.python.framework.errors_impl.NotFoundError: x",
  // "KeyboardInterrupt": the last line of a traceback, not indented.
  static const std::regex kException(
      R"(^([A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(Error|Exception|Exit|Interrupt)(: .*)?$)");
  // A syntax error in the main script itself: the file, the line and a
  // caret, then this, with no "Traceback" before them.
  static const std::regex kSyntaxError(R"(^(SyntaxError|IndentationError|TabError)(: .*)?$)");
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string_view::npos) end = output.size();
    std::string_view line = output.substr(start, end - start);
    if (line.rfind("[tfslurm-agent ", 0) != 0) lines.push_back(line);
    start = end + 1;
  }
  bool in_traceback = false;
  std::string found;
  for (std::string_view line : lines) {
    std::string text(line);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.rfind("Traceback (most recent call last):", 0) == 0) {
      in_traceback = true;
      continue;
    }
    if (in_traceback && !text.empty() && text[0] != ' ' && std::regex_search(text, kException)) {
      found = text;
      in_traceback = false;
    } else if (std::regex_search(text, CannotOpenFile()) ||
               std::regex_search(text, ShellNotFound()) || std::regex_search(text, kSyntaxError) ||
               std::regex_search(text, LauncherError())) {
      found = text;
    }
  }
  return found.empty() ? "" : Bounded(found);
}

bool RepeatsAtStartup(std::string_view error_line) {
  // The exception's name, qualified or not, as the line's first word.
  static const std::regex kStartupException(
      R"(^([A-Za-z_][A-Za-z0-9_]*\.)*(ImportError|ModuleNotFoundError|SyntaxError|IndentationError|TabError)(: .*)?$)");
  const std::string line(error_line);
  return std::regex_search(line, kStartupException) || std::regex_search(line, CannotOpenFile()) ||
         std::regex_search(line, ShellNotFound()) || std::regex_search(line, LauncherError());
}

std::string DescribeProgramThatRan(const std::string& started, const std::string& exe) {
  if (exe.empty()) return started;
  if (started.empty() || exe == started) return exe;
  return exe + ", started as " + started;
}

std::string WithPythonThatRan(const std::string& error_line, const std::string& program) {
  static const std::regex kImport(
      R"(^([A-Za-z_][A-Za-z0-9_]*\.)*(ImportError|ModuleNotFoundError)(: .*)?$)");
  if (program.empty() || !std::regex_search(error_line, kImport)) return error_line;
  return error_line + " (the Python that ran: " + program + ")";
}

std::optional<int64_t> OutputSize(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return static_cast<int64_t>(st.st_size);
}

std::optional<std::string> ReadOutputSince(int fd, int64_t from, int64_t max_bytes) {
  auto size = OutputSize(fd);
  if (!size || *size <= from) return std::nullopt;
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in < 0) return std::nullopt;
  int64_t offset = std::max(from, *size - max_bytes);
  std::string text(static_cast<size_t>(*size - offset), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::pread(in, text.data() + got, text.size() - got, offset + got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(in);
  text.resize(got);
  return text;
}

}  // namespace tfslurm::agent
