// The SQL migrations of schema/migrations/, embedded at build time
// (cmake/EmbedMigrations.cmake). Version N is file NNNN_*.sql.
//
// Thread safety: EmbeddedMigrations returns immutable static data; any thread
// may read it.
#pragma once

#include <string>
#include <vector>

namespace tfslurm::store {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// In increasing version order.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace tfslurm::store
