// An httplib::Stream over a request that has already arrived whole (the
// gate read it: request_gate.h) and the connection it came on, for the
// answer (plain or TLS: gate_connection.h). Reads come from memory and end
// with the request; writes go to the connection,
// each waiting at most `write_timeout` for room, and all of them within
// `response_timeout` of the first, so a client that does not read its answer
// holds the thread no longer than that.
//
// Thread safety: one connection's, on one thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <optional>
#include <string>

#include "service/api/gate_connection.h"

namespace tfslurm::api {

class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(GateConnection& connection, std::string request,
                 std::chrono::milliseconds write_timeout,
                 std::chrono::milliseconds response_timeout);

  bool is_readable() const override { return read_ < request_.size(); }
  bool wait_readable() const override { return true; }
  bool wait_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return connection_.fd(); }
  time_t duration() const override;
  const char* buffered_data(size_t& size) const override;
  void consume_buffered(size_t size) override;

 private:
  using Clock = std::chrono::steady_clock;
  // How long a write may still wait for room: write_timeout, within the
  // response's deadline. Negative once that has passed.
  std::chrono::milliseconds WriteWait() const;

  GateConnection& connection_;
  const std::string request_;
  size_t read_ = 0;
  const std::chrono::milliseconds write_timeout_;
  const std::chrono::milliseconds response_timeout_;
  const Clock::time_point started_ = Clock::now();
  std::optional<Clock::time_point> deadline_;  // set by the first write
};

// The peer's or this end's address of a connected socket, as httplib gives
// them to a request: "127.0.0.1", "::1"; "" and 0 when unknown.
void SocketAddress(int fd, bool peer, std::string& ip, int& port);

}  // namespace tfslurm::api
