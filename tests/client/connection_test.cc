#include "client/connection.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace tfslurm::client {
namespace {

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("connection_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    config_ = (dir_ / "config").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteConfig(const std::string& text) { std::ofstream(config_) << text; }

  EnvLookup Env() {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }

  std::filesystem::path dir_;
  std::string config_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConnectionTest, DefaultsWithoutFlagsEnvironmentOrConfig) {
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->url, "http://127.0.0.1:8080");
  EXPECT_EQ(c->url_origin, "default");
  EXPECT_EQ(c->token, "");
}

TEST_F(ConnectionTest, FlagsBeatEnvironmentBeatsConfigFile) {
  WriteConfig("url = http://from-config:1\ntoken = config-token\n");
  env_ = {{"TFSLURM_URL", "http://from-env:2"}, {"TFSLURM_TOKEN", "env-token"}};
  ConnectionFlags flags{"http://from-flag:3", "flag-token", std::nullopt};

  auto all = ResolveConnection(flags, Env(), config_);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->url, "http://from-flag:3");
  EXPECT_EQ(all->url_origin, "--url");
  EXPECT_EQ(all->token, "flag-token");

  auto env_and_config = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(env_and_config.ok());
  EXPECT_EQ(env_and_config->url, "http://from-env:2");
  EXPECT_EQ(env_and_config->url_origin, "TFSLURM_URL");
  EXPECT_EQ(env_and_config->token, "env-token");

  env_.clear();
  auto config_only = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(config_only.ok());
  EXPECT_EQ(config_only->url, "http://from-config:1");
  EXPECT_EQ(config_only->url_origin, config_);
  EXPECT_EQ(config_only->token, "config-token");
}

TEST_F(ConnectionTest, UrlAndTokenAreResolvedIndependently) {
  WriteConfig("token = config-token\n");
  env_ = {{"TFSLURM_URL", "http://from-env:2"}};
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->url, "http://from-env:2");
  EXPECT_EQ(c->token, "config-token");
}

TEST_F(ConnectionTest, EmptyValuesCountAsUnset) {
  WriteConfig("url = http://from-config:1\n");
  env_ = {{"TFSLURM_URL", ""}, {"TFSLURM_TOKEN", ""}};
  auto c = ResolveConnection({std::string(""), std::nullopt, std::nullopt}, Env(), config_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->url, "http://from-config:1");
  EXPECT_EQ(c->token, "");
}

TEST_F(ConnectionTest, ReadsTheConfigFileAsYamlToo) {
  WriteConfig("# tfslurm\nurl: http://yaml-host:9000/\ntoken: \"abc def\"\n");
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->url, "http://yaml-host:9000");
  EXPECT_EQ(c->token, "abc def");
}

TEST_F(ConnectionTest, KeyValueLinesMayQuoteValuesAndHaveComments) {
  WriteConfig("# the service\n\n  url = 'https://svc.example:443'  \ntoken=\"t=1#2\"\n");
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->url, "https://svc.example:443");
  EXPECT_EQ(c->token, "t=1#2");
}

TEST_F(ConnectionTest, UnknownConfigKeyNamesFileLineAndTheKnownKeys) {
  WriteConfig("url = http://h:1\ntokn = x\n");
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            config_ + ":2: unknown key 'tokn'; the known keys are url, token and cacert");
}

TEST_F(ConnectionTest, BadUrlNamesWhereItCameFrom) {
  env_ = {{"TFSLURM_URL", "127.0.0.1:8080"}};
  auto c = ResolveConnection({}, Env(), config_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("TFSLURM_URL: '127.0.0.1:8080' is not a service URL"),
            std::string::npos)
      << c.status().message();

  auto with_path = ResolveConnection({std::string("http://h:1/api"), std::nullopt, std::nullopt},
                                     Env(), config_);
  ASSERT_FALSE(with_path.ok());
  EXPECT_EQ(with_path.status().message().rfind("--url:", 0), 0u);
}

// As the URL: --cacert, then TFSLURM_CACERT, then `cacert = ...`; each
// named as the origin (the message of a failed verification says it).
TEST_F(ConnectionTest, TheCaFileComesFromFlagEnvironmentOrConfigAndMustBeReadable) {
  for (const char* name : {"flag.pem", "env.pem", "config.pem"}) std::ofstream(dir_ / name) << "x";
  WriteConfig("url = https://h:1\ncacert = " + (dir_ / "config.pem").string() + "\n");
  auto from_config = ResolveConnection({}, Env(), config_);
  ASSERT_TRUE(from_config.ok()) << from_config.status().message();
  EXPECT_EQ(from_config->cacert, (dir_ / "config.pem").string());
  EXPECT_EQ(from_config->cacert_origin, config_);
  env_["TFSLURM_CACERT"] = (dir_ / "env.pem").string();
  auto from_env = ResolveConnection({}, Env(), config_);
  EXPECT_EQ(from_env->cacert_origin, "TFSLURM_CACERT");
  ConnectionFlags flags;
  flags.cacert = (dir_ / "flag.pem").string();
  auto from_flag = ResolveConnection(flags, Env(), config_);
  EXPECT_EQ(from_flag->cacert, (dir_ / "flag.pem").string());
  EXPECT_EQ(from_flag->cacert_origin, "--cacert");
  flags.cacert = (dir_ / "absent.pem").string();
  auto absent = ResolveConnection(flags, Env(), config_);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().message(), "--cacert: cannot read the CA file '" +
                                           (dir_ / "absent.pem").string() +
                                           "': No such file or directory");
}

TEST_F(ConnectionTest, SaveConfigWritesWhatResolveReadsBackPrivately) {
  const std::string path = (dir_ / "sub" / "config").string();
  std::ofstream(dir_ / "ca.pem") << "x";
  ASSERT_TRUE(SaveConfig(path, "https://h:2", (dir_ / "ca.pem").string(), "tfs_x").ok());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto c = ResolveConnection({}, Env(), path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->url, "https://h:2");
  EXPECT_EQ(c->token, "tfs_x");
  EXPECT_EQ(c->cacert, (dir_ / "ca.pem").string());
}

TEST_F(ConnectionTest, MissingConfigFileIsFine) {
  auto c = ResolveConnection({}, Env(), (dir_ / "absent").string());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->url_origin, "default");
}

TEST(DefaultConfigPathTest, PrefersXdgConfigHomeOverHome) {
  std::map<std::string, std::string> env = {{"HOME", "/home/u"}};
  auto lookup = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(DefaultConfigPath(lookup), "/home/u/.config/tfslurm/config");
  env["XDG_CONFIG_HOME"] = "/xdg";
  EXPECT_EQ(DefaultConfigPath(lookup), "/xdg/tfslurm/config");
  env.clear();
  EXPECT_EQ(DefaultConfigPath(lookup), "");
}

}  // namespace
}  // namespace tfslurm::client
