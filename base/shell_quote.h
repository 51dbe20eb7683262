// Quoting for bash: the one way tfslurm puts a value into shell text (the
// sbatch script, the TensorBoard command the API shows).
//
// Thread safety: a pure function.
#pragma once

#include <string>

namespace tfslurm {

// Quotes `s` for bash so that it is one word whose value is `s`, byte for
// byte: single quotes, with ' written as '\''.
std::string ShellQuote(const std::string& s);

}  // namespace tfslurm
