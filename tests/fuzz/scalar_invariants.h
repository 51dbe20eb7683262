// What must hold for any file a user's program writes for the agent to read
// as training scalars (agent/scalar_watch.h): TensorBoard event files
// (TFRecord framing, agent/tfrecord_reader.h; Events, agent/event_scalars.h)
// and the JSON-lines scalars file (agent/scalars_jsonl.h). Like invariants.h:
// tfevents_fuzzer and scalars_jsonl_fuzzer call these with generated inputs,
// corpus_test.cc with every file of corpus/tfevents and corpus/scalars_jsonl;
// each returns "" when all holds, else what was violated.
//
// The bytes are written to a real file in a temporary directory (under
// /dev/shm when it is writable) as a sequence of appends, split at points
// taken from a hash of the input, and a ScalarWatch polls after each append,
// with its read size and record and line limits also taken from the hash: torn
// records and lines, reads that end anywhere, records over the limit. What it
// has reported after each append is compared with a model that reads the
// whole file written so far at once.
#pragma once

#include <string>
#include <string_view>

namespace tfslurm::fuzz {

// `bytes` are an event file's bytes, or, when they start with "REC:", records
// to frame: each is a 2-byte little-endian length and that many bytes of
// Event (valid CRCs, so that the fuzzer reaches the protobuf decoding); a
// length of 0xffff is instead a header alone whose 8-byte length follows,
// with a valid CRC (a huge record, which must be skipped unread).
//
// Holds: ReadRecord's answers are consistent at every record boundary (a
// record's size is its data plus 16 bytes; an incomplete one asks for more
// bytes than there are; one over the limit is larger than the limit, without
// wrapping around); after every append, the points ScalarWatch has reported
// are exactly those of the complete records the model reads (up to the first
// bad CRC, past records over the limit once all their bytes are there), in
// order, and every point's tag is non-empty (the run, when there is one, its
// prefix). Memory: the fuzzer runs with -malloc_limit_mb (run-fuzzers.sh), so
// a length field is never allocated.
std::string CheckEventFileInput(std::string_view bytes);

// `bytes` are a JSON-lines scalars file's. Holds: every line parses or fails
// the same way twice; an accepted line's points have the line's step, a
// non-empty tag other than "step" and "wall_time", and the default wall_time
// unless the line has one; after every append, the points ScalarWatch has
// reported are exactly those of the complete lines so far (a partial last
// line is never consumed, even by the final poll); with a small line limit,
// they are a subsequence of those (a long line is skipped whole, never in
// part).
std::string CheckScalarsJsonlInput(std::string_view bytes);

}  // namespace tfslurm::fuzz
