#include "mesh/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Topology, NumbersTpuDevicesXFastestWithHostsOfTwoByTwoChips) {
  Topology t = Topology::Parse("tpu-v4:2x2x4");
  ASSERT_EQ(t.num_devices(), 16);
  EXPECT_EQ(t.device_kind(), "TPU v4");
  EXPECT_EQ(t.num_processes(), 4);
  const Device& d5 = t.device(5);
  EXPECT_THAT(d5.coords, ElementsAre(1, 0, 1));
  EXPECT_EQ(d5.process_index, 1);
  EXPECT_EQ(t.device(15).process_index, 3);
  EXPECT_THAT(t.wraparound(), ElementsAre(false, false, true));
}

TEST(Topology, NumbersCoresAndSlices) {
  Topology t = Topology::Parse("tpu-v3:4x4", 2);
  ASSERT_EQ(t.num_devices(), 2 * 16 * 2);
  // id = (((slice*Z + z)*Y + y)*X + x)*C + core
  const Device& d = t.device(((1 * 1 + 0) * 4 + 2) * 4 * 2 + 3 * 2 + 1);
  EXPECT_EQ(d.slice_index, 1);
  EXPECT_THAT(d.coords, ElementsAre(3, 2, 0));
  EXPECT_EQ(d.core_on_chip, 1);
  EXPECT_EQ(t.num_processes(), 8);
  EXPECT_EQ(d.process_index, 4 + 3);  // host (1, 1) of slice 1: hosts are 2x2 chips
  EXPECT_EQ(t.memory_bytes(), int64_t{16} << 30);
}

TEST(Topology, EightChipHostsHoldFourByTwoChips) {
  Topology t = Topology::Parse("tpu-v5e:4x4");
  EXPECT_EQ(t.device_kind(), "TPU v5 lite");
  EXPECT_EQ(t.num_processes(), 2);
  EXPECT_EQ(t.device(7).process_index, 0);
  EXPECT_EQ(t.device(8).process_index, 1);
}

TEST(Topology, GpuHostsAndCpu) {
  Topology h = Topology::Parse("dgx-h100:4");
  EXPECT_EQ(h.num_devices(), 32);
  EXPECT_EQ(h.device(17).process_index, 2);
  EXPECT_EQ(h.device(17).slice_index, 2);
  EXPECT_DOUBLE_EQ(h.link(LinkClass::kNvlink).bandwidth_Bps, 450e9);
  Topology g = Topology::Parse("gpu:2x8");
  EXPECT_EQ(g.num_devices(), 16);
  EXPECT_EQ(g.ToString(), "gpu:2x8");
  Topology c = Topology::Parse("cpu:8");
  EXPECT_EQ(c.num_devices(), 8);
  EXPECT_EQ(c.num_processes(), 1);
  EXPECT_THROW(c.link(LinkClass::kIci), Error);
}

TEST(Topology, ParseErrorsSayWhatIsValid) {
  auto message = [](std::string_view text, int slices = 1) {
    try {
      Topology::Parse(text, slices);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("tpu-v9:2x2x2"), HasSubstr("valid presets: tpu-v2"));
  EXPECT_THAT(message("tpu-v4:2x2"), HasSubstr("3-D torus"));
  EXPECT_THAT(message("tpu-v4"), HasSubstr("PRESET:DIMS"));
  EXPECT_THAT(message("tpu-v4:3x2x2"), HasSubstr("host blocks"));
  EXPECT_THAT(message("cpu:4", 2), HasSubstr("TPU presets only"));
  EXPECT_THAT(message("dgx-h100:2x2"), HasSubstr("8-GPU hosts"));
  EXPECT_THROW(Topology::Parse("cpu:0"), Error);
}

TEST(Topology, GpuPresetsCarryTheirFiguresWithSources) {
  struct Expect {
    const char* text;
    int devices;
    double nvlink_one_way, nic_line;
    GpuGeneration generation;
    bool nvls;
  };
  for (Expect e : {Expect{"dgx-h100:1", 8, 450e9, 50e9, GpuGeneration::kHopper, true},
                   Expect{"dgx-h200:2", 16, 450e9, 50e9, GpuGeneration::kHopper, true},
                   Expect{"h800:1", 8, 200e9, 50e9, GpuGeneration::kHopper, true},
                   Expect{"dgx-a100:1", 8, 300e9, 25e9, GpuGeneration::kAmpere, false},
                   Expect{"a100-40g:1", 8, 300e9, 25e9, GpuGeneration::kAmpere, false},
                   Expect{"dgx-b200:1", 8, 900e9, 50e9, GpuGeneration::kBlackwell, true},
                   Expect{"gb200-nvl72:1", 72, 900e9, 50e9, GpuGeneration::kBlackwell, true}}) {
    SCOPED_TRACE(e.text);
    Topology t = Topology::Parse(e.text);
    EXPECT_EQ(t.num_devices(), e.devices);
    EXPECT_EQ(t.link(LinkClass::kNvlink).bandwidth_Bps, e.nvlink_one_way);
    EXPECT_EQ(t.network().nic_Bps, e.nic_line);
    EXPECT_EQ(t.gpu_generation(), e.generation);
    EXPECT_EQ(t.nvlink_sharp(), e.nvls);
    EXPECT_EQ(t.link(LinkClass::kInfiniband).bandwidth_Bps, e.nic_line);  // one NIC per GPU
    EXPECT_FALSE(t.link(LinkClass::kNvlink).source.empty());
    EXPECT_FALSE(t.network().source.empty());
    EXPECT_FALSE(t.figures_source().empty());
    EXPECT_EQ(t.ToString(), e.text);
  }
  EXPECT_EQ(Topology::Parse("a100-40g:1").memory_bytes(), int64_t{40} * 1000 * 1000 * 1000);
  EXPECT_TRUE(Topology::Parse("dgx-a100:1").amd_host());
}

TEST(Topology, NetworkSetsEachGpusNicShare) {
  Topology t = Topology::Parse("dgx-h100:2");
  NetworkSpec n = t.network();
  n.nics_per_node = 4;  // two GPUs per NIC
  n.oversubscription = 2;
  t.SetNetwork(n);
  EXPECT_DOUBLE_EQ(t.link(LinkClass::kInfiniband).bandwidth_Bps, 50e9 / 2 / 2);
  n.oversubscription = 0.5;
  EXPECT_THROW(t.SetNetwork(n), Error);
  Topology tpu = Topology::Parse("tpu-v4:2x2x1");
  EXPECT_THROW(tpu.SetNetwork(Topology::Parse("dgx-h100:1").network()), Error);
}

TEST(Topology, RoundTripsItsPresetForm) {
  for (const char* text : {"tpu-v4:2x2x4", "tpu-v5e:4x4", "tpu-v5p:4x4x8", "tpu-v3:4x4", "dgx-h100:4",
                           "gpu:2x8", "cpu:8", "tpu-v6e:8x8", "tpu-v2:2x2", "dgx-a100:1", "gb200-nvl72:2"}) {
    EXPECT_EQ(Topology::Parse(text).ToString(), text);
  }
}

}  // namespace
}  // namespace spmdsim
