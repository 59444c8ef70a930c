#include "sim/group_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::vector<float> Floats(const std::vector<Array>& arrays) {
  std::vector<float> out;
  for (const Array& a : arrays) out.push_back(a.data<float>()[0]);
  return out;
}

class GroupExchangeTest : public ::testing::TestWithParam<int> {};

TEST_P(GroupExchangeTest, EveryDeviceReceivesItsGroupsArraysInGroupOrder) {
  Runtime runtime(Mesh::Iota({8}, {"x"}), RuntimeOptions{.num_threads = GetParam()});
  GroupExchange exchange(runtime);
  DeviceGroups groups(8, {{6, 1, 4}, {0}, {2, 3, 5, 7}});
  std::vector<std::vector<float>> got(8);
  std::vector<int64_t> rank(8);
  runtime.Run([&](DeviceContext& d) {
    // Three rounds, so that both tables are reused and a stale slot would show.
    for (int round = 0; round < 3; ++round) {
      Array mine = Array::Scalar<float>(static_cast<float>(d.position() + 10 * round));
      got[d.position()] = Floats(exchange.Exchange(d, mine, groups));
    }
    rank[d.position()] = groups.RankOf(d.position());
  });
  EXPECT_EQ(got[1], (std::vector<float>{26, 21, 24}));
  EXPECT_EQ(got[4], (std::vector<float>{26, 21, 24}));
  EXPECT_EQ(got[0], (std::vector<float>{20}));
  EXPECT_EQ(got[7], (std::vector<float>{22, 23, 25, 27}));
  EXPECT_EQ(rank[4], 2);
  EXPECT_EQ(rank[2], 0);
}

TEST_P(GroupExchangeTest, PermuteDeliversTheSourcesArrayAndNothingToDevicesNobodySendsTo) {
  Runtime runtime(Mesh::Iota({4}, {"x"}), RuntimeOptions{.num_threads = GetParam()});
  GroupExchange exchange(runtime);
  PermutePairs pairs(4, {{0, 1}, {1, 2}, {2, 0}});
  std::vector<float> got(4, -1);
  runtime.Run([&](DeviceContext& d) {
    Array r = exchange.Permute(d, Array::Scalar<float>(static_cast<float>(d.position())), pairs);
    if (r.valid()) got[d.position()] = d.Hold(r).data<float>()[0];
  });
  EXPECT_EQ(got, (std::vector<float>{2, 0, 1, -1}));
}

INSTANTIATE_TEST_SUITE_P(Workers, GroupExchangeTest, ::testing::Values(1, 2, 4));

TEST(DeviceGroups, RefusesGroupsThatAreNotAPartition) {
  auto message = [](int64_t n, std::vector<std::vector<int64_t>> g) {
    try {
      DeviceGroups groups(n, std::move(g));
    } catch (const Error& e) {
      return std::string(e.message());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(4, {{0, 1}, {1, 2, 3}}), HasSubstr("position 1 is in device groups 0 and 1"));
  EXPECT_THAT(message(4, {{0, 1}, {2}}), HasSubstr("position 3 is in no device group"));
  EXPECT_THAT(message(4, {{0, 4}}), HasSubstr("names position 4; positions are 0..3"));
  EXPECT_THROW(PermutePairs(4, {{0, 1}, {2, 1}}), Error);
  EXPECT_THROW(PermutePairs(4, {{0, 1}, {0, 2}}), Error);
}

TEST(GroupExchange, ADeviceThatSkipsAnExchangeFailsTheRun) {
  Runtime runtime(Mesh::Iota({2}, {"x"}));
  GroupExchange exchange(runtime);
  DeviceGroups groups(2, {{0, 1}});
  EXPECT_THROW(runtime.Run([&](DeviceContext& d) {
                 if (d.position() == 0) exchange.Exchange(d, Array::Scalar<float>(1), groups);
               }),
               Error);
}

}  // namespace
}  // namespace spmdsim
