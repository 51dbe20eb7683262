#include "client/connection.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace tfslurm::client {
namespace {

struct ConfigFile {
  std::optional<std::string> url;
  std::optional<std::string> token;
  std::optional<std::string> cacert;
};

Status ConfigError(const std::string& where, const std::string& what) {
  return Error(where + ": " + what);
}

// Stores `value` under `key`, or says which keys exist.
Status SetConfigKey(ConfigFile& config, const std::string& key, std::string value,
                    const std::string& where) {
  if (value.empty()) return Status::Ok();
  if (key == "url") {
    config.url = std::move(value);
  } else if (key == "token") {
    config.token = std::move(value);
  } else if (key == "cacert") {
    config.cacert = std::move(value);
  } else {
    return ConfigError(where,
                       "unknown key '" + key + "'; the known keys are url, token and cacert");
  }
  return Status::Ok();
}

// `key = value` lines; a value may be quoted. nullopt when some line is not
// of that form (the file is then read as YAML).
std::optional<StatusOr<ConfigFile>> ParseKeyValueLines(const std::string& text,
                                                       const std::string& path) {
  static const std::regex kLine(R"(\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*)");
  static const std::regex kBlankOrComment(R"(\s*(#.*)?)");
  ConfigFile config;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (std::regex_match(line, kBlankOrComment)) continue;
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) return std::nullopt;
    std::string value = m[2];
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    if (Status s = SetConfigKey(config, m[1], value, path + ":" + std::to_string(number)); !s.ok())
      return StatusOr<ConfigFile>(std::move(s));
  }
  return StatusOr<ConfigFile>(config);
}

StatusOr<ConfigFile> ParseYamlConfig(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return ConfigError(path + ":" + std::to_string(e.mark.line + 1),
                       "neither `key = value` lines nor YAML: " + e.msg);
  }
  ConfigFile config;
  if (root.IsNull()) return config;
  if (!root.IsMap())
    return ConfigError(path, "must hold `url = ...` and `token = ...` lines, or a YAML mapping");
  for (const auto& entry : root) {
    std::string where = path + ":" + std::to_string(entry.first.Mark().line + 1);
    if (!entry.first.IsScalar())
      return ConfigError(where, "keys must be plain names: url, token, cacert");
    std::string key = entry.first.Scalar();
    if (!entry.second.IsScalar() && !entry.second.IsNull())
      return ConfigError(where, "the value of '" + key + "' must be a single string");
    std::string value = entry.second.IsNull() ? "" : entry.second.Scalar();
    if (Status s = SetConfigKey(config, key, value, where); !s.ok()) return s;
  }
  return config;
}

StatusOr<ConfigFile> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return ConfigFile{};
  std::ifstream in(path);
  if (!in)
    return ConfigError(path, std::string("cannot read the config file: ") + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (auto lines = ParseKeyValueLines(text.str(), path)) return *lines;
  return ParseYamlConfig(text.str(), path);
}

// "http://host:8080/" -> "http://host:8080"; anything with a path, query or
// another scheme is refused, since every request path is appended to it.
StatusOr<std::string> NormalizeUrl(std::string url, const std::string& origin) {
  static const std::regex kUrl(R"(https?://[^/\s?#@]+)");
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (!std::regex_match(url, kUrl))
    return Error(origin + ": '" + url + "' is not a service URL; expected http://HOST:PORT, e.g. " +
                 kDefaultUrl);
  return url;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

std::string DefaultConfigPath(const EnvLookup& env) {
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) return *xdg + "/tfslurm/config";
  if (auto home = env("HOME"); home && !home->empty()) return *home + "/.config/tfslurm/config";
  return "";
}

StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                       const std::string& config_path) {
  auto config = ReadConfigFile(config_path);
  if (!config.ok()) return config.status();
  auto present = [](const std::optional<std::string>& v) { return v && !v->empty(); };

  Connection c;
  std::string url = kDefaultUrl;
  c.url_origin = "default";
  if (auto from_env = env("TFSLURM_URL"); present(flags.url)) {
    url = *flags.url;
    c.url_origin = "--url";
  } else if (present(from_env)) {
    url = *from_env;
    c.url_origin = "TFSLURM_URL";
  } else if (present(config->url)) {
    url = *config->url;
    c.url_origin = config_path;
  }
  auto normalized = NormalizeUrl(url, c.url_origin);
  if (!normalized.ok()) return normalized.status();
  c.url = *normalized;

  if (auto from_env = env("TFSLURM_TOKEN"); present(flags.token)) {
    c.token = *flags.token;
    c.token_origin = "--token";
  } else if (present(from_env)) {
    c.token = *from_env;
    c.token_origin = "TFSLURM_TOKEN";
  } else if (present(config->token)) {
    c.token = *config->token;
    c.token_origin = config_path;
  }
  if (auto socket = env("TFSLURM_MUNGE_SOCKET"); present(socket)) c.munge_socket = *socket;
  if (auto from_env = env("TFSLURM_CACERT"); present(flags.cacert)) {
    c.cacert = *flags.cacert;
    c.cacert_origin = "--cacert";
  } else if (present(from_env)) {
    c.cacert = *from_env;
    c.cacert_origin = "TFSLURM_CACERT";
  } else if (present(config->cacert)) {
    c.cacert = *config->cacert;
    c.cacert_origin = config_path;
  }
  if (!c.cacert.empty() && access(c.cacert.c_str(), R_OK) != 0)
    return Error(c.cacert_origin + ": cannot read the CA file '" + c.cacert +
                 "': " + std::strerror(errno));
  return c;
}

Status SaveConfig(const std::string& path, const std::string& url, const std::string& cacert,
                  const std::string& token) {
  if (path.empty()) return Error("no config file: neither XDG_CONFIG_HOME nor HOME is set");
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error("cannot create " + dir.string() + ": " + ec.message());
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }
  std::string text = "# written by tfctl login\nurl = " + url + "\n";
  if (!cacert.empty()) text += "cacert = " + cacert + "\n";
  if (!token.empty()) text += "token = " + token + "\n";
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return Error("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

}  // namespace tfslurm::client
