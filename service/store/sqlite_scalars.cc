#include "service/store/sqlite_scalars.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

namespace tfslurm::store {
namespace {

// Every other point of a tag goes, counted in (attempt, step) order, except
// each attempt's first (where a chart marks a restart) and the newest: about
// half remain, spread over the whole span. Thinning again later doubles the
// stride, so a long run keeps points evenly spaced in count, not only its
// latest ones.
constexpr const char* kThin =
    "DELETE FROM scalars WHERE tag_id = ?1 AND (attempt, step) IN ("
    " SELECT attempt, step FROM ("
    "  SELECT attempt, step, row_number() OVER (ORDER BY attempt, step) AS n,"
    "   row_number() OVER (PARTITION BY attempt ORDER BY step) AS in_attempt,"
    "   count(*) OVER () AS total"
    "  FROM scalars WHERE tag_id = ?1)"
    " WHERE n % 2 = 0 AND n < total AND in_attempt > 1)";

StatusOr<int64_t> CountPoints(StatementCache& sql, int64_t tag_id) {
  Statement s = sql.Prepare("SELECT count(*) AS kept FROM scalars WHERE tag_id=?");
  s.Bind(1, tag_id);
  if (s.Step() != SQLITE_ROW) return sql.Error("counting scalars");
  return s.Int("kept");
}

Status Thin(StatementCache& sql, int64_t tag_id, int limit) {
  auto kept = CountPoints(sql, tag_id);
  if (!kept.ok()) return kept.status();
  while (*kept > limit) {
    {
      Statement s = sql.Prepare(kThin);
      s.Bind(1, tag_id);
      if (s.Step() != SQLITE_DONE) return sql.Error("thinning scalars");
    }
    auto now = CountPoints(sql, tag_id);
    if (!now.ok()) return now.status();
    // Only attempts' first points and the newest left: as thin as it gets.
    if (*now == *kept) break;
    kept = now;
  }
  return Status::Ok();
}

// The tag's id; nullopt when the experiment has no such tag and already has
// `max_tags`.
StatusOr<std::optional<int64_t>> TagId(StatementCache& sql, const std::string& experiment_id,
                                       const std::string& tag, int max_tags) {
  {
    Statement s = sql.Prepare("SELECT id FROM scalar_tags WHERE experiment_id=? AND tag=?");
    s.Bind(1, experiment_id).Bind(2, tag);
    int rc = s.Step();
    if (rc == SQLITE_ROW) return std::optional<int64_t>(s.Int("id"));
    if (rc != SQLITE_DONE) return sql.Error("reading scalar tags");
  }
  {
    Statement s = sql.Prepare("SELECT count(*) AS tags FROM scalar_tags WHERE experiment_id=?");
    s.Bind(1, experiment_id);
    if (s.Step() != SQLITE_ROW) return sql.Error("counting scalar tags");
    if (s.Int("tags") >= max_tags) return std::optional<int64_t>();
  }
  Statement s =
      sql.Prepare("INSERT INTO scalar_tags (experiment_id, tag) VALUES (?, ?) RETURNING id");
  s.Bind(1, experiment_id).Bind(2, tag);
  if (s.Step() != SQLITE_ROW) return sql.Error("adding a scalar tag");
  return std::optional<int64_t>(s.Int("id"));
}

}  // namespace

StatusOr<AppendedScalars> AppendScalarsInTransaction(StatementCache& sql,
                                                     const std::string& experiment_id, int attempt,
                                                     std::span<const ScalarPoint> points,
                                                     const ScalarLimits& limits) {
  AppendedScalars result;
  std::unordered_map<std::string, std::optional<int64_t>> ids;  // nullopt: refused
  std::unordered_map<int64_t, int64_t> reported;                // by tag id
  for (const ScalarPoint& p : points) {
    auto known = ids.find(p.tag);
    if (known == ids.end()) {
      auto id = TagId(sql, experiment_id, p.tag, limits.tags);
      if (!id.ok()) return id.status();
      if (!*id) result.refused_tags.push_back(p.tag);
      known = ids.emplace(p.tag, *id).first;
    }
    if (!known->second) continue;
    Statement s = sql.Prepare(
        "INSERT INTO scalars (tag_id, attempt, step, wall_time, value) VALUES (?,?,?,?,?) "
        "ON CONFLICT (tag_id, attempt, step) DO UPDATE SET wall_time=excluded.wall_time, "
        "value=excluded.value");
    s.Bind(1, *known->second).Bind(2, attempt).Bind(3, p.step).Bind(4, p.wall_time);
    if (p.value) {
      s.Bind(5, *p.value);
    } else {
      s.BindNull(5);
    }
    if (s.Step() != SQLITE_DONE) return sql.Error("writing scalars");
    ++reported[*known->second];
  }
  for (const auto& [tag_id, count] : reported) {
    {
      Statement s = sql.Prepare("UPDATE scalar_tags SET reported = reported + ? WHERE id = ?");
      s.Bind(1, count).Bind(2, tag_id);
      if (s.Step() != SQLITE_DONE) return sql.Error("counting scalars");
    }
    if (Status s = Thin(sql, tag_id, limits.points_per_tag); !s.ok()) return s;
  }
  return result;
}

StatusOr<std::vector<ScalarSeries>> ReadScalarSeries(StatementCache& sql,
                                                     const std::string& experiment_id,
                                                     const std::vector<std::string>& tags) {
  // One statement whatever the number of tags: the filter goes in as a JSON
  // array (json_each), as the list's ids do.
  Statement s = sql.Prepare(
      "SELECT t.tag AS tag, t.reported AS reported, p.attempt AS attempt, p.step AS step, "
      "p.wall_time AS wall_time, p.value AS value FROM scalar_tags t LEFT JOIN scalars p ON "
      "p.tag_id = t.id WHERE t.experiment_id = ? AND (? = 0 OR t.tag IN (SELECT value FROM "
      "json_each(?))) ORDER BY t.tag, p.attempt, p.step");
  s.Bind(1, experiment_id).Bind(2, static_cast<int64_t>(tags.size()));
  s.Bind(3, nlohmann::json(tags).dump());
  std::vector<ScalarSeries> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    std::string tag = s.Text("tag");
    if (out.empty() || out.back().tag != tag) {
      ScalarSeries& series = out.emplace_back();
      series.tag = std::move(tag);
      series.reported = s.Int("reported");
    }
    if (!s.OptInt("attempt")) continue;  // a tag whose points were all refused
    out.back().points.push_back({.attempt = static_cast<int>(s.Int("attempt")),
                                 .step = s.Int("step"),
                                 .wall_time = s.Real("wall_time"),
                                 .value = s.OptReal("value")});
  }
  if (rc != SQLITE_DONE) return sql.Error("reading scalars");
  return out;
}

StatusOr<std::vector<std::string>> ReadScalarTags(StatementCache& sql,
                                                  const std::string& experiment_id) {
  Statement s = sql.Prepare("SELECT tag FROM scalar_tags WHERE experiment_id = ? ORDER BY tag");
  s.Bind(1, experiment_id);
  std::vector<std::string> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(s.Text("tag"));
  if (rc != SQLITE_DONE) return sql.Error("reading scalar tags");
  return out;
}

}  // namespace tfslurm::store
