// What must hold for any input a user or an agent can send, checked on one
// input at a time. The libFuzzer targets (*_fuzzer.cc) call these with
// generated inputs and abort on a violation; corpus_test.cc calls them with
// every file of corpus/ in every build. Each returns "" when all holds, else
// what was violated. Crashes, hangs and UB are the sanitizers' to find.
#pragma once

#include <string>
#include <string_view>

#include "service/core/sbatch_script.h"
#include "service/core/spec.h"

namespace tfslurm::fuzz {

// bytes -> JSON -> ParseSpec, with the default limits and with tiny ones.
// An invalid spec is InvalidArgument and every FieldError names a field the
// input has (or a known field) with a reason; a valid spec meets the
// documented cross-field rules and ToJson() parses back to itself.
std::string CheckSpecInput(std::string_view bytes);

// bytes -> JSON -> ParseSpec -> BuildSubmitRequest, for a valid spec: every
// line before the first blank one is a comment of printable ASCII (no byte of
// user text can end it), #SBATCH values are of a safe alphabet, the rest is
// exactly the srun command with the expected argv (ShellQuote'd, as
// shell_words.h reads it), and the secret is not in the script. The bytes
// themselves also go through ShellQuote and must come back unchanged.
std::string CheckSbatchInput(std::string_view bytes);

// The script for `spec` with a launch chosen by `variant`, as the sbatch
// check renders it; `argv` gets the words the srun line must split into.
SubmitRequest RenderForCheck(const ExperimentSpec& spec, unsigned variant,
                             std::vector<std::string>* argv);

// ShellQuote(bytes) reads back, as one word, as bytes.
std::string CheckShellQuote(std::string_view bytes);

// bytes as protobuf JSON / binary AgentMessage: when it decodes, FromProto
// copies every field, the message survives JSON and binary round trips, and
// ToProto of replies built from its strings encodes and decodes.
std::string CheckAgentJsonInput(std::string_view bytes);
std::string CheckAgentBinaryInput(std::string_view bytes);

}  // namespace tfslurm::fuzz
