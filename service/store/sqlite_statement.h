// A prepared SQLite statement of the store, read by column name: Prepared
// (compiled once, with its columns' index by name) and Statement (one use
// of it: bind, step, read). Internal to service/store.
//
// Thread safety: none of its own. A Prepared and its Statements belong to
// one connection and are used under the lock that guards it (SqliteStore's
// mutex).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace tfslurm::store {

// A prepared statement as the store keeps it: compiled once, with the
// index of each result column by name (sqlite3_column_name: a column's name,
// or its alias after AS), so that rows are read by name, not by position.
struct Prepared {
  sqlite3_stmt* stmt = nullptr;
  // Transparent, so that a lookup by a literal makes no std::string.
  struct Hash : std::hash<std::string_view> {
    using is_transparent = void;
  };
  std::unordered_map<std::string, int, Hash, std::equal_to<>> columns;
  std::string sql;  // for the message of a bug (an unknown column)
};

// RAII for one use of a Prepared statement, with typed binding and reading
// of columns by name.
class Statement {
 public:
  explicit Statement(const Prepared& prepared) : prepared_(prepared), stmt_(prepared.stmt) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // A state's or a reason's name (records.h).
  Statement& Bind(int i, const char* v) { return Bind(i, std::string(v)); }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Statement& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Statement& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  template <typename T>
  Statement& Bind(int i, const std::optional<T>& v) {
    if (v) return Bind(i, static_cast<int64_t>(*v));
    sqlite3_bind_null(stmt_, i);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  // The current row's column `name`.
  std::string Text(std::string_view name) {
    int col = Column(name);
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, sqlite3_column_bytes(stmt_, col)) : std::string();
  }
  int64_t Int(std::string_view name) { return sqlite3_column_int64(stmt_, Column(name)); }
  std::optional<int64_t> OptInt(std::string_view name) {
    int col = Column(name);
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(stmt_, col);
  }
  double Real(std::string_view name) { return sqlite3_column_double(stmt_, Column(name)); }
  std::optional<double> OptReal(std::string_view name) {
    int col = Column(name);
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }

 private:
  int Column(std::string_view name) const {
    auto it = prepared_.columns.find(name);
    if (it == prepared_.columns.end()) {
      // Our SQL is fixed text: reading a column it does not select is a bug.
      fprintf(stderr, "tfslurmd: no column '%.*s' in SQL: %s\n", static_cast<int>(name.size()),
              name.data(), prepared_.sql.c_str());
      abort();
    }
    return it->second;
  }

  const Prepared& prepared_;
  sqlite3_stmt* stmt_;
};

// The statements of one connection, each compiled once and cached by its
// SQL text (SQLITE_PREPARE_PERSISTENT), with its columns' index by name.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() {
    for (auto& [_, prepared] : statements_) sqlite3_finalize(prepared.stmt);
  }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  Statement Prepare(const std::string& sql) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      Prepared prepared;
      prepared.sql = sql;
      if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &prepared.stmt,
                             nullptr) != SQLITE_OK) {
        // Our SQL is fixed text: failing to prepare it is a bug, not input.
        fprintf(stderr, "tfslurmd: cannot prepare SQL (%s): %s\n", sqlite3_errmsg(db_),
                sql.c_str());
        abort();
      }
      for (int i = 0; i < sqlite3_column_count(prepared.stmt); ++i)
        prepared.columns.emplace(sqlite3_column_name(prepared.stmt, i), i);
      it = statements_.emplace(sql, std::move(prepared)).first;
    }
    // Elements of an unordered_map stay where they are as it grows.
    return Statement(it->second);
  }

  // The store's error for a failed statement: Unavailable, with `what` it
  // was doing and SQLite's message.
  Status Error(const std::string& what) const {
    return Unavailable("database error while " + what + ": " + sqlite3_errmsg(db_));
  }

 private:
  sqlite3* const db_;
  std::unordered_map<std::string, Prepared> statements_;
};

}  // namespace tfslurm::store
