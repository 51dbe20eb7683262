// bench_http_rate: HTTP/1.1 requests at a fixed rate over keep-alive
// connections, with latency measured from each request's scheduled time (as
// wrk2 does; wrk2 is not in Debian and plain wrk only measures at
// saturation), so a slow answer also counts against the requests queued
// behind it.
//
//   bench_http_rate --port P --path /experiments/ID --rate 2000 --connections 8
//                   --duration 10 [--warmup 2] [--host 127.0.0.1] [--header "K: V"]...
//   bench_http_rate --port P --path /experiments --method POST --body-file spec.json
//                   --id-prefix sub --count 500 --connections 1 --rate 0
//
// --rate 0 is a closed loop instead: every connection sends its next request
// as soon as the answer to the last one arrived, until --count requests
// (total) were answered; the rate is count / elapsed. With --body-file,
// "@ID@" in the body is replaced by --id-prefix and a sequence number, so
// each POST creates a new experiment. --log FILE writes one line per request:
// "SENT_NS DONE_NS HTTP_STATUS CONNECTION" (CLOCK_MONOTONIC). --unix SOCKET
// talks to a unix socket instead of --host/--port; --paths-file F cycles
// through the paths in F (one a line) instead of --path.
//
// Each connection is one thread sending every C/R seconds, one request in
// flight; a connection behind schedule sends at once, and stops at the end
// of the run: what it did not send by then is "unsent" (the server did not
// keep up). Prints one line of key=value: target rate, achieved rate
// (answers received in the measured window / its length), requests
// answered, unsent, errors (non-2xx, broken connections, in the warm-up
// too), reconnects (the server closed a keep-alive connection), latency
// p50/p90/p99/p99.9/max in ms from the scheduled time, and p50/p99 from the
// actual send ("service"). Exits 1 when there were errors, or no answer in
// the measured window.
//
// --cacert FILE speaks HTTPS (OpenSSL, TLS 1.2 or later), verifying the
// server's certificate against FILE and --host, as tfctl does; each
// connection handshakes once and keeps its session, as a keep-alive client
// does. A reconnect handshakes again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SleepUntil(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

struct Options {
  std::string host = "127.0.0.1", path = "/", method = "GET", body, id_prefix = "req", log,
              unix_socket, cacert;
  SSL_CTX* tls = nullptr;  // with --cacert; shared by every connection
  std::vector<std::string> headers, paths;
  int port = 0, connections = 8;
  long count = 0;
  double rate = 1000, duration_s = 10, warmup_s = 2;
};

class Connection {
 public:
  Connection(const Options& o) : o_(o) {}
  ~Connection() { Close(); }

  // Sends one request and reads the whole answer; false on a broken
  // connection. `status` gets the HTTP status.
  bool RoundTrip(const std::string& request, int* status, bool* server_closed) {
    if (fd_ < 0 && !Connect()) return false;
    if (!WriteAll(request)) {
      Close();
      return false;
    }
    // Headers.
    size_t header_end;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!ReadMore()) return false;
    std::string head = buf_.substr(0, header_end);
    *status = 0;
    sscanf(head.c_str(), "HTTP/1.%*d %d", status);
    size_t length = 0;
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (auto p = lower.find("\r\ncontent-length:"); p != std::string::npos)
      length = std::strtoul(lower.c_str() + p + 17, nullptr, 10);
    *server_closed = lower.find("\r\nconnection: close") != std::string::npos;
    size_t total = header_end + 4 + length;
    while (buf_.size() < total)
      if (!ReadMore()) return false;
    buf_.erase(0, total);
    if (*server_closed) Close();
    return true;
  }

  void Close() {
    if (ssl_) SSL_free(ssl_);
    ssl_ = nullptr;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    buf_.clear();
  }

 private:
  bool Connect() {
    if (!o_.unix_socket.empty()) {
      fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      snprintf(addr.sun_path, sizeof addr.sun_path, "%s", o_.unix_socket.c_str());
      if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        Close();
        return false;
      }
      return true;
    }
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(o_.port);
    inet_pton(AF_INET, o_.host.c_str(), &addr.sin_addr);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      Close();
      return false;
    }
    if (o_.tls) {
      ssl_ = SSL_new(o_.tls);
      SSL_set_fd(ssl_, fd_);
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), o_.host.c_str());
      if (SSL_connect(ssl_) != 1) {
        ERR_print_errors_fp(stderr);
        Close();
        return false;
      }
    }
    return true;
  }
  bool WriteAll(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ssl_ ? SSL_write(ssl_, s.data() + off, static_cast<int>(s.size() - off))
                       : send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += n;
    }
    return true;
  }
  bool ReadMore() {
    char tmp[65536];
    ssize_t n = ssl_ ? SSL_read(ssl_, tmp, sizeof tmp) : recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      Close();
      return false;
    }
    buf_.append(tmp, n);
    return true;
  }

  const Options& o_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string buf_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--host")
      o.host = v;
    else if (a == "--port")
      o.port = std::stoi(v);
    else if (a == "--cacert")
      o.cacert = v;
    else if (a == "--path")
      o.path = v;
    else if (a == "--method")
      o.method = v;
    else if (a == "--body-file") {
      FILE* f = fopen(v.c_str(), "r");
      if (!f) {
        perror(v.c_str());
        return 2;
      }
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) o.body.append(buf, n);
      fclose(f);
    } else if (a == "--id-prefix")
      o.id_prefix = v;
    else if (a == "--count")
      o.count = std::stol(v);
    else if (a == "--rate")
      o.rate = std::stod(v);
    else if (a == "--connections")
      o.connections = std::stoi(v);
    else if (a == "--duration")
      o.duration_s = std::stod(v);
    else if (a == "--warmup")
      o.warmup_s = std::stod(v);
    else if (a == "--header")
      o.headers.push_back(v);
    else if (a == "--log")
      o.log = v;
    else if (a == "--unix")
      o.unix_socket = v;
    else if (a == "--paths-file") {
      FILE* f = fopen(v.c_str(), "r");
      if (!f) {
        perror(v.c_str());
        return 2;
      }
      char line[4096];
      while (fgets(line, sizeof line, f)) {
        std::string p(line);
        while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
        if (!p.empty()) o.paths.push_back(p);
      }
      fclose(f);
    } else {
      fprintf(stderr,
              "usage: %s --port P --path PATH --rate R [--connections C] [--duration S] [--warmup "
              "S] [--header H]\n"
              "          [--method M] [--body-file F] [--id-prefix P] [--count N] [--log FILE]\n"
              "          [--unix SOCKET] [--paths-file F]\n",
              argv[0]);
      return 2;
    }
  }
  if ((!o.port && o.unix_socket.empty()) || (o.rate <= 0 && o.count <= 0)) {
    fprintf(stderr, "--port or --unix is required, and --count with --rate 0\n");
    return 2;
  }
  if (o.paths.empty()) o.paths.push_back(o.path);
  if (!o.cacert.empty()) {
    // SSL_write to a connection the server closed raises SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    o.tls = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(o.tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(o.tls, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(o.tls, o.cacert.c_str(), nullptr) != 1) {
      fprintf(stderr, "--cacert %s: not a CA file OpenSSL reads\n", o.cacert.c_str());
      return 2;
    }
  }
  std::string headers = " HTTP/1.1\r\nHost: " + o.host + "\r\nAccept: application/json\r\n";
  for (const auto& h : o.headers) headers += h + "\r\n";
  std::atomic<long> sequence{0}, path_index{0};
  // The request to send next: a GET (of the next path in turn), or the body
  // with a new id.
  auto next_request = [&]() -> std::string {
    std::string head = o.method + " " + o.paths[path_index++ % o.paths.size()] + headers;
    if (o.body.empty()) return head + "\r\n";
    std::string body = o.body;
    std::string id = o.id_prefix + "-" + std::to_string(sequence++);
    for (size_t p; (p = body.find("@ID@")) != std::string::npos;) body.replace(p, 4, id);
    return head +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  };

  std::mutex mu;
  std::vector<double> latency, service;
  std::vector<std::string> log_lines;
  long errors = 0, reconnects = 0, measured = 0, unsent = 0;
  const bool closed_loop = o.rate <= 0;
  const int64_t interval = closed_loop ? 0 : static_cast<int64_t>(1e9 * o.connections / o.rate);
  const int64_t start = NowNs() + 50'000'000;
  const int64_t measure_from = closed_loop ? start : start + static_cast<int64_t>(o.warmup_s * 1e9);
  const int64_t end = measure_from + static_cast<int64_t>(o.duration_s * 1e9);
  std::atomic<long> claimed{0};
  std::atomic<int64_t> last_done{start};
  std::vector<std::thread> threads;
  for (int c = 0; c < o.connections; ++c) {
    threads.emplace_back([&, c] {
      Connection conn(o);
      std::vector<double> lat, svc;
      std::vector<std::string> lines;
      long errs = 0, recs = 0, count = 0, late = 0;
      for (int64_t k = 0;; ++k) {
        int64_t scheduled;
        if (closed_loop) {
          if (claimed++ >= o.count) break;
          scheduled = k == 0 ? start : NowNs();
          SleepUntil(scheduled);
        } else {
          // Connections are staggered over one interval so the rate is smooth.
          scheduled = start + k * interval + c * interval / o.connections;
          if (scheduled >= end) break;
          if (NowNs() >= end) {
            for (int64_t kk = k;; ++kk) {
              int64_t s = start + kk * interval + c * interval / o.connections;
              if (s >= end) break;
              if (s >= measure_from) ++late;
            }
            break;
          }
          SleepUntil(scheduled);
        }
        std::string request = next_request();
        int64_t sent = NowNs();
        int status = 0;
        bool closed = false;
        bool ok = conn.RoundTrip(request, &status, &closed);
        int64_t done = NowNs();
        if (closed) ++recs;
        if (!o.log.empty())
          lines.push_back(std::to_string(sent) + " " + std::to_string(done) + " " +
                          std::to_string(status) + " " + std::to_string(c));
        // A refusal counts in the warm-up too: a server that fails there has
        // not been measured.
        const bool refused = !ok || status < 200 || status >= 300;
        if (refused && errs++ == 0) {
          if (!ok)
            fprintf(stderr, "bench_http_rate: connection failed\n");
          else
            fprintf(stderr, "bench_http_rate: HTTP %d\n", status);
        }
        if (scheduled < measure_from) continue;
        if (!closed_loop && done > end) {  // answered after the window: not in the rate
          ++late;
          continue;
        }
        for (int64_t prev = last_done.load();
             done > prev && !last_done.compare_exchange_weak(prev, done);) {
        }
        ++count;
        if (refused) continue;
        lat.push_back((done - scheduled) / 1e6);
        svc.push_back((done - sent) / 1e6);
      }
      std::lock_guard lock(mu);
      latency.insert(latency.end(), lat.begin(), lat.end());
      service.insert(service.end(), svc.begin(), svc.end());
      log_lines.insert(log_lines.end(), lines.begin(), lines.end());
      errors += errs;
      reconnects += recs;
      measured += count;
      unsent += late;
    });
  }
  for (auto& t : threads) t.join();
  if (!o.log.empty()) {
    FILE* f = fopen(o.log.c_str(), "w");
    if (!f) {
      perror(o.log.c_str());
      return 1;
    }
    for (const auto& l : log_lines) fprintf(f, "%s\n", l.c_str());
    if (fclose(f) != 0) {
      perror(o.log.c_str());
      return 1;
    }
  }
  double window_s = closed_loop ? (last_done - start) / 1e9 : o.duration_s;
  std::sort(latency.begin(), latency.end());
  std::sort(service.begin(), service.end());
  printf(
      "target_rate=%.0f achieved_rate=%.1f requests=%ld seconds=%.3f unsent=%ld errors=%ld "
      "reconnects=%ld "
      "p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f service_p50_ms=%.3f "
      "service_p99_ms=%.3f\n",
      o.rate, latency.size() / window_s, measured, window_s, unsent, errors, reconnects,
      Percentile(latency, 50), Percentile(latency, 90), Percentile(latency, 99),
      Percentile(latency, 99.9), latency.empty() ? 0 : latency.back(), Percentile(service, 50),
      Percentile(service, 99));
  // Nothing answered in the window measures nothing: an error too.
  if (latency.empty()) fprintf(stderr, "bench_http_rate: no request answered in the window\n");
  return errors || latency.empty() ? 1 : 0;
}
