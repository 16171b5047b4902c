// The verbs endpoint address blob: round trip and rejection of every kind of
// malformed blob (runs everywhere; needs no device).
#include <gtest/gtest.h>

#include "ibdt/status.h"

#if IBDT_HAVE_VERBS
#include "transport/fabric/verbs/verbs_address.h"

namespace ibdt::fabric::verbs {
namespace {

VerbsAddress roceAddress() {
  VerbsAddress address;
  address.ethernet = true;
  address.mtu = 3;
  address.qpNumber = 0x123456;
  address.psn = 0xabcdef;
  address.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 11, 12, 1};
  return address;
}

TEST(VerbsAddress, RoundTripsEveryField) {
  VerbsAddress in = roceAddress();
  std::vector<uint8_t> blob = encodeAddress(in);
  ASSERT_EQ(blob.size(), kVerbsAddressSize);
  auto out = decodeAddress(blob);
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  EXPECT_EQ(out->ethernet, in.ethernet);
  EXPECT_EQ(out->mtu, in.mtu);
  EXPECT_EQ(out->lid, in.lid);
  EXPECT_EQ(out->qpNumber, in.qpNumber);
  EXPECT_EQ(out->psn, in.psn);
  EXPECT_EQ(out->gid, in.gid);

  VerbsAddress ib;
  ib.mtu = 5;
  ib.lid = 0x1234;
  ib.qpNumber = 7;
  auto decoded = decodeAddress(encodeAddress(ib));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  EXPECT_FALSE(decoded->ethernet);
  EXPECT_EQ(decoded->lid, 0x1234);
}

void expectRejected(std::vector<uint8_t> blob, const char* why) {
  auto out = decodeAddress(blob);
  ASSERT_FALSE(out.isOk()) << why;
  EXPECT_EQ(out.status().code(), Code::kProtocol) << why;
  EXPECT_NE(out.status().message().find("verbs address"), std::string_view::npos) << out.status().toString();
}

TEST(VerbsAddress, RejectsMalformedBlobs) {
  std::vector<uint8_t> good = encodeAddress(roceAddress());
  expectRejected({}, "empty");
  expectRejected(std::vector<uint8_t>(good.begin(), good.end() - 1), "truncated");
  auto longer = good;
  longer.push_back(0);
  expectRejected(longer, "too long");
  auto magic = good;
  magic[0] ^= 1;
  expectRejected(magic, "magic");
  auto version = good;
  version[4] = 2;
  expectRejected(version, "version");
  auto link = good;
  link[5] = 7;
  expectRejected(link, "link layer flag");
  for (uint8_t mtu : {0, 6, 255}) {
    auto bad = good;
    bad[6] = mtu;
    expectRejected(bad, "mtu");
  }
  VerbsAddress zeroQp = roceAddress();
  zeroQp.qpNumber = 0;
  expectRejected(encodeAddress(zeroQp), "QP 0");
  VerbsAddress wideQp = roceAddress();
  wideQp.qpNumber = 1u << 24;
  expectRejected(encodeAddress(wideQp), "QP > 24 bits");
  VerbsAddress widePsn = roceAddress();
  widePsn.psn = 1u << 24;
  expectRejected(encodeAddress(widePsn), "PSN > 24 bits");
  VerbsAddress noGid = roceAddress();
  noGid.gid = {};
  expectRejected(encodeAddress(noGid), "RoCE without GID");
  VerbsAddress noLid = roceAddress();
  noLid.ethernet = false;
  expectRejected(encodeAddress(noLid), "InfiniBand with LID 0");
}

}  // namespace
}  // namespace ibdt::fabric::verbs
#else
TEST(VerbsAddress, NotBuilt) { GTEST_SKIP() << "built without rdma-core (IBDT_WITH_VERBS)"; }
#endif
