#include "service/core/deletion.h"

#include <spdlog/spdlog.h>

#include "service/core/wording.h"

namespace tfslurm {

StatusOr<DeleteResult> Deletion::Delete(const std::string& id, bool files) {
  DeleteResult result{id, "", 0, ""};
  std::string aside;
  RunAs account;
  {
    MutexLock lock(core_.mu());
    if (const OpenExperiment* open = core_.Find(id)) {
      const OpenExperiment& a = *open;
      if (!IsTerminal(a.record.state))
        return FailedPrecondition("experiment '" + id + "' is " +
                                  ExperimentStateName(a.record.state) +
                                  "; only an ended experiment can be deleted: cancel it first "
                                  "(tfctl cancel " +
                                  id + ") or wait for it to end");
      return a.JobStillFinishing();
    }
    auto record = core_.ports().store.GetExperiment(id);
    if (!record.ok()) return record.status();
    if (!IsTerminal(record->state))
      return FailedPrecondition("experiment '" + id + "' is " + ExperimentStateName(record->state) +
                                "; only an ended experiment can be deleted");
    const std::string dir = core_.config().output_root + "/" + id;
    if (files) {
      auto owner = core_.ports().accounts.ForOwner(record->owner);
      if (!owner.ok()) return owner.status();
      account = std::move(owner).value();
      // Moved aside under the lock: once the row is gone the id is free, and
      // a new experiment of that id must not get this one's files.
      auto moved = core_.ports().files.SetAsideExperimentDirectory(dir);
      if (!moved.ok()) return moved.status();
      aside = std::move(moved).value();
      if (!aside.empty()) result.files_removed_from = dir;
      if (record->model_dir != dir && record->model_dir.rfind(dir + "/", 0) != 0)
        result.model_dir_kept = record->model_dir;
    }
    Changes c;
    c.delete_experiment = id;
    if (Status s = core_.Apply({&c, 1}); !s.ok()) {
      spdlog::error("deleting experiment {}: {}{}", id, s.message(),
                    aside.empty() ? "" : "; its files stay in " + aside);
      return s;
    }
  }
  if (!aside.empty()) {
    auto removed = core_.ports().files.RemoveDirectoryTree(aside, account);
    if (!removed.ok()) {
      // The experiment is gone; what is left of its files is named.
      spdlog::warn("experiment {} deleted, but its files in {} were not all removed: {}", id, aside,
                   removed.status().message());
      return Status(removed.status().code(),
                    "experiment '" + id + "' was deleted, but not all of its files: " +
                        removed.status().message() + "; what is left is in " + aside);
    }
    result.entries_removed = *removed;
  }
  spdlog::info("experiment {} deleted by its owner{}", id,
               files ? ", with " + std::to_string(result.entries_removed) + " files" : "");
  core_.metrics().ExperimentDeleted(false, result.entries_removed);
  return result;
}

void Deletion::SweepIfDue() {
  const int64_t keep = core_.config().retain_ended_ms;
  if (keep <= 0) return;
  const int64_t now = core_.ports().clock.NowMs();
  if (now - last_sweep_ms_.load() < core_.config().retention_sweep_ms) return;
  last_sweep_ms_ = now;
  auto ended = core_.ports().store.ListEndedBefore(now - keep, 100);
  if (!ended.ok()) {
    spdlog::warn("retention sweep: {}", ended.status().message());
    return;
  }
  MutexLock lock(core_.mu());
  for (const std::string& id : *ended) {
    // Still in memory (its job finishing, or resumed since the query): kept.
    if (core_.Find(id)) continue;
    auto record = core_.ports().store.GetExperiment(id);
    if (!record.ok() || !IsTerminal(record->state) || record->updated_at >= now - keep) continue;
    Changes c;
    c.delete_experiment = id;
    if (Status s = core_.Apply({&c, 1}); !s.ok()) {
      spdlog::warn("retention sweep: deleting {}: {}", id, s.message());
      return;
    }
    spdlog::info(
        "experiment {} deleted: ended more than {} ago (--retain-ended-days); its files "
        "are kept",
        id, Seconds(keep));
    core_.metrics().ExperimentDeleted(true, 0);
  }
}

}  // namespace tfslurm
