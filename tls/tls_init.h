// `tfslurmd tls init`: a site without its own PKI gets a CA and a server
// certificate in one step, in DIR:
//   ca.pem      the CA certificate (0644): what agents and clients verify
//               the service with (--tls-ca; tfctl --cacert)
//   ca.key      the CA's key (0600), kept to renew the server certificate
//   server.pem  the server certificate, then the CA's (0644) (--tls-cert)
//   server.key  its key (0600) (--tls-key)
// Both keys belong to `key_owner` (tfslurmd's user) and are readable by it
// alone. Run again, it keeps the CA and makes a new server certificate
// (the rotation: then SIGHUP tfslurmd); each file is replaced by rename, so
// a reader sees the old file or the new one, never half of one.
//
// Thread safety: RunTlsInit writes files; LocalNamesAndAddresses reads the
// host's names and interfaces. Both are safe to call from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tls/certificates.h"

namespace tfslurm::tls {

struct TlsInitOptions {
  std::string dir;
  std::vector<std::string> dns_names;     // the service's names
  std::vector<std::string> ip_addresses;  // and addresses
  int server_days = 397;
  int ca_days = 3650;
  // The keys' owner; nullopt: the caller's uid and gid.
  std::optional<uid_t> key_uid;
  std::optional<gid_t> key_gid;
  int64_t now_s = 0;
};

struct TlsInitResult {
  std::string ca_cert_path, ca_key_path, cert_path, key_path;
  bool made_ca = false;  // false: the CA in dir was kept
  CertificateInfo ca, server;
};

StatusOr<TlsInitResult> RunTlsInit(const TlsInitOptions& options);

// This host's names (gethostname, its canonical name, "localhost") and
// addresses (every interface's IPv4 and IPv6 address, loopback included),
// without duplicates.
struct HostNames {
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
};
HostNames LocalNamesAndAddresses();

}  // namespace tfslurm::tls
