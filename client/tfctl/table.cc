#include "client/tfctl/table.h"

#include <algorithm>

#include "client/terminal_text.h"

namespace tfslurm::tfctl {
namespace {

// Width on a terminal, counting each UTF-8 character once.
size_t DisplayWidth(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
}

}  // namespace

Table::Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(std::max(cells.size(), rows_[0].size()));
  for (std::string& cell : cells) cell = client::EscapeForTerminal(cell);
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(rows_[0].size(), 0);
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - DisplayWidth(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace tfslurm::tfctl
