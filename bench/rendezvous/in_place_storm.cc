// bench_in_place_storm: the rendezvous of an attempt restarted in place
// (restart.in_allocation), N simulated agents of N PyTorch ranks.
// With --agents-per-connection K, K agents' streams share each connection,
// as the agents of a node do through the node's relay (agent/relay/).
//
// For each size N it starts a fresh bench_rendezvous_server, then makes
// `--warmup + --runs` runs of:
//   1. a new experiment of N PyTorch ranks (`new N pytorch`); N gRPC
//      channels, one TCP connection each, opened and waited for;
//   2. attempt 1: every agent registers at once, as in
//      bench_rendezvous_storm, and gets its Assignment;
//   3. the failure: rank N/2 reports Exited{signal 9}, as its agent does
//      when its program is killed. The service fails the attempt and sends
//      the other ranks Shutdown; each reports Exited{signal 15, reaped}.
//      Once the service has acknowledged an exit report (finished its
//      stream with OK), the agent opens a new stream and registers with
//      `standby`, as tfslurm-agent does (agent/session.cc, EnterStandby);
//   4. as the last agent comes back to wait (or, failing that, at a Tick),
//      the service decides the restart in place and sends each
//      NextAttempt; each agent cancels its
//      standby stream and registers for attempt 2 on a new stream, with a
//      new port (Session::OnNextAttempt);
//   5. the barrier: every agent gets attempt 2's Assignment;
//   6. the streams are cancelled and the experiment too.
// Each agent acts in the gRPC reactions of its own streams, as N agents
// would in N processes; one thread only starts attempt 1's streams.
//
// Figures per run, from the failing exit report (the time it is handed to
// gRPC): to the last attempt-2 Assignment (the figure); to every agent
// waiting in standby; the last standby registration to the first
// NextAttempt (the decision; before issue 49 also the wait for the
// service's next Tick); to the
// last NextAttempt received; the last attempt-2 registration to the last
// attempt-2 Assignment. Beside them, in the same run, attempt 1's last
// registration -> last assignment, and the size of an attempt-2 Assignment.
//
// Prints a Markdown summary (one row per N) on stdout; per-run lines go to
// stderr, and with --runs-csv FILE to FILE. Exits 1 after the table when a
// run (a warm-up run too) had an error, a cancel was refused, or a server
// did not exit 0.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent.grpc.pb.h"
#include "bench/rendezvous/storm_common.h"

namespace {

using bench::Clock;
using bench::Ms;
using bench::Percentile;
using bench::ServerProcess;
using tfslurm::agent::v1::AgentMessage;
using tfslurm::agent::v1::AgentService;
using tfslurm::agent::v1::ServiceMessage;
using Time = Clock::time_point;

// What every agent of a run reports to, and what the main thread waits on.
struct Run {
  std::mutex mu;
  std::condition_variable cv;
  int assigned1 = 0, assigned2 = 0, live_streams = 0, errors = 0;
  std::string first_error;

  void Count(int Run::*counter, int by = 1) {
    std::lock_guard lock(mu);
    this->*counter += by;
    cv.notify_all();
  }
  void Error(const std::string& why) {
    std::lock_guard lock(mu);
    ++errors;
    if (first_error.empty()) first_error = why;
    cv.notify_all();
  }
};

enum class Purpose { kAttempt1, kStandby, kAttempt2 };

class Agent;

// One Connect stream of an agent. Writes go one at a time (gRPC allows one
// outstanding); Start* calls are made outside `mu_`, so a reaction run at
// once on another thread never waits for it.
class AgentStream final : public grpc::ClientBidiReactor<AgentMessage, ServiceMessage> {
 public:
  AgentStream(Agent* agent, Purpose purpose, AgentMessage first)
      : agent_(agent), purpose_(purpose), first_(std::move(first)) {}
  void Start(AgentService::Stub* stub);
  // Sends `last` as the stream's last message (an exit report).
  void SendLast(AgentMessage last);
  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  Agent* const agent_;
  const Purpose purpose_;
  grpc::ClientContext context_;
  AgentMessage first_, last_;
  ServiceMessage reply_;
  std::mutex mu_;
  bool first_written_ = false;
  std::optional<AgentMessage> waiting_last_;  // until the Register is written
};

class Agent {
 public:
  Agent(Run* run, AgentService::Stub* stub, int proc, const std::string& experiment,
        const std::string& secret, int64_t job, int tasks_per_node)
      : run_(run),
        stub_(stub),
        proc_(proc),
        experiment_(experiment),
        secret_(secret),
        job_(job),
        node_(proc / tasks_per_node),
        local_(proc % tasks_per_node) {}

  void RegisterForAttempt(int attempt) {
    Open(attempt == 1 ? Purpose::kAttempt1 : Purpose::kAttempt2);
  }

  // The agent's program died (the failing rank) or was stopped for a
  // Shutdown: the exit report goes on attempt 1's stream, the current one.
  void ReportExit(int signal, bool reaped) {
    AgentMessage m = Message(1);
    m.mutable_exited()->set_signal(signal);
    m.mutable_exited()->set_reaped(reaped);
    AgentStream* stream;
    {
      std::lock_guard lock(mu_);
      exit_sent = Clock::now();
      exit_report_stream_ = stream = current_;
    }
    if (stream) stream->SendLast(std::move(m));
  }

  void OnRegisterWritten(Purpose purpose) {
    std::lock_guard lock(mu_);
    Time now = Clock::now();
    (purpose == Purpose::kAttempt1  ? reg1
     : purpose == Purpose::kStandby ? standby_reg
                                    : reg2) = now;
  }

  void OnMessage(Purpose purpose, AgentStream* stream, const ServiceMessage& m) {
    Time now = Clock::now();
    if (purpose != Purpose::kStandby && m.has_assignment()) {
      bool first = purpose == Purpose::kAttempt1;
      {
        std::lock_guard lock(mu_);
        (first ? assign1 : assign2) = now;
        if (!first) assignment_bytes = m.assignment().ByteSizeLong();
      }
      run_->Count(first ? &Run::assigned1 : &Run::assigned2);
    } else if (purpose == Purpose::kAttempt1 && m.has_shutdown()) {
      ReportExit(SIGTERM, /*reaped=*/true);
    } else if (purpose == Purpose::kStandby && m.has_next_attempt()) {
      {
        std::lock_guard lock(mu_);
        next_attempt = now;
      }
      // As tfslurm-agent: the standby stream goes, a new one registers.
      stream->Cancel();
      RegisterForAttempt(m.next_attempt().attempt());
    } else {
      run_->Error("rank " + std::to_string(proc_) + " got an unexpected " + Describe(m));
    }
  }

  void OnStreamDone(Purpose purpose, AgentStream* stream, const grpc::Status& status) {
    bool acknowledged_exit;
    {
      std::lock_guard lock(mu_);
      acknowledged_exit = stream == exit_report_stream_;
      if (stream == current_) current_ = nullptr;
    }
    if (acknowledged_exit && status.ok()) {
      Open(Purpose::kStandby);
    } else if (acknowledged_exit) {
      run_->Error("rank " + std::to_string(proc_) +
                  "'s exit report was not acknowledged: " + status.error_message());
    }
    run_->Count(&Run::live_streams, -1);
  }

  void CancelCurrent() {
    std::lock_guard lock(mu_);
    if (current_) current_->Cancel();
  }

  // Written by the reactions under mu_; read once every stream has ended.
  Time reg1{}, assign1{}, exit_sent{}, standby_reg{}, next_attempt{}, reg2{}, assign2{};
  size_t assignment_bytes = 0;

 private:
  AgentMessage Message(int attempt) const {
    AgentMessage m;
    auto* task = m.mutable_task();
    task->set_experiment_id(experiment_);
    task->set_attempt(attempt);
    task->set_secret(secret_);
    task->set_proc_id(proc_);
    return m;
  }

  void Open(Purpose purpose) {
    const int attempt = purpose == Purpose::kAttempt2 ? 2 : 1;
    AgentMessage m = Message(attempt);
    auto* r = m.mutable_register_();
    r->set_slurm_job_id(job_);
    r->set_node_id(node_);
    r->set_local_id(local_);
    char name[16];
    snprintf(name, sizeof name, "node%04d", node_);
    r->set_node_name(name);
    r->set_address(name);
    // A fresh port for each attempt, as the agent reserves one.
    r->set_port(40000 + 1000 * (attempt - 1) + local_);
    r->set_standby(purpose == Purpose::kStandby);
    AgentStream* stream;
    {
      std::lock_guard lock(mu_);
      streams_.push_back(std::make_unique<AgentStream>(this, purpose, std::move(m)));
      current_ = stream = streams_.back().get();
    }
    run_->Count(&Run::live_streams);
    stream->Start(stub_);
  }

  static std::string Describe(const ServiceMessage& m) {
    if (m.has_refused()) return "refusal: " + m.refused().reason();
    if (m.has_release()) return "release: " + m.release().reason();
    return "message: " + m.ShortDebugString().substr(0, 200);
  }

  Run* const run_;
  AgentService::Stub* const stub_;
  const int proc_;
  const std::string experiment_, secret_;
  const int64_t job_;
  const int node_, local_;
  std::mutex mu_;
  // Every stream this agent opened; they live until the run is over.
  std::vector<std::unique_ptr<AgentStream>> streams_;
  AgentStream* current_ = nullptr;
  AgentStream* exit_report_stream_ = nullptr;
};

void AgentStream::Start(AgentService::Stub* stub) {
  stub->async()->Connect(&context_, this);
  StartWrite(&first_);
  StartRead(&reply_);
  StartCall();
}

void AgentStream::SendLast(AgentMessage last) {
  {
    std::lock_guard lock(mu_);
    if (!first_written_) {
      waiting_last_ = std::move(last);
      return;
    }
    last_ = std::move(last);
  }
  StartWriteLast(&last_, grpc::WriteOptions());
}

void AgentStream::OnWriteDone(bool ok) {
  bool write_last = false;
  {
    std::lock_guard lock(mu_);
    if (first_written_) return;  // the last message
    first_written_ = true;
    if (waiting_last_) {
      last_ = std::move(*waiting_last_);
      waiting_last_.reset();
      write_last = true;
    }
  }
  if (ok) agent_->OnRegisterWritten(purpose_);
  if (write_last) StartWriteLast(&last_, grpc::WriteOptions());
}

void AgentStream::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ends; OnDone follows
  ServiceMessage m = std::move(reply_);
  reply_.Clear();
  const bool next_attempt = m.has_next_attempt();
  // Read on, for the Shutdown after an Assignment and the stream's end
  // after an exit report; a standby stream ends at NextAttempt.
  if (!next_attempt) StartRead(&reply_);
  agent_->OnMessage(purpose_, this, m);
}

void AgentStream::OnDone(const grpc::Status& status) {
  agent_->OnStreamDone(purpose_, this, status);
}

struct RunResult {
  int n = 0;
  double connect_ms = 0;
  double first_gap_ms = 0;   // attempt 1: last registration -> last assignment
  double total_ms = 0;       // failing exit -> last attempt-2 assignment
  double standby_ms = 0;     // failing exit -> every agent waiting in standby
  double tick_wait_ms = 0;   // last standby registration -> first NextAttempt
  double next_ms = 0;        // failing exit -> last NextAttempt received
  double rereg_gap_ms = 0;   // last attempt-2 registration -> last assignment
  double server_cpu_ms = 0;  // from the failing exit to the last assignment
  size_t assignment_bytes = 0;
  int errors = 0;
};

double Latest(const std::vector<std::unique_ptr<Agent>>& agents, Time Agent::*t, Time from) {
  double latest = 0;
  for (const auto& a : agents) latest = std::max(latest, Ms((*a).*t - from));
  return latest;
}

double Earliest(const std::vector<std::unique_ptr<Agent>>& agents, Time Agent::*t, Time from) {
  double earliest = Ms((*agents[0]).*t - from);
  for (const auto& a : agents) earliest = std::min(earliest, Ms((*a).*t - from));
  return earliest;
}

RunResult RunInPlace(ServerProcess& server, int n, int tasks_per_node, int agents_per_connection) {
  RunResult res;
  res.n = n;
  std::string answer = server.Command("new " + std::to_string(n) + " pytorch");
  char exp[256], secret[256];
  long long job = 0;
  if (sscanf(answer.c_str(), "exp %255s %255s %lld", exp, secret, &job) != 3)
    ServerProcess::Die("cannot create the experiment: " + answer);

  // One connection per agent (or per agents_per_connection agents), as in
  // bench_rendezvous_storm.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::string target = "127.0.0.1:" + std::to_string(server.agent_port());
  Time c0 = Clock::now();
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<AgentService::Stub>> stubs;
  for (int i = 0; i < (n + agents_per_connection - 1) / agents_per_connection; ++i) {
    channels.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    channels.back()->GetState(/*try_to_connect=*/true);
  }
  for (auto& ch : channels) {
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60)))
      ServerProcess::Die("a channel did not connect within 60 s");
  }
  for (int i = 0; i < n; ++i)
    stubs.push_back(AgentService::NewStub(channels[i / agents_per_connection]));
  res.connect_ms = Ms(Clock::now() - c0);

  Run run;
  std::vector<std::unique_ptr<Agent>> agents;
  for (int i = 0; i < n; ++i)
    agents.push_back(
        std::make_unique<Agent>(&run, stubs[i].get(), i, exp, secret, job, tasks_per_node));
  // True once `counter` reaches n; false on an error or after 120 s.
  auto wait_for = [&](int Run::*counter, const char* what) {
    std::unique_lock lock(run.mu);
    if (run.cv.wait_for(lock, std::chrono::seconds(120),
                        [&] { return run.*counter == n || run.errors > 0; }))
      return run.errors == 0;
    ++run.errors;
    if (run.first_error.empty()) run.first_error = std::string("timed out waiting for ") + what;
    return false;
  };

  for (auto& a : agents) a->RegisterForAttempt(1);
  if (wait_for(&Run::assigned1, "attempt 1's assignments")) {
    const double cpu0 = bench::CpuMs(server.pid());
    agents[n / 2]->ReportExit(SIGKILL, /*reaped=*/false);
    wait_for(&Run::assigned2, "attempt 2's assignments");
    res.server_cpu_ms = bench::CpuMs(server.pid()) - cpu0;
  }

  for (auto& a : agents) a->CancelCurrent();
  {
    std::unique_lock lock(run.mu);
    run.cv.wait_for(lock, std::chrono::seconds(60), [&] { return run.live_streams == 0; });
    res.errors = run.errors;
    if (!run.first_error.empty()) fprintf(stderr, "  N=%d: %s\n", n, run.first_error.c_str());
  }
  if (std::string answer = server.Command(std::string("cancel ") + exp); answer != "ok") {
    ++res.errors;
    fprintf(stderr, "  N=%d: cancelling %s: %s\n", n, exp, answer.c_str());
  }

  if (res.errors == 0) {
    const Time fail = agents[n / 2]->exit_sent, go = Time{};
    res.first_gap_ms = Latest(agents, &Agent::assign1, go) - Latest(agents, &Agent::reg1, go);
    res.total_ms = Latest(agents, &Agent::assign2, fail);
    res.standby_ms = Latest(agents, &Agent::standby_reg, fail);
    res.tick_wait_ms = Earliest(agents, &Agent::next_attempt, fail) - res.standby_ms;
    res.next_ms = Latest(agents, &Agent::next_attempt, fail);
    res.rereg_gap_ms = res.total_ms - Latest(agents, &Agent::reg2, fail);
    for (const auto& a : agents)
      res.assignment_bytes = std::max(res.assignment_bytes, a->assignment_bytes);
  }
  agents.clear();  // every stream has ended
  return res;
}

// Issue 49's targets for the failing exit -> last attempt-2 Assignment, at
// p99: 300 ms up to 512 ranks, 1 s up to 4,096; none above (0).
double TargetMs(int n) { return n <= 512 ? 300 : n <= 4096 ? 1000 : 0; }

}  // namespace

int main(int argc, char** argv) {
  std::string server_bin, dir = "/tmp/bench-in-place-rendezvous", sizes_arg = "64,512,4096",
                          runs_csv;
  int runs = 10, warmup = 1, tasks_per_node = 32;
  double target_ms = 0;  // 0: issue 49's target for each N (TargetMs)
  std::vector<std::string> server_args;
  int agents_per_connection = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) ServerProcess::Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--server")
      server_bin = next();
    else if (a == "--dir")
      dir = next();
    else if (a == "--sizes")
      sizes_arg = next();
    else if (a == "--runs")
      runs = std::stoi(next());
    else if (a == "--warmup")
      warmup = std::stoi(next());
    else if (a == "--runs-csv")
      runs_csv = next();
    else if (a == "--server-arg")
      server_args.push_back(next());
    else if (a == "--target-ms")
      target_ms = std::stod(next());
    else if (a == "--agents-per-connection")
      agents_per_connection = std::stoi(next());
    else {
      fprintf(stderr,
              "usage: %s --server PATH [--sizes 64,512,4096] [--runs 10] [--warmup 1] [--dir D]\n"
              "          [--runs-csv FILE] [--server-arg ARG]... [--target-ms MS]\n"
              "          [--agents-per-connection K]\n",
              argv[0]);
      return 2;
    }
  }
  if (server_bin.empty()) ServerProcess::Die("--server PATH (bench_rendezvous_server) is required");
  if (agents_per_connection < 1 || agents_per_connection > tasks_per_node)
    ServerProcess::Die("--agents-per-connection must be 1.." + std::to_string(tasks_per_node) +
                       " (the agents of one node), got " + std::to_string(agents_per_connection));
  bench::RaiseFileLimitAndIgnoreSigpipe();
  // As in bench_rendezvous_storm: Debian's abseil checks every gRPC lock for
  // deadlocks otherwise, and the load generator shares the CPUs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  FILE* csv = runs_csv.empty() ? nullptr : fopen(runs_csv.c_str(), "w");
  if (!runs_csv.empty() && !csv) ServerProcess::Die("cannot write " + runs_csv);
  int all_errors = 0;
  if (csv)
    fprintf(
        csv,
        "n,run,tick_ms,poll_ms,connect_ms,first_gap_ms,total_ms,standby_ms,tick_wait_ms,next_ms,"
        "rereg_gap_ms,server_cpu_ms,assignment_bytes,errors\n");

  printf(
      "| ranks | runs | **failing exit -> last attempt-2 assignment** p50 / p99 / max (ms) | "
      "target "
      "| p99 within it | failing exit -> all in standby (ms, p50) | last standby -> first "
      "NextAttempt p50 / max (ms) | failing exit -> last NextAttempt p50 / p99 (ms) | last "
      "re-registration -> last assignment p50 / p99 (ms) | attempt 1: last registration -> last "
      "assignment p50 / p99 (ms) | tick / poll (ms) | attempt-2 Assignment (bytes) | server CPU "
      "(ms, p50) | errors |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  fflush(stdout);
  for (int n : bench::ParseSizes(sizes_arg)) {
    std::string run_dir = dir + "/n" + std::to_string(n);
    std::string cmd = "rm -rf '" + run_dir + "'";
    if (system(cmd.c_str()) != 0) ServerProcess::Die("cannot clear " + run_dir);
    ServerProcess server(server_bin, run_dir, server_args);
    const long long tick_ms = server.ReadyValue("tick_ms"), poll_ms = server.ReadyValue("poll_ms");
    std::vector<double> totals, standbys, tick_waits, nexts, reregs, firsts, cpus;
    size_t bytes = 0;
    int errors = 0;
    for (int run = 0; run < warmup + runs; ++run) {
      RunResult r = RunInPlace(server, n, std::min(n, tasks_per_node), agents_per_connection);
      fprintf(stderr,
              "  N=%d run %d%s: failing exit -> standby %.1f, -> first NextAttempt %.1f (tick "
              "wait), -> last NextAttempt %.1f, -> last attempt-2 assignment %.1f ms; "
              "re-registration gap %.1f ms; attempt 1 gap %.1f ms; server CPU %.0f ms; "
              "assignment %zu B; errors %d\n",
              n, run, run < warmup ? " (warm-up)" : "", r.standby_ms, r.standby_ms + r.tick_wait_ms,
              r.next_ms, r.total_ms, r.rereg_gap_ms, r.first_gap_ms, r.server_cpu_ms,
              r.assignment_bytes, r.errors);
      if (csv)
        fprintf(csv, "%d,%d,%lld,%lld,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.0f,%zu,%d\n", n, run,
                tick_ms, poll_ms, r.connect_ms, r.first_gap_ms, r.total_ms, r.standby_ms,
                r.tick_wait_ms, r.next_ms, r.rereg_gap_ms, r.server_cpu_ms, r.assignment_bytes,
                r.errors);
      all_errors += r.errors;  // a warm-up run's errors too
      if (run < warmup) continue;
      errors += r.errors;
      if (r.errors) continue;
      totals.push_back(r.total_ms);
      standbys.push_back(r.standby_ms);
      tick_waits.push_back(r.tick_wait_ms);
      nexts.push_back(r.next_ms);
      reregs.push_back(r.rereg_gap_ms);
      firsts.push_back(r.first_gap_ms);
      cpus.push_back(r.server_cpu_ms);
      bytes = std::max(bytes, r.assignment_bytes);
    }
    const double target = target_ms > 0 ? target_ms : TargetMs(n);
    const bool within = !totals.empty() && errors == 0 && Percentile(totals, 99) <= target;
    const std::string target_text =
        target > 0 ? "<= " + std::to_string(static_cast<int>(target)) + " ms" : "none";
    printf(
        "| %d | %d | **%.1f / %.1f / %.1f** | %s | %s | %.1f | %.1f / %.1f | %.1f / %.1f "
        "| %.1f / %.1f | %.1f / %.1f | %lld / %lld | %zu | %.0f | %d |\n",
        n, runs, Percentile(totals, 50), Percentile(totals, 99), Percentile(totals, 100),
        target_text.c_str(),
        target <= 0 ? "-"
        : within    ? "yes"
                    : "**no**",
        Percentile(standbys, 50), Percentile(tick_waits, 50), Percentile(tick_waits, 100),
        Percentile(nexts, 50), Percentile(nexts, 99), Percentile(reregs, 50),
        Percentile(reregs, 99), Percentile(firsts, 50), Percentile(firsts, 99), tick_ms, poll_ms,
        bytes, Percentile(cpus, 50), errors);
    fflush(stdout);
    if (int status = server.Quit(); status != 0) {
      fprintf(stderr, "N=%d: the server exited with status %d\n", n, status);
      ++all_errors;
    }
  }
  if (csv && fclose(csv) != 0) ServerProcess::Die("cannot write " + runs_csv);
  // A run with an error did not measure a restart in place; the caller must
  // know, whatever the table says.
  if (all_errors > 0) {
    fprintf(stderr, "%s: %d errors\n", program_invocation_short_name, all_errors);
    return 1;
  }
  return 0;
}
