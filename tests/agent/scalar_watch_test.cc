#include "agent/scalar_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/tfrecord_reader.h"
#include "tensorboard_event.pb.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

namespace fs = std::filesystem;
namespace tb = ::tfslurm::tensorboard;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr double kNow = 1'800'000'000.0;

// One framed Event record with a TF1 scalar.
std::string ScalarRecord(const std::string& tag, int64_t step, float value) {
  tb::Event e;
  e.set_step(step);
  e.set_wall_time(1000 + step);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return FrameRecord(e.SerializeAsString());
}

void Append(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

class ScalarWatchTest : public ::testing::Test {
 protected:
  ScalarWatch& Watch(ScalarWatchLimits limits = {}, bool jsonl = true) {
    ScalarWatchOptions options;
    options.model_dir = dir_.path();
    if (jsonl) options.scalars_file = jsonl_;
    options.limits = limits;
    options.wall_clock = [] { return kNow; };
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    watch_.emplace(std::move(options));
    return *watch_;
  }

  static std::vector<std::string> Tags(const std::vector<ScalarPoint>& points) {
    std::vector<std::string> tags;
    for (const auto& p : points) tags.push_back(p.tag + "@" + std::to_string(p.step));
    return tags;
  }

  TempDir dir_;
  std::string jsonl_ = dir_.Path("tfslurm-scalars.jsonl");
  std::optional<ScalarWatch> watch_;
  std::vector<std::string> warnings_;
};

TEST_F(ScalarWatchTest, BaselineSkipsWhatEarlierAttemptsWrote) {
  const std::string old_file = dir_.Path("events.out.tfevents.1.host");
  WriteFile(old_file, ScalarRecord("loss", 1, 0.5f) + ScalarRecord("loss", 2, 0.4f));
  WriteFile(jsonl_, "{\"step\": 1, \"acc\": 0.1}\n");
  ScalarWatch& watch = Watch();
  watch.Baseline();
  EXPECT_TRUE(watch.Poll(true).empty()) << "nothing new yet";

  // The new attempt appends to the old files and writes a new one in a run directory.
  Append(old_file, ScalarRecord("loss", 3, 0.3f));
  Append(jsonl_, "{\"step\": 3, \"acc\": 0.3}\n");
  fs::create_directories(dir_.Path("logs/train"));
  WriteFile(dir_.Path("logs/train/events.out.tfevents.2.host.v2"),
            ScalarRecord("epoch_loss", 0, 2));
  std::vector<ScalarPoint> points = watch.Poll(true);
  EXPECT_EQ(Tags(points), (std::vector<std::string>{"loss@3", "logs/train/epoch_loss@0", "acc@3"}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(ScalarWatchTest, NewFilesAreFoundAtTheNextWalkOnly) {
  ScalarWatchLimits limits;
  limits.rescan_every_polls = 3;
  ScalarWatch& watch = Watch(limits, false);
  watch.Baseline();
  WriteFile(dir_.Path("events.out.tfevents.1.host"), ScalarRecord("loss", 1, 1));
  EXPECT_TRUE(watch.Poll().empty());
  EXPECT_TRUE(watch.Poll().empty());
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@1"})) << "the third poll walks";
  Append(dir_.Path("events.out.tfevents.1.host"), ScalarRecord("loss", 2, 1));
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@2"}))
      << "a followed file is read every poll";
  WriteFile(dir_.Path("events.out.tfevents.3.host"), ScalarRecord("acc", 1, 1));
  EXPECT_EQ(Tags(watch.Poll(true)), (std::vector<std::string>{"acc@1"})) << "the final poll walks";
}

TEST_F(ScalarWatchTest, TornRecordIsWaitedFor) {
  ScalarWatch& watch = Watch({}, false);
  watch.Baseline();
  const std::string path = dir_.Path("events.out.tfevents.1.host");
  const std::string both = ScalarRecord("loss", 1, 1) + ScalarRecord("loss", 2, 2);
  WriteFile(path, both.substr(0, both.size() - 5));
  EXPECT_EQ(Tags(watch.Poll(true)), (std::vector<std::string>{"loss@1"}));
  EXPECT_TRUE(watch.Poll().empty());
  Append(path, both.substr(both.size() - 5));
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@2"}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(ScalarWatchTest, CrcMismatchStopsReadingThatFileWithOneWarning) {
  ScalarWatch& watch = Watch({}, false);
  watch.Baseline();
  std::string bad = ScalarRecord("loss", 2, 2);
  bad[bad.size() - 1] ^= 0x01;  // the data's CRC
  WriteFile(dir_.Path("events.out.tfevents.1.bad"), ScalarRecord("loss", 1, 1) + bad);
  WriteFile(dir_.Path("events.out.tfevents.2.good"), ScalarRecord("acc", 1, 1));
  EXPECT_EQ(Tags(watch.Poll(true)), (std::vector<std::string>{"loss@1", "acc@1"}));
  Append(dir_.Path("events.out.tfevents.1.bad"), ScalarRecord("loss", 3, 3));
  Append(dir_.Path("events.out.tfevents.2.good"), ScalarRecord("acc", 2, 2));
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"acc@2"}));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("events.out.tfevents.1.bad"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("corrupt"), std::string::npos) << warnings_[0];
}

TEST_F(ScalarWatchTest, LargeRecordsAreSkippedAndReadsAreBounded) {
  ScalarWatchLimits limits;
  limits.max_record_bytes = 64;
  limits.max_read_bytes = 40;  // less than one record: a poll still reads one
  ScalarWatch& watch = Watch(limits, false);
  watch.Baseline();
  const std::string path = dir_.Path("events.out.tfevents.1.host");
  WriteFile(path, ScalarRecord("a", 1, 1) + FrameRecord(std::string(100, 'x')) +
                      ScalarRecord("b", 1, 1) + ScalarRecord("c", 1, 1));
  std::vector<std::string> tags;
  for (int i = 0; i < 6; ++i) {
    for (const auto& t : Tags(watch.Poll(i == 0))) tags.push_back(t);
  }
  EXPECT_EQ(tags, (std::vector<std::string>{"a@1", "b@1", "c@1"}));
}

TEST_F(ScalarWatchTest, JsonLinesPartialLastLineWaitsForItsNewline) {
  ScalarWatch& watch = Watch();
  watch.Baseline();
  WriteFile(jsonl_, "{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2, \"lo");
  std::vector<ScalarPoint> points = watch.Poll();
  EXPECT_EQ(points, (std::vector<ScalarPoint>{{"loss", 1, kNow, 0.5}}));
  EXPECT_TRUE(watch.Poll().empty());
  Append(jsonl_, "ss\": 0.25, \"wall_time\": 12.5}\n");
  EXPECT_EQ(watch.Poll(), (std::vector<ScalarPoint>{{"loss", 2, 12.5, 0.25}}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(ScalarWatchTest, InvalidLinesAreSkippedWithRateLimitedWarnings) {
  WriteFile(jsonl_, "{\"step\": 0}\n{\"step\": 0}\n");  // earlier attempts: 2 lines
  ScalarWatchLimits limits;
  limits.warning_every_polls = 10;
  ScalarWatch& watch = Watch(limits);
  watch.Baseline();
  Append(jsonl_,
         "{\"step\": 1, \"loss\": 1}\nnot json\n{\"loss\": 2}\n{\"step\": 3, \"loss\": 3}\n");
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@1", "loss@3"}));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(jsonl_ + " line 4: not valid JSON"), std::string::npos)
      << "names the file, the line counted from the file's start, and why: " << warnings_[0];
  for (int i = 0; i < 5; ++i) {
    Append(jsonl_, "[]\n");
    watch.Poll();
  }
  EXPECT_EQ(warnings_.size(), 1u) << "one invalid line per poll is not one warning per poll";
  watch.Poll(true);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(
      warnings_[1].find("6 more invalid lines skipped (the last: line 11: not a JSON object)"),
      std::string::npos)
      << warnings_[1];
}

TEST_F(ScalarWatchTest, RewrittenJsonLinesFileIsReadFromItsStart) {
  WriteFile(jsonl_, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 2}\n");
  ScalarWatch& watch = Watch();
  watch.Baseline();
  // A program that opens the file with "w" truncates it and writes more than
  // there was before the agent looked.
  WriteFile(jsonl_,
            "{\"step\": 1, \"loss\": 9}\n{\"step\": 2, \"loss\": 9}\n{\"step\": 3, \"loss\": 9}\n");
  watch.Poll();  // notices the rewrite
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@1", "loss@2", "loss@3"}));
  // Truncated to less than was read: also from the start.
  WriteFile(jsonl_, "{\"step\": 4, \"loss\": 9}\n");
  EXPECT_EQ(Tags(watch.Poll()), (std::vector<std::string>{"loss@4"}));
}

TEST_F(ScalarWatchTest, FileLimitDepthLimitAndSymlinkedDirectories) {
  ScalarWatchLimits limits;
  limits.max_files = 3;
  limits.max_depth = 2;
  ScalarWatch& watch = Watch(limits, false);
  watch.Baseline();
  TempDir elsewhere;
  WriteFile(elsewhere.Path("events.out.tfevents.1.host"), ScalarRecord("linked", 1, 1));
  fs::create_directory_symlink(elsewhere.path(), dir_.Path("link"));
  fs::create_directories(dir_.Path("a/b/c"));
  WriteFile(dir_.Path("a/b/c/events.out.tfevents.1.host"), ScalarRecord("deep", 1, 1));
  WriteFile(dir_.Path("a/b/events.out.tfevents.1.host"), ScalarRecord("x", 1, 1));
  WriteFile(dir_.Path("a/events.out.tfevents.1.host"), ScalarRecord("x", 1, 1));
  WriteFile(dir_.Path("events.out.tfevents.1.host"), ScalarRecord("x", 1, 1));
  WriteFile(dir_.Path("not-an-event-file"), ScalarRecord("x", 1, 1));
  EXPECT_EQ(Tags(watch.Poll(true)), (std::vector<std::string>{"a/b/x@1", "a/x@1", "x@1"}))
      << "not a/b/c (too deep) nor link/ (a symlinked directory)";
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];

  WriteFile(dir_.Path("events.out.tfevents.2.host"), ScalarRecord("y", 1, 1));
  WriteFile(dir_.Path("events.out.tfevents.3.host"), ScalarRecord("z", 1, 1));
  EXPECT_TRUE(watch.Poll(true).empty());
  EXPECT_EQ(watch.followed_files(), 3u);
  ASSERT_EQ(warnings_.size(), 1u) << "one warning for the files over the limit";
  EXPECT_NE(warnings_[0].find("more than 3 TensorBoard event files"), std::string::npos)
      << warnings_[0];
}

// Every scalar real TensorFlow 2.21 wrote (TF1 FileWriter, TF2 summary writer,
// Keras' TensorBoard callback; tests/agent/testdata/make_tfevents.py), as
// TensorFlow's own reader decoded them into expected.json.
std::vector<ScalarPoint> ExpectedFromTensorFlow() {
  auto expected = nlohmann::json::parse(ReadFile(TFSLURM_AGENT_TESTDATA "/tfevents/expected.json"));
  std::vector<ScalarPoint> points;
  for (const auto& s : expected.at("scalars")) {
    points.push_back({s.at("tag"), s.at("step"), s.at("wall_time"), s.at("value")});
  }
  return points;
}

void SortPoints(std::vector<ScalarPoint>& points) {
  std::sort(points.begin(), points.end(), [](const ScalarPoint& a, const ScalarPoint& b) {
    return std::tie(a.tag, a.step, a.wall_time) < std::tie(b.tag, b.step, b.wall_time);
  });
}

TEST_F(ScalarWatchTest, ReadsWhatRealTensorFlowWrote) {
  ScalarWatch& watch = Watch({}, false);
  watch.Baseline();
  // The program writes its event files after the baseline.
  fs::copy(TFSLURM_AGENT_TESTDATA "/tfevents", dir_.path(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::vector<ScalarPoint> points = watch.Poll(true);
  SortPoints(points);
  const std::vector<ScalarPoint> expected = ExpectedFromTensorFlow();
  ASSERT_EQ(expected.size(), 26u);
  EXPECT_EQ(points, expected);
  EXPECT_TRUE(warnings_.empty());

  // Spot checks against the values make_tfevents.py wrote.
  auto find = [&](const std::string& tag, int64_t step) {
    for (const auto& p : points) {
      if (p.tag == tag && p.step == step) return p.value;
    }
    return -1.0;
  };
  EXPECT_EQ(find("v2/loss", 2), 0.25) << "tf.summary.scalar, tensor_content";
  EXPECT_EQ(find("learning_rate", 10), 0.05f) << "TF1 FileWriter, simple_value, bare tag";
  EXPECT_EQ(find("v2/raw/float_val", 4), 0.75);
  EXPECT_EQ(find("v2/raw/double_val", 4), 1.4142135623730951);
  EXPECT_EQ(find("v2/raw/simple", 4), 1.5);
  EXPECT_GT(find("keras/train/epoch_loss", 1), 0) << "Keras' run directories";
  EXPECT_GT(find("keras/validation/epoch_loss", 1), 0);
  for (const auto& p : points) {
    EXPECT_EQ(p.tag.find("weights"), std::string::npos) << "histogram reported as a scalar";
    EXPECT_EQ(p.tag.find("note"), std::string::npos) << "text reported as a scalar";
    EXPECT_EQ(p.tag.find("vector"), std::string::npos) << "a shape [2] tensor reported";
  }
}

TEST_F(ScalarWatchTest, RealTensorFlowFilesPresentAtTheBaselineCountOnlyForAppendedRecords) {
  fs::copy(TFSLURM_AGENT_TESTDATA "/tfevents", dir_.path(), fs::copy_options::recursive);
  ScalarWatch& watch = Watch({}, false);
  watch.Baseline();
  EXPECT_TRUE(watch.Poll(true).empty());
  // The same records appended again (a writer that went on): reported once.
  const std::string train = dir_.Path("keras/train");
  const std::string file = (*fs::directory_iterator(train)).path();
  Append(file, ReadFile(file));
  std::vector<ScalarPoint> points = watch.Poll();
  std::vector<ScalarPoint> expected;
  for (const auto& p : ExpectedFromTensorFlow()) {
    if (p.tag.starts_with("keras/train/")) expected.push_back(p);
  }
  SortPoints(points);
  EXPECT_EQ(points, expected);
}

TEST(ScalarBufferTest, DropsTheOldestWithOneWarningAndCountsThem) {
  std::vector<std::string> warnings;
  ScalarBuffer buffer(3, [&](const std::string& m) { warnings.push_back(m); });
  for (int step = 1; step <= 5; ++step) buffer.Add({{"loss", step, 0, 0}});
  EXPECT_EQ(buffer.size(), 3u);
  EXPECT_EQ(buffer.dropped(), 2u);
  ASSERT_EQ(warnings.size(), 1u) << "one warning when dropping starts";
  std::vector<ScalarPoint> first = buffer.Take(2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].step, 3) << "the oldest went";
  EXPECT_EQ(buffer.Take(1000).size(), 1u);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("2 training scalars were dropped"), std::string::npos) << warnings[1];
  EXPECT_TRUE(buffer.empty());
}

}  // namespace
}  // namespace tfslurm::agent
