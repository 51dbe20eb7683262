// "Did you mean": the choice a mistyped word was most likely meant to be,
// shared by tfctl (subcommands, tags, experiment ids) and the spec parser
// (unknown fields).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tfslurm {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of adjacent characters ("stauts" is one from "status").
size_t EditDistance(const std::string& a, const std::string& b);

// The nearest choice by edit distance (a swap of neighbours counts as one
// edit), or the one that holds `word`, or whose last '/' part is near it (a
// tag "train/loss" for "los"); "" when none is near enough to suggest: at
// most a third of the word wrong, and never more than 3 edits.
std::string NearestWord(const std::string& word, const std::vector<std::string>& choices);

}  // namespace tfslurm
