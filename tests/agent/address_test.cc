#include "agent/address.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>

namespace tfslurm::agent {
namespace {

TEST(ParseAddressSpecTest, KnownModes) {
  auto hostname = ParseAddressSpec("hostname");
  ASSERT_TRUE(hostname.ok());
  EXPECT_EQ(hostname->kind, AddressSpec::Kind::kHostname);
  auto fqdn = ParseAddressSpec("fqdn");
  ASSERT_TRUE(fqdn.ok());
  EXPECT_EQ(fqdn->kind, AddressSpec::Kind::kFqdn);
  auto ib = ParseAddressSpec("interface:ib0");
  ASSERT_TRUE(ib.ok());
  EXPECT_EQ(ib->kind, AddressSpec::Kind::kInterface);
  EXPECT_EQ(ib->interface_name, "ib0");
}

TEST(ParseAddressSpecTest, BadModesNameTheChoices) {
  for (const char* bad : {"", "ip", "interface:", "Hostname", "interface"}) {
    auto spec = ParseAddressSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(spec.status().message().find("hostname, fqdn, interface:NAME"), std::string::npos);
  }
}

TEST(ResolveAddressTest, HostnameIsGethostname) {
  char expected[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(gethostname(expected, sizeof(expected) - 1), 0);
  auto address = ResolveAddress({AddressSpec::Kind::kHostname, ""});
  ASSERT_TRUE(address.ok()) << address.status().message();
  EXPECT_EQ(*address, expected);
}

TEST(ResolveAddressTest, FqdnIsACanonicalNameOrAClearError) {
  auto address = ResolveAddress({AddressSpec::Kind::kFqdn, ""});
  if (address.ok()) {
    EXPECT_FALSE(address->empty());
  } else {
    // Hosts without name resolution for themselves (some sandboxes).
    EXPECT_NE(address.status().message().find("fully qualified name"), std::string::npos);
  }
}

TEST(ResolveAddressTest, CanonicalNameOfLocalhost) {
  auto name = CanonicalName("localhost");
  ASSERT_TRUE(name.ok()) << name.status().message();
  EXPECT_FALSE(name->empty());
}

TEST(ResolveAddressTest, CanonicalNameOfAnUnresolvableHostFails) {
  auto name = CanonicalName("tfslurm-no-such-host.invalid");
  ASSERT_FALSE(name.ok());
  EXPECT_NE(name.status().message().find("tfslurm-no-such-host.invalid"), std::string::npos);
}

TEST(ResolveAddressTest, LoopbackInterface) {
  auto address = ResolveAddress({AddressSpec::Kind::kInterface, "lo"});
  ASSERT_TRUE(address.ok()) << address.status().message();
  EXPECT_EQ(*address, "127.0.0.1");
}

TEST(ResolveAddressTest, MissingInterfaceListsTheAvailableOnes) {
  auto address = InterfaceIpv4Address("ib-no-such-0");
  ASSERT_FALSE(address.ok());
  EXPECT_NE(address.status().message().find("no network interface named 'ib-no-such-0'"),
            std::string::npos);
  EXPECT_NE(address.status().message().find("lo"), std::string::npos);
}

}  // namespace
}  // namespace tfslurm::agent
