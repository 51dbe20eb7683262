// Which TF clusters each agent connection has been sent whole: a node's
// relay carries its 8 or so agents' streams on one connection and fills a
// cluster it already has into an Assignment that names it by digest alone
// (agent.proto, Register.cluster_by_digest), so the service sends the
// cluster's bytes once per connection and cluster, not once per task.
//
// A connection is gRPC's peer of a stream ("ipv4:10.1.0.7:40112"): the
// address and port of one TCP connection. Streams from anywhere else (a Unix
// socket's "unix:" peer names no connection) share nothing.
//
// Thread safety: ConnectionClusters and Connection are safe from any thread.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/mutex.h"

namespace tfslurm::agentrpc {

class ConnectionClusters {
 public:
  // One connection's record, shared by the streams on it; it goes when the
  // last of them lets go.
  class Connection {
   public:
    // True the first time `digest` is asked for on this connection: the
    // caller sends the cluster's bytes. A connection remembers its last few
    // clusters (one per attempt, and the relay keeps as many).
    bool FirstSend(const std::string& digest) ABSL_LOCKS_EXCLUDED(mu_);

   private:
    Mutex mu_;
    std::deque<std::string> sent_ ABSL_GUARDED_BY(mu_);
  };

  // How many clusters a connection remembers (and a relay keeps).
  static constexpr size_t kRemembered = 4;

  // The record of `peer`'s connection, made at its first stream.
  std::shared_ptr<Connection> Join(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);

  // Connections with a stream open now (for tests).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Left(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);

  mutable Mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<Connection>> by_peer_ ABSL_GUARDED_BY(mu_);
  // Lets a Connection's deleter find a registry that still exists.
  std::shared_ptr<ConnectionClusters*> self_ = std::make_shared<ConnectionClusters*>(this);
};

}  // namespace tfslurm::agentrpc
