#include "service/api/munge_auth.h"

#include <gtest/gtest.h>

namespace tfslurm::api {
namespace {

UserLookup FakeUsers() {
  return [](uid_t uid) -> std::optional<UnixUser> {
    if (uid == 1001) return UnixUser{"alice", {1001, 50}};
    if (uid == 1002) return UnixUser{"bob", {1002}};
    return std::nullopt;
  };
}

TEST(MungePayload, NamesMethodAndPath) {
  EXPECT_EQ(MungeRequestPayload("POST", "/experiments"), "tfslurm/1 POST /experiments");
}

TEST(MungePayload, CredentialMustBeBoundToThisRequest) {
  MungeCredential c{1001, 1001, MungeRequestPayload("GET", "/experiments/a"), 1000, 300};
  EXPECT_TRUE(CheckMungeCredential(c, "GET", "/experiments/a", 1000, 300).ok());
  EXPECT_EQ(CheckMungeCredential(c, "DELETE", "/experiments/a", 1000, 300).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckMungeCredential(c, "GET", "/experiments/b", 1000, 300).code(),
            StatusCode::kUnauthenticated);
  c.payload = "";  // `munge -n`: no payload, no audience
  EXPECT_EQ(CheckMungeCredential(c, "GET", "/experiments/a", 1000, 300).code(),
            StatusCode::kUnauthenticated);
}

TEST(MungePayload, OldCredentialIsRefusedEvenWithALongTtl) {
  MungeCredential c{1001, 1001, MungeRequestPayload("GET", "/x"), 1000, 3600};
  EXPECT_TRUE(CheckMungeCredential(c, "GET", "/x", 1300, 300).ok());
  Status s = CheckMungeCredential(c, "GET", "/x", 1301, 300);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("301 s ago"), std::string::npos) << s.message();
}

TEST(ReplayCache, SecondUseIsRefusedUntilExpiry) {
  ReplayCache cache;
  EXPECT_TRUE(cache.Admit("k", 1300, 1000));
  EXPECT_FALSE(cache.Admit("k", 1300, 1100));
  EXPECT_TRUE(cache.Admit("other", 1300, 1100));
  // Past its expiry the entry is dropped; the age check refuses such a credential anyway.
  EXPECT_TRUE(cache.Admit("k2", 2000, 1301));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ReplayCache, BoundedByDroppingTheSoonestToExpire) {
  ReplayCache cache(2);
  EXPECT_TRUE(cache.Admit("a", 1100, 1000));
  EXPECT_TRUE(cache.Admit("b", 1200, 1000));
  EXPECT_TRUE(cache.Admit("c", 1300, 1000));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Admit("b", 1200, 1000));
  EXPECT_FALSE(cache.Admit("c", 1300, 1000));
}

TEST(PrincipalForUid, RootAndUnknownUidsAreRefused) {
  Status root = PrincipalForUid(0, FakeUsers(), std::nullopt).status();
  EXPECT_EQ(root.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(root.message().find("uid 0"), std::string::npos);
  Status unknown = PrincipalForUid(4242, FakeUsers(), std::nullopt).status();
  EXPECT_EQ(unknown.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(unknown.message().find("uid 4242 has no account"), std::string::npos);
}

TEST(PrincipalForUid, AdminOnlyByTheAdminGroup) {
  auto alice = PrincipalForUid(1001, FakeUsers(), std::nullopt);
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->user, "alice");
  EXPECT_FALSE(alice->admin);
  EXPECT_TRUE(PrincipalForUid(1001, FakeUsers(), gid_t{50})->admin);
  EXPECT_FALSE(PrincipalForUid(1002, FakeUsers(), gid_t{50})->admin);
}

class NoTokens final : public Authenticator {
 public:
  StatusOr<Principal> Authenticate(const httplib::Request&) override {
    return Principal{"token-user", false};
  }
};

TEST(MungeAuthenticator, DecodesBindsAndRefusesReplay) {
  int64_t now = 1000;
  auto auth = NewMungeAuthenticator(
      {"", 300, ""}, std::make_unique<NoTokens>(),
      [](const std::string& cred) -> StatusOr<MungeCredential> {
        if (cred == "root") return MungeCredential{0, 0, "tfslurm/1 GET /experiments", 990, 300};
        return MungeCredential{1002, 1002, cred == "bound" ? "tfslurm/1 GET /experiments" : "x",
                               990, 300};
      },
      FakeUsers(), [&now] { return now; });
  ASSERT_TRUE(auth.ok());
  httplib::Request req;
  req.method = "GET";
  req.path = "/experiments";
  req.headers.emplace("Authorization", "MUNGE bound");
  auto bob = (*auth)->Authenticate(req);
  ASSERT_TRUE(bob.ok()) << bob.status().message();
  EXPECT_EQ(bob->user, "bob");
  Status replay = (*auth)->Authenticate(req).status();
  EXPECT_NE(replay.message().find("replayed"), std::string::npos);

  req.headers = {{"Authorization", "MUNGE unbound"}};
  EXPECT_EQ((*auth)->Authenticate(req).status().code(), StatusCode::kUnauthenticated);
  req.headers = {{"Authorization", "MUNGE root"}};
  EXPECT_NE((*auth)->Authenticate(req).status().message().find("uid 0"), std::string::npos);
  req.headers = {{"Authorization", "Bearer tfs_x"}};
  EXPECT_EQ((*auth)->Authenticate(req)->user, "token-user");
  req.headers = {};
  EXPECT_EQ((*auth)->Authenticate(req).status().code(), StatusCode::kUnauthenticated);
}

TEST(MungeAuthenticator, UnknownAdminGroupIsAnError) {
  auto auth = NewMungeAuthenticator({"", 300, "no-such-group-tfslurm"},
                                    std::make_unique<NoTokens>(), nullptr, FakeUsers(), nullptr);
  EXPECT_EQ(auth.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tfslurm::api
