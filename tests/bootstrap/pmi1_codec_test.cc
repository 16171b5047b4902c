// PMI-1 value encoding, key naming and PMI_process_mapping decoding.
#include <gtest/gtest.h>

#include "bootstrap/pmi1/pmi1_client.h"
#include "bootstrap/pmi1/pmi1_codec.h"
#include "bootstrap/store_test_util.h"

namespace ibdt::bootstrap::pmi1 {
namespace {

TEST(Pmi1Base64, RoundTripsEveryLengthAndByte) {
  for (size_t size = 0; size < 70; ++size) {
    Bytes bytes = test::patternBlob(3, static_cast<int>(size), size);
    std::string text = encodeBase64(bytes);
    EXPECT_EQ(text.find_first_of(" =\n+/"), std::string::npos) << text;
    auto decoded = decodeBase64(text);
    ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
    EXPECT_EQ(*decoded, bytes) << "size " << size;
  }
  Bytes all(256);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(*decodeBase64(encodeBase64(all)), all);
  EXPECT_EQ(encodeBase64(test::toBytes("foobar")), "Zm9vYmFy");  // RFC 4648 test vector
}

TEST(Pmi1Base64, RejectsForeignCharactersAndImpossibleLengths) {
  EXPECT_EQ(decodeBase64("ab=c").status().code(), Code::kProtocol);
  EXPECT_EQ(decodeBase64("abcde").status().code(), Code::kProtocol);
}

TEST(Pmi1Value, SmallValuesAreInlineLargeOnesChunked) {
  Bytes small = test::patternBlob(0, 1, 100);
  EncodedValue inlined = encodeValue(small, 1023);
  EXPECT_TRUE(inlined.chunks.empty());
  auto head = decodeHead(inlined.head);
  ASSERT_TRUE(head.isOk());
  EXPECT_TRUE(head->isInline);
  EXPECT_EQ(head->inlineBytes, small);

  Bytes large = test::patternBlob(0, 2, 5000);
  EncodedValue chunked = encodeValue(large, 1023);
  ASSERT_EQ(chunked.chunks.size(), 7u);  // 6667 characters in pieces of 1023
  std::string text;
  for (const std::string& chunk : chunked.chunks) {
    EXPECT_LE(chunk.size(), 1023u);
    text += chunk;
  }
  auto chunkedHead = decodeHead(chunked.head);
  ASSERT_TRUE(chunkedHead.isOk());
  EXPECT_FALSE(chunkedHead->isInline);
  EXPECT_EQ(chunkedHead->chunks, 7u);
  EXPECT_EQ(chunkedHead->bytes, 5000u);
  EXPECT_EQ(*decodeBase64(text), large);
  EXPECT_EQ(decodeHead("x12").status().code(), Code::kProtocol);
  EXPECT_EQ(decodeHead("c7").status().code(), Code::kProtocol);
}

TEST(Pmi1Key, CarriesTheRankAndFitsTheLimit) {
  EXPECT_EQ(kvsKey(3, "ep", 63), "i3.ep");
  EXPECT_NE(kvsKey(3, "ep", 63), kvsKey(4, "ep", 63));
  std::string longKey(200, 'k');
  std::string hashed = kvsKey(12, longKey, 63);
  EXPECT_LE(hashed.size() + 8, 63u);
  EXPECT_EQ(hashed.rfind("i12.h", 0), 0u);
  EXPECT_NE(hashed, kvsKey(12, longKey + "x", 63));
}

TEST(Pmi1ProcessMapping, DecodesBlocksAndRepeats) {
  auto two = decodeProcessMapping("(vector,(0,2,2))", 4);
  ASSERT_TRUE(two.isOk()) << two.status().toString();
  EXPECT_EQ(*two, (std::vector<int>{0, 0, 1, 1}));
  // Fewer ranks described than the job has: the vector repeats (round robin).
  auto cyclic = decodeProcessMapping("(vector,(0,2,1))", 5);
  ASSERT_TRUE(cyclic.isOk());
  EXPECT_EQ(*cyclic, (std::vector<int>{0, 1, 0, 1, 0}));
  auto mixed = decodeProcessMapping("(vector,(0,1,3),(1,2,1))", 5);
  ASSERT_TRUE(mixed.isOk());
  EXPECT_EQ(*mixed, (std::vector<int>{0, 0, 0, 1, 2}));
  // Node ids are renumbered densely.
  auto sparse = decodeProcessMapping("(vector,(5,1,2),(2,1,2))", 4);
  ASSERT_TRUE(sparse.isOk());
  EXPECT_EQ(*sparse, (std::vector<int>{0, 0, 1, 1}));
}

TEST(Pmi1ProcessMapping, RejectsMalformedMappings) {
  for (const char* bad : {"", "(vector)", "(vector,(0,1))", "(vector,(0,1,2,3))", "(vector,(0,0,2))", "vector,(0,1,2)",
                          "(vector,(0,1,x))", "(vector,(0,1,2)"}) {
    EXPECT_EQ(decodeProcessMapping(bad, 4).status().code(), Code::kProtocol) << bad;
  }
}

TEST(Pmi1Wire, ParsesReplyLines) {
  auto fields = parseLine("cmd=get_result rc=0 msg=success value=abc");
  ASSERT_TRUE(fields.isOk());
  EXPECT_EQ((*fields)["cmd"], "get_result");
  EXPECT_EQ((*fields)["value"], "abc");
  EXPECT_EQ(parseLine("rc=0").status().code(), Code::kProtocol);
  EXPECT_EQ(parseLine("cmd=x garbage").status().code(), Code::kProtocol);
}

}  // namespace
}  // namespace ibdt::bootstrap::pmi1
