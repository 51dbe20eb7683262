#include "service/api/list_cache.h"

#include <utility>

#include "service/api/experiments_json.h"

namespace tfslurm::api {

// Why a kept body or item is never older than its version says.
//
// Versions only grow. Core tells the cache of a commit (Committed) after
// the store has committed it, and the cache bumps the versions then; so a
// change counted in a version read at time t was in the store before t.
// Body() reads the list version V before it calls the source, and each
// experiment's version in `need`, after the source was called; the store
// reads after that. So:
//  - a body kept at V was made from reads that all began after V was read:
//    it shows every change counted in V (and perhaps some not yet counted:
//    the commit is in the store, Committed has not run yet). A body is
//    answered only while the list version is still V; a change counted
//    later makes V stale.
//  - an item is kept at its version iv only when iv <= V: the change that
//    set iv was counted before V was read, so before the summary was read,
//    and the item shows it. (With iv > V a commit was counted while the list
//    was being read, perhaps after its summary was: the item is used for
//    this body, which is then not kept, and not kept itself.)
//  - an item kept at iv is used while the experiment's version is iv: no
//    change to what a list shows of it has been counted since.
// A kept body or item may thus be newer than its version says, never older:
// newer is what a read of the store at that moment would show anyway.
//
// A change goes uncounted only when ChangesWhatListsShow says it changes
// nothing, judged against seen_, the role and state of each task as the
// commits wrote them. That holds while seen_ is what the store holds: every
// write goes through core, which tells its observers, and writes of one
// task come in order (core writes an experiment's rows under its lock). A
// commit that may or may not have happened (applied false) counts as a
// change and clears what seen_ knows of its experiments.

namespace {

// The query, as the key of its body: equal for queries with equal answers.
std::string QueryKey(const ListQuery& q) {
  std::string key = q.owner + '\n' + std::to_string(q.limit) + '\n' + std::to_string(q.offset);
  for (ExperimentState st : q.states) {
    key += ExperimentStateName(st);
    key += ',';
  }
  return key;
}

}  // namespace

ExperimentListCache::ExperimentListCache(ListSource source) : source_(std::move(source)) {}

StatusOr<std::string> ExperimentListCache::Body(const ListQuery& q) {
  const std::string key = QueryKey(q);
  uint64_t version;
  {
    MutexLock lock(mu_);
    version = list_version_;
    if (bodies_version_ == version) {
      auto it = bodies_.find(key);
      if (it != bodies_.end()) return *it->second;
    }
  }
  // Per experiment of the page, in page order: its kept item, or the
  // version its summary is read at.
  struct Slot {
    std::shared_ptr<const std::string> item;
    uint64_t version = 0;
  };
  std::vector<Slot> slots;
  auto page = source_.list_page(q, [&](const std::string& id) {
    MutexLock lock(mu_);
    Slot slot;
    slot.version = ItemVersionLocked(id);
    auto it = items_.find(id);
    if (it != items_.end() && it->second.version == slot.version) slot.item = it->second.json;
    slots.push_back(std::move(slot));
    return slots.back().item == nullptr;
  });
  if (!page.ok()) return page.status();
  auto total = source_.count_experiments(q);
  if (!total.ok()) return total.status();
  if (slots.size() != page->size())
    return Internal("the list source asked about " + std::to_string(slots.size()) + " of the " +
                    std::to_string(page->size()) + " experiments of a page");

  std::vector<std::shared_ptr<const std::string>> items;
  items.reserve(slots.size());
  std::vector<size_t> made;  // places of the items made from summaries
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].item) {
      const ListedExperiment& listed = (*page)[i];
      if (!listed.summary)
        return Internal("the list source did not read the summary of '" + listed.id + "'");
      slots[i].item = std::make_shared<const std::string>(ExperimentSummaryJson(*listed.summary));
      made.push_back(i);
    }
    items.push_back(slots[i].item);
  }
  std::string body = ExperimentListJson(items, *total, q.limit, q.offset);

  MutexLock lock(mu_);
  for (size_t i : made)
    if (slots[i].version <= version) PutItem((*page)[i].id, slots[i].version, slots[i].item);
  // Kept only while current: a body of an older version would never be
  // answered (and bodies_version_ <= list_version_ always).
  if (version == list_version_) {
    if (version > bodies_version_ || bodies_.size() >= kMaxBodies) {
      bodies_.clear();
      bodies_version_ = version;
    }
    bodies_[key] = std::make_shared<const std::string>(body);
  }
  return body;
}

void ExperimentListCache::Committed(std::span<const Changes> batch, bool applied) {
  MutexLock lock(mu_);
  // One set after the other: each is judged against seen_ as the sets
  // before it in the batch left it, as they left the store.
  for (const Changes& c : batch) {
    if (!applied) {
      Forget(c);
      Changed(c);
      continue;
    }
    bool changed = ChangesWhatListsShow(c);
    See(c);
    if (changed) Changed(c);
  }
}

uint64_t ExperimentListCache::ListVersion() {
  MutexLock lock(mu_);
  return list_version_;
}

uint64_t ExperimentListCache::ItemVersion(const std::string& id) {
  MutexLock lock(mu_);
  return ItemVersionLocked(id);
}

size_t ExperimentListCache::ItemsKept() {
  MutexLock lock(mu_);
  return items_.size();
}

uint64_t ExperimentListCache::ItemVersionLocked(const std::string& id) const {
  auto it = item_versions_.find(id);
  return it == item_versions_.end() ? 0 : it->second;
}

bool ExperimentListCache::ChangesWhatListsShow(const Changes& c) const {
  if (c.experiment || !c.attempts.empty() || c.delete_experiment) return true;
  for (const TaskRecord& t : c.tasks) {
    auto it = seen_.find(t.experiment_id);
    if (it == seen_.end() || it->second.attempt != t.attempt) return true;
    auto known = it->second.by_task.find(t.task);
    if (known == it->second.by_task.end() || known->second.first != t.role ||
        known->second.second != t.state)
      return true;
  }
  return false;
}

void ExperimentListCache::See(const Changes& c) {
  // In the order the store applies them: the delete first.
  if (c.delete_experiment) seen_.erase(*c.delete_experiment);
  for (const TaskRecord& t : c.tasks) {
    auto [it, added] = seen_.try_emplace(t.experiment_id);
    SeenTasks& seen = it->second;
    // A later attempt's tasks replace an earlier one's; an earlier
    // attempt's (a late report) are not kept.
    if (added || t.attempt > seen.attempt) {
      seen.attempt = t.attempt;
      seen.by_task.clear();
    }
    if (t.attempt == seen.attempt) seen.by_task[t.task] = {t.role, t.state};
  }
  // A list shows no counts for a finished experiment; a task written later
  // (or a resume) counts as a change.
  if (c.experiment && IsTerminal(c.experiment->state)) seen_.erase(c.experiment->id);
  // Bounded: forgetting only makes the next writes count as changes.
  if (seen_.size() > kMaxItems) seen_.clear();
}

void ExperimentListCache::Changed(const Changes& c) {
  ++list_version_;
  // A deleted experiment keeps a version (versions never go back, which
  // the argument above needs); its item goes.
  if (c.delete_experiment) {
    item_versions_[*c.delete_experiment] = list_version_;
    items_.erase(*c.delete_experiment);
  }
  if (c.experiment) item_versions_[c.experiment->id] = list_version_;
  for (const AttemptRecord& a : c.attempts) item_versions_[a.experiment_id] = list_version_;
  for (const TaskRecord& t : c.tasks) item_versions_[t.experiment_id] = list_version_;
}

void ExperimentListCache::Forget(const Changes& c) {
  if (c.delete_experiment) seen_.erase(*c.delete_experiment);
  if (c.experiment) seen_.erase(c.experiment->id);
  for (const AttemptRecord& a : c.attempts) seen_.erase(a.experiment_id);
  for (const TaskRecord& t : c.tasks) seen_.erase(t.experiment_id);
}

void ExperimentListCache::PutItem(const std::string& id, uint64_t version,
                                  std::shared_ptr<const std::string> json) {
  auto it = items_.find(id);
  if (it != items_.end()) {
    // Not over an item of a later version (a faster list's).
    if (version >= it->second.version) it->second = {version, std::move(json)};
    return;
  }
  if (items_.size() >= kMaxItems) items_.clear();
  items_.emplace(id, Item{version, std::move(json)});
}

}  // namespace tfslurm::api
