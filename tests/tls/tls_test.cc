// tls/: certificates made, read and checked; the TLS server identity
// replaced while connections are open; the probe's verdicts against a real
// OpenSSL server; the staged files gRPC's watcher reads; `tls init`'s files.
// Fingerprints are checked against the openssl command's own.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "tls/certificate_maker.h"
#include "tls/certificates.h"
#include "tls/probe.h"
#include "tls/serving_identity.h"
#include "tls/staged_identity.h"
#include "tls/tls_init.h"

namespace tfslurm::tls {
namespace {

constexpr int64_t kDay = 86400;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Pki {
  MadeCertificate ca, server;
};

Pki MakePki(int64_t not_before, int64_t not_after, std::vector<std::string> ips = {"127.0.0.1"},
            std::vector<std::string> names = {"tfslurm.test"}) {
  CertificateSpec ca_spec{"test CA", {}, {}, Now() - kDay, Now() + 10 * kDay};
  auto ca = MakeCa(ca_spec);
  EXPECT_TRUE(ca.ok()) << ca.status().message();
  CertificateSpec spec{"tfslurmd test", names, ips, not_before, not_after};
  auto server = MakeServerCertificate(spec, *ca);
  EXPECT_TRUE(server.ok()) << server.status().message();
  return {*ca, *server};
}

class TempDir {
 public:
  TempDir() {
    std::string p = "/tmp/tls-test-XXXXXX";
    path_ = mkdtemp(p.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    chmod(file.c_str(), mode);
    return file;
  }

 private:
  std::string path_;
};

ServerIdentity IdentityOf(const Pki& pki) {
  ServerIdentity id;
  id.chain_pem = pki.server.cert_pem + pki.ca.cert_pem;
  id.key_pem = pki.server.key_pem;
  return id;
}

std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

TEST(CertificatesTest, WhatIsMadeReadsBackAndItsFingerprintIsOpensslsOwn) {
  Pki pki = MakePki(Now() - 60, Now() + kDay, {"127.0.0.1", "::1"}, {"login1", "login1.site"});
  auto certs = ParseCertificates(pki.server.cert_pem + pki.ca.cert_pem, "chain");
  ASSERT_TRUE(certs.ok()) << certs.status().message();
  ASSERT_EQ(certs->size(), 2u);
  const CertificateInfo& leaf = (*certs)[0];
  EXPECT_EQ(leaf.subject, "CN=tfslurmd test");
  EXPECT_EQ(leaf.issuer, "CN=test CA");
  EXPECT_EQ(leaf.dns_names, (std::vector<std::string>{"login1", "login1.site"}));
  EXPECT_EQ(leaf.ip_addresses, (std::vector<std::string>{"127.0.0.1", "::1"}));
  EXPECT_FALSE(leaf.is_ca);
  EXPECT_TRUE((*certs)[1].is_ca);
  EXPECT_EQ(DescribeNames(leaf), "DNS:login1, DNS:login1.site, IP:127.0.0.1, IP:::1");
  TempDir dir;
  std::string file = dir.Write("ca.pem", pki.ca.cert_pem, 0644);
  std::string openssl = Shell("openssl x509 -noout -fingerprint -sha256 -in " + file);
  EXPECT_EQ(openssl, "sha256 Fingerprint=" + (*certs)[1].fingerprint + "\n");
  // OpenSSL's own verification accepts the chain for the name.
  std::string leaf_file = dir.Write("leaf.pem", pki.server.cert_pem, 0644);
  EXPECT_EQ(
      Shell("openssl verify -CAfile " + file + " -verify_hostname login1 " + leaf_file + " 2>&1"),
      leaf_file + ": OK\n");
}

TEST(CertificatesTest, AServerIdentityIsCheckedBeforeItIsServed) {
  TempDir dir;
  Pki pki = MakePki(Now() - 60, Now() + kDay);
  std::string cert = dir.Write("server.pem", pki.server.cert_pem, 0644);
  std::string key = dir.Write("server.key", pki.server.key_pem, 0600);
  auto ok = LoadServerIdentity(cert, key, Now());
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->leaf.subject, "CN=tfslurmd test");

  std::string open_key = dir.Write("open.key", pki.server.key_pem, 0644);
  auto readable = LoadServerIdentity(cert, open_key, Now());
  ASSERT_FALSE(readable.ok());
  EXPECT_NE(readable.status().message().find("mode 644); make it tfslurmd's alone: chmod 600"),
            std::string::npos)
      << readable.status().message();

  Pki other = MakePki(Now() - 60, Now() + kDay);
  std::string wrong_key = dir.Write("wrong.key", other.server.key_pem, 0600);
  auto mismatch = LoadServerIdentity(cert, wrong_key, Now());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("is not the key of the certificate"),
            std::string::npos);

  Pki old = MakePki(Now() - 3 * kDay, Now() - kDay);
  std::string old_cert = dir.Write("old.pem", old.server.cert_pem, 0644);
  std::string old_key = dir.Write("old.key", old.server.key_pem, 0600);
  auto expired = LoadServerIdentity(old_cert, old_key, Now());
  ASSERT_FALSE(expired.ok());
  EXPECT_NE(
      expired.status().message().find(") expired on " + FormatUtc(Now() - kDay).substr(0, 10)),
      std::string::npos)
      << expired.status().message();

  Pki future = MakePki(Now() + kDay, Now() + 2 * kDay);
  std::string f_cert = dir.Write("f.pem", future.server.cert_pem, 0644);
  std::string f_key = dir.Write("f.key", future.server.key_pem, 0600);
  auto early = LoadServerIdentity(f_cert, f_key, Now());
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("is not valid before"), std::string::npos);

  std::string junk = dir.Write("junk.pem", "not a certificate\n", 0644);
  auto none = LoadServerIdentity(junk, key, Now());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("holds no certificate"), std::string::npos);
}

TEST(CertificatesTest, CheckServesHostSaysWhyAClientWouldRefuse) {
  Pki pki = MakePki(Now() - 60, Now() + kDay, {"127.0.0.1"}, {"login1"});
  ServerIdentity id = IdentityOf(pki);
  EXPECT_TRUE(CheckServesHost(id, pki.ca.cert_pem, "127.0.0.1", Now()).ok());
  EXPECT_TRUE(CheckServesHost(id, pki.ca.cert_pem, "login1", Now()).ok());
  Status other_host = CheckServesHost(id, pki.ca.cert_pem, "node7", Now());
  EXPECT_EQ(other_host.message(),
            "hostname mismatch: it is for DNS:login1, IP:127.0.0.1, not node7");
  Pki other = MakePki(Now() - 60, Now() + kDay);
  // The chain ends in its own CA, which the other bundle does not hold.
  Status other_ca = CheckServesHost(id, other.ca.cert_pem, "login1", Now());
  EXPECT_EQ(other_ca.message(), "self-signed certificate in certificate chain");
  Status leaf_only = CheckServesHost({pki.server.cert_pem, pki.server.key_pem, {}, "", ""},
                                     other.ca.cert_pem, "login1", Now());
  EXPECT_EQ(leaf_only.message(), "unable to get local issuer certificate")
      << "a CA of the same name that did not sign it (its key identifier differs)";
  Status system = CheckServesHost(id, "", "login1", Now());
  EXPECT_FALSE(system.ok()) << "a private CA is in no system store";
}

// A TLS server on 127.0.0.1 built as tfslurmd's REST port builds its
// SSL_CTX (ServingIdentity::Configure): each connection is handshaken and
// then echoes what it reads, until the client closes.
class TlsServer {
 public:
  explicit TlsServer(ServingIdentity& identity) : ctx_(SSL_CTX_new(TLS_server_method())) {
    signal(SIGPIPE, SIG_IGN);  // as tfslurmd: a client may close first
    identity.Configure(ctx_);
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 16);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~TlsServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    acceptor_.join();
    for (auto& t : connections_) t.join();
    SSL_CTX_free(ctx_);
  }
  int port() const { return port_; }

 private:
  void Accept() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      connections_.emplace_back([this, c] {
        SSL* ssl = SSL_new(ctx_);
        SSL_set_fd(ssl, c);
        if (SSL_accept(ssl) == 1) {
          char buf[256];
          int n;
          while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) SSL_write(ssl, buf, n);
        }
        ERR_clear_error();
        SSL_free(ssl);
        close(c);
      });
    }
  }

  SSL_CTX* ctx_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

ProbeResult Probe(int port, const std::string& ca_pem, const std::string& host = "127.0.0.1") {
  ProbeOptions o;
  o.host = host;
  o.port = port;
  o.ca_pem = ca_pem;
  return ProbeTls(o);
}

TEST(ProbeTest, SaysWhetherAndWhyAServiceCannotBeVerified) {
  Pki pki = MakePki(Now() - 60, Now() + kDay, {"127.0.0.1"}, {"login1"});
  auto identity = ServingIdentity::Create(IdentityOf(pki));
  ASSERT_TRUE(identity.ok()) << identity.status().message();
  TlsServer server(**identity);

  ProbeResult good = Probe(server.port(), pki.ca.cert_pem);
  EXPECT_EQ(good.kind, ProbeResult::Kind::kVerified) << good.reason;
  ASSERT_EQ(good.chain.size(), 2u);
  EXPECT_TRUE(good.chain.back().is_ca);

  Pki other = MakePki(Now() - 60, Now() + kDay);
  ProbeResult wrong_ca = Probe(server.port(), other.ca.cert_pem);
  EXPECT_EQ(wrong_ca.kind, ProbeResult::Kind::kUnverified);
  EXPECT_EQ(wrong_ca.reason,
            "self-signed certificate in certificate chain (the service's certificate: CN=tfslurmd "
            "test, issued by CN=test CA)");

  ProbeResult system = Probe(server.port(), "");
  EXPECT_EQ(system.kind, ProbeResult::Kind::kUnverified);
  EXPECT_NE(system.reason.find("self-signed certificate in certificate chain"), std::string::npos)
      << system.reason;

  ProbeResult by_name = Probe(server.port(), pki.ca.cert_pem, "localhost");
  EXPECT_EQ(by_name.kind, ProbeResult::Kind::kUnverified);
  EXPECT_EQ(by_name.reason,
            "hostname mismatch: the certificate is for DNS:login1, IP:127.0.0.1, not localhost");

  Pki old = MakePki(Now() - 3 * kDay, Now() - kDay);
  ASSERT_TRUE((*identity)->Replace(IdentityOf(old)).ok());
  ProbeResult expired = Probe(server.port(), old.ca.cert_pem);
  EXPECT_EQ(expired.kind, ProbeResult::Kind::kUnverified);
  EXPECT_NE(expired.reason.find("certificate has expired (CN=tfslurmd test, on "),
            std::string::npos)
      << expired.reason;
}

TEST(ProbeTest, APlaintextPortOrNoneAtAllIsToldApart) {
  // A plaintext HTTP server, as tfslurmd's REST port without TLS.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  listen(fd, 4);
  std::thread plaintext([fd] {
    int c = accept(fd, nullptr, nullptr);
    char buf[1024];
    // A (void) cast does not silence glibc's warn_unused_result under GCC
    // with _FORTIFY_SOURCE (Debian's package build); the probe's answer is
    // what the test checks, not these.
    [[maybe_unused]] ssize_t got = read(c, buf, sizeof buf);
    const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    [[maybe_unused]] ssize_t sent = write(c, answer, sizeof answer - 1);
    close(c);
  });
  ProbeResult r = Probe(ntohs(a.sin_port), "");
  plaintext.join();
  EXPECT_EQ(r.kind, ProbeResult::Kind::kNotTls);
  EXPECT_NE(r.reason.find("wrong version number"), std::string::npos) << r.reason;
  close(fd);

  ProbeResult closed = Probe(ntohs(a.sin_port), "");
  EXPECT_EQ(closed.kind, ProbeResult::Kind::kUnreachable);
  EXPECT_EQ(closed.reason, "Connection refused");
}

// One client connection: handshake, then an echo.
struct Client {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = nullptr;
  int fd = -1;
  explicit Client(int port) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
  }
  ~Client() {
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
  }
  bool Echo() {
    char buf[8] = {};
    return SSL_write(ssl, "ping", 4) == 4 && SSL_read(ssl, buf, sizeof buf) == 4 &&
           std::string(buf) == "ping";
  }
  std::string PeerFingerprint() {
    X509* peer = SSL_get1_peer_certificate(ssl);
    unsigned char md[32];
    unsigned n = 0;
    X509_digest(peer, EVP_sha256(), md, &n);
    X509_free(peer);
    return std::string(reinterpret_cast<char*>(md), n);
  }
};

TEST(ServingIdentityTest, AReplacementReachesTheNextHandshakeAndLeavesOpenConnectionsAlone) {
  Pki first = MakePki(Now() - 60, Now() + kDay);
  Pki second = MakePki(Now() - 60, Now() + kDay);
  auto identity = ServingIdentity::Create(IdentityOf(first));
  ASSERT_TRUE(identity.ok());
  TlsServer server(**identity);
  Client before(server.port());
  ASSERT_EQ(SSL_connect(before.ssl), 1);
  ASSERT_TRUE(before.Echo());
  const std::string first_fp = before.PeerFingerprint();

  ASSERT_TRUE((*identity)->Replace(IdentityOf(second)).ok());
  EXPECT_TRUE(before.Echo()) << "the connection made before the replacement still works";
  Client after(server.port());
  ASSERT_EQ(SSL_connect(after.ssl), 1);
  EXPECT_NE(after.PeerFingerprint(), first_fp);
  EXPECT_EQ(Probe(server.port(), second.ca.cert_pem).kind, ProbeResult::Kind::kVerified);

  // A bad replacement is refused, and the identity served stays.
  ServerIdentity broken = IdentityOf(second);
  broken.key_pem = first.server.key_pem;
  Status refused = (*identity)->Replace(broken);
  EXPECT_EQ(refused.message(), "the key is not the certificate's");
  EXPECT_EQ(Probe(server.port(), second.ca.cert_pem).kind, ProbeResult::Kind::kVerified);
}

TEST(ServingIdentityTest, APlaintextHttpRequestGetsA400SayingThePortSpeaksHttps) {
  Pki pki = MakePki(Now() - 60, Now() + kDay);
  auto identity = ServingIdentity::Create(IdentityOf(pki));
  ASSERT_TRUE(identity.ok());
  TlsServer server(**identity);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char request[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(fd, request, sizeof request - 1), static_cast<ssize_t>(sizeof request - 1));
  std::string answer;
  char buf[1024];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find(ServingIdentity::PlaintextAnswer()), std::string::npos) << answer;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(StagedIdentityTest, BothFilesChangeAtOnceWithATimeOfTheirOwnGeneration) {
  Pki a = MakePki(Now() - 60, Now() + kDay), b = MakePki(Now() - 60, Now() + kDay);
  auto staged = StagedIdentity::Create(IdentityOf(a));
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  const std::string dir = (*staged)->dir();
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(ReadAll((*staged)->key_path()), a.server.key_pem);
  ASSERT_EQ(stat((*staged)->key_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (int g = 2; g <= 4; ++g) {
    const Pki& p = g % 2 ? a : b;
    ASSERT_TRUE((*staged)->Replace(IdentityOf(p)).ok());
    EXPECT_EQ(ReadAll((*staged)->key_path()), p.server.key_pem);
    EXPECT_EQ(ReadAll((*staged)->cert_path()), p.server.cert_pem + p.ca.cert_pem);
    ASSERT_EQ(stat((*staged)->cert_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mtime, g) << "each generation's own time: the watcher sees every change";
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/g3")) << "the generation before is kept";
  EXPECT_FALSE(std::filesystem::exists(dir + "/g2"));
  staged->reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(TlsInitTest, MakesACaAndAServerCertificateAndKeepsTheCaWhenRunAgain) {
  TempDir dir;
  TlsInitOptions o;
  o.dir = dir.path() + "/tls";
  o.dns_names = {"login1"};
  o.ip_addresses = {"198.18.0.3"};
  o.now_s = Now();
  auto first = RunTlsInit(o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->made_ca);
  struct stat st {};
  for (auto [file, mode] :
       {std::pair{"ca.key", 0600}, {"server.key", 0600}, {"ca.pem", 0644}, {"server.pem", 0644}}) {
    ASSERT_EQ(stat((o.dir + "/" + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0777, static_cast<mode_t>(mode)) << file;
  }
  auto id = LoadServerIdentity(first->cert_path, first->key_path, Now());
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_TRUE(CheckServesHost(*id, ReadAll(first->ca_cert_path), "198.18.0.3", Now()).ok());
  EXPECT_EQ(DescribeNames(id->leaf), "DNS:login1, IP:198.18.0.3");
  EXPECT_EQ(id->leaf.not_after_s / kDay, (o.now_s + 397 * kDay) / kDay);

  auto second = RunTlsInit(o);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->made_ca);
  EXPECT_EQ(second->ca.fingerprint, first->ca.fingerprint);
  EXPECT_NE(second->server.fingerprint, first->server.fingerprint);

  std::filesystem::remove(o.dir + "/ca.key");
  auto half = RunTlsInit(o);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("without " + o.dir + "/ca.key"), std::string::npos);
}

// A thread that uses OpenSSL and ends after main has returned, as gRPC's
// threads do. Its end is awaited by an atexit handler registered before
// OpenSSL can register its own (a static initializer of this file), so it
// ends after OpenSSL's teardown would have run: with that teardown on, the
// thread's error queue is left unfreed and LeakSanitizer fails this program
// at exit (the unit stage runs it under ASan). tests/CMakeLists.txt turns the
// teardown off for every test program, as the three programs' mains do.
std::atomic<bool> late_thread_may_end{false};
std::thread* late_thread = nullptr;
const bool kLateThreadAwaitedAtExit = [] {
  atexit([] {
    if (late_thread == nullptr) return;
    late_thread_may_end = true;
    late_thread->join();
    delete late_thread;
  });
  return true;
}();

TEST(OpenSslThroughExitTest, AThreadThatEndsAfterMainLeavesNothingOfOpenSslBehind) {
  static std::atomic<int> queued{-1};  // outlives the test: the thread does
  late_thread = new std::thread([] {
    ERR_raise(ERR_LIB_SYS, 1);  // the thread's own error queue
    queued = ERR_peek_error() != 0;
    while (!late_thread_may_end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (queued < 0) std::this_thread::yield();
  EXPECT_EQ(queued, 1) << "the thread holds an error queue of its own";
}

}  // namespace
}  // namespace tfslurm::tls
