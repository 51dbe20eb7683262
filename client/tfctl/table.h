// Plain-text tables with aligned columns, as squeue and kubectl print them.
//
// Thread safety: not thread-safe; one Table per use.
#pragma once

#include <string>
#include <vector>

namespace tfslurm::tfctl {

class Table {
 public:
  explicit Table(std::vector<std::string> header);
  // A row shorter than the header is padded with empty cells. Cells are
  // escaped for the terminal (client/terminal_text.h): they hold what users
  // and programs wrote, and a line break in one would forge a row.
  void AddRow(std::vector<std::string> cells);
  // Columns are separated by two spaces; the last one is not padded, so
  // lines carry no trailing blanks.
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
};

}  // namespace tfslurm::tfctl
