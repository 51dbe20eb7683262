#include "service/system/system.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "schema/checkpoint_name.h"
#include "service/core/sha256.h"

namespace tfslurm::system {
namespace {

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class SystemRandomness final : public Randomness {
 public:
  std::string NewSecret() override { return RandomHex(32); }
  std::string NewExperimentId() override {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    return std::string("exp-") + buf + "-" + RandomHex(3);
  }

 private:
  static std::string RandomHex(size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
      spdlog::critical("RAND_bytes failed: no secret can be made safely; stopping");
      std::abort();
    }
    return HexBytes(buf.data(), bytes);
  }
};

class LocalFiles final : public Files {
 public:
  Status CreateDirectories(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Unavailable("cannot create " + path + ": " + ec.message());
    return Status::Ok();
  }

  std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir,
                                                     Framework framework) override {
    if (framework == Framework::kPytorch) {
      wire::LatestTorchCheckpoint latest;
      std::error_code ec;
      // increment(ec), not a range-for: its ++ throws on a read error.
      for (std::filesystem::directory_iterator it(model_dir, ec), end; !ec && it != end;
           it.increment(ec)) {
        std::error_code type_ec;
        if (it->is_regular_file(type_ec)) latest.See(it->path().filename().string());
      }
      if (!latest.found()) return std::nullopt;
      return CheckpointState{latest.file_name(), latest.step()};
    }
    std::ifstream f(model_dir + "/checkpoint");
    if (!f) return std::nullopt;
    std::stringstream ss;
    ss << f.rdbuf();
    return ParseCheckpointState(ss.str());
  }
};

}  // namespace

std::unique_ptr<Clock> NewSystemClock() { return std::make_unique<SystemClock>(); }
std::unique_ptr<Randomness> NewSystemRandomness() { return std::make_unique<SystemRandomness>(); }
std::unique_ptr<Files> NewLocalFiles() { return std::make_unique<LocalFiles>(); }

}  // namespace tfslurm::system
