#include "hlo/support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "hlo/parser.h"

namespace spmdsim::hlo {
namespace {

using ::testing::HasSubstr;
using Use = SupportedModule::Use;

std::string Refusal(const std::string& text, Use use) {
  try {
    SupportedModule::Check(ParseModule(text, "m.txt"), use);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    return e.message();
  }
  return "accepted";
}

std::string Entry(const std::string& body) { return "HloModule m\nENTRY %e {\n" + body + "\n}\n"; }

// What XLA's TPU and GPU compilers emit beside XLA CPU's opcodes: an abstract run takes it, a run with data
// refuses it in one line.
constexpr char kTpuOps[] = R"(HloModule m, num_partitions=2
ENTRY %e {
  %a = f32[8]{0:T(128)} parameter(0)
  %cs = (f32[8]{0:S(1)}, f32[8]{0}, u32[]{:S(2)}) copy-start(%a), cross_program_prefetch_index=0
  %cd = f32[8]{0:S(1)} copy-done(%cs)
  %ss = ((f32[8]), f32[4]{0:S(1)}, s32[]{:S(2)}) slice-start(%cd), slice={[0:4]}
  %sd = f32[4]{0:S(1)} slice-done(%ss)
  %tok = token[] after-all()
  %s = (f32[4], u32[], token[]) send(%sd, %tok), channel_id=2, is_host_transfer=true
  %sdn = token[] send-done(%s), channel_id=2, is_host_transfer=true
  %r = (f32[4], u32[], token[]) recv(%tok), channel_id=1, is_host_transfer=true
  %rd = (f32[4], token[]) recv-done(%r), channel_id=1, is_host_transfer=true
  %buf = f32[4]{0:S(1)} custom-call(), custom_call_target="AllocateBuffer"
  %rp = f32[4] reduce-precision(%sd), exponent_bits=8, mantissa_bits=7
  ROOT %t = (token[], (f32[4], token[]), f32[4], f32[4]) tuple(%sdn, %rd, %buf, %rp)
}
)";

TEST(SupportedModule, AcceptsWhatTpuAndGpuCompilesEmitWhenAbstract) {
  EXPECT_EQ(Refusal(kTpuOps, Use::kAbstract), "accepted");
  for (const char* target : {"__cublas$lt$matmul", "__cublas$gemm", "__cudnn$fmhaSoftmax", "__cudnn$norm",
                             "ConcatBitcast", "AsyncCollectiveStart", "SliceId", "ZeroCrop"}) {
    EXPECT_EQ(Refusal(Entry(std::string("  ROOT %c = (f32[4], s8[16]) custom-call(), custom_call_target=\"") + target +
                            "\""),
                      Use::kAbstract),
              "accepted")
        << target;
  }
  EXPECT_THAT(Refusal(Entry("  ROOT %c = f32[4] custom-call(), custom_call_target=\"MyKernel\""), Use::kAbstract),
              HasSubstr("m.txt:3:3: %c (custom-call) cannot run: custom-call target \"MyKernel\" is not supported"));
  EXPECT_THAT(Refusal(Entry("  %a = c64[8] parameter(0)\n  ROOT %f = c64[8] fft(%a), fft_type=FFT, fft_length={8}"),
                      Use::kAbstract),
              HasSubstr("m.txt:4:3: %f (fft) cannot run: fft is not supported"));
}

TEST(SupportedModule, RefusesWhatOnlyRunsAbstractWithDataInOneLine) {
  EXPECT_EQ(Refusal(kTpuOps, Use::kWithData),
            "m.txt:4:3: %cs (copy-start) cannot run: copy-start comes from a TPU or GPU compile, which spmdsim runs "
            "without data only; run it --abstract");
  EXPECT_THAT(Refusal(Entry("  ROOT %c = f32[4] custom-call(), custom_call_target=\"AllocateBuffer\""), Use::kWithData),
              HasSubstr("custom-call target \"AllocateBuffer\" comes from a TPU or GPU compile, which spmdsim runs "
                        "without data only; run it --abstract"));
  // Mixed precision (a TPU's f32 -> bf16 broadcast) verifies, and runs abstract only.
  const std::string mixed = Entry("  %a = f32[4] parameter(0)\n  ROOT %b = bf16[4,2] broadcast(%a), dimensions={0}");
  EXPECT_EQ(Refusal(mixed, Use::kAbstract), "accepted");
  EXPECT_EQ(Refusal(mixed, Use::kWithData),
            "m.txt:4:3: %b (broadcast) cannot run: it mixes floating-point precisions (must keep the element type of "
            "f32[4]), as only TPU and GPU compiles do; run it --abstract");
  EXPECT_EQ(
      Refusal(
          Entry(
              "  %a = f32[4] parameter(0)\n  ROOT %r = f32[4] reduce-precision(%a), exponent_bits=5, mantissa_bits=10"),
          Use::kWithData),
      "accepted");
}

}  // namespace
}  // namespace spmdsim::hlo
