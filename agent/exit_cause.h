// Why a program failed, read from the end of its own output: the line a
// person would look for first in the task's log, sent with the exit report
// (Exited.detail) so that the experiment's reason says it.
//
// The task's output is the file srun (--output) or --log-dir opened as the
// agent's stdout and stderr, which the program inherits; the agent notes its
// size when the program starts and reads what was written after that, so
// an earlier attempt's lines in the same file are never taken.
//
// Thread safety: pure functions, and a read of a file through a descriptor.
#ifndef TFSLURM_AGENT_EXIT_CAUSE_H_
#define TFSLURM_AGENT_EXIT_CAUSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::agent {

// The last line of `output` that names a failure, the agent's own lines
// ("[tfslurm-agent ...") left out: a Python exception that ended a
// traceback ("ModuleNotFoundError: No module named 'tensorflow'"), a
// SyntaxError of the main script (which Python prints without a traceback),
// Python's "can't open file", a shell's "not found", or the container
// launcher's "tfslurm-container: error: ..." (the runtime missing, the image
// not importable, the command not in the image; container_command.h); ""
// when there is none. At
// most 300 bytes (cut at a character boundary, "..." added).
std::string LastErrorLine(std::string_view output);

// Whether `error_line` (LastErrorLine's) names a failure that repeats on
// every start of the same program: Python could not open the script, or
// import a module (ImportError, ModuleNotFoundError), or parse a file
// (SyntaxError, IndentationError, TabError), or a shell did not find the
// command, or the container launcher failed. Exceptions raised by training itself (ValueError, ...)
// do not.
bool RepeatsAtStartup(std::string_view error_line);

// Which program ran, for a person: `exe`, the file the process ran last
// (/proc/PID/exe, read while it ran: what a PATH lookup, a venv's symlink, a
// pyenv shim or an `env python3` line led to), and `started`, the file the
// agent started (ResolveProgram's) when that was another:
// "/usr/bin/python3.11, started as /opt/venv/bin/python". Either may be "".
std::string DescribeProgramThatRan(const std::string& started, const std::string& exe);

// `error_line` (LastErrorLine's) with the Python that ran appended, when it
// names an ImportError or ModuleNotFoundError: which interpreter ran is the
// first thing to check (a venv's python, or the system's without the
// package). `program` is DescribeProgramThatRan's; nothing is appended when
// it is "".
std::string WithPythonThatRan(const std::string& error_line, const std::string& program);

// The size of the regular file `fd` refers to; nullopt for a pipe, a
// terminal or /dev/null, whose content cannot be read back.
std::optional<int64_t> OutputSize(int fd);

// At most the last `max_bytes` written to the regular file `fd` refers to
// since offset `from`, read through /proc/self/fd (the descriptor itself is
// write-only); nullopt when it cannot be read.
std::optional<std::string> ReadOutputSince(int fd, int64_t from, int64_t max_bytes);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_EXIT_CAUSE_H_
