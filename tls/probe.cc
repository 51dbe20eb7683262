#include "tls/probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tls/openssl_ptr.h"
#include "tls/x509_text.h"

namespace tfslurm::tls {
namespace {

// OpenSSL writes to the socket with write(2): a peer that has closed it
// (a server that drops a client it will not serve) would raise SIGPIPE in a
// process that has not ignored it. Blocked on this thread for the probe, and
// a SIGPIPE it raised is taken off the thread's pending set before the
// mask is restored.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A connected blocking socket with send/receive timeouts, or -1 and why.
int Connect(const ProbeOptions& o, std::string* why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(o.host.c_str(), std::to_string(o.port).c_str(), &hints, &found); e != 0) {
    *why = "cannot resolve " + o.host + ": " + gai_strerror(e);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(o.timeout.count())) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof err;
      if (rc == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      *why = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{static_cast<time_t>(o.timeout.count() / 1000),
             static_cast<suseconds_t>(o.timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

bool AddTrust(SSL_CTX* ctx, const std::string& ca_pem) {
  if (ca_pem.empty()) return SSL_CTX_set_default_verify_paths(ctx) == 1;
  auto certs = ReadPemCertificates(ca_pem);
  if (!certs.ok()) return false;
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (auto& c : *certs) X509_STORE_add_cert(store, c.get());
  return true;
}

std::string UnverifiedReason(long result, const std::string& host, const ProbeResult& r) {
  std::string why = X509_verify_cert_error_string(result);
  if (r.chain.empty()) return why;
  const CertificateInfo& leaf = r.chain.front();
  switch (result) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return why + ": the certificate is for " + DescribeNames(leaf) + ", not " + host;
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return why + " (" + leaf.subject + ", on " + FormatUtc(leaf.not_after_s) + ")";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return why + " (" + leaf.subject + ", valid from " + FormatUtc(leaf.not_before_s) + ")";
    default:
      return why + " (the service's certificate: " + leaf.subject + ", issued by " +
             r.chain.back().issuer + ")";
  }
}

}  // namespace

bool SplitTarget(const std::string& target, std::string* host, int* port) {
  auto colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = target.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  try {
    size_t used = 0;
    *port = std::stoi(target.substr(colon + 1), &used);
    return used == target.size() - colon - 1 && *port > 0 && *port <= 65535;
  } catch (const std::exception&) {
    return false;
  }
}

ProbeResult ProbeTls(const ProbeOptions& o) {
  SigpipeBlocked no_sigpipe;
  ProbeResult r;
  int fd = Connect(o, &r.reason);
  if (fd < 0) return r;
  OpenSslPtr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (!AddTrust(ctx.get(), o.ca_pem)) {
    close(fd);
    r.kind = ProbeResult::Kind::kUnverified;
    r.reason = "the trusted certificates do not parse: " + DrainOpenSslErrors();
    return r;
  }
  X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx.get()), X509_V_FLAG_PARTIAL_CHAIN);
  // Record the verdict, finish the handshake anyway: the chain is wanted.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
  OpenSslPtr<SSL> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (IsIpAddress(o.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, o.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), o.host.c_str());
    X509_VERIFY_PARAM_set1_host(param, o.host.c_str(), 0);
  }
  ERR_clear_error();
  if (SSL_connect(ssl.get()) != 1) {
    std::string errors = DrainOpenSslErrors();
    // Closed or reset without a word: a service going down looks the same,
    // so it is not taken for a refusal.
    r.kind = errors.empty() ? ProbeResult::Kind::kUnreachable : ProbeResult::Kind::kNotTls;
    r.reason = "no TLS handshake with " + o.host + ":" + std::to_string(o.port) + ": " +
               (errors.empty() ? "the connection was closed" : errors);
    close(fd);
    return r;
  }
  if (STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl.get())) {
    for (int i = 0; i < sk_X509_num(chain); ++i) {
      X509* c = sk_X509_value(chain, i);
      r.chain_pem.push_back(ToPem(c));
      r.chain.push_back(Describe(c));
    }
  }
  long verdict = SSL_get_verify_result(ssl.get());
  r.kind = verdict == X509_V_OK ? ProbeResult::Kind::kVerified : ProbeResult::Kind::kUnverified;
  if (verdict != X509_V_OK) r.reason = UnverifiedReason(verdict, o.host, r);
  SSL_shutdown(ssl.get());
  close(fd);
  return r;
}

std::string SystemTrustPem() {
  std::ifstream in(X509_get_default_cert_file(), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tfslurm::tls
