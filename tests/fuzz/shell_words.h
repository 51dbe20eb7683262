// A model of the small subset of bash the sbatch script may use outside its
// comments: words of bare safe characters, single-quoted strings and \x
// escapes, separated by blanks, with \<newline> continuations. Anything else
// (an unquoted $ ` ; | & < > ( ) * ? [ ] { } ~ # ! " or a control byte) is
// refused, so a script that passes carries no unquoted user text: there is
// nothing in it for bash to expand. corpus_test.cc checks this model against
// real bash.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::fuzz {

// Bytes that may appear unquoted in a word.
bool IsSafeBareByte(unsigned char c);

// Splits `text` into simple commands (one per newline-terminated line, after
// continuations) of words. On text outside the subset returns nullopt and
// says why in `*error`.
std::optional<std::vector<std::vector<std::string>>> SplitShellCommands(std::string_view text,
                                                                        std::string* error);

}  // namespace tfslurm::fuzz
