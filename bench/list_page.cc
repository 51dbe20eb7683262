// The list of 1,000 (GET /experiments?limit=1000) made in-process, without
// HTTP and without the Slurm cluster, after each change to the store: what
// tfslurmd computes when its ExperimentListCache has no body for the new
// version. Two ways, taking turns after every change:
//   every item made from its row: ExperimentListCache::Body of a new cache,
//     with nothing kept (every summary read from SQLite and written as JSON);
//   kept items: Body of the cache tfslurmd keeps, told of every change as
//     core tells it (CommitObserver), so that only the changed experiments'
//     summaries are read and written.
// The store is a real SQLite file in a new directory under --dir, filled
// with --experiments queued experiments (one attempt each, the spec of
// examples/hello.json); each change sets the reason of --changes of them,
// as a poll or a cancel does.
//
//   bench_list_page [--experiments 1000] [--runs 300] [--changes 1] [--dir /tmp]
//
// Prints one line of key=value per way: p50/p99/max ms, body bytes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "service/api/list_cache.h"
#include "service/core/ports/store.h"
#include "service/store/sqlite_store.h"

namespace {

using namespace tfslurm;
using SteadyClock = std::chrono::steady_clock;

struct Options {
  int experiments = 1000;
  int runs = 300;
  int changes = 1;
  std::string dir = "/tmp";
};

[[noreturn]] void Usage() {
  fprintf(stderr,
          "usage: bench_list_page [--experiments N] [--runs N] [--changes N] [--dir DIR]\n");
  exit(2);
}

// The value of `flag` as a whole number from `lo` to `hi`, or exit with
// an error that names the flag, the value and what is allowed.
int IntFlag(const std::string& flag, const std::string& value, int lo, int hi) {
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || n < lo || n > hi) {
    fprintf(stderr, "bench_list_page: %s must be a whole number from %d to %d; got '%s'\n",
            flag.c_str(), lo, hi, value.c_str());
    exit(2);
  }
  return static_cast<int>(n);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Usage();
    std::string v = argv[++i];
    if (a == "--experiments")
      o.experiments = IntFlag(a, v, 1, 1000);  // one page: the list's limit is 1,000
    else if (a == "--runs")
      o.runs = IntFlag(a, v, 1, 1000000);
    else if (a == "--changes")
      o.changes = IntFlag(a, v, 1, 1000);
    else if (a == "--dir")
      o.dir = v;
    else
      Usage();
  }
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A queued experiment as a POST leaves it: submitted, its job pending.
Changes Queued(int i, const std::string& spec) {
  char id[32];
  snprintf(id, sizeof id, "list-%04d", i);
  ExperimentRecord e;
  e.id = id;
  e.owner = "bench";
  e.spec_json = spec;
  e.state = ExperimentState::kQueued;
  e.reason = "waiting for resources (Slurm: PartitionDown)";
  e.current_attempt = 1;
  e.model_dir = "/shared/models/" + e.id;
  e.mem_per_task_mb = 3800;
  e.mem_explanation = "partition debug: 7600 MB per node for 2 tasks per node";
  e.created_at = e.updated_at = 1763800000000 + i;
  Changes c;
  c.create_experiment = true;
  c.experiment = e;
  AttemptRecord a;
  a.experiment_id = e.id;
  a.number = 1;
  a.job_name = "tfx-" + e.id + "-a1";
  a.slurm_job_id = 1000 + i;
  a.state = AttemptState::kPending;
  a.slurm_state = "PENDING";
  a.sbatch_script = std::string(2500, '#');
  c.attempts.push_back(a);
  c.events.push_back({0, e.id, 1, e.created_at, EventCode::kSubmitted, "submitted as job"});
  return c;
}

struct Figures {
  std::vector<double> ms;
  size_t bytes = 0;
  void Print(const char* way) {
    std::sort(ms.begin(), ms.end());
    auto at = [&](double p) { return ms[std::min(ms.size() - 1, size_t(p * ms.size()))]; };
    printf("way=%s runs=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f body_bytes=%zu\n", way, ms.size(),
           at(0.50), at(0.99), ms.back(), bytes);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  namespace fs = std::filesystem;
  fs::path dir = fs::path(o.dir) / ("bench-list-page-" + std::to_string(getpid()));
  fs::create_directories(dir);
  int rc = 0;
  {
    auto opened = store::OpenSqliteStore((dir / "tfslurm.db").string());
    if (!opened.ok()) {
      fprintf(stderr, "bench_list_page: %s\n", opened.status().message().c_str());
      return 1;
    }
    Store& store = **opened;
    const std::string spec = ReadFile(TFSLURM_SOURCE_DIR "/examples/hello.json");
    for (int i = 0; i < o.experiments; ++i) {
      if (Status s = store.Apply(Queued(i, spec)); !s.ok()) {
        fprintf(stderr, "bench_list_page: %s\n", s.message().c_str());
        return 1;
      }
    }
    ListQuery q;
    q.limit = 1000;
    api::ExperimentListCache kept(api::ListSourceOf(store));
    Figures whole, incremental;
    for (int run = 0; run < o.runs && rc == 0; ++run) {
      for (int k = 0; k < o.changes; ++k) {
        char id[32];
        snprintf(id, sizeof id, "list-%04d", (run * o.changes + k) % o.experiments);
        Changes c;
        c.experiment = *store.GetExperiment(id);
        c.experiment->reason = "run " + std::to_string(run);
        Status applied = store.Apply(c);
        kept.Committed({&c, 1}, applied.ok());
      }
      // Taking turns: odd runs make the whole list first.
      for (int turn = 0; turn < 2; ++turn) {
        bool whole_way = (turn == 0) == (run % 2 == 1);
        api::ExperimentListCache none(api::ListSourceOf(store));
        auto t0 = SteadyClock::now();
        auto body = (whole_way ? none : kept).Body(q);
        double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
        if (!body.ok()) {
          fprintf(stderr, "bench_list_page: %s\n", body.status().message().c_str());
          rc = 1;
          break;
        }
        Figures& f = whole_way ? whole : incremental;
        f.ms.push_back(ms);
        f.bytes = body->size();
      }
    }
    if (rc == 0) {
      whole.Print("every_item_from_its_row");
      incremental.Print("kept_items");
    }
  }
  fs::remove_all(dir);
  return rc;
}
