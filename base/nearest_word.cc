#include "base/nearest_word.h"

#include <algorithm>

namespace tfslurm {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string NearestWord(const std::string& word, const std::vector<std::string>& choices) {
  if (word.empty()) return "";
  const size_t allowed = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3));
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& choice : choices) {
    // Words of hundreds of characters (an id, a tag) are not worth the
    // quadratic table: nothing that long is a typo of a short one.
    if (choice.size() > word.size() + allowed + 64) continue;
    size_t distance = EditDistance(word, choice);
    const std::string last = choice.substr(choice.rfind('/') + 1);
    if (last != choice) distance = std::min(distance, EditDistance(word, last));
    if (distance > allowed && word.size() >= 3 && choice.find(word) != std::string::npos)
      distance = allowed;
    if (distance < best_distance) {
      best = choice;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace tfslurm
