#include "agent/tfrecord_reader.h"

// Boost.CRC rather than a hand-written table: there is no CRC32C library in
// Debian 12 that we already use (zlib's crc32 is the IEEE polynomial), and
// Boost's header-only, well-kept implementation takes the polynomial as a
// parameter. Debian's libboost-dev, from deploy/install-deps.sh.
#include <boost/crc.hpp>
#include <limits>

namespace tfslurm::agent {
namespace {

// CRC-32C: polynomial 0x1EDC6F41, reflected, initial and final XOR all ones.
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

constexpr uint32_t kMaskDelta = 0xa282ead8u;

uint32_t LoadLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void AppendLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t MaskedCrc32c(std::string_view data) {
  Crc32c crc;
  crc.process_bytes(data.data(), data.size());
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + kMaskDelta;
}

RecordRead ReadRecord(std::string_view buffer, uint64_t max_data_bytes) {
  RecordRead r;
  if (buffer.size() < kRecordHeaderBytes) {
    r.size = kRecordHeaderBytes;
    return r;
  }
  const uint64_t length = LoadLe64(buffer.data());
  if (MaskedCrc32c(buffer.substr(0, 8)) != LoadLe32(buffer.data() + 8)) {
    r.kind = RecordRead::Kind::kCorrupt;
    r.error = "the CRC of a record's length does not match";
    return r;
  }
  // Saturated: a length near 2^64 must not wrap around to a small size
  // (which would make the caller skip back into records already read).
  constexpr uint64_t kFrame = kRecordHeaderBytes + kRecordFooterBytes;
  r.size = length > std::numeric_limits<uint64_t>::max() - kFrame
               ? std::numeric_limits<uint64_t>::max()
               : length + kFrame;
  if (length > max_data_bytes) {
    r.kind = RecordRead::Kind::kTooLarge;
    return r;
  }
  if (buffer.size() < r.size) return r;
  r.data = buffer.substr(kRecordHeaderBytes, length);
  if (MaskedCrc32c(r.data) != LoadLe32(buffer.data() + kRecordHeaderBytes + length)) {
    r.kind = RecordRead::Kind::kCorrupt;
    r.error = "the CRC of a record's data does not match";
    r.data = {};
    return r;
  }
  r.kind = RecordRead::Kind::kRecord;
  return r;
}

std::string FrameRecord(std::string_view data) {
  std::string out;
  AppendLe(out, data.size(), 8);
  AppendLe(out, MaskedCrc32c(out), 4);
  out.append(data);
  AppendLe(out, MaskedCrc32c(data), 4);
  return out;
}

}  // namespace tfslurm::agent
