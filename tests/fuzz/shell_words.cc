#include "tests/fuzz/shell_words.h"

#include <cstdio>

namespace tfslurm::fuzz {

bool IsSafeBareByte(unsigned char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  switch (c) {
    case '_':
    case '-':
    case '.':
    case '/':
    case '=':
    case '%':
    case ':':
    case '@':
    case '+':
    case ',':
      return true;
    default:
      return false;
  }
}

std::optional<std::vector<std::vector<std::string>>> SplitShellCommands(std::string_view text,
                                                                        std::string* error) {
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto fail = [&](size_t at, const std::string& why) {
    char where[64];
    std::snprintf(where, sizeof where, " at byte %zu (0x%02x)", at,
                  at < text.size() ? static_cast<unsigned char>(text[at]) : 0u);
    *error = why + where;
    return std::nullopt;
  };
  auto end_word = [&] {
    if (in_word) words.push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = text[i];
    if (c == ' ' || c == '\t') {
      end_word();
      ++i;
    } else if (c == '\n') {
      end_word();
      if (!words.empty()) commands.push_back(std::move(words));
      words.clear();
      ++i;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return fail(i, "backslash at the end of the text");
      if (text[i + 1] == '\n') {  // continuation: a blank
        end_word();
      } else {
        word += text[i + 1];
        in_word = true;
      }
      i += 2;
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return fail(i, "unterminated single quote");
      word.append(text.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (IsSafeBareByte(c)) {
      word += static_cast<char>(c);
      in_word = true;
      ++i;
    } else {
      return fail(i, "unquoted byte outside the safe set");
    }
  }
  if (in_word || !words.empty()) return fail(text.size(), "last command not ended by a newline");
  return commands;
}

}  // namespace tfslurm::fuzz
