#include "tls/tls_init.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tls/certificate_maker.h"

namespace tfslurm::tls {
namespace {

constexpr int64_t kDay = 24 * 60 * 60;

// Writes `text` to `path` through a temporary file in the same directory,
// with `mode` and owner from the start, then renames it into place.
Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode,
                           std::optional<uid_t> uid, std::optional<gid_t> gid) {
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return FailedPrecondition("cannot write " + tmp + ": " + strerror(errno));
  auto fail = [&](const std::string& what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return FailedPrecondition("cannot " + what + " " + tmp + ": " + strerror(err));
  };
  if (fchmod(fd, mode) != 0) return fail("set the mode of");
  if ((uid || gid) &&
      fchown(fd, uid.value_or(static_cast<uid_t>(-1)), gid.value_or(static_cast<gid_t>(-1))) != 0)
    return fail("give away");
  for (size_t done = 0; done < text.size();) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("sync");
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return FailedPrecondition("cannot rename " + tmp + " to " + path + ": " + strerror(err));
  }
  return Status::Ok();
}

std::optional<std::string> ReadIfExists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The CA in `dir`, or a new one. Both of its files or neither.
StatusOr<MadeCertificate> KeepOrMakeCa(const TlsInitOptions& o, const TlsInitResult& paths,
                                       bool* made) {
  auto cert = ReadIfExists(paths.ca_cert_path);
  auto key = ReadIfExists(paths.ca_key_path);
  if (cert && key) {
    *made = false;
    return MadeCertificate{*cert, *key};
  }
  if (cert || key)
    return FailedPrecondition("found " + (cert ? paths.ca_cert_path : paths.ca_key_path) +
                              " without " + (cert ? paths.ca_key_path : paths.ca_cert_path) +
                              ": a CA needs both; move the one away to make a new CA");
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  CertificateSpec spec;
  spec.common_name = std::string("tfslurm CA on ") + host;
  spec.not_before_s = o.now_s - 300;  // a node whose clock is a little behind
  spec.not_after_s = o.now_s + o.ca_days * kDay;
  auto ca = MakeCa(spec);
  if (!ca.ok()) return ca.status();
  *made = true;
  if (auto s = WriteFileAtomically(paths.ca_key_path, ca->key_pem, 0600, o.key_uid, o.key_gid);
      !s.ok())
    return s;
  if (auto s =
          WriteFileAtomically(paths.ca_cert_path, ca->cert_pem, 0644, std::nullopt, std::nullopt);
      !s.ok())
    return s;
  return ca;
}

void AddUnique(std::vector<std::string>& list, const std::string& value) {
  if (!value.empty() && std::find(list.begin(), list.end(), value) == list.end())
    list.push_back(value);
}

}  // namespace

StatusOr<TlsInitResult> RunTlsInit(const TlsInitOptions& o) {
  if (o.dns_names.empty() && o.ip_addresses.empty())
    return InvalidArgument("name at least one host name (--name) or address (--ip)");
  if (o.server_days < 1 || o.ca_days < o.server_days)
    return InvalidArgument("--days must be at least 1 and at most the CA's " +
                           std::to_string(o.ca_days));
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return FailedPrecondition("cannot create " + o.dir + ": " + ec.message());
  TlsInitResult r;
  r.ca_cert_path = o.dir + "/ca.pem";
  r.ca_key_path = o.dir + "/ca.key";
  r.cert_path = o.dir + "/server.pem";
  r.key_path = o.dir + "/server.key";
  auto ca = KeepOrMakeCa(o, r, &r.made_ca);
  if (!ca.ok()) return ca.status();

  CertificateSpec spec;
  spec.common_name = o.dns_names.empty() ? o.ip_addresses.front() : o.dns_names.front();
  spec.dns_names = o.dns_names;
  spec.ip_addresses = o.ip_addresses;
  spec.not_before_s = o.now_s - 300;
  spec.not_after_s = o.now_s + o.server_days * kDay;
  auto server = MakeServerCertificate(spec, *ca);
  if (!server.ok()) return server.status();
  // The key first: a tfslurmd reloading between the two renames reads a
  // pair that does not match and keeps its old one (and says so).
  if (auto s = WriteFileAtomically(r.key_path, server->key_pem, 0600, o.key_uid, o.key_gid);
      !s.ok())
    return s;
  if (auto s = WriteFileAtomically(r.cert_path, server->cert_pem + ca->cert_pem, 0644, std::nullopt,
                                   std::nullopt);
      !s.ok())
    return s;
  auto ca_info = ParseCertificates(ca->cert_pem, r.ca_cert_path);
  auto server_info = ParseCertificates(server->cert_pem, r.cert_path);
  if (!ca_info.ok()) return ca_info.status();
  if (!server_info.ok()) return server_info.status();
  r.ca = ca_info->front();
  r.server = server_info->front();
  return r;
}

HostNames LocalNamesAndAddresses() {
  HostNames out;
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) == 0) {
    AddUnique(out.dns_names, host);
    addrinfo hints{};
    hints.ai_flags = AI_CANONNAME;
    addrinfo* info = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &info) == 0) {
      if (info && info->ai_canonname) AddUnique(out.dns_names, info->ai_canonname);
      freeaddrinfo(info);
    }
  }
  AddUnique(out.dns_names, "localhost");
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr) continue;
      char text[INET6_ADDRSTRLEN] = "";
      if (i->ifa_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                  sizeof text);
      else if (i->ifa_addr->sa_family == AF_INET6 &&
               !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                  sizeof text);
      AddUnique(out.ip_addresses, text);
    }
    freeifaddrs(ifs);
  }
  return out;
}

}  // namespace tfslurm::tls
