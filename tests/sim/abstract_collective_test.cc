#include "sim/abstract_collective.h"

#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using ::testing::EndsWith;

// The first non-barrier collective event of a Run, copied out of the runtime's spans.
struct Event {
  CollectiveKind op = CollectiveKind::kBarrier;
  std::vector<std::string> axes;
  int64_t group_size = 0, num_groups = 0;
  std::vector<std::vector<int64_t>> groups;
  DType dtype = DType::kF32;
  int64_t input_bytes = 0, output_bytes = 0;
  bool abstract = false;
  std::vector<std::pair<int64_t, int64_t>> permutation;
  bool operator==(const Event&) const = default;
};

Event Copy(const CollectiveEvent& e) {
  return {e.op, {e.axes.begin(), e.axes.end()}, e.group_size, e.num_groups, {e.groups.begin(), e.groups.end()},
          e.dtype, e.input_bytes_per_device, e.output_bytes_per_device, e.abstract,
          {e.permutation.begin(), e.permutation.end()}};
}

class FirstCollective : public RuntimeObserver {
 public:
  void OnCollective(const CollectiveEvent& e) override {
    if (e.op != CollectiveKind::kBarrier && !seen) {
      event = Copy(e);
      seen = true;
    }
  }
  Event event;
  bool seen = false;
};

// One call of `r` on every device of a Runtime, on abstract inputs: device 0's result and the observer's event.
std::pair<Array, Event> RunOnDevices(const Mesh& mesh, const CollectiveRequest& r, DType dtype,
                                     std::vector<int64_t> shape) {
  FirstCollective observer;
  Runtime runtime(mesh, RuntimeOptions{.num_threads = 1, .observer = &observer});
  Array result;
  runtime.Run([&](DeviceContext& d) {
    const Array x = Array::Abstract(shape, dtype);
    Array out;
    switch (r.op) {
      case CollectiveKind::kPsum: out = d.Psum(x, r.axes); break;
      case CollectiveKind::kPmean: out = d.Pmean(x, r.axes); break;
      case CollectiveKind::kPmax: out = d.Pmax(x, r.axes); break;
      case CollectiveKind::kPmin: out = d.Pmin(x, r.axes); break;
      case CollectiveKind::kAllGather: out = d.AllGather(x, r.axes, static_cast<int>(r.axis), r.tiled); break;
      case CollectiveKind::kPsumScatter: out = d.PsumScatter(x, r.axes, static_cast<int>(r.axis), r.tiled); break;
      case CollectiveKind::kAllToAll:
        out = d.AllToAll(x, r.axes, static_cast<int>(r.axis), static_cast<int>(r.concat_axis), r.tiled);
        break;
      case CollectiveKind::kPpermute: out = d.Ppermute(x, r.axes, r.perm); break;
      case CollectiveKind::kBarrier: break;
    }
    if (d.position() == 0) result = out;
  });
  return {result, observer.event};
}

TEST(AbstractCollective, GivesTheResultAndEventOfARunOnEveryDevice) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  const std::vector<CollectiveRequest> requests = {
      {.op = CollectiveKind::kPsum, .axes = {"x"}},
      {.op = CollectiveKind::kPmean, .axes = {"y", "x"}},
      {.op = CollectiveKind::kPmax, .axes = {"y"}},
      {.op = CollectiveKind::kAllGather, .axes = {"x"}, .axis = 1, .tiled = true},
      {.op = CollectiveKind::kAllGather, .axes = {"x", "y"}, .axis = -1},
      {.op = CollectiveKind::kPsumScatter, .axes = {"x"}, .axis = 0, .tiled = true},
      {.op = CollectiveKind::kPsumScatter, .axes = {"x"}, .axis = 1},
      {.op = CollectiveKind::kAllToAll, .axes = {"x"}, .axis = 0, .concat_axis = 1, .tiled = true},
      {.op = CollectiveKind::kAllToAll, .axes = {"x"}, .axis = 1, .concat_axis = 0},
      {.op = CollectiveKind::kPpermute, .axes = {"x"}, .perm = {{0, 1}, {1, -2}, {-1, 0}}},
      {.op = CollectiveKind::kPmean, .axes = {}},
  };
  for (DType dtype : {DType::kF32, DType::kBool, DType::kI64}) {
    for (const CollectiveRequest& r : requests) {
      SCOPED_TRACE(std::string(CollectiveName(r.op)) + " " + std::string(DTypeName(dtype)));
      const AbstractCollective abstract(mesh, r, dtype, {8, 4});
      const auto [result, event] = RunOnDevices(mesh, r, dtype, {8, 4});
      EXPECT_FALSE(abstract.identity());
      EXPECT_EQ(abstract.result_shape(), result.shape());
      EXPECT_EQ(abstract.result_dtype(), result.dtype());
      EXPECT_EQ(abstract.result_bytes(), result.nbytes());
      EXPECT_EQ(abstract.input_bytes(), 32 * DTypeSize(dtype));
      EXPECT_TRUE(Copy(abstract.event()) == event);
    }
  }
}

TEST(AbstractCollective, OverNoAxesPsumAndAllGatherAreTheInputItself) {
  const Mesh mesh = Mesh::Iota({4}, {"x"});
  const AbstractCollective psum(mesh, {.op = CollectiveKind::kPsum, .axes = {}}, DType::kBool, {3});
  EXPECT_TRUE(psum.identity());
  EXPECT_EQ(psum.result_dtype(), DType::kBool);  // no collective, no int32
  EXPECT_EQ(psum.result_shape(), std::vector<int64_t>{3});
  const AbstractCollective gather(mesh, {.op = CollectiveKind::kAllGather, .axes = {}}, DType::kF32, {3});
  EXPECT_TRUE(gather.identity());
  EXPECT_EQ(gather.result_shape(), std::vector<int64_t>{3});
}

// Every error is the one the devices throw (Run reports it as device 0's).
TEST(AbstractCollective, ThrowsWhatEveryDeviceThrows) {
  const Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  const std::vector<CollectiveRequest> bad = {
      {.op = CollectiveKind::kPsum, .axes = {"z"}},                                       // NameError
      {.op = CollectiveKind::kPsumScatter, .axes = {"x"}, .axis = 1, .tiled = true},     // 4 does not divide 2
      {.op = CollectiveKind::kAllGather, .axes = {"x"}, .axis = 3},                      // axis out of bounds
      {.op = CollectiveKind::kAllToAll, .axes = {"x"}, .axis = 1, .concat_axis = 0},     // size 2 != 4
      {.op = CollectiveKind::kPpermute, .axes = {"y", "x"}, .perm = {{0, 1}}},           // not in mesh order
      {.op = CollectiveKind::kPpermute, .axes = {"x"}, .perm = {{0, 1}, {0, 2}}},        // duplicate source
      {.op = CollectiveKind::kPpermute, .axes = {"x"}, .perm = {{0, 9}}},                // IndexError
  };
  for (const CollectiveRequest& r : bad) {
    SCOPED_TRACE(CollectiveName(r.op));
    std::string abstract_error, device_error;
    try {
      AbstractCollective(mesh, r, DType::kF32, {8, 2});
    } catch (const Error& e) {
      abstract_error = e.what();
    }
    try {
      RunOnDevices(mesh, r, DType::kF32, {8, 2});
    } catch (const DeviceError& e) {
      EXPECT_EQ(e.position(), 0);
      device_error = e.what();
    }
    ASSERT_FALSE(abstract_error.empty());
    EXPECT_THAT(device_error, EndsWith(abstract_error));
  }
}

}  // namespace
}  // namespace spmdsim
