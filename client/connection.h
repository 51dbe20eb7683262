// Where tfctl finds tfslurmd, what it trusts and the token to send: each of
// the URL, the CA file and the token comes from the first of flags (--url,
// --cacert, --token), the environment (TFSLURM_URL, TFSLURM_CACERT,
// TFSLURM_TOKEN), the config file (~/.config/tfslurm/config), or the
// default (http://127.0.0.1:8080; the system's trust store; no token). With
// no token, the client proves its Unix user with a MUNGE credential per
// request (tfslurm_client.h).
//
// The config file holds `url = ...`, `cacert = ...` and `token = ...` lines
// (# starts a comment line), or the same keys as YAML (`url: ...`).
// `tfctl login` writes it.
//
// Thread safety: the functions keep no state; ProcessEnvironment's lookup
// calls getenv(3), safe while no thread changes the environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace tfslurm::client {

inline constexpr const char* kDefaultUrl = "http://127.0.0.1:8080";

struct Connection {
  std::string url;    // http(s)://HOST[:PORT], without a trailing slash
  std::string token;  // empty: a MUNGE credential is sent, when munged makes one
  // Where `url` came from ("--url", "TFSLURM_URL", the config file's path or
  // "default"), so that a message about an unreachable service can say.
  std::string url_origin;
  // Where `token` came from ("--token", "TFSLURM_TOKEN" or the config
  // file's path), so that a refused token's message can say; "" without one.
  std::string token_origin;
  // munged's socket for those credentials (TFSLURM_MUNGE_SOCKET); empty:
  // libmunge's default (/run/munge/munge.socket.2).
  std::string munge_socket;
  // The certificates an https:// service's certificate must verify against
  // (PEM file); empty: the system's trust store. Where it came from, for
  // the message when verification fails.
  std::string cacert;
  std::string cacert_origin;
};

struct ConnectionFlags {
  std::optional<std::string> url;
  std::optional<std::string> token;
  std::optional<std::string> cacert;
};

// Reads an environment variable; nullopt when unset. Injected so tests do
// not depend on the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnvironment();

// $XDG_CONFIG_HOME/tfslurm/config, else $HOME/.config/tfslurm/config; empty
// when neither variable is set.
std::string DefaultConfigPath(const EnvLookup& env);

// Empty values (TFSLURM_TOKEN= or `token =`) count as unset. A missing config
// file is fine; an unreadable or malformed one, or a URL that is not
// http(s)://HOST[:PORT], is an error naming where the bad value came from.
StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                       const std::string& config_path);

// Writes the config file (`tfctl login`): `url`, and `cacert` and `token`
// when not empty, as `key = value` lines, mode 0600 (it may hold a token),
// its directory made (0700) when missing; replaced by rename, so a reader
// sees the old file or the new one.
Status SaveConfig(const std::string& path, const std::string& url, const std::string& cacert,
                  const std::string& token);

}  // namespace tfslurm::client
