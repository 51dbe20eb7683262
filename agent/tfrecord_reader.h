// TFRecord framing, the container of TensorBoard event files: each record is
//
//   uint64  length            little-endian
//   uint32  masked CRC32C of the 8 length bytes
//   byte    data[length]
//   uint32  masked CRC32C of data
//
// (tensorflow/core/lib/io/record_writer.cc; the mask is crc32c.h's Mask). A
// file being written can end inside a record; ReadRecord says how many bytes
// it needs then, so the caller waits for them instead of calling the file
// corrupt.
//
// Thread safety: pure functions.
#ifndef TFSLURM_AGENT_TFRECORD_READER_H_
#define TFSLURM_AGENT_TFRECORD_READER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm::agent {

inline constexpr uint64_t kRecordHeaderBytes = 12;  // length + its CRC
inline constexpr uint64_t kRecordFooterBytes = 4;   // the data's CRC

// CRC32C (Castagnoli) of `data`, masked as TFRecord stores it, so that a CRC
// of bytes that themselves hold a CRC does not look valid by accident.
uint32_t MaskedCrc32c(std::string_view data);

struct RecordRead {
  enum class Kind {
    kRecord,      // `data` is the record's data, `size` its whole length
    kIncomplete,  // the buffer ends inside the record; `size` bytes are needed
    kCorrupt,     // a CRC does not match; `error` says which
    kTooLarge,    // the header is valid but the data exceeds the limit: skip
                  // `size` bytes without reading them
  };
  Kind kind = Kind::kIncomplete;
  std::string_view data;  // into the buffer given to ReadRecord
  uint64_t size = 0;      // header + data + footer (kIncomplete: at least)
  std::string error;
};

// Reads the record at the start of `buffer`. A length over `max_data_bytes`
// is kTooLarge as soon as the header is there: the caller skips it without
// holding it in memory (no scalar summary is anywhere near that big).
RecordRead ReadRecord(std::string_view buffer, uint64_t max_data_bytes);

// The framing of `data` as one record: what TensorFlow's RecordWriter writes
// (for tests).
std::string FrameRecord(std::string_view data);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_TFRECORD_READER_H_
