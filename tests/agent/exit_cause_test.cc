#include "agent/exit_cause.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace tfslurm::agent {
namespace {

TEST(LastErrorLineTest, APythonTracebacksLastLine) {
  EXPECT_EQ(LastErrorLine("step 1\n"
                          "Traceback (most recent call last):\n"
                          "  File \"/w/train.py\", line 1, in <module>\n"
                          "    import tensorflowx\n"
                          "ModuleNotFoundError: No module named 'tensorflowx'\n"),
            "ModuleNotFoundError: No module named 'tensorflowx'");
  EXPECT_EQ(LastErrorLine("Traceback (most recent call last):\n"
                          "  File \"x.py\", line 3, in <module>\n"
                          "tensorflow.python.framework.errors_impl.NotFoundError: /data: no\n"
                          "[tfslurm-agent exp=a attempt=1 proc=0] 2026 info: the program exited\n"),
            "tensorflow.python.framework.errors_impl.NotFoundError: /data: no")
      << "the agent's own lines are left out";
  EXPECT_EQ(
      LastErrorLine("Traceback (most recent call last):\n  File \"x.py\"\nKeyboardInterrupt\n"),
      "KeyboardInterrupt");
}

TEST(LastErrorLineTest, TheLastOfSeveralTracebacksAndNotWhatLooksLikeOneOutside) {
  EXPECT_EQ(LastErrorLine("Traceback (most recent call last):\n  x\nValueError: first\n"
                          "During handling...\n"
                          "Traceback (most recent call last):\n  y\nRuntimeError: second\n"),
            "RuntimeError: second");
  EXPECT_EQ(LastErrorLine("loss: 0.5\nValueError: printed by the program, no traceback\n"), "");
  EXPECT_EQ(LastErrorLine("all fine\n"), "");
  EXPECT_EQ(LastErrorLine(""), "");
}

TEST(LastErrorLineTest, PythonsCannotOpenFileAndTheShellsNotFound) {
  EXPECT_EQ(LastErrorLine("/usr/bin/python3: can't open file '/w/trian.py': [Errno 2] No such "
                          "file or directory\n"),
            "/usr/bin/python3: can't open file '/w/trian.py': [Errno 2] No such file or directory");
  EXPECT_EQ(LastErrorLine("/bin/sh: 1: trian.py: not found\n"), "/bin/sh: 1: trian.py: not found");
  EXPECT_EQ(LastErrorLine("bash: line 1: trian.py: command not found\n"),
            "bash: line 1: trian.py: command not found");
}

TEST(LastErrorLineTest, ASyntaxErrorOfTheMainScriptHasNoTraceback) {
  // What python3 prints for "def f(" in the script it was given.
  EXPECT_EQ(LastErrorLine("  File \"/w/train.py\", line 1\n"
                          "    def f(\n"
                          "         ^\n"
                          "SyntaxError: '(' was never closed\n"),
            "SyntaxError: '(' was never closed");
  EXPECT_EQ(
      LastErrorLine("  File \"/w/t.py\", line 2\n    x\nIndentationError: unexpected indent\n"),
      "IndentationError: unexpected indent");
}

TEST(RepeatsAtStartupTest, ImportAndSyntaxErrorsAndMissingFilesRepeatTrainingErrorsDoNot) {
  for (const char* line :
       {"ModuleNotFoundError: No module named 'tensorflowx'",
        "ImportError: cannot import name 'Foo' from 'bar'", "SyntaxError: '(' was never closed",
        "IndentationError: unexpected indent",
        "TabError: inconsistent use of tabs and spaces in indentation",
        "/usr/bin/python3: can't open file '/w/trian.py': [Errno 2] No such file "
        "or directory",
        "/bin/sh: 1: trian.py: not found", "bash: line 1: trian.py: command not found"})
    EXPECT_TRUE(RepeatsAtStartup(line)) << line;
  for (const char* line :
       {"ValueError: loss is nan", "RuntimeError: NCCL error", "KeyboardInterrupt", "core dumped",
        "", "tensorflow.python.framework.errors_impl.NotFoundError: /data: no",
        "print('ImportError: no')"})
    EXPECT_FALSE(RepeatsAtStartup(line)) << line;
}

TEST(DescribeProgramThatRanTest, TheFileThatRanAndWhatWasStartedWhenItDiffers) {
  EXPECT_EQ(DescribeProgramThatRan("/usr/bin/python3.11", "/usr/bin/python3.11"),
            "/usr/bin/python3.11");
  EXPECT_EQ(DescribeProgramThatRan("/opt/venv/bin/python", "/usr/bin/python3.11"),
            "/usr/bin/python3.11, started as /opt/venv/bin/python")
      << "a venv's python is a symlink: both say which";
  EXPECT_EQ(DescribeProgramThatRan("/root/.pyenv/shims/python3", ""), "/root/.pyenv/shims/python3")
      << "ended before it could be read";
  EXPECT_EQ(DescribeProgramThatRan("", "/usr/bin/python3.11"), "/usr/bin/python3.11");
}

TEST(WithPythonThatRanTest, AnImportErrorNamesThePythonThatRanOthersDoNot) {
  EXPECT_EQ(WithPythonThatRan("ModuleNotFoundError: No module named 'torch'",
                              "/usr/bin/python3 -> /usr/bin/python3.11"),
            "ModuleNotFoundError: No module named 'torch' (the Python that ran: /usr/bin/python3 "
            "-> /usr/bin/python3.11)");
  EXPECT_EQ(WithPythonThatRan("ImportError: cannot import name 'x' from 'y'", "/v/bin/python"),
            "ImportError: cannot import name 'x' from 'y' (the Python that ran: /v/bin/python)");
  EXPECT_EQ(WithPythonThatRan("ValueError: loss is nan", "/v/bin/python"),
            "ValueError: loss is nan");
  EXPECT_EQ(WithPythonThatRan("ModuleNotFoundError: No module named 'torch'", ""),
            "ModuleNotFoundError: No module named 'torch'");
}

TEST(LastErrorLineTest, ALongLineIsCut) {
  std::string line = LastErrorLine(
      "Traceback (most recent call last):\nValueError: " + std::string(1000, 'x') + "\n");
  EXPECT_EQ(line.size(), 300u);
  EXPECT_EQ(line.substr(297), "...");
}

TEST(ReadOutputSinceTest, OnlyWhatWasWrittenAfterTheStartFromAWriteOnlyDescriptor) {
  char path[] = "/tmp/exit-cause-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  fd = open(path, O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "old attempt\n", 12), 12);
  auto start = OutputSize(fd);
  ASSERT_EQ(start, 12);
  ASSERT_EQ(write(fd, "new line one\nnew two\n", 21), 21);
  EXPECT_EQ(ReadOutputSince(fd, *start, 1 << 16), "new line one\nnew two\n");
  EXPECT_EQ(ReadOutputSince(fd, *start, 8), "new two\n") << "only the last max_bytes";
  EXPECT_EQ(ReadOutputSince(fd, 33, 100), std::nullopt) << "nothing new";
  close(fd);
  unlink(path);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(OutputSize(pipe_fds[1]), std::nullopt) << "a pipe cannot be read back";
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace tfslurm::agent
