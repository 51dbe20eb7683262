// The address other tasks use to reach this one, as chosen by the spec's
// `network.address` and passed to the agent as --address:
//
//   hostname        gethostname(): right when node names resolve cluster-wide
//   fqdn            the canonical name of that host (getaddrinfo AI_CANONNAME)
//   interface:NAME  the IPv4 address of a network interface, e.g. ib0 so that
//                   TensorFlow's traffic goes over InfiniBand (IPoIB)
//
// A mode that cannot be resolved is an error, never a silent fallback: a wrong
// address only shows up much later as tasks that cannot reach each other.
//
// Thread safety: the functions keep no state of their own and may be called
// from any thread (gethostname, getaddrinfo and getifaddrs are thread-safe).
#ifndef TFSLURM_AGENT_ADDRESS_H_
#define TFSLURM_AGENT_ADDRESS_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace tfslurm::agent {

struct AddressSpec {
  enum class Kind { kHostname, kFqdn, kInterface };
  Kind kind = Kind::kHostname;
  std::string interface_name;  // for kInterface only
};

StatusOr<AddressSpec> ParseAddressSpec(std::string_view text);

StatusOr<std::string> ResolveAddress(const AddressSpec& spec);

// The pieces ResolveAddress is made of, exposed for tests.
StatusOr<std::string> LocalHostname();
StatusOr<std::string> CanonicalName(const std::string& host);
StatusOr<std::string> InterfaceIpv4Address(const std::string& interface_name);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_ADDRESS_H_
