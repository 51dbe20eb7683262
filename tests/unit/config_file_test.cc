// tfslurmd's settings file (service/config/config_file.h) with CLI11 on
// options defined as tfslurmd defines them: bound fields, flags, defaults.
#include "service/config/config_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/test_dir.h"

namespace tfslurm::config {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string listen = "127.0.0.1:8080";
  std::string db = "tfslurm.db";
  int poll_ms = 2000;
  bool site = false;
  bool print = false;
};

void Define(CLI::App& app, Options& o) {
  app.add_option("--listen", o.listen, "REST address")->capture_default_str();
  app.add_option("--db", o.db, "database")->capture_default_str();
  app.add_option("--poll-interval-ms", o.poll_ms, "poll")->capture_default_str();
  app.add_flag("--site", o.site, "site mode");
  app.add_flag("--print-config", o.print, "print")->configurable(false);
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = FreshTestDir("config-file-test"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& text) {
    std::string path = (dir_ / "tfslurmd.conf").string();
    std::ofstream(path) << text;
    return path;
  }
  // Parses as tfslurmd does: default file `default_file`, then argv.
  void Parse(const std::string& default_file, std::vector<const char*> args) {
    args.insert(args.begin(), "tfslurmd");
    Define(app_, o_);
    AddConfigFile(app_, default_file);
    app_.parse(static_cast<int>(args.size()), args.data());
    given_ = SetOnCommandLine(
        [](CLI::App& probe) {
          static Options unused;
          Define(probe, unused);
          AddConfigFile(probe, "");
        },
        static_cast<int>(args.size()), args.data());
  }

  fs::path dir_;
  CLI::App app_;
  Options o_;
  std::set<std::string> given_;
};

TEST_F(ConfigFileTest, TheFileSetsEveryOptionAndTheCommandLineWins) {
  std::string f = Write(
      "# a comment\nlisten = \"0.0.0.0:9000\"\ndb = \"/var/lib/tfslurm/tfslurm.db\"\n"
      "poll-interval-ms = 500\nsite = true\n");
  Parse(f, {"--listen", "127.0.0.1:1"});
  EXPECT_EQ(o_.listen, "127.0.0.1:1");
  EXPECT_EQ(o_.db, "/var/lib/tfslurm/tfslurm.db");
  EXPECT_EQ(o_.poll_ms, 500);
  EXPECT_TRUE(o_.site);
  EXPECT_EQ(FileRead(app_), f);
  EXPECT_TRUE(CheckFileSettings(app_).ok());
  std::string report = SettingsReport(app_, given_);
  EXPECT_NE(report.find("listen = \"127.0.0.1:1\""), std::string::npos) << report;
  EXPECT_NE(report.find("# command line (over " + f + "'s \"0.0.0.0:9000\")"), std::string::npos)
      << report;
  EXPECT_NE(report.find("poll-interval-ms = 500"), std::string::npos) << report;
  EXPECT_NE(report.find("site = true"), std::string::npos) << report;
  EXPECT_EQ(report.find("print-config"), std::string::npos) << "not a setting: " << report;
  EXPECT_NE(report.find("# file: " + f), std::string::npos) << report;
}

TEST_F(ConfigFileTest, DefaultsAreNamedAsDefaults) {
  Parse((dir_ / "absent.conf").string(), {"--db", "x.db"});
  EXPECT_EQ(FileRead(app_), "") << "a missing default file is not read, and not an error";
  std::string report = SettingsReport(app_, given_);
  EXPECT_NE(report.find("# file: none read"), std::string::npos) << report;
  EXPECT_NE(report.find("db = \"x.db\""), std::string::npos) << report;
  EXPECT_NE(report.find("listen = \"127.0.0.1:8080\""), std::string::npos) << report;
  EXPECT_NE(report.find("site = false"), std::string::npos) << report;
  // Each line names its source; db's is the command line, listen's the default.
  EXPECT_NE(report.find("\"x.db\"  "), std::string::npos);
  EXPECT_EQ(given_, std::set<std::string>{"db"});
}

TEST_F(ConfigFileTest, AMisspeltSettingIsAnErrorWithTheNearestName) {
  std::string f = Write("lisen = \"0.0.0.0:9000\"\n");
  Parse(f, {});
  Status s = CheckFileSettings(app_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(f + ": 'lisen' is not a setting of tfslurmd (did you mean 'listen'?)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(o_.listen, "127.0.0.1:8080");
}

TEST_F(ConfigFileTest, ASettingSetTwiceIsAnError) {
  std::string f = Write("listen = \"0.0.0.0:9000\"\ndb = \"a.db\"\nlisten = \"127.0.0.1:1\"\n");
  Parse(f, {});
  Status s = CheckFileSettings(app_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'listen' is set more than once"), std::string::npos) << s.message();
}

TEST_F(ConfigFileTest, SectionsAreRefused) {
  std::string f = Write("[server]\nlisten = \"0.0.0.0:9000\"\n");
  Parse(f, {});
  Status s = CheckFileSettings(app_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'server.listen' is in a [section]"), std::string::npos)
      << s.message();
}

TEST_F(ConfigFileTest, AnExplicitFileMustExistAndAnEmptyOneReadsNone) {
  Define(app_, o_);
  AddConfigFile(app_, Write("db = \"from-default.db\"\n"));
  const char* missing[] = {"tfslurmd", "--config", "/nonexistent/tfslurmd.conf"};
  EXPECT_THROW(app_.parse(3, missing), CLI::FileError);
  CLI::App again;
  Options o;
  Define(again, o);
  AddConfigFile(again, (dir_ / "tfslurmd.conf").string());
  const char* none[] = {"tfslurmd", "--config", ""};
  again.parse(3, none);
  EXPECT_EQ(o.db, "tfslurm.db");
}

}  // namespace
}  // namespace tfslurm::config
