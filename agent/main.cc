// tfslurm-agent: started by srun once per Slurm task from the job script
// tfslurmd generates. Everything but the command line lives in
// tfslurm_agent_lib (agent/agent.h).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <string_view>

#include "agent/agent.h"
#include "agent/relay/node_relay.h"
#include "agent/service_access.h"
#include "agent/signals.h"
#include "tls/openssl_through_exit.h"

namespace {

// `tfslurm-agent relay ...`: the node's relay, which an agent starts
// (agent/relay/relay_route.h); not for people to run.
int RelayMain(int argc, char** argv) {
  namespace agent = tfslurm::agent;
  agent::NodeRelayOptions options;
  double keepalive_s = 60;
  int lock_fd = -1;
  std::string log_level = "info";
  CLI::App app{"tfslurm-agent relay: the node's relay of one job step, started by its agents"};
  app.add_option("--socket", options.socket_path, "the Unix socket to serve agents on")->required();
  app.add_option("--service", options.service, "tfslurmd's agent endpoint, HOST:PORT")->required();
  app.add_option("--lock-fd", lock_fd, "descriptor holding the relay's lock")->required();
  std::vector<std::string> leftovers;
  app.add_option("--remove-at-exit", leftovers,
                 "files to remove at a clean end (its lock, its log)");
  app.add_option("--keepalive", keepalive_s, "seconds between HTTP/2 keepalive pings (0: off)");
  app.add_option("--log-level", log_level)
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : agent::kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  options.keepalive_time = std::chrono::milliseconds(static_cast<int64_t>(keepalive_s * 1000));
  // The same TLS as the agents' (TFSLURM_CA in the job's environment).
  auto ca = agent::ServiceCaFromEnv(agent::ProcessEnvironment());
  if (!ca.ok()) {
    spdlog::error("relay: {}", ca.status().message());
    return agent::kExitUsage;
  }
  options.tls_ca_pem = *ca;
  return agent::RunNodeRelayProcess(options, lock_fd, leftovers);
}

}  // namespace

int main(int argc, char** argv) {
  namespace agent = tfslurm::agent;
  tfslurm::tls::KeepOpenSslThroughExit();
  // Before anything can start a thread. The relay keeps them blocked too:
  // the step's SIGTERM is for the agents, which still report through it.
  agent::BlockAgentSignals();
  if (argc > 1 && std::string_view(argv[1]) == "relay") return RelayMain(argc - 1, argv + 1);

  agent::AgentOptions options;
  CLI::App app{
      "tfslurm-agent: runs one task of a tfslurm experiment under Slurm.\n"
      "Reads SLURM_JOB_ID, SLURM_PROCID, SLURM_NODEID, SLURM_LOCALID, SLURMD_NODENAME and\n"
      "the attempt secret from the file TFSLURM_SECRET_FILE names (else TFSLURM_SECRET)."};
  app.add_option("--service", options.service, "tfslurmd's agent endpoint, HOST:PORT")->required();
  app.add_option("--experiment", options.experiment_id, "experiment id")->required();
  app.add_option("--attempt", options.attempt, "attempt number")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--address", options.address,
                 "address other tasks use to reach this one: hostname | fqdn | interface:NAME")
      ->capture_default_str();
  app.add_option("--exit-ack-timeout", options.exit_ack_timeout_s,
                 "seconds to wait for the service to acknowledge the exit report")
      ->capture_default_str();
  app.add_option("--exit-report-timeout", options.exit_report_timeout_s,
                 "seconds to keep trying to report the program's exit (reconnecting)")
      ->capture_default_str();
  app.add_option("--unknown-experiment-timeout", options.unknown_experiment_timeout_s,
                 "seconds to keep retrying a service that does not know the experiment (another "
                 "tfslurmd than the job's?) before giving up with exit 3")
      ->capture_default_str();
  app.add_option("--keepalive", options.keepalive_s,
                 "seconds between HTTP/2 keepalive pings to the service (0: off)")
      ->capture_default_str();
  app.add_option("--log-level", options.log_level, "trace | debug | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-dir", options.log_dir,
                 "write this task's output (the agent's and the program's) to "
                 "DIR/task-$SLURM_PROCID.out instead of srun's --output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : agent::kExitUsage;
  }
  options.argc = argc;
  return agent::RunAgent(options, agent::ProcessEnvironment());
}
