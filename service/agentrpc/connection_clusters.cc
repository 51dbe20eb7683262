#include "service/agentrpc/connection_clusters.h"

#include <algorithm>

namespace tfslurm::agentrpc {
namespace {

// gRPC names a TCP peer "ipv4:ADDRESS:PORT" or "ipv6:[ADDRESS]:PORT", one
// name per connection: seen with Debian's gRPC 1.51 in
// ApiConcurrencyTest.TheClusterGoesOncePerConnectionToTheStreamsThatAskByDigest
// (three connections told apart) and AgentRelayTest (a relay's streams
// share one peer).
bool NamesOneConnection(const std::string& peer) {
  return peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0;
}

}  // namespace

bool ConnectionClusters::Connection::FirstSend(const std::string& digest) {
  MutexLock lock(mu_);
  if (std::find(sent_.begin(), sent_.end(), digest) != sent_.end()) return false;
  sent_.push_back(digest);
  if (sent_.size() > kRemembered) sent_.pop_front();
  return true;
}

std::shared_ptr<ConnectionClusters::Connection> ConnectionClusters::Join(const std::string& peer) {
  if (!NamesOneConnection(peer)) return std::make_shared<Connection>();
  MutexLock lock(mu_);
  std::weak_ptr<Connection>& entry = by_peer_[peer];
  if (std::shared_ptr<Connection> open = entry.lock()) return open;
  // The deleter runs when the connection's last stream lets go, perhaps
  // after this registry has gone (tfslurmd's shutdown).
  std::weak_ptr<ConnectionClusters*> registry = self_;
  std::shared_ptr<Connection> made(new Connection, [registry, peer](Connection* c) {
    delete c;
    if (std::shared_ptr<ConnectionClusters*> r = registry.lock()) (*r)->Left(peer);
  });
  entry = made;
  return made;
}

void ConnectionClusters::Left(const std::string& peer) {
  MutexLock lock(mu_);
  auto it = by_peer_.find(peer);
  // A new connection from the same address and port may have joined since.
  if (it != by_peer_.end() && it->second.expired()) by_peer_.erase(it);
}

size_t ConnectionClusters::size() const {
  MutexLock lock(mu_);
  return by_peer_.size();
}

}  // namespace tfslurm::agentrpc
