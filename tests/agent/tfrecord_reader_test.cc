#include "agent/tfrecord_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using Kind = RecordRead::Kind;
constexpr uint64_t kNoLimit = 1 << 20;

TEST(MaskedCrc32cTest, IsCrc32cOfTheStandardCheckStringMasked) {
  // CRC-32C("123456789") is 0xE3069283 (the catalogue's check value), masked
  // as TensorFlow's crc32c::Mask does.
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(MaskedCrc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(ReadRecordTest, ReadsConsecutiveRecords) {
  const std::string bytes = FrameRecord("first") + FrameRecord("") + FrameRecord("third");
  std::string_view rest = bytes;
  for (std::string_view want : {"first", "", "third"}) {
    RecordRead r = ReadRecord(rest, kNoLimit);
    ASSERT_EQ(r.kind, Kind::kRecord) << r.error;
    EXPECT_EQ(r.data, want);
    EXPECT_EQ(r.size, 16 + want.size());
    rest.remove_prefix(r.size);
  }
  EXPECT_EQ(ReadRecord(rest, kNoLimit).kind, Kind::kIncomplete);
}

TEST(ReadRecordTest, TornTailSaysHowManyBytesItNeeds) {
  const std::string record = FrameRecord("a record still being written");
  for (size_t n = 0; n < record.size(); ++n) {
    RecordRead r = ReadRecord(std::string_view(record).substr(0, n), kNoLimit);
    ASSERT_EQ(r.kind, Kind::kIncomplete) << "prefix of " << n << " bytes";
    EXPECT_EQ(r.size, n < 12 ? 12 : record.size()) << "prefix of " << n << " bytes";
  }
}

TEST(ReadRecordTest, DataCrcMismatchIsCorrupt) {
  std::string record = FrameRecord("payload");
  record[14] ^= 0x01;  // a bit of the data
  RecordRead r = ReadRecord(record, kNoLimit);
  EXPECT_EQ(r.kind, Kind::kCorrupt);
  EXPECT_NE(r.error.find("data"), std::string::npos) << r.error;
}

TEST(ReadRecordTest, LengthCrcMismatchIsCorruptBeforeTheDataArrives) {
  std::string record = FrameRecord("payload");
  record[0] ^= 0x40;  // the length now claims 64 more bytes
  RecordRead r = ReadRecord(std::string_view(record).substr(0, 12), kNoLimit);
  EXPECT_EQ(r.kind, Kind::kCorrupt) << "a wrong length must not be waited for";
  EXPECT_NE(r.error.find("length"), std::string::npos) << r.error;
}

TEST(ReadRecordTest, TooLargeIsReportedFromTheHeaderAlone) {
  const std::string record = FrameRecord(std::string(100, 'x'));
  RecordRead r = ReadRecord(std::string_view(record).substr(0, 12), 99);
  EXPECT_EQ(r.kind, Kind::kTooLarge);
  EXPECT_EQ(r.size, record.size());
}

TEST(ReadRecordTest, EveryRecordOfAFileTensorFlowWroteChecks) {
  // Written by TF 2.21's tf.summary writer (tests/agent/testdata/make_tfevents.py).
  int files = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(TFSLURM_AGENT_TESTDATA "/tfevents")) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    ++files;
    const std::string bytes = testing::ReadFile(entry.path());
    std::string_view rest = bytes;
    int records = 0;
    while (!rest.empty()) {
      RecordRead r = ReadRecord(rest, kNoLimit);
      ASSERT_EQ(r.kind, Kind::kRecord) << entry.path() << " record " << records << ": " << r.error;
      rest.remove_prefix(r.size);
      ++records;
    }
    EXPECT_GE(records, 2) << entry.path() << ": the file_version record and data";
    // The framing we write is the framing TensorFlow wrote.
    RecordRead first = ReadRecord(bytes, kNoLimit);
    EXPECT_EQ(FrameRecord(first.data), bytes.substr(0, first.size)) << entry.path();
  }
  EXPECT_EQ(files, 4);
}

}  // namespace
}  // namespace tfslurm::agent
