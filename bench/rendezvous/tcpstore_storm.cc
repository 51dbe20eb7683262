// bench_tcpstore_storm: PyTorch's own rendezvous, N ranks against one
// TCPStore, measured the way bench_rendezvous_storm measures tfslurmd's
// (issue 15). It links the libtorch that python3-torch's bindings call
// (Debian's libtorch 1.13.1): every store operation below is c10d's own
// TCPStore code; only the Python loop around them is re-written in C++.
//
// What torch.distributed.init_process_group("...", init_method="env://")
// does for its rendezvous in torch 1.13 (distributed_c10d.py, rendezvous.py):
//   1. rendezvous.py _env_rendezvous_handler -> _create_c10d_store: rank 0
//      hosts the TCPStore server (start_daemon, multi_tenant=True), every
//      rank constructs a TCPStore client (world_size = N). The constructor
//      connects twice (the client and the watch-key callback client, whose
//      TCPStoreWorkerDaemon is one thread per rank) and calls
//      waitForWorkers(): each rank adds 1 to "init/"; the server's rank
//      reads the count every 10 ms until it reaches N.
//   2. init_process_group wraps the store in PrefixStore("default_pg").
//   3. _store_based_barrier: add("store_based_barrier_key:1", 1), then
//      add(key, 0) every 10 ms (time.sleep(0.01)) until it returns N.
// The backend's own connect (gloo's full mesh, NCCL's unique id) comes
// after and is not measured.
//
// Here the server runs in its own process (this binary with --serve), so
// that its threads, RSS and CPU are its own; rank 0 is one of the N clients
// and does rank 0's reading of the count. With --agent-store the server is
// torchrun's (TORCHELASTIC_USE_AGENT_STORE): no rank reads the count.
// With --wait-barrier the barrier is torch >= 2.0's instead of 1.13's:
// add 1, add 0, the rank that sees N sets "<key>:last_worker", and every
// rank waits for that key with TCPStore's WAIT (answered by the server when
// the key is set) instead of reading the count every 10 ms. The store is
// still 1.13's.
//
// One run, as bench_rendezvous_storm's:
//   1. "connect": N TCPStore clients are constructed one after the other
//      (waitWorkers=false: two TCP connections and one thread each, as the
//      constructor makes them), N rank threads are started that wait for
//      "go", and the server is waited for until it has accepted all 2N
//      connections (timed apart). In torch the connections and the count
//      are made in the same constructor call, and the store accepts one
//      connection per turn of its poll loop, between the queries of the
//      ranks already in: that wait is part of a real rendezvous, and is
//      left out here as bench_rendezvous_storm leaves out gRPC's connect;
//   2. "go": all ranks are released at once; each does steps 1 (the
//      count) and 3 (the barrier) above, in a per-run key space
//      (PrefixStore "/worker/attempt_R", as torchelastic names restarts);
//   3. the clients are destroyed and the server is waited for until it
//      has closed their sockets.
// Figures per run: last barrier entry (the add of 1 issued) -> last barrier
// exit (the add that returned N), the whole barrier (go -> last exit), per
// rank entry -> exit, store requests; the server's /proc/PID/status every
// 2 ms (Threads, VmRSS, RssAnon), VmHWM after the run, its CPU time.
//
// Prints a Markdown summary (one row per N) on stdout; per-run lines on
// stderr, and with --runs-csv FILE per-run rows to FILE. Exits 1 after the
// table when a rank failed in any run (a warm-up run too), or the store
// server did not exit 0.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/rendezvous/storm_common.h"

namespace {

using bench::Clock;
using bench::CpuMs;
using bench::Ms;
using bench::ParseSizes;
using bench::Percentile;
using bench::ProcStatus;
using bench::ReadProcStatus;
using bench::SelfCpuMs;

[[noreturn]] void Die(const std::string& why) {
  fprintf(stderr, "bench_tcpstore_storm: %s\n", why.c_str());
  exit(1);
}

// torch's constants (distributed_c10d.py): the barrier's key for the
// default group, and the sleep between two reads of a count (also
// TCPStore::waitForWorkers's).
constexpr char kBarrierKey[] = "store_based_barrier_key:1";
constexpr auto kPollInterval = std::chrono::milliseconds(10);

// ---------------------------------------------------------------- server --

// Established TCP connections on this machine whose local port, and whose
// remote port, is `port` (/proc/net/tcp and tcp6, state 01).
std::pair<int, int> ConnectionsOfPort(int port) {
  int local = 0, remote = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // the header
    while (std::getline(f, line)) {
      std::istringstream fields(line);
      std::string slot, local_address, remote_address, state;
      fields >> slot >> local_address >> remote_address >> state;
      if (state != "01") continue;
      auto port_of = [](const std::string& a) {
        return std::stoi(a.substr(a.rfind(':') + 1), nullptr, 16);
      };
      local += port_of(local_address) == port;
      remote += port_of(remote_address) == port;
    }
  }
  return {local, remote};
}

int Serve(std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = 0;  // the OS chooses
  opts.isServer = true;
  opts.waitWorkers = false;  // no count: the ranks are the load generator's
  opts.multiTenant = true;   // as _create_c10d_store makes it
  opts.timeout = timeout;
  c10d::TCPStore store("127.0.0.1", opts);
  // The store's own client connections (the client and its watch-key
  // callback client) are accepted by its serving thread one per turn of its
  // poll loop, maybe after the constructor returns. The load generator counts
  // this process's descriptors from "ready" on as its idle share, so "ready"
  // waits until every connection to the store is accepted; counted earlier,
  // the late ones looked like a run's sockets never closed.
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
    auto [accepted, connected] = ConnectionsOfPort(store.getPort());
    if (connected > 0 && accepted == connected) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fprintf(
          stderr,
          "bench_tcpstore_storm --serve: %d of the store's own %d connections accepted in 60 s\n",
          accepted, connected);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The store's one serving thread (TCPStoreMasterDaemon) is the first
  // thread the constructor starts; the second is its own client's
  // callback thread.
  std::vector<long> tids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && std::atol(e->d_name) != getpid())
        tids.push_back(std::atol(e->d_name));
    closedir(d);
  }
  std::sort(tids.begin(), tids.end());
  printf("ready port=%d pid=%d daemon_tid=%ld\n", store.getPort(), getpid(),
         tids.empty() ? 0L : tids.front());
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin))
    if (std::string(line).rfind("quit", 0) == 0) break;
  return 0;
}

// What the store's serving thread is doing, from /proc/PID/task/TID: on a
// CPU or runnable ("R"); asleep in poll() waiting for any client; asleep in
// a socket read, i.e. in the middle of one client's query (the server reads
// a query field by field with blocking recv()); anything else.
enum class DaemonState { kRunning, kPoll, kRecv, kOther };

DaemonState ReadDaemonState(pid_t pid, long tid) {
  std::string base = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  std::ifstream stat(base + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), {});
  auto close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return DaemonState::kOther;
  if (s[close + 2] == 'R') return DaemonState::kRunning;
  std::ifstream w(base + "/wchan");
  std::string wchan;
  std::getline(w, wchan);
  if (wchan.find("poll") != std::string::npos) return DaemonState::kPoll;
  if (wchan.find("wait_woken") != std::string::npos || wchan.find("sk_wait") != std::string::npos ||
      wchan.find("tcp_recv") != std::string::npos)
    return DaemonState::kRecv;
  return DaemonState::kOther;
}

int OpenFds(pid_t pid) {
  int n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// The store server in its own process: this binary with --serve.
class ServerProcess {
 public:
  ServerProcess(std::chrono::milliseconds timeout) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) Die("pipe");
    pid_ = fork();
    if (pid_ < 0) Die("fork");
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::string ms = std::to_string(timeout.count());
      execl("/proc/self/exe", "bench_tcpstore_storm", "--serve", "--timeout-ms", ms.c_str(),
            nullptr);
      perror("/proc/self/exe");
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    char buf[256] = "";
    if (!fgets(buf, sizeof buf, from_) ||
        sscanf(buf, "ready port=%d pid=%*d daemon_tid=%ld", &port_, &daemon_tid_) != 2)
      Die(std::string("the store server did not start: ") + buf);
    idle_fds_ = OpenFds(pid_);
    idle_ = ReadProcStatus(pid_);
  }
  ~ServerProcess() { Quit(); }
  // Tells the server to quit and waits for it: its exit status (128 + the
  // signal for a killed one). Later calls give the same.
  int Quit() {
    if (pid_ < 0) return exit_status_;
    fprintf(to_, "quit\n");
    fclose(to_);
    int status = 0;
    waitpid(pid_, &status, 0);
    fclose(from_);
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  long daemon_tid() const { return daemon_tid_; }
  // /proc/PID/status before any client: libtorch's own share of the RSS.
  const ProcStatus& idle() const { return idle_; }

  // Waits until the server has accepted `sockets` more connections than it
  // holds when idle. A client's connect() returns once the kernel has the
  // connection in the listen queue; TCPStore's serving thread accepts one
  // connection per turn of its poll loop, so right after the clients are
  // made many are not yet in its poll set.
  void WaitAccepted(int sockets) {
    auto deadline = Clock::now() + std::chrono::seconds(120);
    while (OpenFds(pid_) < idle_fds_ + sockets) {
      if (Clock::now() > deadline)
        Die("the store server accepted " + std::to_string(OpenFds(pid_) - idle_fds_) + " of " +
            std::to_string(sockets) + " connections in 120 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Waits until the server has closed every socket of the last run's
  // clients (it notices a closed connection on its next poll).
  void WaitIdle() {
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (OpenFds(pid_) > idle_fds_) {
      if (Clock::now() > deadline)
        Die("the store server still holds " + std::to_string(OpenFds(pid_) - idle_fds_) +
            " sockets of the last run after 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  pid_t pid_ = -1;
  int exit_status_ = 0;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  int port_ = 0;
  long daemon_tid_ = 0;
  int idle_fds_ = 0;
  ProcStatus idle_;
};

// ------------------------------------------------------------------ ranks --

struct Rank {
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  Clock::time_point checkin{}, entry{}, exit{};
  long requests = 0;
  std::string error;
};

struct Options {
  bool agent_store = false;   // torchrun's store: nobody reads the count
  bool wait_barrier = false;  // torch >= 2.0's barrier instead of 1.13's
  std::chrono::milliseconds timeout{120000};
};

// What rank `rank` of `n` does after "go": torch 1.13's TCPStore
// waitForWorkers (the count) and _store_based_barrier, on the run's keys.
void RunRank(Rank& r, int rank, int n, int run, const Options& o) {
  try {
    auto attempt =
        c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(run), r.tcp);
    // TCPStore::waitForWorkers: incrementValueBy("init/", 1); the server's
    // rank then doGet("init/") until the count is N, 10 ms apart.
    r.checkin = Clock::now();
    attempt->add("init/", 1);
    ++r.requests;
    if (rank == 0 && !o.agent_store) {
      auto start = Clock::now();
      for (;;) {
        auto v = attempt->get("init/");
        ++r.requests;
        if (std::stoi(std::string(v.begin(), v.end())) >= n) break;
        if (Clock::now() - start > o.timeout)
          throw std::runtime_error("timed out waiting for workers");
        std::this_thread::sleep_for(kPollInterval);
      }
    }
    // init_process_group: store = PrefixStore("default_pg", store), then
    // _store_based_barrier(rank, store, timeout).
    c10d::PrefixStore pg("default_pg", attempt);
    r.entry = Clock::now();
    pg.add(kBarrierKey, 1);
    int64_t count = pg.add(kBarrierKey, 0);
    r.requests += 2;
    auto start = Clock::now();
    if (o.wait_barrier) {
      // torch >= 2.0: the rank that sees the count complete sets a key the
      // others wait for (TCPStore's WAIT: the server answers when it is set).
      const std::string last_worker = std::string(kBarrierKey) + ":last_worker";
      if (count == n) {
        pg.set(last_worker, std::vector<uint8_t>{'1'});
        ++r.requests;
      }
      pg.wait({last_worker}, o.timeout);
      ++r.requests;
      count = n;
    }
    while (count != n) {
      std::this_thread::sleep_for(kPollInterval);
      count = pg.add(kBarrierKey, 0);
      ++r.requests;
      if (Clock::now() - start > o.timeout)
        throw std::runtime_error("timed out in the store-based barrier: " + std::to_string(count) +
                                 " of " + std::to_string(n));
    }
    r.exit = Clock::now();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
}

struct RunResult {
  int n = 0;
  double connect_ms = 0, first_checkin_ms = 0, last_checkin_ms = 0, first_entry_ms = 0,
         last_entry_ms = 0, last_exit_ms = 0, gap_ms = 0;
  std::vector<double> per_rank_ms;  // entry -> exit
  long requests = 0;
  int errors = 0;
  std::string first_error;
  long max_threads = 0, max_rss_kb = 0, max_anon_kb = 0, hwm_kb = 0;
  double server_cpu_ms = 0, client_cpu_ms = 0;
  long daemon_samples[4] = {0, 0, 0, 0};  // by DaemonState

  double DaemonShare(DaemonState s) const {
    long all = daemon_samples[0] + daemon_samples[1] + daemon_samples[2] + daemon_samples[3];
    return all ? 100.0 * daemon_samples[static_cast<int>(s)] / all : 0;
  }
};

RunResult RunBarrier(ServerProcess& server, int n, int run, const Options& o) {
  RunResult res;
  res.n = n;
  std::vector<Rank> ranks(n);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(n);
  auto c0 = Clock::now();
  try {
    for (int i = 0; i < n; ++i) {
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<uint16_t>(server.port());
      opts.isServer = false;
      opts.numWorkers = n;
      opts.waitWorkers = false;  // its count is made after "go", in RunRank
      opts.timeout = o.timeout;
      ranks[i].tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
    }
  } catch (const std::exception& e) {
    Die("N=" + std::to_string(n) + ": a TCPStore client could not be made: " + e.what());
  }
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      go.wait(false);
      RunRank(ranks[i], i, n, run, o);
    });
  // "Connected" as bench_rendezvous_storm means it (gRPC's WaitForConnected:
  // the server has taken the connection): both connections of every rank
  // accepted by the store.
  server.WaitAccepted(2 * n);
  res.connect_ms = Ms(Clock::now() - c0);

  std::atomic<bool> sampling{true}, in_barrier{false};
  std::thread sampler([&] {
    while (sampling) {
      ProcStatus s = ReadProcStatus(server.pid());
      res.max_threads = std::max(res.max_threads, s.threads);
      res.max_rss_kb = std::max(res.max_rss_kb, s.vm_rss_kb);
      res.max_anon_kb = std::max(res.max_anon_kb, s.rss_anon_kb);
      if (in_barrier)
        ++res.daemon_samples[static_cast<int>(ReadDaemonState(server.pid(), server.daemon_tid()))];
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  double cpu0 = CpuMs(server.pid()), self0 = SelfCpuMs();
  Clock::time_point go_at = Clock::now();
  in_barrier = true;
  go = true;
  go.notify_all();
  for (auto& t : threads) t.join();
  in_barrier = false;
  res.server_cpu_ms = CpuMs(server.pid()) - cpu0;
  res.client_cpu_ms = SelfCpuMs() - self0;
  sampling = false;
  sampler.join();
  res.hwm_kb = ReadProcStatus(server.pid()).vm_hwm_kb;

  bool first = true;
  for (auto& r : ranks) {
    if (!r.error.empty()) {
      if (res.errors++ == 0) res.first_error = r.error;
      continue;
    }
    res.requests += r.requests;
    double checkin = Ms(r.checkin - go_at), entry = Ms(r.entry - go_at), exit = Ms(r.exit - go_at);
    res.first_checkin_ms = first ? checkin : std::min(res.first_checkin_ms, checkin);
    res.first_entry_ms = first ? entry : std::min(res.first_entry_ms, entry);
    res.last_checkin_ms = std::max(res.last_checkin_ms, checkin);
    res.last_entry_ms = std::max(res.last_entry_ms, entry);
    res.last_exit_ms = std::max(res.last_exit_ms, exit);
    res.per_rank_ms.push_back(exit - entry);
    first = false;
  }
  res.gap_ms = res.last_exit_ms - res.last_entry_ms;
  if (res.errors)
    fprintf(stderr, "  N=%d: %d ranks failed: %s\n", n, res.errors, res.first_error.c_str());
  ranks.clear();  // closes 2N connections, stops N callback threads
  server.WaitIdle();
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes_arg = "64,512,4096", runs_csv;
  int runs = 20, warmup = 2;
  bool serve = false;
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--serve")
      serve = true;
    else if (a == "--sizes")
      sizes_arg = next();
    else if (a == "--runs")
      runs = std::stoi(next());
    else if (a == "--warmup")
      warmup = std::stoi(next());
    else if (a == "--runs-csv")
      runs_csv = next();
    else if (a == "--agent-store")
      o.agent_store = true;
    else if (a == "--wait-barrier")
      o.wait_barrier = true;
    else if (a == "--timeout-ms")
      o.timeout = std::chrono::milliseconds(std::stol(next()));
    else {
      fprintf(stderr,
              "usage: %s [--sizes 64,512,4096] [--runs 20] [--warmup 2] [--runs-csv FILE]\n"
              "          [--agent-store] [--wait-barrier] [--timeout-ms 120000]\n"
              "       %s --serve [--timeout-ms MS]   (the store server; started by the above)\n",
              argv[0], argv[0]);
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  if (serve) return Serve(o.timeout);
  // Four descriptors per rank here (two sockets, the callback thread's
  // control pipe), two per rank in the server.
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  rlimit want{std::max<rlim_t>(r.rlim_max, 65536), std::max<rlim_t>(r.rlim_max, 65536)};
  if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }

  FILE* csv = runs_csv.empty() ? nullptr : fopen(runs_csv.c_str(), "w");
  if (!runs_csv.empty() && !csv) Die("cannot write " + runs_csv);
  int all_errors = 0;
  if (csv)
    fprintf(
        csv,
        "n,run,connect_ms,first_checkin_ms,last_checkin_ms,first_entry_ms,last_entry_ms,"
        "last_exit_ms,gap_ms,rank_p50_ms,rank_p99_ms,requests,errors,max_threads,max_rss_mb,"
        "hwm_mb,max_rss_anon_mb,server_cpu_ms,client_cpu_ms,store_thread_running_pct,store_thread_"
        "in_query_pct,store_thread_poll_pct\n");
  printf(
      "| ranks | runs | last entry -> last exit p50 / p99 / max (ms) | whole barrier p50 / p99 / "
      "max (ms) | per rank entry -> exit p50 / p99 (ms) | store requests per run (p50) | connect "
      "(ms, p50) | server threads (max) | server RSS peak VmHWM (idle VmRSS) (MB) | server RssAnon "
      "peak (idle) "
      "(MB) | "
      "server CPU per barrier (ms, p50) | load generator CPU (ms, p50) | store thread: running / "
      "in "
      "one client's query / in poll (%% of samples) | errors |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  fflush(stdout);
  for (int n : ParseSizes(sizes_arg)) {
    ServerProcess server(o.timeout);
    std::vector<double> gaps, wholes, per_rank, requests, connects, cpus, client_cpus;
    long threads = 0, hwm = 0, anon = 0;
    RunResult all;  // the store thread's samples over the measured runs
    int errors = 0;
    for (int run = 0; run < warmup + runs; ++run) {
      RunResult res = RunBarrier(server, n, run, o);
      double p50 = Percentile(res.per_rank_ms, 50), p99 = Percentile(res.per_rank_ms, 99);
      fprintf(
          stderr,
          "  N=%d run %d%s: connect %.1f ms, check-ins %.1f..%.1f ms, barrier entries "
          "%.1f..%.1f ms, last exit %.1f ms, gap %.1f ms, per rank p50 %.1f p99 %.1f ms, %ld "
          "requests, threads %ld, RSS %.0f MB (HWM %.0f, anon %.0f), server CPU %.0f ms, load "
          "generator CPU %.0f ms, store thread running %.0f%% / in a client's query %.0f%% / in "
          "poll %.0f%% / other %.0f%%, errors %d\n",
          n, run, run < warmup ? " (warm-up)" : "", res.connect_ms, res.first_checkin_ms,
          res.last_checkin_ms, res.first_entry_ms, res.last_entry_ms, res.last_exit_ms, res.gap_ms,
          p50, p99, res.requests, res.max_threads, res.max_rss_kb / 1024.0, res.hwm_kb / 1024.0,
          res.max_anon_kb / 1024.0, res.server_cpu_ms, res.client_cpu_ms,
          res.DaemonShare(DaemonState::kRunning), res.DaemonShare(DaemonState::kRecv),
          res.DaemonShare(DaemonState::kPoll), res.DaemonShare(DaemonState::kOther), res.errors);
      if (csv)
        fprintf(csv,
                "%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%ld,%d,%ld,%.1f,%.1f,%.1f,%.0f,"
                "%.0f,%.0f,%.0f,%.0f\n",
                n, run, res.connect_ms, res.first_checkin_ms, res.last_checkin_ms,
                res.first_entry_ms, res.last_entry_ms, res.last_exit_ms, res.gap_ms, p50, p99,
                res.requests, res.errors, res.max_threads, res.max_rss_kb / 1024.0,
                res.hwm_kb / 1024.0, res.max_anon_kb / 1024.0, res.server_cpu_ms, res.client_cpu_ms,
                res.DaemonShare(DaemonState::kRunning), res.DaemonShare(DaemonState::kRecv),
                res.DaemonShare(DaemonState::kPoll));
      threads = std::max(threads, res.max_threads);
      hwm = std::max(hwm, res.hwm_kb);
      anon = std::max(anon, res.max_anon_kb);
      all_errors += res.errors;  // a warm-up run's errors too
      if (run < warmup) continue;
      errors += res.errors;
      for (int i = 0; i < 4; ++i) all.daemon_samples[i] += res.daemon_samples[i];
      gaps.push_back(res.gap_ms);
      wholes.push_back(res.last_exit_ms);
      per_rank.insert(per_rank.end(), res.per_rank_ms.begin(), res.per_rank_ms.end());
      requests.push_back(res.requests);
      connects.push_back(res.connect_ms);
      cpus.push_back(res.server_cpu_ms);
      client_cpus.push_back(res.client_cpu_ms);
    }
    printf(
        "| %d | %d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.1f / %.1f | %.0f | %.0f | %ld | "
        "%.0f (%.0f) | %.0f (%.0f) | %.0f | %.0f | %.0f / %.0f / %.0f | %d |\n",
        n, runs, Percentile(gaps, 50), Percentile(gaps, 99), Percentile(gaps, 100),
        Percentile(wholes, 50), Percentile(wholes, 99), Percentile(wholes, 100),
        Percentile(per_rank, 50), Percentile(per_rank, 99), Percentile(requests, 50),
        Percentile(connects, 50), threads, hwm / 1024.0, server.idle().vm_rss_kb / 1024.0,
        anon / 1024.0, server.idle().rss_anon_kb / 1024.0, Percentile(cpus, 50),
        Percentile(client_cpus, 50), all.DaemonShare(DaemonState::kRunning),
        all.DaemonShare(DaemonState::kRecv), all.DaemonShare(DaemonState::kPoll), errors);
    fflush(stdout);
    if (int status = server.Quit(); status != 0) {
      fprintf(stderr, "N=%d: the store server exited with status %d\n", n, status);
      ++all_errors;
    }
  }
  if (csv && fclose(csv) != 0) Die("cannot write " + runs_csv);
  if (all_errors > 0) {
    fprintf(stderr, "bench_tcpstore_storm: %d errors (failed ranks)\n", all_errors);
    return 1;
  }
  return 0;
}
