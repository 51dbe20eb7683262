#include "client/terminal_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "client/spec_file.h"
#include "client/tfctl/experiment_text.h"
#include "client/tfctl/output.h"

namespace tfslurm::client {
namespace {

using nlohmann::json;

TEST(EscapeForTerminalTest, ControlCharactersBecomeVisibleEscapes) {
  // An OSC title change, a CSI screen clear, BEL, NUL, BS, DEL.
  EXPECT_EQ(EscapeForTerminal("x\x1b]0;TITLE\x07/model.ckpt-7"),
            "x\\x1b]0;TITLE\\x07/model.ckpt-7");
  EXPECT_EQ(EscapeForTerminal("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b\bc\x7f", 6)), "a\\x00b\\x08c\\x7f");
  EXPECT_EQ(EscapeForTerminal("a\nb\tc\rd"), "a\\nb\\tc\\rd") << "one line in a cell";
}

TEST(EscapeForTerminalTest, C1AndBidiControlsAndBadBytesAreEscaped) {
  EXPECT_EQ(EscapeForTerminal("a\xc2\x9b"
                              "2Jb"),
            "a\\u009b2Jb")
      << "U+009B, the 8-bit CSI";
  EXPECT_EQ(EscapeForTerminal("loss\xe2\x80\xae"
                              "tset"),
            "loss\\u202etset")
      << "U+202E RLO";
  EXPECT_EQ(EscapeForTerminal("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069") << "isolates";
  EXPECT_EQ(EscapeForTerminal("\xe2\x80\x8f"), "\\u200f") << "RLM";
  EXPECT_EQ(EscapeForTerminal("a\x9b"
                              "b\xff"),
            "a\\x9bb\\xff")
      << "bytes that are not UTF-8";
  EXPECT_EQ(EscapeForTerminal("\xc0\x9b"), "\\xc0\\x9b") << "an overlong encoding is not UTF-8";
  EXPECT_EQ(EscapeForTerminal("\xe2\x80"), "\\xe2\\x80") << "a cut sequence at the end";
}

// Issue 41, point 11: U+2028 and U+200B in tags, details and paths reached
// the terminal as they were.
TEST(EscapeForTerminalTest, EscapesInvisibleCharactersAndLineSeparators) {
  EXPECT_EQ(EscapeForTerminal("a\u2028b\u2029c"), "a\\u2028b\\u2029c");
  EXPECT_EQ(EscapeForTerminal("run\u200b1 \u00ad\ufeff"), "run\\u200b1 \\u00ad\\ufeff");
  EXPECT_EQ(EscapeForTerminal("tag\U000E0041\U000E007F"), "tag\\U000e0041\\U000e007f")
      << "beyond U+FFFF: eight digits, never confused with a four-digit escape and a digit";
  EXPECT_EQ(EscapeForTerminal("caf\u00e9 \u4e2d\u6587 \U0001F600"),
            "caf\u00e9 \u4e2d\u6587 \U0001F600")
      << "other characters are text";
  // -o json stays exact: JSON spells U+E0041 as its surrogate pair.
  EXPECT_EQ(EscapeInStructured("{\"t\":\"a\u2028\U000E0041\"}"),
            "{\"t\":\"a\\u2028\\udb40\\udc41\"}");
}

TEST(EscapeForTerminalTest, PrintableTextIsUnchangedAndEscapingTwiceChangesNothing) {
  std::string text = "train/loss é 训练 🙂 C:\\dir \\x1b";
  EXPECT_EQ(EscapeForTerminal(text), text);
  std::string once = EscapeForTerminal("a\x1b[31m\xe2\x80\xae\n");
  EXPECT_EQ(EscapeForTerminal(once), once);
}

TEST(EscapeForTerminalTest, KeepingLineBreaksKeepsNewlineTabAndCrLfOnly) {
  EXPECT_EQ(EscapeForTerminal("a\tb\r\nc\rd\x1b]52;c;AAAA\x07\n", LineBreaks::kKeep),
            "a\tb\r\nc\\rd\\x1b]52;c;AAAA\\x07\n");
}

TEST(TerminalEscaperTest, ACharacterOrCrLfSplitBetweenPiecesIsHeldBack) {
  TerminalEscaper escaper(LineBreaks::kKeep);
  std::string out;
  out += escaper.Feed("ok \xe2\x80");  // U+202E cut after two bytes
  EXPECT_EQ(out, "ok ");
  out += escaper.Feed("\xae done\r");
  out += escaper.Feed("\nnext \xe8\xae");  // 训 (U+8BAD) cut
  out += escaper.Feed("\xad\r");
  out += escaper.Feed("x\x1b");
  out += escaper.Finish();
  EXPECT_EQ(out, "ok \\u202e done\r\nnext 训\\rx\\x1b");
}

TEST(TerminalEscaperTest, FinishEscapesWhatWasHeldBack) {
  TerminalEscaper escaper(LineBreaks::kKeep);
  EXPECT_EQ(escaper.Feed("a\xe2\x80"), "a");
  EXPECT_EQ(escaper.Finish(), "\\xe2\\x80");
}

// What others may write: an OSC in a path, C1, bidi and DEL in a tag, and
// plain non-ASCII text that must stay as it is.
json ValueWithControls() {
  return {{"model_dir", "/m/\x1b]0;T\x07"},
          {"tag",
           "a\xc2\x9b"
           "b\xe2\x80\xae"
           "c\x7f"},
          {"plain", "é"}};
}

TEST(EscapeInStructuredTest, JsonStaysExactAndCarriesNoControls) {
  json value = ValueWithControls();
  std::ostringstream out;
  tfctl::PrintStructured(value, tfctl::OutputFormat::kJson, out);
  std::string text = out.str();
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    EXPECT_FALSE(b < 0x20 && c != '\n') << "a C0 control reached the output: " << text;
    EXPECT_NE(b, 0x7F) << text;
  }
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << text;
  EXPECT_NE(text.find("\\u202e"), std::string::npos) << text;
  EXPECT_EQ(json::parse(text), value) << "the same value read back";
}

TEST(EscapeInStructuredTest, YamlStaysExactAndCarriesNoControls) {
  json value = ValueWithControls();
  std::ostringstream out;
  tfctl::PrintStructured(value, tfctl::OutputFormat::kYaml, out);
  std::string text = out.str();
  EXPECT_EQ(EscapeForTerminal(text, LineBreaks::kKeep), text) << "nothing left to escape";
  auto back = YamlToJson(text, "out.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, value) << text;
}

TEST(TfctlTextTest, StatusEventsAndTablesShowUserTextEscaped) {
  Experiment e;
  e.id = "x";
  e.state = "running";
  e.model_dir = "/out/\x1b]0;TITLE\x07";
  e.checkpoint_step = 7;
  e.checkpoint_path = "x\x1b]52;c;AAAA\x07/model.ckpt-7";
  e.reason = "a\nforged: line";
  std::string status = tfctl::FormatStatus(e);
  EXPECT_EQ(status.find('\x1b'), std::string::npos) << status;
  EXPECT_NE(status.find("model dir   /out/\\x1b]0;TITLE\\x07\n"), std::string::npos) << status;
  EXPECT_NE(status.find("(x\\x1b]52;c;AAAA\\x07/model.ckpt-7)"), std::string::npos) << status;
  EXPECT_NE(status.find("running: a\\nforged: line\n"), std::string::npos) << status;

  Event event{1, "1970-01-01T00:00:05.250Z", 1, "scalars",
              "dropped tag 'a\xe2\x80\xae"
              "b': \x1b[2J"};
  EXPECT_EQ(tfctl::FormatEventTable({event}),
            "TIME                  ATTEMPT  WHAT     WHY\n"
            "1970-01-01T00:00:05Z  1        scalars  dropped tag 'a\\u202eb': \\x1b[2J\n");
  EXPECT_EQ(tfctl::FormatEventLine(event),
            "1970-01-01T00:00:05Z  attempt 1  scalars: dropped tag 'a\\u202eb': \\x1b[2J");
}

}  // namespace
}  // namespace tfslurm::client

namespace tfslurm::client {
namespace {

TEST(PrefixedLinesTest, WholeLinesOnlyEachAfterThePrefix) {
  PrefixedLines lines("worker:1 | ");
  EXPECT_EQ(lines.Feed("a\nb"), "worker:1 | a\n");
  EXPECT_EQ(lines.Feed("c\n\nd"), "worker:1 | bc\nworker:1 | \n");
  EXPECT_EQ(lines.Finish(), "worker:1 | d\n") << "the last line, ended";
  EXPECT_EQ(lines.Finish(), "");
  EXPECT_EQ(lines.Feed("e\n"), "worker:1 | e\n");
  EXPECT_EQ(lines.Finish(), "") << "nothing held back";
}

TEST(PrefixedLinesTest, AnOverlongLineComesOutInParts) {
  PrefixedLines lines("p ");
  const std::string long_line(64 * 1024 + 10, 'x');
  std::string out = lines.Feed(long_line);
  EXPECT_EQ(out, "p " + std::string(64 * 1024, 'x') + "\n");
  EXPECT_EQ(lines.Finish(), "p " + std::string(10, 'x') + "\n");
}

}  // namespace
}  // namespace tfslurm::client
