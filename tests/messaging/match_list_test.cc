#include "transport/messaging/match_list.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ibdt::messaging {
namespace {

struct PostedReceive : MatchListHook {
  MatchSpec spec;
  int order = 0;
};

struct Arrival : MatchListHook {
  Envelope envelope;
  int order = 0;
};

TEST(MatchSpec, WildcardsAndCommunicator) {
  Envelope e{3, 7, 1};
  EXPECT_TRUE((MatchSpec{3, 7, 1}.accepts(e)));
  EXPECT_TRUE((MatchSpec{kAnySource, 7, 1}.accepts(e)));
  EXPECT_TRUE((MatchSpec{3, kAnyTag, 1}.accepts(e)));
  EXPECT_TRUE((MatchSpec{kAnySource, kAnyTag, 1}.accepts(e)));
  EXPECT_FALSE((MatchSpec{kAnySource, kAnyTag, 2}.accepts(e)));  // other library
  EXPECT_FALSE((MatchSpec{2, kAnyTag, 1}.accepts(e)));
  EXPECT_FALSE((MatchSpec{3, 8, 1}.accepts(e)));
}

TEST(MatchList, EarliestPostedReceiveWins) {
  std::vector<PostedReceive> posted(4);
  posted[0].spec = {1, 5, 0};
  posted[1].spec = {kAnySource, 5, 0};
  posted[2].spec = {2, kAnyTag, 0};
  posted[3].spec = {kAnySource, kAnyTag, 0};
  MatchList<PostedReceive> list;
  for (int i = 0; i < 4; ++i) {
    posted[i].order = i;
    list.pushBack(&posted[i]);
  }
  auto take = [&](Envelope e) {
    PostedReceive* r = list.takeFirst([&](const PostedReceive& p) { return p.spec.accepts(e); });
    return r == nullptr ? -1 : r->order;
  };
  EXPECT_EQ(take({2, 5, 0}), 1);  // 0 wants source 1; 1 is the earliest that accepts
  EXPECT_EQ(take({2, 5, 0}), 2);
  EXPECT_EQ(take({1, 5, 0}), 0);
  EXPECT_EQ(take({9, 9, 1}), -1);  // wrong communicator matches nothing
  EXPECT_EQ(take({9, 9, 0}), 3);
  EXPECT_TRUE(list.empty());
}

TEST(MatchList, CancelRemovesOnlyWhatIsQueued) {
  std::vector<Arrival> arrivals(3);
  MatchList<Arrival> list;
  for (auto& a : arrivals) list.pushBack(&a);
  EXPECT_TRUE(list.remove(&arrivals[1]));
  EXPECT_FALSE(list.remove(&arrivals[1]));
  EXPECT_FALSE(arrivals[1].linked());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.takeFirst([](const Arrival&) { return true; }), &arrivals[0]);
  EXPECT_EQ(list.takeFirst([](const Arrival&) { return true; }), &arrivals[2]);
  EXPECT_EQ(list.takeFirst([](const Arrival&) { return true; }), nullptr);
}

// Non-overtaking: messages from one source with one tag are received in the
// order they arrived, whatever wildcards the receives use.
TEST(MatchList, RandomisedNonOvertaking) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    std::vector<Arrival> arrivals(64);
    MatchList<Arrival> unexpected;
    for (int i = 0; i < 64; ++i) {
      arrivals[i].envelope = {static_cast<int32_t>(rng() % 3), static_cast<int32_t>(rng() % 3), 0};
      arrivals[i].order = i;
      unexpected.pushBack(&arrivals[i]);
    }
    std::vector<int> lastSeen(9, -1);
    while (!unexpected.empty()) {
      MatchSpec spec{rng() % 2 ? kAnySource : static_cast<int32_t>(rng() % 3),
                     rng() % 2 ? kAnyTag : static_cast<int32_t>(rng() % 3), 0};
      Arrival* a = unexpected.takeFirst([&](const Arrival& x) { return spec.accepts(x.envelope); });
      if (a == nullptr) continue;
      int key = a->envelope.source * 3 + a->envelope.tag;
      ASSERT_GT(a->order, lastSeen[key]) << "seed round " << round;
      lastSeen[key] = a->order;
    }
  }
}

}  // namespace
}  // namespace ibdt::messaging
