#include "mesh/topology.h"

#include <string>
#include <string_view>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_EQ(t.memory_bytes(), 16 * kGiB);
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

std::string ParseError(std::string_view text, int slices = 1) {
  try {
    Topology::Parse(text, slices);
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

// Before: "unknown topology preset 'tpu-v5'; valid presets: tpu-v2, ..." (no suggestion).
TEST(Topology, UnknownPresetsGetADidYouMean) {
  EXPECT_THAT(ParseError("tpu-v5:4x4x4"),
              HasSubstr("unknown topology preset 'tpu-v5' (did you mean 'tpu-v5e' or 'tpu-v5p'?); valid presets:"));
  EXPECT_THAT(ParseError("dgx-h10:2"), HasSubstr("(did you mean 'dgx-h100'?)"));
  EXPECT_THAT(ParseError("tpu-v5"), HasSubstr("has no dimensions (did you mean 'tpu-v5e' or 'tpu-v5p'?)"));
  EXPECT_THAT(ParseError("tpu-v5p"), HasSubstr("has no dimensions: tpu-v5p takes XxYxZ chips, e.g. tpu-v5p:4x4x4"));
  EXPECT_THAT(ParseError("v5e-16"), HasSubstr("(did you mean 'v5litepod-16'?)"));
  EXPECT_THAT(ParseError("zzzz:4"), Not(HasSubstr("did you mean")));
}

// Before: "topology 'tpu-v5p:4x4x': bad dimension '' in '4x4x' (dimensions are positive integers separated by
// 'x', e.g. 2x4 or [2, 4])": the hint of an array shape.
TEST(Topology, MalformedDimensionsGetAHintForThatTopology) {
  EXPECT_EQ(ParseError("tpu-v5p:4x4x"),
            "topology 'tpu-v5p:4x4x': dimension 3 of '4x4x' is empty; tpu-v5p takes XxYxZ chips, e.g. tpu-v5p:4x4x4");
  EXPECT_THAT(ParseError("tpu-v5e:4xa"),
              HasSubstr("dimension 2 of '4xa' is 'a', not a number; tpu-v5e takes XxY chips"));
  EXPECT_THAT(ParseError("dgx-h100:x"), HasSubstr("dgx-h100 takes the number of hosts, e.g. dgx-h100:4"));
  EXPECT_THAT(ParseError("gpu:2x"), HasSubstr("gpu takes HOSTSxGPUS, e.g. gpu:2x8"));
  EXPECT_THAT(ParseError("tpu-v5p:4x4x"), Not(HasSubstr("[2, 4]")));
}

// Cloud TPU accelerator types: v2, v3, v4 and v5p count TensorCores (2 per chip), v5e ("v5litepod") and v6e chips;
// the slice shapes are Google Cloud's (cloud.google.com/tpu/docs/v5p, v4, v5e, v6e: "Configurations").
TEST(Topology, ParsesCloudTpuAcceleratorTypesWithGoogleCloudsSliceShapes) {
  const std::pair<const char*, const char*> cases[] = {
      {"v5p-8", "tpu-v5p:2x2x1"},       {"v5p-16", "tpu-v5p:2x2x2"},     {"v5p-64", "tpu-v5p:2x4x4"},
      {"v5p-128", "tpu-v5p:4x4x4"},     {"v5p-256", "tpu-v5p:4x4x8"},    {"v5p-512", "tpu-v5p:4x8x8"},
      {"v5p-1024", "tpu-v5p:8x8x8"},    {"v5p-2048", "tpu-v5p:8x8x16"},  {"v5p-4096", "tpu-v5p:8x16x16"},
      {"v4-8", "tpu-v4:2x2x1"},         {"v4-32", "tpu-v4:2x2x4"},       {"v4-128", "tpu-v4:4x4x4"},
      {"v4-4096", "tpu-v4:8x16x16"},    {"v5litepod-1", "tpu-v5e:1x1"},  {"v5litepod-8", "tpu-v5e:2x4"},
      {"v5litepod-16", "tpu-v5e:4x4"},  {"v5litepod-128", "tpu-v5e:8x16"}, {"v5litepod-256", "tpu-v5e:16x16"},
      {"v6e-4", "tpu-v6e:2x2"},         {"v6e-32", "tpu-v6e:4x8"},       {"v6e-256", "tpu-v6e:16x16"},
      {"v2-8", "tpu-v2:2x2"},           {"v2-32", "tpu-v2:4x4"},         {"v3-64", "tpu-v3:4x8"},
      {"v3-2048", "tpu-v3:32x32"}};
  for (const auto& [type, preset] : cases) {
    const Topology t = Topology::Parse(type);
    EXPECT_EQ(t.ToString(), preset) << type;
    EXPECT_EQ(t.accelerator_type(), type);
  }
  const Topology v5p = Topology::Parse("v5p-64");
  EXPECT_EQ(v5p.num_chips(), 32);
  EXPECT_EQ(v5p.num_devices(), 32);  // v5p is a megacore: one JAX device per chip
  EXPECT_EQ(v5p.ChipCountText(), "32 chips (Cloud TPU v5p-64 counts 64 TensorCores, 2 per chip)");
  EXPECT_EQ(Topology::Parse("v5litepod-256").ChipCountText(), "256 chips (Cloud TPU v5litepod-256 counts chips)");
  EXPECT_EQ(Topology::Parse("v4-128").num_chips(), 64);
  const Topology v3 = Topology::Parse("v3-32");  // 16 chips, a JAX device per TensorCore
  EXPECT_EQ(v3.num_chips(), 16);
  EXPECT_EQ(v3.num_devices(), 32);
  EXPECT_EQ(v3.ChipCountText(),
            "16 chips (2 TensorCores each, one device per TensorCore; Cloud TPU v3-32 counts 32 TensorCores, 2 per "
            "chip)");
  EXPECT_EQ(Topology::Parse("tpu-v5p:2x4x4").ChipCountText(), "32 chips");
  EXPECT_EQ(Topology::Parse("dgx-h100:2").ChipCountText(), "16 GPUs");
  EXPECT_EQ(Topology::Parse("v5p-128", 2).num_devices(), 128);  // slices
}

TEST(Topology, RefusesAcceleratorTypesWithoutAKnownSliceShape) {
  EXPECT_THAT(ParseError("v5p-63"),
              HasSubstr("Cloud TPU v5p-N counts TensorCores, 2 per chip; spmdsim knows the slice shapes of N = 8, "
                        "16, 32, ... (powers of two); for another shape give the chips as tpu-v5p:XxYxZ"));
  EXPECT_THAT(ParseError("v5p-12288"), HasSubstr("tpu-v5p:XxYxZ (e.g. 16x16x24)"));
  EXPECT_THAT(ParseError("v4-4"), HasSubstr("N = 8, 16, 32"));
  EXPECT_THAT(ParseError("v5litepod-12"),
              HasSubstr("v5litepod-N counts chips; spmdsim knows the slice shapes of N = 1, 2, 4"));
  EXPECT_THAT(ParseError("v6e-x"), HasSubstr("topology 'v6e-x': the size"));
  EXPECT_THROW(Topology::Parse("v5p-1048576"), Error);  // past the device limit, refused before anything is built
}

}  // namespace
}  // namespace spmdsim
