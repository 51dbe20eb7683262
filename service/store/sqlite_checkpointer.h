// The WAL checkpointer of the SQLite store (sqlite_store.cc): checkpoints
// on a thread of its own, with a connection of its own. Internal to
// service/store.
//
// Thread safety: see the class.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <thread>

#include "base/mutex.h"
#include "service/store/sqlite_store.h"

namespace tfslurm::store {

// PASSIVE checkpoints on a thread of its own: when a commit leaves the WAL
// at checkpoint_wal_pages or more, and every checkpoint_interval while the
// WAL has commits not yet checkpointed. A PASSIVE checkpoint never blocks
// the serving connection: it copies what no reader still needs and leaves
// the rest for the next one. Thread-safe: OnCommit is called by the serving
// connection's WAL hook, under the store's mutex (so the store's mu_ is taken
// before this mu_, never after).
class WalCheckpointer {
 public:
  // Takes ownership of `db`, a connection of its own to the database.
  WalCheckpointer(sqlite3* db, const SqliteOptions& options)
      : db_(db), options_(options), thread_([this] { Run(); }) {}
  ~WalCheckpointer() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
    sqlite3_close(db_);
  }
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // A commit left `wal_pages` pages in the WAL.
  void OnCommit(int wal_pages) ABSL_LOCKS_EXCLUDED(mu_) {
    bool wake;
    {
      MutexLock lock(mu_);
      wal_pages_ = wal_pages;
      // Fewer pages than checkpointed: the WAL started over from its head.
      if (wal_pages_ < checkpointed_pages_) checkpointed_pages_ = 0;
      wake = wal_pages_ - checkpointed_pages_ >= options_.checkpoint_wal_pages;
    }
    if (wake) wake_.notify_one();
  }

  int64_t checkpoints() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return checkpoints_;
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    // The checkpoint runs outside mu_; it is counted when mu_ is next taken,
    // before waiting again, as the one hold of a std::unique_lock would.
    bool checkpointed = false;
    while (true) {
      {
        MutexLock lock(mu_);
        if (checkpointed) ++checkpoints_;
        if (!AwaitCheckpoint()) return;
      }
      // SQLITE_BUSY (another checkpoint running, e.g. a sqlite3 CLI's) is
      // not an error: the next commit or interval tries again.
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      checkpointed = true;
    }
  }

  // Waits until a checkpoint is due and returns true, with its pages counted
  // as checkpointed; false once stop_ is set.
  bool AwaitCheckpoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!stop_) {
      // condition_variable_any unlocks and relocks mu_ itself; the analysis
      // sees mu_ held throughout, as it is whenever the predicate runs.
      wake_.wait_for(
          mu_, options_.checkpoint_interval, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return stop_ || wal_pages_ - checkpointed_pages_ >= options_.checkpoint_wal_pages;
          });
      if (stop_ || wal_pages_ == checkpointed_pages_) continue;
      // Counted as checkpointed now: pages the checkpoint leaves behind (a
      // reader still needs them) wait for the next one.
      checkpointed_pages_ = wal_pages_;
      return true;
    }
    return false;
  }

  sqlite3* const db_;
  const SqliteOptions options_;
  Mutex mu_;
  // _any: it waits on a tfslurm::Mutex (see AwaitCheckpoint).
  std::condition_variable_any wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int wal_pages_ ABSL_GUARDED_BY(mu_) = 0;           // in the WAL after the last commit
  int checkpointed_pages_ ABSL_GUARDED_BY(mu_) = 0;  // in the WAL when the last checkpoint began
  int64_t checkpoints_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tfslurm::store
