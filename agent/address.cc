#include "agent/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <set>

namespace tfslurm::agent {

StatusOr<AddressSpec> ParseAddressSpec(std::string_view text) {
  constexpr std::string_view kInterfacePrefix = "interface:";
  AddressSpec spec;
  if (text == "hostname") {
    spec.kind = AddressSpec::Kind::kHostname;
  } else if (text == "fqdn") {
    spec.kind = AddressSpec::Kind::kFqdn;
  } else if (text.starts_with(kInterfacePrefix) && text.size() > kInterfacePrefix.size()) {
    spec.kind = AddressSpec::Kind::kInterface;
    spec.interface_name = std::string(text.substr(kInterfacePrefix.size()));
  } else {
    return InvalidArgument("--address '" + std::string(text) +
                           "' is not one of: hostname, fqdn, interface:NAME (e.g. interface:ib0)");
  }
  return spec;
}

StatusOr<std::string> LocalHostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) {
    return Error(std::string("gethostname failed: ") + std::strerror(errno));
  }
  if (name[0] == '\0') return Error("gethostname returned an empty name");
  return std::string(name);
}

StatusOr<std::string> CanonicalName(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return Error("cannot find the fully qualified name of '" + host + "': getaddrinfo: " +
                 ::gai_strerror(rc) + "; use --address hostname or interface:NAME instead");
  }
  std::string canonical;
  if (result != nullptr && result->ai_canonname != nullptr) canonical = result->ai_canonname;
  ::freeaddrinfo(result);
  if (canonical.empty()) {
    return Error("getaddrinfo gave no canonical name for '" + host +
                 "'; use --address hostname or interface:NAME instead");
  }
  return canonical;
}

StatusOr<std::string> InterfaceIpv4Address(const std::string& interface_name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return Error(std::string("getifaddrs failed: ") + std::strerror(errno));
  }
  std::set<std::string> names;  // for the error message
  bool found_interface = false;
  std::string address;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_name == nullptr) continue;
    names.insert(it->ifa_name);
    if (interface_name != it->ifa_name) continue;
    found_interface = true;
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) {
      address = text;
      break;
    }
  }
  ::freeifaddrs(list);
  if (!address.empty()) return address;
  if (found_interface) {
    return Error("network interface '" + interface_name + "' has no IPv4 address on this node");
  }
  std::string available;
  for (const std::string& name : names) available += (available.empty() ? "" : ", ") + name;
  return Error("no network interface named '" + interface_name +
               "' on this node (available: " + available + ")");
}

StatusOr<std::string> ResolveAddress(const AddressSpec& spec) {
  switch (spec.kind) {
    case AddressSpec::Kind::kHostname:
      return LocalHostname();
    case AddressSpec::Kind::kFqdn: {
      StatusOr<std::string> host = LocalHostname();
      if (!host.ok()) return host;
      return CanonicalName(*host);
    }
    case AddressSpec::Kind::kInterface:
      return InterfaceIpv4Address(spec.interface_name);
  }
  return Internal("unknown address kind");
}

}  // namespace tfslurm::agent
