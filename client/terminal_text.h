// Text that came from another user or a program, made safe to print on a
// terminal. tfctl shows ids, paths, reasons, events, tags and log lines that
// anyone with a token may have written: an ESC in them would let that person
// set the admin's window title, write to the clipboard (OSC 52), clear the
// screen or forge lines, and a bidi override would reorder what the reader
// sees. Like journalctl and less, tfctl shows such characters as visible
// escapes instead (which ones: base/unsafe_text.h): C0 controls and DEL as
// \xNN (\n, \t, \r where a line break or a tab is not kept), C1 controls
// and bidi controls as \u009b, \u202e, bytes that are not UTF-8 as \xff. A
// backslash is left as it is, so escaping twice changes nothing.
//
// Thread safety: EscapeForTerminal and EscapeInStructured are pure;
// a TerminalEscaper is for one stream on one thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace tfslurm::client {

enum class LineBreaks {
  kEscape,  // a table cell or a field: one line, whatever the text holds
  kKeep,    // a log or a message: \n and \t (and \r right before \n) are kept
};

// The text with every control character, bidi control and invalid UTF-8 byte
// shown as a visible escape; other characters as they are.
std::string EscapeForTerminal(std::string_view text, LineBreaks line_breaks = LineBreaks::kEscape);

// For JSON or YAML text that already escapes C0 controls in its strings (as
// nlohmann::json::dump and yaml-cpp do): DEL, C1 and bidi controls become
// \u escapes, which both formats read back as the same character, so the
// document stays exact while nothing in it acts on the terminal.
std::string EscapeInStructured(std::string_view document);

// EscapeForTerminal over a stream that arrives in pieces (tfctl logs -f): a
// UTF-8 character or a CR LF split between two pieces is held back until the
// next piece completes it.
class TerminalEscaper {
 public:
  explicit TerminalEscaper(LineBreaks line_breaks) : line_breaks_(line_breaks) {}
  std::string Feed(std::string_view piece);
  // Whatever was held back, escaped: the stream has ended.
  std::string Finish();

 private:
  LineBreaks line_breaks_;
  std::string pending_;
};

// Whole lines of a stream that arrives in pieces, each after `prefix`
// (tfctl logs of every task: "worker:1 | "): a line is given out once its
// \n has come, so that lines of streams shown together never mix. A line
// longer than 64 KiB is given out in 64 KiB parts.
class PrefixedLines {
 public:
  explicit PrefixedLines(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string Feed(std::string_view piece);
  // The last line, ended with \n, if it had no end: the stream has ended.
  std::string Finish();

 private:
  std::string prefix_;
  std::string pending_;
};

}  // namespace tfslurm::client
